"""A fleet of simulated bases in one process: N base nodes, each in ``/robotK``.

Each robot is the mecanum firmware behind ``sim://mecanum`` (:data:`SIM_URL`), its
own base node (:class:`~fwbridge.bridge.node.driven.DrivenBaseNode`: the same core,
lifecycle, sinks and policy as ``fwbridge bridge``'s) and its own ROS 2 node in
namespace ``/robot1`` … ``/robotN`` with its own TF frames
(``robot1/odom -> robot1/base_link``, after the settings' ``frame_prefix``):
the robots share ``/tf``. All share one Zenoh session (one ROS 2 context, as
nodes of one process do), so the same fleet on two machines is one
``connect`` line to the router.

All of them run on one thread, :data:`FLEET_THREAD`, in rounds of :data:`ROUND`
seconds: each round hands the ``cmd_vel`` samples that came meanwhile to their
robots, and every :data:`REQUEST_ROUNDS` rounds the service requests (the
participant is polled: Zenoh keeps them in a channel per end rather than starting
a Python thread for each), steps every
robot's simulated world to the wall clock (one
:class:`~fwbridge.bridge.sim.scheduler.WorldScheduler`), services every node (the
odometry that arrived, the commands that are due, health, events) and does one
robot's diagnostics when its turn in the second comes. A thread and a wake-up per
robot (a world, a node, a diagnostics timer, a dozen Zenoh callbacks each) cost
far more than the robots' own work; a round is one wake-up for all of them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fwbridge.bridge.node.base_core import ZERO_FRAME, NodeEvent
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.driven import DrivenBaseNode
from fwbridge.bridge.node.hardware import LinkHardware
from fwbridge.bridge.ros2.base import DIAGNOSTICS_PERIOD, Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.sim.scheduler import WorldScheduler
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.protocols.errors import ConfigError

__all__ = ["FLEET_THREAD", "REQUEST_ROUNDS", "ROUND", "SIM_URL", "Fleet"]

#: Each robot's simulated firmware; its world is stepped by the fleet's rounds.
SIM_URL = "sim://mecanum"
#: Seconds between the fleet's rounds: a reply or a command waits at most this long
#: between a world and its node (a 10 ms quantum, as a lone world's ``quantum_ms=10``),
#: and a command is at most this late on its schedule.
ROUND = 0.01
#: Rounds between two looks at the robots' service requests (``cmd_vel`` is looked at
#: every round): a request waits up to 50 ms, and a round spends less on a dozen
#: services per robot that are seldom called.
REQUEST_ROUNDS = 5
#: The name of the thread that runs every robot of a fleet.
FLEET_THREAD = "fwbridge-fleet"

log = logging.getLogger("fwbridge.ros2")


def _quiet(_text: str) -> None:
    """The robots after the first share its session: one router message is enough."""


class Fleet:
    """``count`` simulated bases bridged into ROS 2 on one Zenoh session, all on one
    thread (see the module)."""

    def __init__(self, count: int, settings: Ros2Settings, *, rate_hz: float = 50.0,
                 prefix: str = "/robot", first: int = 1,
                 on_event: Callable[[str, NodeEvent], Any] | None = None,
                 say: Callable[[str], Any] | None = None, round_s: float = ROUND) -> None:
        if count < 1:
            raise ConfigError("a fleet has at least one robot")
        if not 0 < round_s <= 0.05:
            raise ConfigError(f"a fleet's round is 0 to 0.05 s, not {round_s!r}")
        self.count, self.settings, self.rate_hz = count, settings, rate_hz
        self.round_s = round_s
        self.namespaces = [f"{prefix}{k}" for k in range(first, first + count)]
        self.frame_prefixes = [f"{settings.frame_prefix}{ns.strip('/')}/"
                               for ns in self.namespaces]
        self.on_event, self.say = on_event, say
        self.participant: Participant | None = None
        self.worlds = WorldScheduler()
        self.nodes: list[DrivenBaseNode] = []
        self.bridges: list[Ros2Base] = []
        self.rounds = 0  # rounds run, for tests and status
        self.late_rounds = 0  # rounds that began more than a round late (the CPU is short)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        s = self.settings
        offer_sim()  # a fleet is simulated bases: asked for by whoever starts it
        self.participant = Participant(domain=s.domain, distro=s.distro, connect=s.connect,
                                       listen=s.listen, polled=True)
        try:
            for i, (ns, frames) in enumerate(zip(self.namespaces, self.frame_prefixes)):
                config = RobotConfig(sim_url=SIM_URL, use_sim=True,
                                     rate_hz=self.rate_hz, source=f"<fleet {ns}>")
                hardware = LinkHardware(config, reset_frame=ZERO_FRAME,
                                        safe_stop_frame=ZERO_FRAME, opener=self.worlds.open)
                node = DrivenBaseNode(config, on_event=self._event_hook(ns), hardware=hardware)
                node.start()
                self.nodes.append(node)
                bridge = Ros2Base(node, replace(s, namespace=ns, frame_prefix=frames),
                                  participant=self.participant, timer=False,
                                  say=self.say if i == 0 and self.say is not None else _quiet)
                bridge.start()
                self.bridges.append(bridge)
            self._thread = threading.Thread(target=self._run, name=FLEET_THREAD, daemon=True)
            self._thread.start()
        except BaseException:
            self.stop()
            raise

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        """The rounds, until stop(): worlds, nodes, then one robot's diagnostics when
        its turn comes (spread over the period, so no round carries them all)."""
        clock, stopping = time.monotonic, self._stopping
        worlds, nodes, bridges = self.worlds, tuple(self.nodes), tuple(self.bridges)
        participant = self.participant
        assert participant is not None
        period = self.round_s
        spacing = DIAGNOSTICS_PERIOD / len(bridges)
        turn = 0
        start = clock()
        next_diag = start + spacing
        next_round = start
        while not stopping.is_set():
            now = clock()
            try:
                # cmd_vel (and requests every few rounds): a new command is written now,
                participant.poll(requests=self.rounds % REQUEST_ROUNDS == 0)
                worlds.step(now)  # and its world takes it in this round's steps
                for node in nodes:
                    node.service(now)  # ends only that node when it fails
                if now >= next_diag:
                    next_diag = max(next_diag + spacing, now - DIAGNOSTICS_PERIOD)
                    bridges[turn].housekeep()
                    turn = (turn + 1) % len(bridges)
            except Exception:  # the loop carries every robot: say it, go on
                log.exception("fleet round failed")
            self.rounds += 1
            next_round += period
            wait = next_round - clock()
            if wait < -period:  # held up (CPU short): start again from now, no burst
                self.late_rounds += 1
                next_round, wait = clock(), 0.0
            if wait > 0:
                stopping.wait(wait)

    def _event_hook(self, ns: str) -> Callable[[NodeEvent], Any] | None:
        hook = self.on_event
        if hook is None:
            return None

        def on_event(event: NodeEvent) -> None:
            hook(ns, event)

        return on_event

    def stop(self) -> None:
        """The rounds end, then every robot stops (zero velocity, safe stop), then the
        session closes: each step runs even when one before it failed (an ExitStack,
        last pushed first)."""
        with contextlib.ExitStack() as steps:
            if self.participant is not None:
                steps.callback(self.participant.close)
            steps.callback(self.worlds.stop)  # worlds whose node never closed its port
            for node in reversed(self.nodes):
                steps.callback(node.stop)
            for bridge in reversed(self.bridges):
                steps.callback(bridge.stop)
            steps.callback(self._stop_rounds)  # first: no round runs while robots stop
            self.bridges.clear()
            self.nodes.clear()

    def _stop_rounds(self) -> None:
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def stats(self) -> dict[str, dict[str, int]]:
        return {b.settings.namespace: {**b.node.stats(), **b.stats()} for b in self.bridges}

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
