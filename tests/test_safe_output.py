"""Outputs never clobber on failure, bad output paths fail first and in one line, and
``--link`` never replaces anything but a missing path or a stale pty link."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
from pathlib import Path

import pytest

from fwbridge.bridge.capture import read_capture
from fwbridge.bridge.transports import PtyPair
from tests.helpers import FirmwarePeer, reaped, run_verb, spawn_verb

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

PRECIOUS = b"a capture the user wants to keep\n" * 10


def one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2, proc.stderr.decode()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not re.search(r"\b[A-Z]\w*(Error|Exception)\b", lines[0]), lines  # no class names
    return lines[0]


def _keep(tmp_path: Path, name: str) -> Path:
    keep = tmp_path / name
    keep.write_bytes(PRECIOUS)
    return keep


def _untouched(keep: Path) -> None:
    assert keep.read_bytes() == PRECIOUS
    assert not [p for p in keep.parent.iterdir() if p.name.endswith(".partial")]


def test_can_record_keeps_the_file_when_the_bus_cannot_open(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.log")
    res = run_verb("can", "-i", "socketcan", "-c", "fwbridge-none0", "record", str(keep))
    assert "cannot open CAN bus" in one_error_line(res)
    _untouched(keep)


def test_bridge_keeps_the_capture_when_the_start_fails(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    missing = run_verb("bridge", str(tmp_path / "missing.toml"), "--record", str(keep))
    one_error_line(missing)
    _untouched(keep)
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{tmp_path / "ttyUSB7"}"\n')
    no_port = run_verb("bridge", str(cfg), "--record", str(keep))
    assert "no such device" in one_error_line(no_port)
    _untouched(keep)


def test_bridge_replaces_the_capture_once_the_link_works(pair: PtyPair, peer: FirmwarePeer,
                                                         tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[control]\nrate_hz = 50\n')
    res = run_verb("bridge", str(cfg), "--record", str(keep), "--duration", "0.3")
    assert res.returncode == 0, res.stderr
    assert {p.direction for p in read_capture(keep)} >= {"tx"}
    mask = os.umask(0)
    os.umask(mask)
    assert keep.stat().st_mode & 0o777 == 0o666 & ~mask  # as a plain open() makes it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_record_keeps_the_file_when_the_port_cannot_open(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    res = run_verb("record", str(tmp_path / "ttyUSB7"), str(keep))
    assert "no such device" in one_error_line(res)
    _untouched(keep)


@pytest.mark.parametrize("verb", [
    ("record", "{port}", "{out}"),
    ("sniff", "{port}", "-p", "odom", "--record", "{out}"),
    ("can", "--bus-kwarg", "modules=1", "record", "{out}"),
    ("can", "sim", "2", "--capture", "{out}"),
    ("bridge", "{cfg}", "--record", "{out}"),
], ids=lambda v: "-".join(a for a in v[:3] if not a.startswith("{")))
@pytest.mark.parametrize("where", ["missing-dir", "directory", "under-a-file", "read-only-dir"])
def test_unwritable_outputs_are_one_error_line_before_the_run(
        pair: PtyPair, tmp_path: Path, verb: tuple[str, ...], where: str) -> None:
    if where == "read-only-dir" and os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    out = {"missing-dir": tmp_path / "nowhere" / "x.pcapng",
           "directory": tmp_path,
           "under-a-file": tmp_path / "robot.toml" / "x.pcapng",
           "read-only-dir": tmp_path / "ro" / "x.pcapng"}[where]
    if where == "read-only-dir":
        out.parent.mkdir()
        out.parent.chmod(0o500)
    if verb[0] == "can" and out.suffix == ".pcapng" and "record" in verb:
        out = out.with_suffix(".log")
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n')
    args = [a.format(port=pair.path, out=out, cfg=cfg) for a in verb]
    line = one_error_line(run_verb(*args, timeout=60))
    assert str(out.name if where != "directory" else out) in line


def test_demo_plot_path_is_checked_before_the_run(tmp_path: Path) -> None:
    res = run_verb("demo", "--plot", str(tmp_path / "nonexistent" / "x.png"))
    assert "--plot" in one_error_line(res) and "no such directory" in res.stderr.decode()
    assert res.stdout == b""  # refused before the banner: the 30 s run never started


def test_sim_link_refuses_to_replace_a_users_file(tmp_path: Path) -> None:
    mine = tmp_path / "existing.txt"
    mine.write_text("my notes\n")
    res = run_verb("sim", "echo", "--link", str(mine), "--duration", "0.1")
    assert "refusing to replace" in one_error_line(res)
    assert mine.read_text() == "my notes\n" and not mine.is_symlink()
    other = tmp_path / "other"
    other.symlink_to(mine)
    res = run_verb("sim", "echo", "--link", str(other), "--duration", "0.1")
    assert "not to a pty" in one_error_line(res)
    assert os.readlink(other) == str(mine)


def test_sim_link_refuses_a_link_to_a_pty_in_use(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    try:
        link = tmp_path / "robot"
        link.symlink_to(os.ttyname(slave))  # someone's terminal, or another simulation
        res = run_verb("sim", "echo", "--link", str(link), "--duration", "0.1")
        assert "in use" in one_error_line(res)
        assert os.readlink(link) == os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


def test_sim_link_takes_over_a_stale_pty_link_and_removes_it(tmp_path: Path) -> None:
    link = tmp_path / "robot"
    stale = "/dev/pts/987654"  # left by a simulation that was killed
    assert not os.path.exists(stale)
    link.symlink_to(stale)
    proc = spawn_verb("sim", "echo", "--link", str(link), "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None
    with reaped(proc):
        ready = json.loads(proc.stdout.readline())
        assert ready["port"] == str(link) and os.readlink(link) != stale
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 129, err
    assert not os.path.lexists(link)
