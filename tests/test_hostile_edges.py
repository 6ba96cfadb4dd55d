"""Smaller hostile edges: a fish flash file that lies, a flash that is a link, the fish's
CAN nodes at every stop, a busy or open live-view address, temporary file names in
errors, and simulators whose stdout reader goes away."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli_env, fwbridge_argv, run_verb

ROOT = Path(__file__).resolve().parent.parent


def _flash(tmp_path: Path) -> Path:
    """A good flash file, as the simulator writes it."""
    path = tmp_path / "flash.json"
    r = run_verb("sim", "fish", "--flash", str(path), "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d.update(user_config=""), "user_config"),
    (lambda d: d.update(user_config="zz"), "non-hexadecimal"),
    (lambda d: d.update(boots=1e400), "boots"),
    (lambda d: d.update(active=True), "active"),
    (lambda d: d.update(actions="00"), "actions"),
], ids=["empty config", "not hex", "boots 1e400", "active true", "actions text"])
def test_a_flash_that_lies_is_refused_at_load(tmp_path: Path, change: object,
                                              said: str) -> None:
    path = _flash(tmp_path)
    doc = json.loads(path.read_text())
    change(doc)  # type: ignore[operator]
    path.write_text(json.dumps(doc))
    r = run_verb("sim", "fish", "--flash", str(path), "--duration", "0.2")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert f"error: {path}: damaged fish flash file" in err and said in err, err
    assert "Traceback" not in err


def test_a_deeply_nested_flash_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    r = run_verb("sim", "fish", "--flash", str(path), "--duration", "0.2")
    assert r.returncode == 2 and b"nested more than 32 deep" in r.stderr, r.stderr


def test_a_flash_link_is_written_through_to_its_target(tmp_path: Path) -> None:
    target = _flash(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    before = json.loads(target.read_text())["boots"]
    r = run_verb("sim", "fish", "--flash", str(link), "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert json.loads(target.read_text())["boots"] == before + 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_the_fish_stops_without_warnings(tmp_path: Path) -> None:
    r = run_verb("sim", "fish", "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    assert b"not properly shut down" not in r.stderr, r.stderr


@pytest.mark.skipif(importlib.util.find_spec("foxglove") is None,
                    reason="foxglove-sdk is not installed")
def test_a_busy_live_view_port_is_one_plain_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_verb("sim", "fish", "--foxglove", "--foxglove-port", str(port),
                     "--duration", "0.2")
    err = r.stderr.decode()
    assert r.returncode == 2 and f"127.0.0.1:{port}: the port is in use" in err, err
    assert "FoxgloveError" not in err and "not properly shut down" not in err, err


@pytest.mark.skipif(importlib.util.find_spec("foxglove") is None,
                    reason="foxglove-sdk is not installed")
def test_a_live_view_open_to_the_network_is_announced() -> None:
    r = run_verb("sim", "mecanum", "--foxglove", "--foxglove-host", "0.0.0.0",
                 "--foxglove-port", "0", "--duration", "0.2")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "warning: foxglove: 0.0.0.0 is not a loopback address" in err, err
    r = run_verb("sim", "mecanum", "--foxglove", "--foxglove-port", "0", "--duration", "0.2")
    assert r.returncode == 0 and b"warning" not in r.stderr, r.stderr


def test_errors_name_the_output_not_its_temporary_file(tmp_path: Path) -> None:
    src = tmp_path / "run.pcapng"
    r = run_verb("sim", "mecanum", "--record", str(src), "--duration", "0.3")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "missing" / "run.mcap"
    r = run_verb("convert", str(src), str(out))
    err = r.stderr.decode()
    assert r.returncode == 2 and f"error: {out}: cannot write" in err, err
    assert f".{out.name}." not in err


@pytest.mark.parametrize("verb", [["sim", "fish"], ["sim", "mecanum"],
                                  ["can", "-c", f"gone{os.getpid()}", "sim", "3"]],
                         ids=["sim fish", "sim mecanum", "can sim"])
def test_a_simulator_ends_when_its_stdout_reader_goes(verb: list[str]) -> None:
    read, write = os.pipe()
    proc = subprocess.Popen([*fwbridge_argv(), *verb], stdout=write, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=cli_env(), cwd=ROOT)
    os.close(write)
    try:
        if verb[0] == "sim":  # it says where its port is first, as `| head -1` reads
            with os.fdopen(read, "rb", closefd=False) as f:
                assert f.readline()
        os.close(read)  # the reader is gone
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert b"Traceback" not in err
