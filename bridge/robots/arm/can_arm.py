"""The SCARA arm on CAN: joint modules, the host's arm link, and a pick-and-place run.

Four joint actuator modules (theta1, theta2, the z slide, theta4; module IDs
1..4) and a gripper (module 5) on any python-can bus. The host commands each
with an actuator struct, sub-command 0x38 (set servo absolute position); the
modules answer with feedback structs. The struct's int8 angle cannot carry a
SCARA joint (±170°, 1 mm at the tool), so both directions also carry the
fine position in the reserved bytes (PROTOCOLS.md 6): 0.01° for the
revolute joints, 0.1 mm for the slide, 0.01 % closed for the gripper.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import can

from fwbridge.bridge.robots.arm.kinematics import Joints, Pose, ScaraGeometry, forward, inverse
from fwbridge.bridge.robots.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig
from fwbridge.can_bus.ids import (
    Direction,
    accept,
    drain,
    feedback_filter,
    from_message,
    to_message,
)
from fwbridge.can_bus.sim.joints import (
    PER_FRACTION,
    PER_M,
    PER_RAD,
    JointModule,
    JointSpec,
    coarse_angle,
)
from fwbridge.can_bus.sim.nodes import TxQueue
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families.actuator import ActuatorStruct, fine_position, with_fine_position

__all__ = [
    "START",
    "ArmLink",
    "JointModule",
    "JointSpec",
    "PickPlaceRun",
    "arm_specs",
    "drive_pick_place",
    "run_modules",
    "run_pick_place",
]


def arm_specs(geom: ScaraGeometry) -> tuple[JointSpec, ...]:
    """Modules 1..4 for the joints (seed 001's speed limits), module 5 the gripper."""
    v1, v2, v3, v4 = geom.vmax
    return (
        JointSpec("theta1", 1, PER_RAD, v1, lo=-geom.limit1, hi=geom.limit1),
        JointSpec("theta2", 2, PER_RAD, v2, lo=-geom.limit2, hi=geom.limit2),
        JointSpec("d3", 3, PER_M, v3, lo=geom.z_min, hi=geom.z_max),
        JointSpec("theta4", 4, PER_RAD, v4, lo=-geom.limit4, hi=geom.limit4),
        JointSpec("gripper", 5, PER_FRACTION, 4.0, lo=0.0, hi=1.0),
    )


class ArmLink:
    """The host's side: joint setpoints out, measured joints in, per module health."""

    def __init__(self, bus: can.BusABC, specs: Sequence[JointSpec], *,
                 silence_timeout: float = 0.1) -> None:
        self.bus = bus
        self.specs = {s.module_id: s for s in specs}
        self.silence_timeout = silence_timeout
        self.values: dict[int, float] = {}
        self.last_seen: dict[int, float] = {}
        self.tx = TxQueue()
        self.bad_frames = 0
        self.accept = accept(bus, feedback_filter())  # see ids.drain

    def send(self, joints: Joints, gripper: float) -> None:
        for spec, value in zip(self.specs.values(), (*joints, gripper)):
            s = ActuatorStruct(angle=coarse_angle(spec, value), module_id=spec.module_id,
                               command=SubCommand.SET_SERVO_POSITION)
            s = with_fine_position(s, spec.to_counts(value))
            self.tx.put(to_message(s, Direction.COMMAND, spec.module_id))
        self.tx.pump(self.bus)

    def poll(self, now: float) -> None:
        for msg in drain(self.bus, self.accept):
            try:
                got = from_message(msg)
            except FrameError:
                self.bad_frames += 1
                continue
            if got is None or got.direction is not Direction.FEEDBACK:
                continue
            spec = self.specs.get(got.module)
            if spec is not None:
                self.values[got.module] = spec.from_counts(fine_position(got.struct))
                self.last_seen[got.module] = now

    def silent(self, now: float) -> list[str]:
        """Names of the modules whose feedback is missing or older than the timeout."""
        return [s.name for k, s in self.specs.items()
                if now - self.last_seen.get(k, -math.inf) > self.silence_timeout]

    @property
    def joints(self) -> Joints | None:
        v = self.values
        if not all(k in v for k in (1, 2, 3, 4)):
            return None
        return Joints(v[1], v[2], v[3], v[4])

    @property
    def gripper(self) -> float | None:
        return self.values.get(5)


START = Pose(0.4, 0.0, 0.2)  # where the simulated arm is when a run begins


@dataclass
class PickPlaceRun:
    """What a pick-and-place run on the bus did."""

    task: PickAndPlace
    sim_seconds: float
    step_seconds: list[float] = field(default_factory=list)  # wall time of each control step
    trace: list[tuple[float, Pose, Phase]] = field(default_factory=list)  # measured tool pose
    bus_frames: int = 0


def run_pick_place(
    config: PickPlaceConfig | None = None,
    geom: ScaraGeometry | None = None,
    *,
    start: Pose = START,
    channel: str | None = None,
    bitrate: int = 1_000_000,
    max_seconds: float = 60.0,
    on_step: Callable[[float, PickAndPlace, Joints], None] | None = None,
    bus_kwargs: dict[str, Any] | None = None,
) -> PickPlaceRun:
    """One pick-and-place cycle against simulated joint modules on a simulated CAN bus.

    The bus is the ``fwbridge`` interface in as-fast-as-possible pacing: bus
    time advances one control period at a time, and frames take their exact
    bit time on it. Deterministic; the wall time of each control step is
    recorded for the benchmark.
    """
    geom = geom or ScaraGeometry()
    cfg = config or PickPlaceConfig()
    specs = arm_specs(geom)
    name = channel or f"scara-{id(cfg):x}-{time.monotonic_ns()}"
    kw = {"interface": "fwbridge", "channel": name, "bitrate": bitrate, "pacing": "afap",
          **(bus_kwargs or {})}
    host_bus = can.Bus(**kw)
    modules, module_buses = run_modules(lambda: can.Bus(**kw), geom, start=start)
    try:
        link = ArmLink(host_bus, specs)
        task = PickAndPlace(geom, cfg)
        run = PickPlaceRun(task, 0.0)
        now, period = 0.0, cfg.period
        advance = host_bus.advance_to  # type: ignore[attr-defined]
        while not task.done and now < max_seconds:
            advance(now)
            for m in modules:
                m.step(now)
            _control_step(run, link, geom, now, on_step)
            now += period
        run.sim_seconds = now
        run.bus_frames = sum(m.tx.sent for m in modules) + link.tx.sent
        return run
    finally:
        for b in (host_bus, *module_buses):
            b.shutdown()


def _control_step(run: PickPlaceRun, link: ArmLink, geom: ScaraGeometry, now: float,
                  on_step: Callable[[float, PickAndPlace, Joints], None] | None) -> bool:
    """One control period of the host: feedback in, task step, setpoints out.

    Returns False while the joints' feedback is still incomplete (nothing sent).
    """
    link.poll(now)
    fb = link.joints
    if fb is None:
        return False
    t0 = time.perf_counter()
    sp = run.task.step(now, fb, link.gripper)
    link.send(sp.joints, sp.gripper)
    run.step_seconds.append(time.perf_counter() - t0)
    run.trace.append((now, forward(geom, fb), sp.phase))
    if on_step is not None:
        on_step(now, run.task, fb)
    return True


def drive_pick_place(
    bus: can.BusABC,
    task: PickAndPlace,
    geom: ScaraGeometry,
    *,
    max_seconds: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_step: Callable[[float, PickAndPlace, Joints], None] | None = None,
) -> PickPlaceRun:
    """Run ``task`` in real time against the arm modules on ``bus`` (vcan, a real adapter).

    Fails the task with a clear reason when a module stays silent for the
    link's silence timeout after the start.
    """
    link = ArmLink(bus, arm_specs(geom))
    run = PickPlaceRun(task, 0.0)
    period = task.cfg.period
    start = clock()
    next_step = start
    while not task.done:
        now = clock() - start
        if now > max_seconds:
            task.failure = f"not done after {max_seconds:.0f} s"
            break
        if not _control_step(run, link, geom, now, on_step) and now > link.silence_timeout * 10:
            task.failure = f"no feedback from {', '.join(link.silent(now))}"
            break
        next_step += period
        sleep(max(0.0, next_step - clock()))
    run.sim_seconds = clock() - start
    run.bus_frames = link.tx.sent
    return run


def run_modules(bus_factory: Callable[[], can.BusABC], geom: ScaraGeometry, *,
                start: Pose = START) -> tuple[list[JointModule], list[can.BusABC]]:
    """The five simulated modules of the arm, each on its own node of the bus."""
    buses = [bus_factory() for _ in range(5)]
    joints = inverse(geom, start)
    modules = [JointModule(b, s, v) for b, s, v in zip(buses, arm_specs(geom), (*joints, 0.0))]
    return modules, buses
