"""``fwbridge sim fish --flash FILE`` and ``fwbridge fish …``, run as a user runs them.

Two processes: the simulator on a new pty with its flash in a file, and the
host verbs on that pty. The simulator is stopped with SIGINT and started
again on the same file: what was written is still there.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fwbridge.protocols.families.fish_commands import make_image
from tests.helpers import ROOT, cli_env, fwbridge_argv, run_cli


@contextmanager
def sim_fish(flash: Path) -> Iterator[str]:
    proc = subprocess.Popen([*fwbridge_argv(), "sim", "fish", "--flash", str(flash), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready"
        yield str(ready["port"])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def fish(port: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("fish", "--port", port, "--timeout", "1.0", *args, timeout=120)


def test_fish_verbs_against_the_simulator_and_its_flash_file(tmp_path: Path) -> None:
    flash = tmp_path / "flash.json"
    cfg = {"free_period_ms": 200, "avoid_mm": 800, "stored_probability_pct": 40,
           "scenes": [{"sensor": "sonar_right_mm", "op": "<", "threshold": 250,
                       "action": "turn-left"}]}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    image = tmp_path / "fish-2.1.bin"
    image.write_bytes(make_image(0x0201, b"fish firmware 2.1" * 40))
    with sim_fish(flash) as port:
        res = fish(port, "status", "--json")
        assert res.returncode == 0, res.stderr.decode()
        st = json.loads(res.stdout)
        assert (st["mode"], st["version"], st["bank"]) == ("idle", "1.0", "A")
        res = fish(port, "config", "set", str(tmp_path / "cfg.json"))
        assert res.returncode == 0, res.stderr.decode()
        res = fish(port, "flash", str(image), "--chunk", "128", "--json")
        assert res.returncode == 0, res.stderr.decode()
        report = json.loads(res.stdout)
        assert (report["version_after"], report["bank_after"], report["chunks"]) == (
            "2.1", "B", 6)
        res = fish(port, "actions", "--json")
        assert res.returncode == 0 and json.loads(res.stdout) == {"groups": []}
    with sim_fish(flash) as port:  # stopped and started: the flash file kept it all
        res = fish(port, "config", "get")
        assert res.returncode == 0, res.stderr.decode()
        assert json.loads(res.stdout) == cfg
        st = json.loads(fish(port, "status", "--json").stdout)
        assert (st["version"], st["bank"], st["boots"]) == ("2.1", "B", 3)


def test_fish_verbs_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"scenes": [{"sensor": "smell", "op": "<", "threshold": 1,
                                           "action": "dive"}]}))
    res = fish("sim://fish?pacing=afap", "config", "set", str(bad))
    assert res.returncode == 2
    err = res.stderr.decode()
    assert err.startswith("error: ") and "scenes[0].sensor" in err and len(err.splitlines()) == 1
    res = fish("sim://fish?pacing=afap", "flash", str(bad))
    assert res.returncode == 2 and "not a firmware image" in res.stderr.decode()
    res = run_cli("sim", "mecanum", "--flash", str(tmp_path / "f.json"), "--duration", "0.1")
    assert res.returncode == 2 and b"--flash is for the fish" in res.stderr
