"""A fleet of simulated bases in one process: N base nodes, each in ``/robotK``.

Each robot is the mecanum firmware behind ``sim://mecanum`` (in-process, waking once a
10 ms quantum: :data:`SIM_URL`), its
own :class:`~fwbridge.bridge.node.base_node.BaseNode`, and its own ROS 2 node in
namespace ``/robot1`` … ``/robotN`` with its own TF frames
(``robot1/odom -> robot1/base_link``, after the settings' ``frame_prefix``):
the robots share ``/tf``. All share one Zenoh session (one ROS 2 context, as
nodes of one process do), so the same fleet on two machines is one
``connect`` line to the router.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fwbridge.bridge.node.base_core import NodeEvent
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.protocols.errors import ConfigError

__all__ = ["SIM_URL", "Fleet"]

#: Each robot's simulated firmware: realtime, waking once every 10 ms rather than at
#: each 1 ms step (a write from its node wakes it at once), which is most of what a
#: simulated robot costs (bridge.sim.endpoint).
SIM_URL = "sim://mecanum?quantum_ms=10"


def _quiet(_text: str) -> None:
    """The robots after the first share its session: one router message is enough."""


class Fleet:
    """``count`` simulated bases bridged into ROS 2 on one Zenoh session."""

    def __init__(self, count: int, settings: Ros2Settings, *, rate_hz: float = 50.0,
                 prefix: str = "/robot", first: int = 1,
                 on_event: Callable[[str, NodeEvent], Any] | None = None,
                 say: Callable[[str], Any] | None = None) -> None:
        if count < 1:
            raise ConfigError("a fleet has at least one robot")
        self.count, self.settings, self.rate_hz = count, settings, rate_hz
        self.namespaces = [f"{prefix}{k}" for k in range(first, first + count)]
        self.frame_prefixes = [f"{settings.frame_prefix}{ns.strip('/')}/"
                               for ns in self.namespaces]
        self.on_event, self.say = on_event, say
        self.participant: Participant | None = None
        self.nodes: list[BaseNode] = []
        self.bridges: list[Ros2Base] = []

    def start(self) -> None:
        s = self.settings
        offer_sim()  # a fleet is simulated bases: asked for by whoever starts it
        self.participant = Participant(domain=s.domain, distro=s.distro, connect=s.connect,
                                       listen=s.listen)
        try:
            for i, (ns, frames) in enumerate(zip(self.namespaces, self.frame_prefixes)):
                config = RobotConfig(sim_url=SIM_URL, use_sim=True,
                                     rate_hz=self.rate_hz, source=f"<fleet {ns}>")
                node = BaseNode(config, on_event=self._event_hook(ns))
                node.start()
                self.nodes.append(node)
                bridge = Ros2Base(node, replace(s, namespace=ns, frame_prefix=frames),
                                  participant=self.participant,
                                  say=self.say if i == 0 and self.say is not None else _quiet)
                bridge.start()
                self.bridges.append(bridge)
        except BaseException:
            self.stop()
            raise

    def _event_hook(self, ns: str) -> Callable[[NodeEvent], Any] | None:
        hook = self.on_event
        if hook is None:
            return None

        def on_event(event: NodeEvent) -> None:
            hook(ns, event)

        return on_event

    def stop(self) -> None:
        """Every robot stops (zero velocity, safe stop), then the session closes: each
        step runs even when one before it failed (an ExitStack, last pushed first)."""
        with contextlib.ExitStack() as steps:
            if self.participant is not None:
                steps.callback(self.participant.close)
            for node in reversed(self.nodes):
                steps.callback(node.stop)
            for bridge in reversed(self.bridges):
                steps.callback(bridge.stop)
            self.bridges.clear()
            self.nodes.clear()

    def stats(self) -> dict[str, dict[str, int]]:
        return {b.settings.namespace: {**b.node.stats(), **b.stats()} for b in self.bridges}

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
