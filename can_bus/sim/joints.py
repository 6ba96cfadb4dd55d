"""The SCARA arm's joints as simulated CAN firmware: actuator modules that follow
set-position commands in SI units through a first-order servo lag.

The arm app (:mod:`fwbridge.bridge.robots.arm`) describes its joints with
:class:`JointSpec` and starts these modules when a simulated arm is asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import can

from fwbridge.can_bus.sim.nodes import ActuatorModule
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.families.actuator import ActuatorStruct, fine_position, with_fine_position

__all__ = ["PER_FRACTION", "PER_M", "PER_RAD", "JointModule", "JointSpec", "coarse_angle"]


@dataclass(frozen=True, slots=True)
class JointSpec:
    """One module of the arm: its ID, how SI units map to fine counts, its dynamics."""

    name: str
    module_id: int
    counts_per_unit: float  # fine-position counts per rad, per m, or per fraction closed
    vmax: float  # SI units per second
    tau: float = 0.03  # s, first-order lag of the servo loop
    lo: float = -math.inf
    hi: float = math.inf

    def to_counts(self, value: float) -> int:
        return round(value * self.counts_per_unit)

    def from_counts(self, counts: int) -> float:
        return counts / self.counts_per_unit


PER_RAD = 100.0 * 180.0 / math.pi  # 0.01 degree
PER_M = 10_000.0  # 0.1 mm
PER_FRACTION = 10_000.0  # 0.01 %


def coarse_angle(spec: JointSpec, value: float) -> int:
    """The struct's int8 angle field: whole degrees, or mm / percent for the others."""
    unit = math.degrees(value) if spec.counts_per_unit == PER_RAD else value * 100.0
    return int(max(-128, min(127, round(unit))))


class JointModule(ActuatorModule):
    """A simulated joint (or gripper) module: follows set-position commands, reports back.

    The CAN side (acceptance filter, feedback period, transmit queue) is the
    actuator module's; the joint moves in SI units and speaks fine positions.
    """

    def __init__(self, bus: can.BusABC, spec: JointSpec, position: float = 0.0, *,
                 feedback_period: float = 0.008) -> None:
        super().__init__(bus, spec.module_id, feedback_period=feedback_period)
        self.spec = spec
        self.position = self.target = position

    def _apply(self, s: ActuatorStruct) -> None:
        if s.command == SubCommand.SET_SERVO_POSITION:
            value = self.spec.from_counts(fine_position(s))
            self.target = max(self.spec.lo, min(self.spec.hi, value))
            self.commands += 1

    def _integrate(self, dt: float) -> None:
        if dt > 0:
            move = (self.target - self.position) * (1.0 - math.exp(-dt / self.spec.tau))
            limit = self.spec.vmax * dt
            self.position += max(-limit, min(limit, move))

    def feedback(self) -> ActuatorStruct:
        s = ActuatorStruct(angle=coarse_angle(self.spec, self.position),
                           module_id=self.spec.module_id, command=SubCommand.SET_SERVO_POSITION)
        return with_fine_position(s, self.spec.to_counts(self.position))
