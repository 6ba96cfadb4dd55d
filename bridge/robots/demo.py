"""``fwbridge demo``'s run: the square, directly on the base node or through ROS 2.

:func:`run_square_demo` takes a :class:`SquareConfig` and picks the run:
:func:`~fwbridge.bridge.robots.square.run_square`, or
:func:`~fwbridge.bridge.robots.square_ros2.run_square_ros2` (loaded only then:
it needs the ros2 extra).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from fwbridge.bridge.node.sinks import Sink
from fwbridge.bridge.robots.square import SquareDriver, SquareResult, Tick, run_square
from fwbridge.bridge.sim.faults import FaultSpec

__all__ = ["SquareConfig", "run_square_demo"]


@dataclass(frozen=True)
class SquareConfig:
    """The demo's square: its side, the link's faults, and whether it goes through ROS 2
    (joining the Zenoh routers of ``connect``; none: in-process only)."""

    side: float = 1.0
    faults: FaultSpec | None = None
    ros2: bool = False
    connect: tuple[str, ...] = ()
    rate_hz: float = 50.0
    timeout_s: float = 90.0


def run_square_demo(
    config: SquareConfig, *, on_tick: Tick | None = None, stop: threading.Event | None = None,
    sinks: Sequence[Sink] = (),
) -> SquareResult:
    """Drive ``config``'s square (through ROS 2 with ``config.ros2``); every way out stops
    the base, the node and the simulation (``sinks`` stay their opener's to close)."""
    driver = SquareDriver(side=config.side)
    if config.ros2:
        from fwbridge.bridge.robots.square_ros2 import run_square_ros2

        return run_square_ros2(driver=driver, faults=config.faults, rate_hz=config.rate_hz,
                               timeout_s=config.timeout_s, connect=config.connect,
                               on_tick=on_tick, stop=stop, sinks=sinks)
    return run_square(driver=driver, faults=config.faults, rate_hz=config.rate_hz,
                      timeout_s=config.timeout_s, on_tick=on_tick, stop=stop, sinks=sinks)
