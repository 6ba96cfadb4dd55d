"""Every way a verb is stopped, on the real CLI: SIGINT, SIGTERM, SIGHUP and a reader that
goes away. Zero velocity where the verb commanded motion, the terminal restored, what the
verb created removed, the summary printed, and 128 + the signal's number as exit status."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import termios
import time
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import FirmwarePeer, reaped, spawn_verb, wait_for_line, wait_until
from tests.terminal import Terminal

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
DEADLINE = 20.0


def _config(tmp_path: Path, url: str) -> Path:
    cfg = tmp_path / "robot.toml"
    # A long watchdog: only the stop itself may bring the commanded speed to zero.
    cfg.write_text(f'[link]\nurl = "{url}"\n[control]\nrate_hz = 50\n'
                   "[watchdog]\ncmd_timeout = 30.0\n")
    return cfg


def _moving(peer: FirmwarePeer) -> None:
    assert peer.wait_for(lambda a: bool(a) and a[-1].frame.vx == pytest.approx(0.3),
                         timeout=DEADLINE), "the bridge never commanded the requested speed"


def _stopped_at_zero(peer: FirmwarePeer) -> None:
    peer.settle()  # the process has exited: everything it wrote has arrived
    frames = peer.frames()
    assert frames and frames[-1] == cmd_frame.ZERO, frames[-3:]


@pytest.mark.parametrize("sig", STOPS, ids=lambda s: signal.Signals(s).name)
def test_bridge_stop_signal_sends_zero_velocity(pair: PtyPair, peer: FirmwarePeer,
                                               tmp_path: Path, sig: int) -> None:
    proc = spawn_verb("bridge", str(_config(tmp_path, pair.path)), "--cmd-stdin",
                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    with reaped(proc):
        proc.stdin.write(b"0.3 0 0\n")
        proc.stdin.flush()  # stdin stays open: the request stands until the stop
        _moving(peer)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 128 + sig, err
    assert b"bridge: commands=" in err and b"Traceback" not in err
    _stopped_at_zero(peer)


def test_more_signals_while_stopping_do_not_cut_the_stop_short(
        pair: PtyPair, peer: FirmwarePeer, tmp_path: Path) -> None:
    capture = tmp_path / "run.pcapng"
    proc = spawn_verb("bridge", str(_config(tmp_path, pair.path)), "--cmd-stdin", "--record",
                      str(capture), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE)
    assert proc.stdin is not None
    with reaped(proc):
        proc.stdin.write(b"0.3 0 0\n")
        proc.stdin.flush()
        _moving(peer)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            proc.send_signal(sig)  # an impatient user, or a service manager and a user
        _, err = proc.communicate(timeout=DEADLINE)
    # the first signal handled decides (pending signals come lowest number first)
    assert proc.returncode in (129, 130, 143), err
    assert b"bridge: commands=" in err and b"Traceback" not in err
    _stopped_at_zero(peer)
    sent = [p.data for p in read_capture(capture) if p.direction == "tx"]
    assert sent[-1] == cmd_frame.encode(cmd_frame.ZERO)  # the capture is whole, to the end


def test_bridge_piped_to_head_stops_the_base_quietly(pair: PtyPair, peer: FirmwarePeer,
                                                     tmp_path: Path) -> None:
    peer.answer = lambda c: odom_frame.encode(OdomFrame(c.vx, c.vy, c.wz, 0.0))
    proc = spawn_verb("bridge", str(_config(tmp_path, pair.path)), "--cmd-stdin",
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        proc.stdin.write(b"0.3 0 0\n")
        proc.stdin.flush()
        _moving(peer)
        json.loads(proc.stdout.readline())  # `head -1`: one record, then the reader is gone
        proc.stdout.close()
        assert proc.wait(timeout=DEADLINE) == 0
        err = proc.stderr.read()
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
    assert b"bridge: commands=" in err
    _stopped_at_zero(peer)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM],
                         ids=lambda s: signal.Signals(s).name)
def test_send_cmd_stopped_early_sends_zero(pair: PtyPair, peer: FirmwarePeer,
                                           sig: int) -> None:
    proc = spawn_verb("send", pair.path, "cmd", "--vx", "0.3", "--count", "100000", "--rate",
                      "50", stderr=subprocess.PIPE)
    with reaped(proc):
        _moving(peer)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 128 + sig, err
    assert b"then zero velocity" in err
    _stopped_at_zero(peer)


def test_replay_of_commands_stopped_early_sends_zero(pair: PtyPair, peer: FirmwarePeer,
                                                    tmp_path: Path) -> None:
    from fwbridge.bridge.record.serial_pcapng import CaptureWriter

    capture = tmp_path / "commands.pcapng"
    go = cmd_frame.encode(cmd_frame.CmdFrame(0.3, 0.0, 0.0))
    with CaptureWriter(capture) as cap:  # what `bridge --record` holds: commands sent (tx)
        for k in range(100):
            cap.write("tx", go, ts_ns=k * 20_000_000)
    proc = spawn_verb("replay", str(capture), pair.path, "--direction", "tx", "--loop",
                      stderr=subprocess.PIPE)
    with reaped(proc):
        _moving(peer)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    assert b"then zero velocity" in err
    _stopped_at_zero(peer)


def test_send_cmd_that_ends_at_its_count_sends_no_extra_frame(pair: PtyPair,
                                                               peer: FirmwarePeer) -> None:
    proc = spawn_verb("send", pair.path, "cmd", "--vx", "0.3", "--count", "3", "--rate", "100",
                      stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert peer.wait_for(lambda a: len(a) >= 3)
    peer.settle()  # and nothing after them
    assert [f.vx for f in peer.frames()] == pytest.approx([0.3] * 3)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_teleop_stop_signal_restores_the_terminal_and_stops(pair: PtyPair, peer: FirmwarePeer,
                                                            sig: int) -> None:
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    proc = spawn_verb("teleop", pair.path, "--rate", "50", stdin=slave,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with reaped(proc):
        assert peer.wait_for(lambda a: len(a) >= 2, timeout=DEADLINE)
        os.write(master, b"w")
        assert peer.wait_for(lambda a: a[-1].frame.vx > 0.19, timeout=DEADLINE)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
        after = termios.tcgetattr(slave)
        os.close(master)
        os.close(slave)
    assert proc.returncode == 128 + sig, err
    assert after == before  # not left raw (-icanon -echo)
    assert b"then zero velocity" in err
    _stopped_at_zero(peer)


def test_sim_link_is_removed_on_sigterm(tmp_path: Path) -> None:
    link = tmp_path / "robot"
    proc = spawn_verb("sim", "echo", "--link", str(link), "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None
    with reaped(proc):
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and link.is_symlink()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    assert json.loads(out.splitlines()[-1])["event"] == "end"  # the summary still comes
    assert not link.exists() and not link.is_symlink()


def _head_one(*args: str, stdin: int | None = None) -> tuple[int, bytes]:
    """``fwbridge ARGS | head -1``: read one line, close the pipe, wait for the end."""
    proc = spawn_verb(*args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        assert select.select([proc.stdout], [], [], DEADLINE)[0], "no output"
        assert proc.stdout.readline()
        proc.stdout.close()
        rc = proc.wait(timeout=DEADLINE)
        return rc, proc.stderr.read()


def test_decode_piped_to_head_ends_quietly(tmp_path: Path) -> None:
    capture = tmp_path / "odom.bin"
    capture.write_bytes(odom_frame.encode(OdomFrame(0.1, 0.0, 0.0, 1.0)) * 200_000)
    for mode in ((), ("--json",)):
        rc, err = _head_one("decode", "-p", "odom", str(capture), *mode)
        assert rc == 0 and b"Traceback" not in err and b"Error" not in err, err


def test_sniff_piped_to_head_ends_quietly(pair: PtyPair) -> None:
    proc = spawn_verb("sniff", pair.path, "-p", "odom", "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        frame = odom_frame.encode(OdomFrame(0.1, 0.0, 0.0, 1.0))
        wait_for_line(proc, "^sniffing ")
        pair.write(frame)
        wait_for_line(proc, "", stream="stdout")  # `head -1`
        proc.stdout.close()
        end = time.monotonic() + DEADLINE
        while proc.poll() is None and time.monotonic() < end:
            pair.write(frame)  # the sniffer learns the reader is gone at its next frame
            time.sleep(0.02)  # pacing: a device sending at 50 Hz
        assert proc.wait(timeout=1) == 0
        err = proc.stderr.read()
    assert b"Traceback" not in err and b"Error" not in err, err
    assert b"counters: frames=" in err


def test_can_sniff_piped_to_head_ends_quietly() -> None:
    rc, err = _head_one("can", "--modules", "2", "sniff", "--raw")
    assert rc == 0 and b"Traceback" not in err and b"Error" not in err, err


def test_can_record_blf_survives_sigterm(tmp_path: Path) -> None:
    import can

    out = tmp_path / "run.blf"
    proc = spawn_verb("can", "--modules", "2", "record", str(out),
                      stderr=subprocess.PIPE)
    with reaped(proc):
        wait_for_line(proc, "^recording ")
        time.sleep(1.0)  # not a readiness wait: frames flow for a while (in the process only)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    n = int(err.split(b"recorded ")[1].split()[0])
    assert n > 0
    with can.BLFReader(str(out)) as reader:
        assert len(list(reader)) == n  # whole: every recorded frame is in the file


def test_can_record_log_keeps_its_tail_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "run.log"
    proc = spawn_verb("can", "--modules", "2", "record", str(out),
                      stderr=subprocess.PIPE)
    with reaped(proc):
        # The file appears once the bus is open and the recording runs (a loaded
        # machine may take longer than any fixed sleep to get there).
        wait_until(lambda: out.exists() and out.stat().st_size > 0, DEADLINE, "a first frame")
        time.sleep(0.3)  # not a readiness wait: more frames flow, the tail is mid-write
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    n = int(err.split(b"recorded ")[1].split()[0])
    lines = out.read_text().splitlines()
    assert n > 0 and len(lines) == n and lines[-1].count("#") == 1


def _stop_handlers_installed(pid: int) -> bool:
    """The process has entered the CLI's entry point: it catches SIGTERM (bit 15)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def _capture_file(tmp_path: Path) -> Path:
    from fwbridge.bridge.record.serial_pcapng import CaptureWriter

    path = tmp_path / "run.pcapng"
    with CaptureWriter(path) as cap:
        for k in range(50):
            cap.write("rx", odom_frame.encode(OdomFrame(0.0, 0.0, 0.0, float(k))),
                      ts_ns=k * 20_000_000)
    return path


def _can_log(tmp_path: Path) -> Path:
    path = tmp_path / "bus.log"
    path.write_text("".join(f"({1.0 + k / 50:.6f}) sim0 101#0000000000000000\n"
                            for k in range(50)))
    return path


# (verb, the stream and line that show its loop runs, what its summary says)
EVERY_VERB = {
    "sniff": (["sniff", "{port}", "-p", "odom"], "stderr", "^sniffing ", b"counters: frames="),
    "record": (["record", "{port}", "{tmp}/rec.pcapng"], "stderr", "^recording ", b"recorded "),
    "replay": (["replay", "{capture}", "{port}", "--loop"], "stderr", "^replaying ",
               b"replayed "),
    "can-sniff": (["can", "--modules", "2", "sniff"], "stdout", "module",
                  b"counters: frames="),
    "can-record": (["can", "--modules", "2", "record", "{tmp}/x.blf"], "stderr",
                   "^recording ", b"recorded "),
    "can-send": (["can", "--modules", "1", "send", "123#00", "--count", "100000",
                  "--interval", "0.01"], "stderr", "^sending ", b"sent "),
    "can-replay": (["can", "--modules", "1", "replay", "{canlog}", "--loop", "0"],
                   "stderr", "^replaying ", b"replayed "),
    "can-busload": (["can", "--modules", "2", "busload", "--interval", "0.2"],
                    "stdout", "frames", b""),
    "can-sim": (["can", "sim", "2"], "stderr", "^simulating ", b""),
    "sim-scara": (["sim", "scara"], "stderr", "^SCARA arm modules on ", b""),
    "demo": (["demo"], "stdout", "side", b"demo: stopped before the square was done"),
}


@pytest.mark.parametrize("name", sorted(EVERY_VERB))
def test_every_long_running_verb_stops_the_same_way_on_sigterm(
        pair: PtyPair, tmp_path: Path, name: str) -> None:
    args, stream, running, summary = EVERY_VERB[name]
    argv = [a.format(port=pair.path, tmp=tmp_path, capture=_capture_file(tmp_path),
                     canlog=_can_log(tmp_path)) for a in args]
    proc = spawn_verb(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    with reaped(proc):
        end = time.monotonic() + DEADLINE
        while not _stop_handlers_installed(proc.pid):
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()
            time.sleep(0.01)  # polling: a bounded wait, as wait_until's
        wait_for_line(proc, running, DEADLINE, stream=stream)  # its loop runs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    assert b"Traceback" not in err, err
    assert summary in err


# -- the simulators and the demo: every way out (a signal, or the reader gone) -------------
#: How a verb is left: a stop signal, or "pipe" (`| head -1`: stdout's reader goes away).
WAYS = ["SIGINT", "SIGTERM", "pipe"]


def _leave(proc: subprocess.Popen[bytes], way: str) -> int:
    """Leave the running verb ``way``; its exit status (the house's for that way)."""
    assert proc.stdout is not None
    if way == "pipe":
        proc.stdout.close()  # the reader has read its line and is gone
        want = 0
    else:
        proc.send_signal(getattr(signal, way))
        want = 128 + getattr(signal, way)
    rc = proc.wait(timeout=DEADLINE)
    assert rc == want, proc.stderr.read() if proc.stderr else rc
    return rc


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("model", ["mecanum", "zumo", "fish"])
def test_sim_every_way_out_removes_its_link_and_closes_its_capture(
        tmp_path: Path, model: str, way: str) -> None:
    link, capture = tmp_path / "robot", tmp_path / "sim.pcapng"
    proc = spawn_verb("sim", model, "--link", str(link), "--record", str(capture), "--json",
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and ready["port"] == str(link) and link.is_symlink()
        json.loads(proc.stdout.readline())  # a status line: the clock runs
        _leave(proc, way)
        err = proc.stderr.read()
    assert b"Traceback" not in err and b"error:" not in err, err
    assert not os.path.lexists(link)  # the --link is gone with the pty it named
    list(read_capture(capture))  # readable to its end: closed whole, not cut


@pytest.mark.parametrize("way", WAYS)
def test_demo_every_way_out_stops_the_base_and_closes_its_capture(tmp_path: Path,
                                                                  way: str) -> None:
    capture = tmp_path / "demo.pcapng"
    proc = spawn_verb("demo", "--json", "--record", str(capture), stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        wait_for_line(proc, r'"event":"odometry"', DEADLINE, stream="stdout")  # driving
        _leave(proc, way)
        err = proc.stderr.read()
    assert b"Traceback" not in err and b"error:" not in err, err
    sent = [cmd_frame.decode(p.data) for p in read_capture(capture) if p.direction == "tx"]
    assert any(c.vx or c.vy or c.wz for c in sent)  # it was driving the square
    assert sent[-1] == cmd_frame.ZERO  # the last command, and the capture's end: the stop


@pytest.mark.parametrize("suffix", ["pcapng", "mcap"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_record_stopped_by_a_signal_keeps_every_packet(pair: PtyPair, tmp_path: Path,
                                                        sig: int, suffix: str) -> None:
    out = tmp_path / f"run.{suffix}"
    # On a terminal: its live line counts the packets written (a wide window keeps the
    # long test path whole).
    with Terminal("record", pair.path, str(out), cols=250) as term:
        term.expect(r"recording .* to ")
        pair.write(odom_frame.encode(OdomFrame(0.1, 0.0, 0.0, 1.0)) * 20)
        term.expect(rf"run\.{suffix}: [1-9]\d* packets")  # taken off the port, written
        term.kill(sig)
        assert term.wait() == 128 + sig, term.text
        text = term.text
    n = int(re.findall(r"recorded (\d+) packets", text)[-1])
    assert n > 0 and len(list(read_capture(out))) == n  # closed whole: every packet counted


@pytest.mark.parametrize("way", ["SIGHUP", "pipe"])
def test_fw_run_every_way_out_stops_qemu_and_removes_its_link(tmp_path: Path, way: str) -> None:
    """SIGINT and SIGTERM: tests/test_firmware_qemu.py; here the other two ways out."""
    from tests.qemu_fw import qemu_build

    qemu_build()
    link = tmp_path / "ttyFW0"
    proc = spawn_verb("fw", "run", "--json", "--link", str(link), stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with reaped(proc):
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and link.is_symlink()
        wait_for_line(proc, '"event":"status"', DEADLINE, stream="stdout")  # the board runs
        _leave(proc, way)
        err = proc.stderr.read()
    assert b"Traceback" not in err and b"error:" not in err, err
    assert not os.path.lexists(link)
    assert not Path(f"/proc/{ready['qemu_pid']}").exists()  # QEMU stopped (and reaped)
