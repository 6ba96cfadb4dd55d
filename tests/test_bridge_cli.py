"""Every serial verb as a subprocess, against pty pairs with a firmware peer."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pty
import select
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame
from tests import sim_stub
from tests.helpers import (
    ROOT,
    FirmwarePeer,
    LagMeter,
    run_cli,
    run_verb,
    spawn_verb,
    wait_for_line,
)

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")






def one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2, proc.stderr.decode()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def blocks(frames: list[CmdFrame]) -> list[CmdFrame]:
    """Runs of equal frames collapsed to one."""
    return [f for i, f in enumerate(frames) if i == 0 or f != frames[i - 1]]


def until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)  # polling: a bounded wait
    return True


def test_ports_lists_or_says_none() -> None:
    table = run_verb("ports")
    assert table.returncode == 0, table.stderr
    assert b"device" in table.stdout or b"no serial ports found" in table.stderr
    as_json = run_verb("ports", "--json")
    assert as_json.returncode == 0
    for line in as_json.stdout.decode().splitlines():
        row = json.loads(line)
        assert {"device", "usb", "description"} <= row.keys()


def test_send_writes_byte_exact_frames(pair: PtyPair, peer: FirmwarePeer) -> None:
    proc = run_verb("send", pair.path, "cmd", "--vx", "0.5", "--wz", "-0.25", "--rate", "100",
                    "--count", "5")
    assert proc.returncode == 0, proc.stderr
    assert b"sent 5 cmd frames" in proc.stderr
    want = cmd_frame.encode(CmdFrame(0.5, 0.0, -0.25))
    assert peer.wait_for(lambda a: len(a) == 5)
    assert bytes(peer.raw) == want * 5


def test_send_odom_plays_the_firmware(pair: PtyPair) -> None:
    proc = run_verb("send", pair.path, "odom", "--vx", "1", "--yaw", "90", "--count", "2",
                    "--rate", "200")
    assert proc.returncode == 0, proc.stderr
    data = b""
    while len(data) < 38:
        chunk = pair.read(timeout=2.0)
        assert chunk
        data += chunk
    assert data == odom_frame.encode(OdomFrame(1.0, 0.0, 0.0, 90.0)) * 2


def test_sniff_decodes_live_frames_and_records_them(pair: PtyPair, tmp_path: Path) -> None:
    capture = tmp_path / "sniff.pcapng"
    proc = spawn_verb("sniff", pair.path, "-p", "odom", "--json", "--record", str(capture),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout is not None
    lines: list[dict[str, object]] = []
    # Frames until the sniffer shows the first (it may open the port after we start) ...
    k = 0
    while not lines:
        pair.write(odom_frame.encode(OdomFrame(0.0, 0.0, 0.0, float(k))))
        k += 1
        if select.select([proc.stdout], [], [], 0.02)[0]:
            lines.append(json.loads(proc.stdout.readline()))
    first = int(lines[0]["yaw_deg"])  # type: ignore[call-overload]
    # ... then a known run, with noise between frames.
    for j in range(k, k + 30):
        pair.write(b"\x13\xaa" + odom_frame.encode(OdomFrame(0.5, -0.5, 0.1, float(j))))
    last = k + 29
    while int(lines[-1]["yaw_deg"]) != last:  # type: ignore[call-overload]
        assert select.select([proc.stdout], [], [], 10)[0], "sniff stopped printing"
        lines.append(json.loads(proc.stdout.readline()))
    proc.send_signal(signal.SIGINT)  # Ctrl-C ends a sniff normally, with its counters
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err  # 128 + SIGINT, after the summary
    assert b"counters: frames=" in err
    assert out == b""
    yaws = [int(r["yaw_deg"]) for r in lines]  # type: ignore[call-overload]
    assert yaws == list(range(first, k + 30))  # every frame, in order, none invented
    assert lines[-1]["vx"] == 0.5 and lines[-1]["protocol"] == "odom"
    recorded = b"".join(p.data for p in read_capture(capture))
    assert odom_frame.encode(OdomFrame(0.5, -0.5, 0.1, float(last))) in recorded


def test_sniff_stops_after_duration_with_counters(pair: PtyPair) -> None:
    proc = run_verb("sniff", pair.path, "-p", "cmd", "--duration", "0.3")
    assert proc.returncode == 0, proc.stderr
    assert b"counters: frames=0" in proc.stderr


def test_sniff_suspects_a_wrong_baud_rate(pair: PtyPair) -> None:
    stop = threading.Event()

    def garbage() -> None:  # what a UART at the wrong rate delivers: bytes, no frame
        while not stop.is_set():
            pair.write(bytes([0x13, 0xF0, 0x7E, 0x00, 0xFF, 0x55, 0x3C]) * 8)
            time.sleep(0.01)  # pacing: a stream of garbage, as a UART delivers it

    feeder = threading.Thread(target=garbage, daemon=True)
    feeder.start()
    try:
        proc = run_verb("sniff", pair.path, "-p", "odom", "--garbage-timeout", "0.5",
                        "--duration", "20")
    finally:
        stop.set()
        feeder.join()
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and lines[-1].startswith("error: only garbage on ")
    assert "wrong baud rate?" in lines[-1] and "--baud" in lines[-1]
    assert lines[0].startswith("sniffing ") and lines[1].startswith("counters:")


def test_serial_errors_are_one_line_with_the_fix(pair: PtyPair, tmp_path: Path) -> None:
    missing = one_error_line(run_verb("sniff", str(tmp_path / "ttyUSB9"), "-p", "odom"))
    assert "no such device" in missing and ("serial ports here" in missing
                                            or "no serial ports found" in missing)
    holder = spawn_verb("record", pair.path, str(tmp_path / "hold.pcapng"),
                        stderr=subprocess.PIPE)
    try:
        until(lambda: holder.poll() is not None or _holds(holder.pid, pair.slave_name))
        busy = run_verb("send", pair.path, "cmd")
        assert "is busy" in one_error_line(busy)
    finally:
        holder.terminate()
        holder.communicate(timeout=10)


def _holds(pid: int, device: str) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == device for fd in fds.iterdir())
    except OSError:
        return False


def test_record_then_replay_reproduces_bytes_and_timing(tmp_path: Path) -> None:
    capture = tmp_path / "run.pcapng"
    frames = [cmd_frame.encode(CmdFrame(0.1 * i, 0.0, 0.0)) for i in range(1, 7)]
    gaps = [0.06, 0.03, 0.12, 0.03, 0.12]  # distinct enough that a mix-up shows
    with PtyPair() as src:
        recorder = spawn_verb("record", src.path, str(capture), stderr=subprocess.PIPE)
        wait_for_line(recorder, "^recording ")  # port and file open: it is reading
        for i, frame in enumerate(frames):
            src.write(frame)
            if i < len(gaps):
                time.sleep(gaps[i])  # pacing: the gaps the replay must reproduce
        until(lambda: sum(len(p.data) for p in read_capture(capture)) >= 90)
        recorder.send_signal(signal.SIGINT)
        _, err = recorder.communicate(timeout=10)
    assert recorder.returncode == 130 and b"recorded " in err
    packets = [p for p in read_capture(capture) if p.data.strip(b"\x00")]
    assert b"".join(p.data for p in packets).lstrip(b"\x00") == b"".join(frames)
    rec_t = [p.ts_ns / 1e9 for p in packets if p.data.lstrip(b"\x00")[:2] == b"\xaa\x55"]

    with PtyPair() as dst:
        peer = FirmwarePeer(dst)
        peer.start()
        try:
            spawned = time.monotonic()
            with LagMeter() as lag:
                proc = run_verb("replay", str(capture), dst.path, "--speed", "2")
            assert proc.returncode == 0, proc.stderr
            assert peer.wait_for(lambda a: len(a) == 6)
        finally:
            peer.stop()
    assert bytes(peer.raw).lstrip(b"\x00") == b"".join(frames)
    rep_t = [a.t for a in peer.arrivals]
    # The replay sends packet i no earlier than its start + (its capture offset) / 2,
    # and it starts after we spawned it; a loaded machine only makes it later.
    # So this bound holds however slow the machine is, and fails a replay
    # that ignores the timing or the speed (sending early or all at once).
    schedule = [(t - rec_t[0]) / 2 for t in rec_t]
    assert all(arrived - spawned >= due for arrived, due in zip(rep_t, schedule))
    # Late can be the machine's doing: the rhythm (each gap half the recorded
    # one, so a replay at the wrong speed fails) is checked only when the lag
    # measured alongside shows the machine kept real time.
    if lag.worst > 0.03:
        pytest.skip(f"the machine could not keep real time (woke {lag.worst * 1e3:.0f} ms late)")
    rec_gaps = [b - a for a, b in itertools.pairwise(rec_t)]
    rep_gaps = [b - a for a, b in itertools.pairwise(rep_t)]
    for r, p in zip(rec_gaps, rep_gaps):  # at 1x the 0.12 s gap would be 60 ms off
        assert p == pytest.approx(r / 2, abs=0.01 + lag.worst)
    none = run_verb("replay", str(capture), "loop://", "--direction", "tx")
    assert "no tx packets (it has rx=" in one_error_line(none)


def test_teleop_keys_on_a_terminal(pair: PtyPair, peer: FirmwarePeer) -> None:
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    proc = spawn_verb("teleop", pair.path, "--rate", "50", stdin=slave,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert peer.wait_for(lambda a: len(a) >= 2)  # idle: zero at the rate
        for key, check in ((b"w", lambda f: f.vx > 0.19), (b"a", lambda f: f.wz > 0.49),
                           (b"x", lambda f: f == cmd_frame.ZERO), (b"d", lambda f: f.wz < -0.49)):
            os.write(master, key)
            assert peer.wait_for(lambda a, c=check: c(a[-1].frame)), key  # type: ignore[misc]
        os.write(master, b"q")
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
        after = termios.tcgetattr(slave)
        os.close(master)
        os.close(slave)
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO)  # quitting stops the robot
    seen = [v for f in blocks(peer.frames()) for v in (f.vx, f.wz)]
    assert seen == pytest.approx([0, 0, 0.2, 0, 0, 0.5, 0, 0, 0, -0.5, 0, 0])
    assert after == before  # the terminal is given back as it was


def test_teleop_keys_piped_on_stdin(pair: PtyPair, peer: FirmwarePeer) -> None:
    proc = spawn_verb("teleop", pair.path, "--rate", "50", stdin=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"s")
        proc.stdin.flush()
        assert peer.wait_for(lambda a: bool(a) and a[-1].frame.vx < -0.19)
        proc.stdin.close()  # end of input quits
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.stderr is not None
    assert b"then zero velocity" in proc.stderr.read()
    proc.stderr.close()
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO)


def test_bridge_runs_the_node_and_prints_odometry(pair: PtyPair, peer: FirmwarePeer,
                                                  tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[control]\nrate_hz = 50\n'
                   "[watchdog]\ncmd_timeout = 5.0\n")
    # The firmware answers each command with odometry echoing it.
    peer.answer = lambda c: odom_frame.encode(OdomFrame(c.vx, c.vy, c.wz, 45.0))
    capture = tmp_path / "bridge.pcapng"
    proc = spawn_verb("bridge", str(cfg), "--duration", "1.0", "--cmd-stdin", "--record",
                      str(capture), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    out, err = proc.communicate(b"0.3 0 0.2\n", timeout=20)
    assert proc.returncode == 0, err
    records = [json.loads(line) for line in out.decode().splitlines()]
    moving = [r for r in records if r["twist"]["linear"]["x"] == pytest.approx(0.3)]
    assert moving, records[:3]
    last = moving[-1]
    assert last["pose"]["yaw"] == pytest.approx(0.7853981, abs=1e-6)
    assert last["pose"]["position"]["x"] > 0 and last["pose"]["position"]["y"] > 0
    assert {"stamp", "dt", "seq", "frame_id", "child_frame_id"} <= last.keys()
    assert b"active" in err and b"bridge: commands=" in err
    assert any(f.vx == pytest.approx(0.3) for f in peer.frames())
    directions = {p.direction for p in read_capture(capture)}
    assert directions == {"rx", "tx"}


def test_bridge_config_and_port_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[link]\nurl = "/dev/x"\nbaud = "fast"\n')
    assert "link.baud: must be an integer" in one_error_line(run_verb("bridge", str(bad)))
    gone = tmp_path / "gone.toml"
    gone.write_text(f'[link]\nurl = "{tmp_path / "ttyACM7"}"\n')
    assert "no such device" in one_error_line(run_verb("bridge", str(gone)))


def test_sniff_action_frames_through_the_decoder_registry(pair: PtyPair) -> None:
    from fwbridge.protocols import action_frame

    frame = action_frame.encode(action_frame.ActionFrame(3, 0x04, 0x21, b"\x01\x02\xfd\xdf"))
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            pair.write(frame)
            time.sleep(0.02)  # pacing: a device sending at 50 Hz

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        proc = run_verb("sniff", pair.path, "-p", "action", "--json", "--duration", "0.6")
    finally:
        stop.set()
        feeder.join()
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert rows and all(r["machine"] == 3 and r["data"] == "0102fddf" for r in rows)


def test_bridge_use_sim_through_the_cli(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(
        f'use_sim = true\n[link]\nurl = "{tmp_path / "ttyUSB0"}"\n'
        '[sim]\nurl = "sim://simstub"\n'
    )
    # The model comes from an installed package's fwbridge.sim_models entry point.
    site = sim_stub.install_entry_point(tmp_path / "site")
    path = os.pathsep.join((str(site), str(ROOT)))
    sim = run_cli("bridge", str(cfg), "--duration", "0.4", env={"PYTHONPATH": path})
    assert sim.returncode == 0, sim.stderr
    assert b"simulated endpoint sim://simstub" in sim.stderr
    assert json.loads(sim.stdout.decode().splitlines()[-1])["child_frame_id"] == "base_link"
    real = run_verb("bridge", str(cfg), "--real", "--duration", "0.4")  # same file, real port
    assert "no such device" in one_error_line(real)


def test_read_pcapng_payloads_for_decode(tmp_path: Path) -> None:
    from fwbridge.bridge.record.serial_pcapng import CaptureWriter
    from fwbridge.cli_verbs.codec import read_pcapng_payloads
    from fwbridge.cli_verbs.common import CliError

    path = tmp_path / "c.pcapng"
    with CaptureWriter(path) as cap:
        cap.write("rx", b"odom")
        cap.write("tx", b"cmd")
    assert list(read_pcapng_payloads(str(path))) == [b"odom", b"cmd"]
    assert list(read_pcapng_payloads(str(path), "tx")) == [b"cmd"]
    text = tmp_path / "t.txt"
    text.write_text("aa 55")
    with pytest.raises(CliError, match="not a pcapng file"):
        list(read_pcapng_payloads(str(text)))


def test_bridge_stops_on_a_suspected_wrong_baud_rate(pair: PtyPair, tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[watchdog]\ngarbage_timeout = 0.4\n')
    stop = threading.Event()

    def garbage() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                pair.write(bytes([0x13, 0xF0, 0x7E, 0x00, 0xFF, 0x55, 0x3C]) * 8)
            time.sleep(0.01)  # pacing: a stream of garbage, as a UART delivers it

    feeder = threading.Thread(target=garbage, daemon=True)
    feeder.start()
    try:
        proc = run_verb("bridge", str(cfg), "--duration", "20")
    finally:
        stop.set()
        feeder.join()
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("error: only garbage on ")
    assert "wrong baud rate?" in last and f"link.baud in {cfg}" in last
