"""Simulated endpoints end to end: ptys, pyserial, the base node, the CLI as a subprocess.

No test asserts on wall time: simulated time comes from the frames (each
odometry frame is one 20 ms window of the firmware) and from the status
lines; the realtime runs only bound how long a test may wait.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serial

from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.sim.endpoint import Pacer, SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.bridge.sim.models.zumo import Zumo
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import reaped

REPO = Path(__file__).resolve().parents[1]
RUN_SIM = (
    "import sys; from fwbridge.cli_verbs.sim import sim_cmd; "
    "sim_cmd.main(args=sys.argv[1:], prog_name='fwbridge sim')"
)

offer_sim()  # serial.serial_for_url("sim://…") below


@contextlib.contextmanager
def served(model: Any, **kwargs: Any) -> Iterator[tuple[SimEndpoint, PtyLink]]:
    endpoint = SimEndpoint(model, **kwargs)
    link = PtyLink(endpoint)
    try:
        yield endpoint, link
    finally:
        endpoint.stop()
        link.close()


def read_frames(port: serial.Serial, count: int, limit_s: float = 20.0) -> list[OdomFrame]:
    """``count`` odometry frames from ``port`` (gives up after ``limit_s`` without them)."""
    rx = Sum8Receiver(odom_frame.CODEC)
    frames: list[OdomFrame] = []
    end = time.monotonic() + limit_s
    while len(frames) < count and time.monotonic() < end:
        frames += [r.frame for r in rx.feed(port.read(19 * (count - len(frames))))]
    assert len(frames) >= count, f"only {len(frames)} odometry frames arrived"
    return frames[:count]


def test_commanded_velocity_is_reached_within_the_settling_time() -> None:
    model = MecanumBase(MecanumParams(cmd_timeout_ms=0))  # one command, kept (no watchdog)
    p = model.params
    cmd = CmdFrame(0.4, 0.2, 0.6)
    wheels = p.geometry.inverse(cmd.vx, cmd.vy, cmd.wz)
    assert max(map(abs, wheels)) < p.motor.max_speed  # no desaturation in this test
    tol_w = 0.01  # rad/s per wheel counts as settled
    settle_ms = 1 + 1000 * p.motor.settling_time(max(map(abs, wheels)), tol_w)
    period = p.odom_period_ms
    r = p.geometry.wheel_radius
    q = 2 * math.pi / p.cpr / (period / 1000)  # one encoder count per window, rad/s
    k = p.geometry.lx + p.geometry.ly
    tol = (r * (q + tol_w), r * (q + tol_w), r * (q + tol_w) / k)  # vx, vy, wz per frame

    with served(model, pacing="afap") as (endpoint, link):
        port = serial.Serial(link.path, timeout=2)  # pyserial on the pty: a real tty
        port.write(cmd_frame.encode(cmd))
        port.flush()
        assert link.wait_for_host()  # so the command lands in the first step
        endpoint.start()
        frames = read_frames(port, 80)
        port.close()

    # Frame k (from 1) averages the window ((k-1)*20, k*20] ms of simulated time.
    first_settled = math.ceil(settle_ms / period)  # index of the first window starting after
    assert 5 < first_settled < 60
    assert frames[0].vx < 0.5 * cmd.vx  # the motors do lag: the test is not vacuous
    settled = frames[first_settled:]
    for f in settled:
        assert abs(f.vx - cmd.vx) <= tol[0] and abs(f.vy - cmd.vy) <= tol[1]
        assert abs(f.wz - cmd.wz) <= tol[2]
    # Over many windows the counts add up exactly: the mean is within one count in total.
    n = len(settled)
    mean = [sum(getattr(f, a) for f in settled) / n for a in ("vx", "vy", "wz")]
    assert mean[0] == pytest.approx(cmd.vx, abs=2 * r * (q / n + tol_w))
    assert mean[1] == pytest.approx(cmd.vy, abs=2 * r * (q / n + tol_w))
    assert mean[2] == pytest.approx(cmd.wz, abs=2 * r * (q / n + tol_w) / k)
    # The IMU yaw is in degrees and turns at the commanded rate.
    turn = [b.yaw_deg - a.yaw_deg for a, b in itertools.pairwise(settled) if b.yaw_deg > a.yaw_deg]
    assert sum(turn) / len(turn) == pytest.approx(math.degrees(cmd.wz) * period / 1000, rel=1e-3)


def status_lines(port: serial.Serial, buf: bytearray, out: list[dict[str, Any]]) -> None:
    buf += port.read(4096)
    while b"\n" in buf:
        line, _, rest = bytes(buf).partition(b"\n")
        buf[:] = rest
        out.append(json.loads(line))


def test_zumo_encoder_counts_match_the_integral_of_commanded_speeds() -> None:
    model = Zumo()
    drive, cpr = model.params.drive, model.params.cpr
    commands = [(0.05, 0.3), (0.07, -0.5), (-0.03, 0.0), (0.02, 1.0), (0.0, 0.0)]
    lines: list[dict[str, Any]] = []
    buf = bytearray()
    with served(model, pacing="realtime", speed=4.0) as (endpoint, link):
        robot = serial.Serial(link.path, timeout=0)
        sup = serial.Serial(link.supervisor_path, timeout=0.05)
        endpoint.start()
        for vx, wz in commands:
            robot.write(cmd_frame.encode(CmdFrame(vx, 0.0, wz)))
            seen = len(lines)
            # Hold each command for at least 4 status lines (400 ms simulated).
            end = time.monotonic() + 10
            while len(lines) < seen + 4 and time.monotonic() < end:
                status_lines(sup, buf, lines)
            robot.reset_input_buffer()  # odometry is not under test here
        robot.close()
        sup.close()
    assert len(lines) >= 4 * len(commands)
    # The HAL's mapping: wheel rad/s / 0.01, both scaled into ±400, rounded.
    used = {tuple(s["speeds"]) for s in lines}
    for vx, wz in commands:
        left, right = (w / 0.01 for w in drive.inverse(vx, wz))
        scale = min(1.0, 400 / max(abs(left), abs(right), 1e-9))
        assert (round(left * scale), round(right * scale)) in used
    # Integrate the commanded speeds between status lines; a command that
    # arrived between two lines took effect at its own time (cmd_t).
    expect = [0.0, 0.0]
    for a, b in itertools.pairwise(lines):
        segments = [(a["t"], b["t"], a["speeds"])]
        if a["t"] < b["cmd_t"] <= b["t"]:
            segments = [(a["t"], b["cmd_t"], a["speeds"]), (b["cmd_t"], b["t"], b["speeds"])]
        else:
            assert b["speeds"] == a["speeds"]
        for t0, t1, speeds in segments:
            for side in (0, 1):
                expect[side] += speeds[side] * 0.01 * (t1 - t0) / 1000 * cpr / (2 * math.pi)
    got = [lines[-1]["counts"][i] - lines[0]["counts"][i] for i in (0, 1)]
    assert abs(expect[0]) > 50 and abs(expect[1]) > 50
    for side in (0, 1):
        assert abs(got[side] - expect[side]) <= 1.0 + 1e-6  # whole counts at both ends


def run_cli_sim(args: list[str], host_bytes: bytes, want: int) -> bytes:
    """``fwbridge sim`` as a subprocess: open its port, write, read ``want`` bytes, Ctrl-C."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_SIM, *args, "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with reaped(proc):
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and ready["port"].startswith("/dev/")
        port = serial.Serial(ready["port"], timeout=5)
        port.write(host_bytes)
        data = bytearray()
        while len(data) < want:
            chunk = port.read(want - len(data))
            assert chunk, "the simulation stopped sending"
            data += chunk
        port.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        end = json.loads(out.strip().splitlines()[-1])
        assert end["event"] == "end" and end["interrupted"]
        return bytes(data)


def test_same_seed_same_bytes_in_fast_mode() -> None:
    faults = "drop=0.01,corrupt=0.01,insert=0.01,delay=0.002,delay_ms=30"
    cmd = cmd_frame.encode(CmdFrame(0.3, 0.1, 0.5))

    def run(seed: int) -> bytes:
        args = [
            "mecanum",
            "--pacing",
            "afap",
            "--wait-for-host",
            "--watchdog",
            "0",  # one command, kept for the whole run
            "--faults",
            faults,
            "--seed",
            str(seed),
        ]
        return run_cli_sim(args, cmd, 8000)

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert other != first
    rx = Sum8Receiver(odom_frame.CODEC)
    frames = [r.frame for r in rx.feed(first)]
    assert rx.stats.checksum_errors > 0  # the faults are really there
    assert frames[-1].vx == pytest.approx(0.3, abs=0.02)  # and so is the command


def test_bridge_tracks_the_pose_through_one_percent_corruption() -> None:
    spec = FaultSpec(corrupt=0.01, seed=5)
    model = MecanumBase()
    p = model.params
    request = (0.3, 0.1, 0.4)
    latest: list[Odometry] = []
    with served(model, pacing="realtime", faults=spec) as (endpoint, link):
        endpoint.start()
        config = RobotConfig(sim_url=link.path, use_sim=True, rate_hz=50, source="<test>")
        node = BaseNode(config, on_odometry=lambda o: latest.append(o), on_event=None)
        node.start()
        try:
            for i in range(30):  # 3 s of requests, renewed well within the watchdog
                node.request(*(request if i < 22 else (0.0, 0.0, 0.0)))
                time.sleep(0.1)  # pacing: a request every 0.1 s, as a host sends them
            # The counts are compared across two processes' views: first the
            # simulation's, then the node's once it has read what was in flight
            # (waiting for a count, not for a time, so a stalled machine cannot
            # break it), then the simulation's again for the upper bound.
            sim = endpoint.status()
            floor = sim["firmware"]["odom_sent"] - sim["faults"]["robot->host"]["corrupted"]
            deadline = time.monotonic() + 30
            while node.stats()["frames"] < floor and time.monotonic() < deadline:
                time.sleep(0.02)  # polling: a bounded wait
            stats = node.stats()
            after = endpoint.status()["firmware"]["odom_sent"]
        finally:
            node.stop()
        truth = model.pose
    odom = latest[-1]
    # Tolerance from the model: one count per wheel, the arrival jitter (half
    # a period) and one lost frame's period at each of the two speed changes,
    # and the heading the host rotates each frame by (its end, not its middle).
    period = p.odom_period_ms / 1000
    v = math.hypot(request[0], request[1])
    count = p.geometry.wheel_radius * 2 * math.pi / p.cpr
    tol = count + 2 * v * (period / 2 + period) + v * request[2] * period / 2 * 2.2
    assert math.hypot(odom.x - truth[0], odom.y - truth[1]) <= tol
    assert math.hypot(truth[0], truth[1]) > 0.4  # it did go somewhere
    assert math.degrees(odom.yaw) == pytest.approx(math.degrees(truth[2]), abs=0.01)
    # The counters show the corruption, both ways.
    up = sim["faults"]["robot->host"]["corrupted"]
    sent = sim["firmware"]["odom_sent"]
    assert up > 0 and stats["checksum_errors"] > 0 and stats["discarded"] > 0
    assert sent - up <= stats["frames"] < after  # each corrupted byte costs at most its frame
    assert sim["faults"]["host->robot"]["corrupted"] > 0
    assert sim["firmware_rx"]["checksum_errors"] > 0


def test_use_sim_config_opens_a_sim_url_in_a_fresh_process_once_offered(tmp_path: Path) -> None:
    """The seam: a robot TOML with use_sim = true, in a process that offers sim:// (the
    ``fwbridge`` command does, to its openers only: pyserial is not imported at its
    start-up); one that does not gets one clear error, no simulation."""
    config = tmp_path / "robot.toml"
    config.write_text(
        'use_sim = true\n[link]\nurl = "/dev/ttyUSB0"\n[sim]\nurl = "sim://echo?pacing=afap"\n'
    )
    code = (
        "import sys\n"
        "if sys.argv[2] != 'no':\n"
        "    from fwbridge.bridge.sim import register; register(pyserial=sys.argv[2] == 'offer')\n"
        "    assert sys.argv[2] == 'offer' or 'serial' not in sys.modules, 'pyserial loaded'\n"
        "from fwbridge.bridge.node.config import load_config\n"
        "from fwbridge.bridge.node.hardware import LinkHardware\n"
        "hw = LinkHardware(load_config(sys.argv[1])); hw.configure()\n"
        "hw.link.write(b'\\xaa\\x55hello'); print(hw.link.read(7).hex()); hw.shutdown()\n"
    )

    def run(offer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, str(config), offer], cwd=REPO,
                              capture_output=True, text=True, timeout=60)

    for offer in ("offer", "to-openers"):
        out = run(offer)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == (b"\xaa\x55hello").hex()
    out = run("no")
    assert out.returncode != 0 and out.stdout == ""
    assert "'sim://' URLs are not offered by this program" in out.stderr


def test_base_node_on_a_sim_url() -> None:
    records: list[Odometry] = []
    got = threading.Event()

    def on_odometry(o: Odometry) -> None:
        records.append(o)
        if o.vx > 0.19:
            got.set()

    config = RobotConfig(
        url="/dev/ttyUSB0", sim_url="sim://mecanum?speed=2", use_sim=True, rate_hz=50
    )
    node = BaseNode(config, on_odometry=on_odometry, on_event=None)
    node.start()
    try:
        # the I/O loop waits on the simulated port itself: no pump thread
        assert "base-node-rx" not in {t.name for t in threading.enumerate()}
        for _ in range(50):
            node.request(0.2, 0.0, 0.0)
            if got.wait(0.1):
                break
    finally:
        node.stop()
    assert got.is_set()
    assert records[-1].vy == pytest.approx(0.0, abs=0.01)


def test_sim_url_options_and_errors() -> None:
    port = serial.serial_for_url("sim://echo?pacing=afap&drop=0&seed=3", timeout=0.05)
    port.write(b"\x01\x02\x03")
    assert port.read(3) == b"\x01\x02\x03"
    assert port.in_waiting == 0
    port.close()
    for url, message in (
        ("sim://tank", "unknown robot model"),
        ("sim://mecanum?bogus=1", "unknown option"),
        ("sim://mecanum?pacing=slow", "pacing"),
        ("sim://mecanum?faults=drop=2", "between 0 and 1"),
        ("sim://mecanum?quantum_ms=51", "quantum_ms must be 0 to 50"),
        ("sim://mecanum?quantum_ms=-1", "quantum_ms must be 0 to 50"),
    ):
        with pytest.raises(serial.SerialException, match=message):
            serial.serial_for_url(url)


class _Wake:
    """A stand-in for the pacer's wake-up event: records each wait, never blocks."""

    def __init__(self, woken: bool) -> None:
        self.woken, self.waits, self.cleared = woken, [], 0

    def wait(self, timeout: float) -> bool:
        self.waits.append(round(timeout, 6))
        return self.woken

    def clear(self) -> None:
        self.cleared += 1

    def set(self) -> None:
        self.woken = True


@pytest.mark.parametrize("woken", [False, True])
def test_a_quantum_runs_ahead_then_sleeps_once_for_it(woken: bool) -> None:
    """With a 10 ms quantum the world steps on while it is less than 10 ms ahead of the
    wall clock and then sleeps until its time is due, once, however many 1 ms steps
    that covers; a host write ends the sleep (and the wake-up is cleared)."""
    now = [100.0]
    pacer = Pacer("realtime", quantum_ms=10, clock=lambda: now[0])
    wake = pacer.wake = _Wake(woken)  # type: ignore[assignment]
    pacer(0)  # anchors
    for ms in range(1, 10):
        pacer(ms)  # ahead by 1..9 ms: no sleep
    assert wake.waits == []
    pacer(10)
    assert wake.waits == [0.01] and wake.cleared == (1 if woken else 0)
    now[0] += 0.010
    for ms in range(11, 20):
        pacer(ms)
    assert wake.waits == [0.01]


def test_without_a_quantum_each_step_waits_for_its_time() -> None:
    now = [100.0]
    waits: list[float] = []
    pacer = Pacer("realtime", clock=lambda: now[0])

    def wait(timeout: float) -> None:
        waits.append(round(timeout, 6))
        now[0] += timeout

    pacer.wait = wait
    for ms in range(4):
        pacer(ms)
    assert waits == [0.001, 0.001, 0.001]


def test_a_host_write_wakes_a_world_sleeping_out_its_quantum() -> None:
    ep = SimEndpoint("echo", quantum_ms=50)
    assert ep.link.on_write is not None
    ep.pacer.wake.clear()
    ep.link.write(b"x")
    assert ep.pacer.wake.is_set()
    assert SimEndpoint("echo").link.on_write is None  # no quantum: nothing to wake


def test_a_realtime_sim_port_is_polled_directly_and_cancel_wakes_it() -> None:
    from fwbridge.bridge.link.transports import poller_for

    offer_sim()
    fast = serial.serial_for_url("sim://echo?pacing=afap")
    assert poller_for(fast) is None  # afap: the caller's reads step the world
    fast.close()
    port = serial.serial_for_url("sim://echo")
    try:
        read = poller_for(port)
        assert read is not None
        port.write(b"ping")
        got = b""
        for _ in range(200):  # polling: each call waits up to 50 ms for the echo
            got += read(0.05)
            if len(got) >= 4:
                break
        assert got == b"ping"
        port.write(b"pong")
        for _ in range(200):
            if port.in_waiting >= 4:
                break
            time.sleep(0.01)  # polling: until the echo is there to read
        port.cancel_read()
        assert read(5.0) == b""  # a cancelled wait gives nothing, even with bytes there
        assert read(5.0) == b"pong"  # and the next one gives them
    finally:
        port.close()
