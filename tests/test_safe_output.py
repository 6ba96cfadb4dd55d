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

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from tests.helpers import FirmwarePeer, reaped, run_verb, shared_bus, spawn_verb

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
    res = run_verb("can", "-i", "socketcan", "-c", "fwbridge-none0", "record", str(keep),
                   "--force")
    assert "cannot open CAN bus" in one_error_line(res)
    _untouched(keep)


def test_bridge_keeps_the_capture_when_the_start_fails(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    missing = run_verb("bridge", str(tmp_path / "missing.toml"), "--record", str(keep), "--force")
    one_error_line(missing)
    _untouched(keep)
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{tmp_path / "ttyUSB7"}"\n')
    no_port = run_verb("bridge", str(cfg), "--record", str(keep), "--force")
    assert "no such device" in one_error_line(no_port)
    _untouched(keep)


def test_bridge_replaces_the_capture_once_the_link_works(pair: PtyPair, peer: FirmwarePeer,
                                                         tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[control]\nrate_hz = 50\n')
    res = run_verb("bridge", str(cfg), "--record", str(keep), "--duration", "0.3", "--force")
    assert res.returncode == 0, res.stderr
    assert {p.direction for p in read_capture(keep)} >= {"tx"}
    mask = os.umask(0)
    os.umask(mask)
    assert keep.stat().st_mode & 0o777 == 0o666 & ~mask  # as a plain open() makes it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_record_keeps_the_file_when_the_port_cannot_open(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.pcapng")
    res = run_verb("record", str(tmp_path / "ttyUSB7"), str(keep), "--force")
    assert "no such device" in one_error_line(res)
    _untouched(keep)


@pytest.mark.parametrize("verb", [
    ("record", "{port}", "{out}"),
    ("sniff", "{port}", "-p", "odom", "--record", "{out}"),
    ("can", "--modules", "1", "record", "{out}"),
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


# -- an existing output is replaced only with --force -----------------------------------------
@pytest.mark.parametrize("verb", [
    ("record", "{port}", "{out}.pcapng"),
    ("sniff", "{port}", "-p", "odom", "--record", "{out}.pcapng"),
    ("can", "--modules", "1", "record", "{out}.log"),
    ("can", "sim", "2", "--capture", "{out}.mcap"),
    ("bridge", "{cfg}", "--record", "{out}.pcapng"),
    ("sim", "echo", "--record", "{out}.pcapng"),
    ("demo", "--record", "{out}.pcapng"),
    ("demo", "--plot", "{out}.png"),
    ("plot", "{capture}", "-o", "{out}.png"),
    ("gen", "dbc", "-o", "{out}.dbc"),
    ("gen", "wireshark", "odom", "-o", "{out}.lua"),
    ("gen", "c", "odom", "-o", "{dir}", "--name", "keep"),
], ids=lambda v: "-".join(a for a in v[:3] if not a.startswith(("{", "-"))))
def test_an_existing_output_is_refused_without_force(
        pair: PtyPair, tmp_path: Path, verb: tuple[str, ...]) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n')
    capture = tmp_path / "some.log"
    capture.write_text("(1796161315.123858) sim0 101#0000000000000000\n")
    name = next(a for a in verb if "{out}" in a or "{dir}" in a)
    keep = _keep(tmp_path, name.format(out="keep", dir="keep.h"))
    args = [a.format(port=pair.path, out=tmp_path / "keep", cfg=cfg, capture=capture,
                     dir=tmp_path) for a in verb]
    res = run_verb(*args, timeout=60)
    line = one_error_line(res)
    assert keep.name in line and "exists already" in line and "--force" in line
    assert res.stdout == b""  # refused before the run, not after it
    _untouched(keep)


def test_force_replaces_an_existing_output(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.log")
    res = run_verb("can", "--modules", "1", "record", str(keep), "--count", "3",
                   "--force")
    assert res.returncode == 0, res.stderr
    assert len(keep.read_text().splitlines()) == 3
    dbc = _keep(tmp_path, "keep.dbc")
    assert run_verb("gen", "dbc", "-o", str(dbc), "--force").returncode == 0
    assert dbc.read_text().startswith("VERSION")


def test_generated_files_get_the_users_umask(tmp_path: Path) -> None:
    mask = os.umask(0)
    os.umask(mask)
    outs = [tmp_path / "a.dbc", tmp_path / "a.lua", tmp_path / "c" / "fw.h",
            tmp_path / "c" / "fw.c"]
    assert run_verb("gen", "dbc", "-o", str(outs[0])).returncode == 0
    assert run_verb("gen", "wireshark", "odom", "-o", str(outs[1])).returncode == 0
    assert run_verb("gen", "c", "odom", "-o", str(tmp_path / "c"), "--name", "fw").returncode == 0
    for out in outs:
        assert out.stat().st_mode & 0o777 == 0o666 & ~mask, out  # as a plain open() makes it


# -- a shared bus (its daemon in another process) ----------------------------------------------


def test_can_sim_capture_on_a_shared_bus(rundir: Path, tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.mcap")
    with shared_bus("shared0"):
        name = "shared:shared0"
        # a failed start (the bus runs at another rate) leaves the file as it was ...
        bad = run_verb("can", "-c", name, "-b", "250000", "sim", "3", "--capture", str(keep),
                       "--force", "--duration", "0.5")
        line = one_error_line(bad)
        assert "runs at 500000 bit/s" in line and "--bitrate 250000" in line
        _untouched(keep)
        # ... and a good one records the shared bus's frames, as a node of it
        ok = run_verb("can", "-c", name, "sim", "3", "--capture", str(keep), "--force",
                      "--duration", "1", "--json")
        assert ok.returncode == 0, ok.stderr
    decoded = run_verb("can", "decode", str(keep), "--json")
    modules = {json.loads(r)["module"] for r in decoded.stdout.splitlines()}
    assert modules == {1, 2, 3}, decoded.stderr


def test_shared_bus_refusals_say_what_to_run_instead(rundir: Path, tmp_path: Path) -> None:
    with shared_bus("shared1"):
        name = "shared:shared1"
        line = one_error_line(run_verb("can", "-c", name, "--bus-kwarg",
                                       f"capture={tmp_path / 'x.log'}", "sniff",
                                       "--duration", "0.2"))
        assert f"'fwbridge can -c {name} record FILE'" in line
        # modules are nodes like any other: on a shared bus too
        ok = run_verb("can", "-c", name, "--modules", "2", "sniff", "--count", "4", "--json")
        assert ok.returncode == 0, ok.stderr
        alone = run_verb("can", "-c", name, "send", "123#00")
        assert alone.returncode == 2 and f"'fwbridge can -c {name} sim N'" in alone.stderr.decode()


def test_can_sim_bad_bus_options_leave_the_capture(tmp_path: Path) -> None:
    keep = _keep(tmp_path, "keep.mcap")
    res = run_verb("can", "--bus-kwarg", "bitrate_typo=1", "sim", "2", "--capture", str(keep),
                   "--force", "--duration", "0.2")
    assert "bitrate_typo" in one_error_line(res)
    _untouched(keep)


def test_a_file_written_by_one_thread_and_flushed_by_another_keeps_every_write(
        tmp_path: Path) -> None:
    """A run publishes (flushes) its capture while the reader thread records into it:
    neither may fail, and every write lands once, in order."""
    import threading

    from fwbridge.bridge.record.safe_output import open_output

    out = open_output(tmp_path / "shared.bin")
    chunks = [i.to_bytes(4, "big") * 40 for i in range(20000)]
    failures: list[BaseException] = []
    done = threading.Event()

    def flusher() -> None:
        try:
            while not done.is_set():
                out.flush()
                out.tell()
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for chunk in chunks:
            out.write(chunk)
    finally:
        done.set()
        thread.join()
        out.close()
    assert failures == []
    assert (tmp_path / "shared.bin").read_bytes() == b"".join(chunks)
