"""A fleet on one loop: the base node with no thread of its own, simulated worlds stepped by
one scheduler, and a fleet whose threads do not grow with its robots."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.base_core import ZERO_FRAME
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.driven import DrivenBaseNode
from fwbridge.bridge.node.hardware import LinkHardware
from fwbridge.bridge.node.sinks import SinkBase
from fwbridge.bridge.sim.scheduler import WorldScheduler
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import FirmwarePeer, ManualClock, Recorder, config


def moving(frames: list[Any]) -> list[Any]:
    return [f for f in frames if f != cmd_frame.ZERO]


@contextmanager
def driven(node: DrivenBaseNode, every: float = 0.005) -> Iterator[DrivenBaseNode]:
    """The node's owner: a loop that services it every ``every`` s until the block ends."""
    done = threading.Event()

    def rounds() -> None:
        while not done.wait(every):  # pacing: the owner's rounds, not a readiness wait
            node.service(time.monotonic())

    node.start()
    owner = threading.Thread(target=rounds, daemon=True)
    owner.start()
    try:
        yield node
    finally:
        done.set()
        owner.join(5)
        node.stop()


def test_a_driven_node_recovers_from_unplug_with_a_zero_command_first(
        pair: PtyPair, peer: FirmwarePeer) -> None:
    got = Recorder()
    cfg = config(pair.path, watchdog={"cmd_timeout": 30.0},
                 reconnect={"min_delay": 0.02, "max_delay": 0.1})
    node = DrivenBaseNode(cfg, on_odometry=got.odometry, on_event=got.event)
    with driven(node):
        node.request(0.2, 0.0, 0.0)
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a])) >= 5)
        pair.unplug()
        assert got.wait(lambda c: "link-lost" in c.kinds())
        assert not node.connected and node.running
        mark = len(peer.arrivals)
        pair.plug()
        assert got.wait(lambda c: "link-restored" in c.kinds())
        assert peer.wait_for(lambda a: len(moving([x.frame for x in a[mark:]])) >= 3)
        peer.send(odom_frame.encode(OdomFrame(0.2, 0, 0, 0)) * 2)
        assert got.wait(lambda c: len(c.records) >= 2)
        assert node.running and node.error is None
    after = [a.frame for a in peer.arrivals[mark:]]
    assert after[0] == cmd_frame.ZERO and after[1].vx == pytest.approx(0.2)
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO)  # the safe stop
    assert got.records[0].dt == 0.0  # no integration across the outage


def test_a_driven_node_needs_a_link_it_can_read_without_waiting() -> None:
    from fwbridge.bridge.sim.scheme import register
    from fwbridge.protocols.errors import LinkError

    register()
    node = DrivenBaseNode(RobotConfig(sim_url="sim://mecanum?pacing=afap", use_sim=True))
    with pytest.raises(LinkError, match="read without waiting"):
        node.start()
    node.stop()


def test_worlds_stepped_by_one_scheduler_keep_every_rate_on_the_nodes_clock() -> None:
    """Three robots, each a world and a driven node, in rounds of 10 ms of a manual clock
    (nothing reads the machine's): every robot's odometry is one frame a 20 ms of its
    simulated time, its commands come at their rate, the one robot asked to move moves,
    its watchdog stops it once the requests stop, and a stop leaves zero at its firmware."""
    clock = ManualClock(100.0)
    worlds = WorldScheduler(clock=clock)
    rate = 50.0
    nodes, seen = [], []
    for _ in range(3):
        cfg = RobotConfig(sim_url="sim://mecanum", use_sim=True, rate_hz=rate)
        got = Recorder()
        hw = LinkHardware(cfg, reset_frame=ZERO_FRAME, safe_stop_frame=ZERO_FRAME,
                          opener=worlds.open)
        nodes.append(DrivenBaseNode(cfg, on_odometry=got.odometry, on_event=got.event,
                                    clock=clock, hardware=hw))
        seen.append(got)
    for node in nodes:
        node.start()

    def rounds(n: int) -> None:
        for _ in range(n):
            clock.advance(0.01)
            now = clock()
            worlds.step(now)
            for node in nodes:
                node.service(now)

    try:
        rounds(5)
        start = [(len(got.records), node.stats()["commands"]) for got, node in zip(seen, nodes)]
        nodes[1].request(0.3, 0.0, 0.0)  # once: the watchdog must end it
        rounds(200)  # 2 s
        for (records, commands), got, node in zip(start, seen, nodes):
            assert len(got.records) - records == pytest.approx(100, abs=1)
            assert node.stats()["commands"] - commands == pytest.approx(2.0 * rate, abs=2)
        fast = max(r.vx for r in seen[1].records)
        assert fast == pytest.approx(0.3, abs=0.02)
        assert [r.vx for r in seen[0].records] == [0.0] * len(seen[0].records)
        assert seen[1].kinds() == ["watchdog"]
        assert abs(seen[1].records[-1].vx) < 0.01  # at rest again
        assert worlds.lag_resets == 0
    finally:
        for node in nodes:
            node.stop()
    for node in nodes:
        assert not node.running
    assert worlds.endpoints == []  # each world left with its port


# -- a fleet ----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(pred: Any, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)  # polling: a bounded wait
    return False


class _Count(SinkBase):
    def __init__(self) -> None:
        self.records = 0
        self.vx = 0.0
        self.events: list[str] = []

    def on_odometry(self, odom: Any) -> None:
        self.records += 1
        self.vx = odom.vx

    def on_event(self, event: Any) -> None:
        self.events.append(event.kind)


def _drive_through_zenoh(endpoint: str, robot: Any, count: _Count) -> None:
    """cmd_vel from another session at 20 Hz until the base moves, then none: its
    watchdog brings it to rest."""
    from fwbridge.bridge.ros2.participant import Participant
    from fwbridge.bridge.rosmsg import cdr

    types = cdr.typestore("jazzy").types
    vec = types["geometry_msgs/msg/Vector3"]
    msg = types["geometry_msgs/msg/Twist"](linear=vec(x=0.3, y=0.0, z=0.0),
                                           angular=vec(x=0.0, y=0.0, z=0.0))
    with Participant(connect=(endpoint,), mode="peer") as operator:
        pub = operator.node("operator").publisher(robot.cmd_sub.topic, "geometry_msgs/msg/Twist")
        for _ in range(400):  # until the base moves (bounded)
            pub.publish(msg)
            if count.vx > 0.25:
                break
            time.sleep(0.05)  # pacing: the operator's 20 Hz
        assert count.vx > 0.25 and robot.cmd_sub.received > 0
        assert _wait(lambda: "watchdog" in count.events)
        assert _wait(lambda: abs(count.vx) < 0.01)  # at rest


def _one_fleet(size: int) -> int:
    """A fleet of ``size``: how many Python threads it added; every robot's odometry one
    frame a 20 ms of its world's time; with 8, one robot driven through Zenoh."""
    from fwbridge.bridge.ros2.config import Ros2Settings
    from fwbridge.bridge.ros2.fleet import FLEET_THREAD, Fleet

    before = threading.active_count()
    here = f"tcp/127.0.0.1:{_free_port()}"
    fleet = Fleet(size, Ros2Settings(connect=(), listen=(here,), domain_id=0))
    try:
        fleet.start()
        grew = threading.active_count() - before
        assert [t.name for t in threading.enumerate()].count(FLEET_THREAD) == 1
        counts = [_Count() for _ in fleet.nodes]
        for node, c in zip(fleet.nodes, counts):
            node.sinks.add(c)
        clocks = [node.hardware.link.endpoint.world.clock for node in fleet.nodes]
        assert _wait(lambda: all(c.records >= 5 for c in counts))
        marks = [(c.records, w.millis()) for c, w in zip(counts, clocks)]
        assert _wait(lambda: all(c.records >= m + 50 for c, (m, _) in zip(counts, marks)))
        for c, w, (m, ms) in zip(counts, clocks, marks):
            frames, sim_ms = c.records - m, w.millis() - ms
            assert abs(frames - sim_ms / 20) <= 2, (frames, sim_ms)
        if size == 8:  # cmd_vel through Zenoh, polled by the fleet's round
            _drive_through_zenoh(here, fleet.bridges[2], counts[2])
            assert all(abs(c.vx) < 0.01 for i, c in enumerate(counts) if i != 2)
    finally:
        fleet.stop()
    assert not fleet.running
    return grew


@pytest.mark.slow
def test_a_fleet_runs_on_threads_that_do_not_grow_with_its_robots() -> None:
    """2 and then 8 robots: the same Python threads more (the fleet's one), every robot's
    odometry at its rate against its world's time, and a robot that cmd_vel from another
    session moved stops by its watchdog once cmd_vel stops."""
    pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
    assert _one_fleet(2) == _one_fleet(8) == 1  # the fleet's thread; Zenoh's ends polled
