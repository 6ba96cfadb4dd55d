"""The mobile-base node over real pty pairs, with a peer thread playing the firmware."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.aio import AsyncBaseNode
from fwbridge.bridge.node.base_core import NodeEvent
from fwbridge.bridge.node.base_node import ZERO_FRAME, BaseNode
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import SinkBase
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.bridge.record.serial_pcapng import CaptureWriter
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame
from tests import sim_stub
from tests.helpers import FirmwarePeer, ManualClock, Recorder, config


def moving(frames: list[CmdFrame]) -> list[CmdFrame]:
    return [f for f in frames if f != cmd_frame.ZERO]


def test_commands_arrive_byte_exact_at_the_requested_rate(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    # The rate is counted against the node's own (injected) clock: one frame
    # per period of it, however slowly the machine runs the test.
    rate = 64.0  # a period exact in binary: the schedule accumulates no rounding
    clock = ManualClock()
    want = cmd_frame.encode(CmdFrame(0.3, -0.1, 0.25))
    node = BaseNode(config(pair.path, control={"rate_hz": rate}, watchdog={"cmd_timeout": 30.0}),
                    on_event=None, clock=clock)
    periods = 60
    with node:
        # The clock stands still: the activation's zero and the first tick, nothing more.
        assert peer.wait_for(lambda a: len(a) >= 2)
        node.request(0.3, -0.1, 0.25)
        for k in range(1, periods + 1):
            clock.advance(1 / rate)
            assert peer.wait_for(lambda a, k=k: sum(x.raw == want for x in a) >= k)
        # Half a period more: not due yet, so no frame, however long we wait.
        clock.advance(0.5 / rate)
        assert not peer.wait_for(lambda a: len(a) > 2 + periods, timeout=0.3)
        assert node.stats()["commands"] == 1 + periods  # the activation zero is the hardware's
    assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)  # deactivation: the safe stop
    arrivals = peer.arrivals
    assert len(arrivals) == 2 + periods + 1
    assert arrivals[0].raw == ZERO_FRAME  # activation: the reset state
    assert [a.raw for a in arrivals[2:-1]] == [want] * periods  # one per period, byte-exact
    assert all(a.raw in (want, ZERO_FRAME) for a in arrivals)  # nothing else
    assert bytes(peer.raw) == b"".join(a.raw for a in arrivals)  # no stray byte on the wire


def test_a_new_cmd_timeout_stops_the_base_after_it_on_the_nodes_clock(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    """set_cmd_timeout on a running node (what ROS 2's ~/set_watchdog calls): the request
    there goes out for 0.25 s of the node's clock, not the 30 s it started with, then zero."""
    rate = 64.0  # 0.25 s is 16 periods, exact in binary
    clock = ManualClock()
    go = cmd_frame.encode(CmdFrame(0.3, 0.0, 0.0))
    node = BaseNode(config(pair.path, control={"rate_hz": rate}, watchdog={"cmd_timeout": 30.0}),
                    on_event=None, clock=clock)
    with node:
        assert peer.wait_for(lambda a: len(a) >= 2)  # activation zero, first tick
        node.request(0.3, 0.0, 0.0)
        node.set_cmd_timeout(0.25)
        assert node.config.cmd_timeout == node.core.cmd_timeout == 0.25
        for k in range(1, 16):
            clock.advance(1 / rate)
            assert peer.wait_for(lambda a, k=k: sum(x.raw == go for x in a) >= k)
        clock.advance(1 / rate)  # 0.25 s after the request
        assert peer.wait_for(lambda a: len(a) == 2 + 16)
        assert peer.arrivals[-1].raw == ZERO_FRAME
        assert node.stats()["watchdog_trips"] == 1
    assert sum(a.raw == go for a in peer.arrivals) == 15


def test_both_runtimes_keep_a_new_cmd_timeout_in_their_config(pair: PtyPair) -> None:
    """The new timeout is the node's config too: a core rebuilt at start keeps it, and
    what reads the config (ROS 2's status, its stale cmd_vel) says it."""
    for runtime in (BaseNode, AsyncBaseNode):
        node = runtime(config(pair.path), on_event=None)
        node.set_cmd_timeout(0.3)
        assert node.config.cmd_timeout == node.core.cmd_timeout == 0.3, runtime
        with pytest.raises(ValueError, match="cmd_timeout"):
            node.set_cmd_timeout(0.0)
        assert node.config.cmd_timeout == 0.3


def test_odometry_over_a_pty_integrates_to_the_closed_form(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    # The node's clock is the test's: each frame is stamped t0 + k*h exactly.
    now = [100.0]
    got = Recorder()
    v, w, h, n = 0.4, 0.9, 0.005, 200
    node = BaseNode(config(pair.path), on_odometry=got.odometry, on_event=None,
                    clock=lambda: now[0])
    with node:
        for k in range(n + 1):
            now[0] = 100.0 + k * h
            peer.send(odom_frame.encode(OdomFrame(v, 0.0, w, math.degrees(w * k * h))))
            assert got.wait(lambda c, k=k: len(c.records) == k + 1)
    last = got.records[-1]
    th = w * h
    ratio = math.sin(n * th / 2) / math.sin(th / 2)
    vf = last.vx  # v as float32
    assert last.x == pytest.approx(vf * h * ratio * math.cos((n + 1) * th / 2), abs=1e-5)
    assert last.y == pytest.approx(vf * h * ratio * math.sin((n + 1) * th / 2), abs=1e-5)
    assert last.yaw == pytest.approx(w * n * h, abs=1e-5)
    assert last.orientation[2] == pytest.approx(math.sin(w * n * h / 2), abs=1e-5)
    assert [r.stamp for r in got.records[:3]] == [100.0, 100.0 + h, 100.0 + 2 * h]


def test_watchdog_sends_zero_when_requests_stop_and_says_so(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    got = Recorder()
    node = BaseNode(config(pair.path, watchdog={"cmd_timeout": 0.15}), on_event=got.event)
    with node:
        node.request(0.4, 0.0, 0.0)
        assert got.wait(lambda c: "watchdog" in c.kinds())
        assert peer.wait_for(lambda a: len(a) > 3 and a[-1].frame == cmd_frame.ZERO)
        node.request(0.1, 0.0, 0.0)
        assert peer.wait_for(lambda a: a[-1].frame.vx == pytest.approx(0.1))
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO)  # the safe stop
    frames = peer.frames()
    # zero (activate), 0.4 ..., zero (watchdog) ..., 0.1 ..., zero (safe stop)
    blocks = [f.vx for i, f in enumerate(frames) if i == 0 or f != frames[i - 1]]
    assert blocks == [0.0, pytest.approx(0.4), 0.0, pytest.approx(0.1), 0.0]
    watchdog = next(e for e in got.events if e.kind == "watchdog")
    assert "zero velocity" in watchdog.message and "0.15" in watchdog.message
    assert got.kinds().count("resumed") == 1


def test_unplug_and_replug_recovers_with_a_zero_command_first(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    got = Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.02, "max_delay": 0.1})
    node = BaseNode(cfg, on_odometry=got.odometry, on_event=got.event)
    with node:
        node.request(0.2, 0.0, 0.0)
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a])) >= 5)
        pair.unplug()  # the USB cable comes out
        assert got.wait(lambda c: "link-lost" in c.kinds())
        assert not node.connected and node.running
        assert not got.wait(lambda c: "link-restored" in c.kinds(), timeout=0.3)
        attempts_while_out = node.open_attempts
        mark = len(peer.arrivals)
        pair.plug()  # and back in: same path, new device
        assert got.wait(lambda c: "link-restored" in c.kinds())
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a[mark:]])) >= 3)
        peer.send(odom_frame.encode(OdomFrame(0.2, 0, 0, 0)) * 2)
        assert got.wait(lambda c: len(c.records) >= 2)
        assert node.running
    after = [a.frame for a in peer.arrivals[mark:]]
    assert after[0] == cmd_frame.ZERO  # zero first ...
    assert after[1].vx == pytest.approx(0.2)  # ... then the standing request again
    assert 1 <= attempts_while_out <= 20  # bounded backoff, no busy loop
    assert got.records[0].dt == 0.0  # no integration across the outage
    lost = next(e for e in got.events if e.kind == "link-lost")
    assert str(pair.path) in lost.message


def test_use_sim_swaps_in_the_simulated_endpoint_and_nothing_else(
    pair: PtyPair, peer: FirmwarePeer
) -> None:
    sim_stub.register()
    base = config(pair.path, sim={"url": "sim://simstub"}, watchdog={"cmd_timeout": 30.0})
    for use_sim in (True, False):
        got = Recorder()
        node = BaseNode(base.with_sim(use_sim), on_odometry=got.odometry, on_event=None)
        with node:
            node.request(0.3, 0.0, 0.5)
            if not use_sim:  # the real side: answer like the stub does
                peer.answer = lambda c: odom_frame.encode(OdomFrame(c.vx, c.vy, c.wz, 1.0))
            assert got.wait(lambda c: any(r.vx == pytest.approx(0.3) for r in c.records))
            endpoint = getattr(node.hardware.link, "endpoint", None)
            link_type = type(node.hardware.link).__module__
        if use_sim:
            assert endpoint is not None and isinstance(endpoint.model, sim_stub.SimStub)
        else:
            assert link_type == "serial.serialposix"


def test_node_captures_both_directions(pair: PtyPair, peer: FirmwarePeer, tmp_path: Path) -> None:
    got = Recorder()
    sent = b"".join(odom_frame.encode(OdomFrame(0.1 * k, 0, 0, k)) for k in range(10))
    with CaptureWriter(tmp_path / "node.pcapng", port=pair.path) as cap:
        node = BaseNode(config(pair.path), on_odometry=got.odometry, on_event=None, capture=cap)
        with node:
            node.request(0.5, 0, 0)
            peer.send(sent)
            assert got.wait(lambda c: len(c.records) == 10)
            assert peer.wait_for(lambda a: len(a) >= 5)
    packets = list(read_capture(tmp_path / "node.pcapng"))
    assert b"".join(p.data for p in packets if p.direction == "rx") == sent
    tx = b"".join(p.data for p in packets if p.direction == "tx")
    assert peer.wait_for(lambda a: len(a) * cmd_frame.SIZE >= len(tx))  # the safe stop arrived
    assert tx == bytes(peer.raw)


# -- blocking and asyncio runtimes: the same frames ------------------------------------------
ODOM_STREAM = b"".join(
    odom_frame.encode(OdomFrame(0.1 * k, -0.05 * k, 0.01 * k, 3.0 * k)) for k in range(40)
)
NOISY = b"\xaa\xaa" + ODOM_STREAM[:95] + b"\x55\xaa\x55\x00" + ODOM_STREAM[95:]


def drive(pair: PtyPair, peer: FirmwarePeer, got: Recorder, request: Any) -> None:
    request(0.1, 0.2, 0.3)
    assert peer.wait_for(lambda a: len(moving([x.frame for x in a])) >= 3)
    for i in range(0, len(NOISY), 37):
        peer.send(NOISY[i : i + 37])
    assert got.wait(lambda c: len(c.records) == 40)


def run_blocking(pair: PtyPair, peer: FirmwarePeer) -> Recorder:
    got = Recorder()
    node = BaseNode(config(pair.path, watchdog={"cmd_timeout": 30.0}),
                    on_odometry=got.odometry, on_event=None)
    with node:
        drive(pair, peer, got, node.request)
    assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)
    return got


def run_asyncio(pair: PtyPair, peer: FirmwarePeer) -> Recorder:
    got = Recorder()
    node = AsyncBaseNode(config(pair.path, watchdog={"cmd_timeout": 30.0}),
                         on_odometry=got.odometry, on_event=None)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_until_complete, args=(node.run(),))
    runner.start()
    try:
        drive(pair, peer, got,
              lambda *v: loop.call_soon_threadsafe(node.request, *v))
    finally:
        loop.call_soon_threadsafe(node.stop)
        runner.join(5)
        loop.close()
    assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)
    return got


def test_asyncio_and_blocking_runtimes_give_the_same_frames(tmp_path: Path) -> None:
    results = []
    for run in (run_blocking, run_asyncio):
        with PtyPair() as pair:
            peer = FirmwarePeer(pair)
            peer.start()
            try:
                got = run(pair, peer)
            finally:
                peer.stop()
            odoms = [(r.vx, r.vy, r.wz, r.yaw) for r in got.records]
            wire = [a.raw for a in peer.arrivals]
            results.append((odoms, wire))
    (odo_b, wire_b), (odo_a, wire_a) = results
    assert odo_a == odo_b and len(odo_a) == 40
    expected = [odom_frame.decode(ODOM_STREAM[i : i + 19]) for i in range(0, len(ODOM_STREAM), 19)]
    assert [o[0] for o in odo_b] == [f.vx for f in expected]
    want = cmd_frame.encode(CmdFrame(0.1, 0.2, 0.3))
    for wire in (wire_a, wire_b):  # reset zero, the request, the safe-stop zero
        distinct = [w for i, w in enumerate(wire) if i == 0 or w != wire[i - 1]]
        assert distinct == [ZERO_FRAME, want, ZERO_FRAME]


def test_asyncio_runtime_recovers_from_unplug_too(pair: PtyPair, peer: FirmwarePeer) -> None:
    got = Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.02, "max_delay": 0.1})
    node = AsyncBaseNode(cfg, on_odometry=got.odometry, on_event=got.event)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_until_complete, args=(node.run(),))
    runner.start()
    try:
        loop.call_soon_threadsafe(node.request, 0.2, 0.0, 0.0)
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a])) >= 3)
        pair.unplug()
        assert got.wait(lambda c: "link-lost" in c.kinds())
        mark = len(peer.arrivals)
        pair.plug()
        assert got.wait(lambda c: "link-restored" in c.kinds())
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a[mark:]])) >= 2)
    finally:
        loop.call_soon_threadsafe(node.stop)
        runner.join(5)
        loop.close()
    after = [a.frame for a in peer.arrivals[mark:]]
    assert after[0] == cmd_frame.ZERO and after[1].vx == pytest.approx(0.2)


# -- both runtimes: the same sink calls for the same bytes -------------------------------------
class CallLog(SinkBase):
    """Every call a sink gets, as comparable values (the times and the read sizes aside)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        with self.lock:
            self.calls.append((direction, bytes(data)))

    def on_odometry(self, odom: Odometry) -> None:
        with self.lock:  # x and y integrate host time: the firmware's values and the order
            self.calls.append(("odometry", odom.seq, odom.vx, odom.vy, odom.wz, odom.yaw))

    def on_command(self, frame: CmdFrame, ts_ns: int) -> None:
        with self.lock:
            self.calls.append(("command", frame))

    def on_event(self, event: NodeEvent) -> None:
        with self.lock:
            self.calls.append(("event", event.kind))

    def close(self) -> None:
        with self.lock:
            self.calls.append(("close",))

    def of(self, *kinds: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [c for c in self.calls if c[0] in kinds]


def _unplug_and_back(pair: PtyPair, peer: FirmwarePeer, got: Recorder) -> None:
    drive(pair, peer, got, lambda *v: None)  # the request stands: only the bytes come
    pair.unplug()
    assert got.wait(lambda c: "link-lost" in c.kinds())
    mark = len(peer.arrivals)
    pair.plug()
    assert got.wait(lambda c: "link-restored" in c.kinds())
    assert peer.wait_for(lambda a: len(moving([x.frame for x in a[mark:]])) >= 2)
    peer.send(ODOM_STREAM[:19 * 3])
    assert got.wait(lambda c: len(c.records) == 43)


def sink_calls_blocking(pair: PtyPair, peer: FirmwarePeer) -> CallLog:
    log, got = CallLog(), Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.02, "max_delay": 0.1})
    node = BaseNode(cfg, sinks=[log], on_odometry=got.odometry, on_event=got.event)
    with node:
        node.request(0.1, 0.2, 0.3)
        _unplug_and_back(pair, peer, got)
    assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)  # the safe stop arrived
    return log


def sink_calls_asyncio(pair: PtyPair, peer: FirmwarePeer) -> CallLog:
    log, got = CallLog(), Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.02, "max_delay": 0.1})
    node = AsyncBaseNode(cfg, sinks=[log], on_odometry=got.odometry, on_event=got.event)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_until_complete, args=(node.run(),))
    runner.start()
    try:
        loop.call_soon_threadsafe(node.request, 0.1, 0.2, 0.3)
        _unplug_and_back(pair, peer, got)
    finally:
        loop.call_soon_threadsafe(node.stop)
        runner.join(5)
        loop.close()
    assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)  # the safe stop arrived
    return log


def distinct(frames: list[CmdFrame]) -> list[CmdFrame]:
    return [f for i, f in enumerate(frames) if i == 0 or f != frames[i - 1]]


def test_both_runtimes_make_the_same_sink_calls_for_the_same_bytes() -> None:
    logs = []
    for run in (sink_calls_blocking, sink_calls_asyncio):
        with PtyPair() as pair:
            peer = FirmwarePeer(pair)
            peer.start()
            try:
                logs.append((run(pair, peer), bytes(peer.raw)))
            finally:
                peer.stop()
    (blocking, wire_b), (aio, wire_a) = logs
    want = cmd_frame.decode(cmd_frame.encode(CmdFrame(0.1, 0.2, 0.3)))  # as the wire has it
    for log, wire in ((blocking, wire_b), (aio, wire_a)):
        rx = b"".join(c[1] for c in log.of("rx"))
        assert rx == NOISY + ODOM_STREAM[:19 * 3]  # every byte read, once, in order
        writes = [c[1] for c in log.of("tx")]
        commands = [c[1] for c in log.of("command")]
        assert commands == [cmd_frame.decode(w) for w in writes]  # each write's, not decoded
        # reset zero, the request, zero first after the link came back, the request, safe stop
        assert distinct(commands) == [cmd_frame.ZERO, want, cmd_frame.ZERO, want, cmd_frame.ZERO]
        # what the device got (less a frame the unplugging may swallow) says the same
        assert distinct([cmd_frame.decode(wire[i:i + cmd_frame.SIZE])
                         for i in range(0, len(wire), cmd_frame.SIZE)]) == distinct(commands)
        assert log.calls[-1] == ("close",) and log.of("close") == [("close",)]
    # the same records and events, in the same order, from either runtime
    assert blocking.of("odometry", "event") == aio.of("odometry", "event")
    assert [c[0] for c in blocking.of("odometry", "event")].count("odometry") == 43
    assert [c[1] for c in blocking.of("event")] == ["link-lost", "link-restored"]


@pytest.mark.parametrize("runtime", ["threads", "asyncio"])
def test_a_link_that_never_comes_back_gives_up_after_its_attempts(
        pair: PtyPair, peer: FirmwarePeer, runtime: str) -> None:
    # Both runtimes share the give-up path: the core reports it and the node ends with
    # LinkLost naming the link.
    from fwbridge.bridge.link.transports import LinkLost

    got = Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.01, "max_delay": 0.02, "attempts": 2})
    ended: list[BaseException] = []
    if runtime == "threads":
        node: Any = BaseNode(cfg, on_event=got.event)

        def body() -> None:
            node.run()
    else:
        node = AsyncBaseNode(cfg, on_event=got.event)

        def body() -> None:
            asyncio.run(node.run())

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # what ended the node, for the test to look at
            ended.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        node.request(0.2, 0.0, 0.0)
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a])) >= 2)
        pair.unplug()
        runner.join(20)
        assert not runner.is_alive()
    finally:
        if runner.is_alive():
            node.stop()
            runner.join(5)
    assert len(ended) == 1 and isinstance(ended[0], LinkLost), ended
    assert "gave up reconnecting" in str(ended[0]) and str(pair.path) in str(ended[0])
    gave_up = next(e for e in got.events if e.kind == "gave-up")
    assert "after 2 attempts" in gave_up.message
    assert node.open_attempts == 2
