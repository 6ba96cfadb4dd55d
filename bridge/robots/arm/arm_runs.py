"""The arm's two runs as ``fwbridge sim scara`` and ``fwbridge arm pick-place`` make them:
the five simulated modules served on a bus until stopped, and one pick-and-place cycle
driven on a bus (or on an arm simulated here), with the measured joints reported.

The caller says what to print through callables; nothing here prints. Every way
out of :func:`serve_scara` shuts its buses down; :func:`pick_place` shuts down the
bus it opened and closes the ROS 2 participant it was given.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import can

from fwbridge.bridge.robots.arm.can_arm import (
    JointModule,
    PickPlaceRun,
    drive_pick_place,
    run_modules,
    run_pick_place,
)
from fwbridge.bridge.robots.arm.kinematics import Joints, ScaraGeometry
from fwbridge.bridge.robots.arm.pick_place import PickAndPlace, Reached
from fwbridge.can_bus.bus_node import split_channel
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.protocols.errors import ArmError

__all__ = [
    "PickPlaceJob",
    "PickPlaceProgress",
    "ScaraBus",
    "ScaraModules",
    "ScaraSimResult",
    "afap_refusal",
    "open_scara",
    "pick_place",
    "scara_bus",
    "serve_scara",
]


@dataclass(frozen=True)
class ScaraBus:
    """Where the modules go: python-can's configuration, read as ``sim scara`` reads it."""

    interface: str = "fwbridge"
    channel: str = "sim0"
    bitrate: int | None = 1_000_000  # None: a shared bus's own
    shared: bool = False  # a fwbridge shared bus (its daemon runs it)
    name: str = "sim0"  # the channel less its ``shared:``

    @property
    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"interface": self.interface, "channel": self.channel}
        if self.bitrate:
            kw["bitrate"] = self.bitrate
        return kw


def scara_bus(config: dict[str, Any]) -> ScaraBus:
    """The bus of a python-can configuration (``{}``: the in-process simulator)."""
    interface = config.get("interface") or "fwbridge"
    channel = str(config.get("channel") or "sim0")
    name, shared = split_channel(channel)
    shared = shared and interface == "fwbridge"
    # a shared bus runs at its own rate: ask for one only when it is configured
    rate = config.get("bitrate") or (None if shared else 1_000_000)
    return ScaraBus(interface, channel, rate, shared, name)


def afap_refusal(name: str) -> str:
    return (f"bus {name} is paced afap, and the arm runs in real time: start the bus with "
            f"--pacing realtime ('fwbridge can bus down {name}; fwbridge can bus up "
            f"{name} --bitrate 1000000')")


@dataclass
class ScaraModules:
    """The five modules on their buses (one node each)."""

    bus: ScaraBus
    modules: list[JointModule]
    buses: list[can.BusABC]

    @property
    def sim(self) -> Any:
        return self.buses[0].sim if isinstance(self.buses[0], FwBridgeBus) else None

    @property
    def where(self) -> str:
        sim = self.sim
        return (f"{self.bus.interface} {self.bus.channel}"
                + (f" at {sim.bitrate} bit/s" if sim is not None else ""))

    def positions(self) -> dict[str, float]:
        return {m.spec.name: round(m.position, 5) for m in self.modules}

    def shutdown(self) -> None:
        for b in self.buses:
            b.shutdown()


def open_scara(bus: ScaraBus, geom: ScaraGeometry | None = None) -> ScaraModules:
    """The modules on ``bus``; python-can's errors as they come; :class:`ArmError` when a
    shared bus runs afap (the arm runs in real time)."""
    modules, buses = run_modules(lambda: can.Bus(**bus.kwargs), geom or ScaraGeometry())
    arm = ScaraModules(bus, modules, buses)
    if bus.shared and arm.sim is not None and arm.sim.afap:
        arm.shutdown()
        raise ArmError(afap_refusal(bus.name))
    return arm


@dataclass
class ScaraSimResult:
    ran: float  # seconds
    positions: dict[str, float]
    interrupted: bool = False


def serve_scara(arm: ScaraModules, duration: float | None, *,
                on_ready: Callable[[], None] = lambda: None,
                on_status: Callable[[float, dict[str, float]], None] = lambda t, p: None,
                period: float = 0.002) -> ScaraSimResult:
    """Step the modules by the wall clock until ``duration`` (None: a stop signal);
    ``on_status`` once a second. The buses are shut down on every way out; a stop signal
    ends the run normally (``interrupted``)."""
    start = time.monotonic()
    next_print = start
    interrupted = False
    try:  # from the readiness line on: a stop right after it still shuts the buses down
        on_ready()
        while duration is None or time.monotonic() - start < duration:
            now = time.monotonic() - start
            for m in arm.modules:
                m.step(now)
            if time.monotonic() >= next_print:
                next_print += 1.0
                on_status(now, arm.positions())
            time.sleep(period)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        arm.shutdown()
    return ScaraSimResult(round(time.monotonic() - start, 3), arm.positions(), interrupted)


@dataclass
class PickPlaceJob:
    """One cycle: the task's config, where the arm is and how to report."""

    task: PickAndPlace  # made (and so checked) by the caller: its config is the cycle's
    geom: ScaraGeometry = field(default_factory=ScaraGeometry)
    open_bus: Callable[[], can.BusABC] | None = None  # None: an arm simulated here
    bitrate: int = 1_000_000  # the simulated arm's
    realtime: bool = False  # the simulated arm paced by the wall clock
    ros_arm: Any = None  # publishes the measured joints (``publish_joints``); closed at the end


@dataclass
class PickPlaceProgress:
    reported: int = 0  # waypoints handed to ``on_reached``


def pick_place(job: PickPlaceJob,
               on_reached: Callable[[Reached, Joints], None] = lambda r, fb: None,
               progress: PickPlaceProgress | None = None) -> PickPlaceRun:
    """Run one cycle; ``on_reached`` once per waypoint, with the measured joints then.
    ``progress`` says how far it got when a stop signal ends it (KeyboardInterrupt goes up).
    """
    task, cfg = job.task, job.task.cfg
    prog = progress if progress is not None else PickPlaceProgress()
    ros_arm = job.ros_arm

    def on_step(now: float, t: PickAndPlace, fb: Joints) -> None:
        if ros_arm is not None:
            ros_arm.publish_joints(dict(zip(("theta1", "theta2", "d3", "theta4"), fb)))
        while prog.reported < len(t.reached):
            r = t.reached[prog.reported]
            prog.reported += 1
            on_reached(r, fb)
        if job.realtime and job.open_bus is None:
            time.sleep(cfg.period)

    try:
        if job.open_bus is None:
            return run_pick_place(cfg, job.geom, on_step=on_step, bitrate=job.bitrate)
        bus = job.open_bus()
        try:
            return drive_pick_place(bus, task, job.geom, on_step=on_step)
        finally:
            bus.shutdown()
    finally:
        if ros_arm is not None:
            time.sleep(0.2)  # the last samples leave before the session closes
            ros_arm.participant.close()
