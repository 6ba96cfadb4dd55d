"""The pick-and-place task of seed 001 as a sans-I/O state machine.

Phases: reset (lift to the safe height, then home), above pick, descend,
close gripper, ascend, above place, descend, open gripper, ascend, home.
XY moves happen only at the safe height; below it the tool moves straight
up or down (MoveL). Every setpoint is checked against that rule, and a
phase ends only when the joint *feedback* is within the seed's 0.015 (rad
for the revolute joints, m for the slide) of the waypoint's joints, or,
with ``joint_tolerance=None``, within ``tolerance`` (1 mm) in Cartesian
terms, so the task never runs ahead of the arm.

The seed's values are the defaults (PROTOCOLS.md 6.3): ramp speeds 0.8 rad/s
resetting, 1.0 rad/s moving, 0.4 m/s for the slide; the 0.015 joint
tolerance; the safe height at the top of its 150 mm slide stroke; a gripper
closing with 20 N per finger on its 200 g block, with a grip/slip result.
:meth:`PickPlaceConfig.precise` gives the earlier values (motor top speeds,
1 mm, safe height 0.35 m on a 0.4 m slide).

Feed it ``step(now, feedback)`` every control period; it returns the joint
and gripper setpoint. Time is an argument; nothing here sleeps.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

from fwbridge.bridge.robots.arm.kinematics import (
    ArmConfigError,
    Joints,
    Pose,
    ScaraGeometry,
    forward,
    inverse,
    normalize_angle,
)
from fwbridge.bridge.robots.arm.motion import JointMove, Limits, LinearMove, RampSpeeds
from fwbridge.protocols.errors import ArmError

__all__ = ["Grip", "Phase", "PickAndPlace", "PickPlaceConfig", "Reached", "SafeZViolation",
           "Setpoint"]

G = 9.81  # m/s^2


class Phase(enum.Enum):
    RESET_LIFT = "reset-lift"
    RESET_HOME = "reset-home"
    ABOVE_PICK = "above-pick"
    DESCEND_PICK = "descend-pick"
    CLOSE_GRIPPER = "close-gripper"
    ASCEND_PICK = "ascend-pick"
    ABOVE_PLACE = "above-place"
    DESCEND_PLACE = "descend-place"
    OPEN_GRIPPER = "open-gripper"
    ASCEND_PLACE = "ascend-place"
    HOME = "home"
    DONE = "done"
    FAILED = "failed"


class SafeZViolation(ArmError, RuntimeError):
    """A setpoint would move the tool in XY below the safe height."""


@dataclass(frozen=True, slots=True)
class Setpoint:
    joints: Joints
    gripper: float  # 0 open .. 1 closed
    phase: Phase


@dataclass(frozen=True, slots=True)
class Reached:
    """A waypoint reached: which, when, and the Cartesian error of the feedback."""

    phase: Phase
    time: float
    error_m: float


@dataclass(frozen=True, slots=True)
class Grip:
    """Whether the closed gripper holds the payload through the lift.

    Friction from both fingers (``2 * mu * force``) against what the lift asks:
    the weight plus the slide's top acceleration (``m * (g + a)``).
    """

    force_n: float  # per finger
    capacity_n: float
    needed_n: float

    @property
    def held(self) -> bool:
        return self.capacity_n >= self.needed_n

    @property
    def result(self) -> str:
        return "held" if self.held else "slipped"


@dataclass(slots=True)
class _Active:
    phase: Phase
    start: float
    target: Pose
    move: JointMove | LinearMove | None
    gripper: float
    goal: Joints | None = None  # the waypoint's joints
    reached_at: float | None = None


@dataclass
class PickPlaceConfig:
    pick: tuple[float, float, float] = (0.45, 0.15, 0.12)
    place: tuple[float, float, float] = (0.2, -0.25, 0.15)
    home: tuple[float, float] = (0.4, 0.0)
    safe_z: float = 0.25  # the top of the seed's 150 mm stroke (PROTOCOLS.md 6.3)
    phi: float = 0.0
    period: float = 0.016  # the seed's basicTimeStep
    tolerance: float = 0.001  # m, feedback to waypoint (when joint_tolerance is None)
    joint_tolerance: float | None = 0.015  # the seed's: rad (revolute), m (slide)
    ramp: RampSpeeds | None = field(default_factory=RampSpeeds)  # None: motor top speeds
    phi_tolerance: float = 0.01  # rad, the tool's yaw: feedback to waypoint
    gripper_time: float = 0.5  # s to close or open
    settle_timeout: float = 3.0  # s after a move ends before the task fails
    limits: Limits = field(default_factory=Limits)
    grip_force: float = 20.0  # N per finger, the seed's maxForce
    friction: float = 0.8  # the seed's ContactProperties (Coulomb)
    payload_kg: float = 0.2  # the seed's 200 g block

    def precise(self) -> PickPlaceConfig:
        """The earlier defaults: motor top speeds, 1 mm Cartesian tolerance, the safe
        height 0.35 m (use it with ``ScaraGeometry(z_min=0.0, z_max=0.4)``)."""
        return replace(self, safe_z=0.35, joint_tolerance=None, ramp=None)

    def phase_limits(self, phase: Phase) -> Limits:
        if self.ramp is None:
            return self.limits
        return self.ramp.limits(phase in (Phase.RESET_LIFT, Phase.RESET_HOME), self.limits)

    def grip(self) -> Grip:
        """The grip the gripper makes on the payload (slide acceleration of the lift)."""
        accel = self.phase_limits(Phase.ASCEND_PICK).amax[2]
        return Grip(self.grip_force, 2.0 * self.friction * self.grip_force,
                    self.payload_kg * (G + accel))


class PickAndPlace:
    """One pick-and-place cycle for ``geom``; ``step()`` every control period."""

    def __init__(self, geom: ScaraGeometry, config: PickPlaceConfig | None = None) -> None:
        self.geom = geom
        self.cfg = cfg = config or PickPlaceConfig()
        for name, xyz in (("pick", cfg.pick), ("place", cfg.place)):
            if xyz[2] > cfg.safe_z:
                raise ArmConfigError(f"{name} z={xyz[2]} is above the safe height {cfg.safe_z}")
            inverse(geom, Pose(*xyz, cfg.phi))  # raises UnreachableError early
        self.reached: list[Reached] = []
        self.grip: Grip | None = None  # set when the gripper has closed on the payload
        self.failure: str | None = None
        self._active: _Active | None = None
        self._command: Joints | None = None
        self._gripper = 0.0
        self._last_pose: Pose | None = None

    @property
    def phase(self) -> Phase:
        if self.failure is not None:
            return Phase.FAILED
        return self._active.phase if self._active else Phase.RESET_LIFT

    @property
    def done(self) -> bool:
        return self.phase in (Phase.DONE, Phase.FAILED)

    # -- the plan ---------------------------------------------------------
    def _waypoint(self, phase: Phase, here: Pose) -> tuple[Pose, bool, float]:
        """Target pose of ``phase``, whether it is a straight-line move, gripper."""
        c = self.cfg
        px, py, pz = c.pick
        qx, qy, qz = c.place
        plan = {
            Phase.RESET_LIFT: (Pose(here.x, here.y, max(here.z, c.safe_z), c.phi), True, 0.0),
            Phase.RESET_HOME: (Pose(*c.home, c.safe_z, c.phi), False, 0.0),
            Phase.ABOVE_PICK: (Pose(px, py, c.safe_z, c.phi), False, 0.0),
            Phase.DESCEND_PICK: (Pose(px, py, pz, c.phi), True, 0.0),
            Phase.CLOSE_GRIPPER: (Pose(px, py, pz, c.phi), True, 1.0),
            Phase.ASCEND_PICK: (Pose(px, py, c.safe_z, c.phi), True, 1.0),
            Phase.ABOVE_PLACE: (Pose(qx, qy, c.safe_z, c.phi), False, 1.0),
            Phase.DESCEND_PLACE: (Pose(qx, qy, qz, c.phi), True, 1.0),
            Phase.OPEN_GRIPPER: (Pose(qx, qy, qz, c.phi), True, 0.0),
            Phase.ASCEND_PLACE: (Pose(qx, qy, c.safe_z, c.phi), True, 0.0),
            Phase.HOME: (Pose(*c.home, c.safe_z, c.phi), False, 0.0),
        }
        return plan[phase]

    def _enter(self, phase: Phase, now: float) -> None:
        assert self._command is not None
        here = forward(self.geom, self._command)
        target, straight, gripper = self._waypoint(phase, here)
        move: JointMove | LinearMove | None
        limits = self.cfg.phase_limits(phase)
        goal = inverse(self.geom, target, self._command)
        if phase in (Phase.CLOSE_GRIPPER, Phase.OPEN_GRIPPER):
            move = None
            goal = self._command
        elif straight:
            move = LinearMove(self.geom, here, target, self._command, limits, self.cfg.period)
        else:
            move = JointMove(self._command, goal, limits)
        self._active = _Active(phase, now, target, move, gripper, goal)

    def _within(self, feedback: Joints, act: _Active, error: float) -> bool:
        tol = self.cfg.joint_tolerance
        if tol is None or act.goal is None:
            return error <= self.cfg.tolerance
        g = act.goal
        return (abs(normalize_angle(feedback.theta1 - g.theta1)) < tol
                and abs(normalize_angle(feedback.theta2 - g.theta2)) < tol
                and abs(feedback.d3 - g.d3) < tol
                and abs(normalize_angle(feedback.theta4 - g.theta4)) < tol)

    # -- the loop ---------------------------------------------------------
    def step(self, now: float, feedback: Joints, gripper_feedback: float | None = None) -> Setpoint:
        """The setpoint for this control period, given the measured joints."""
        if self._command is None:
            self._command = feedback
            self._enter(Phase.RESET_LIFT, now)
        act = self._active
        assert act is not None and self._command is not None
        if self.failure is not None or act.phase is Phase.DONE:
            return Setpoint(self._command, self._gripper, self.phase)
        t = now - act.start
        if act.move is not None:
            self._command = act.move.sample(t)
            self._check_safe_z(forward(self.geom, self._command))
            finished = t >= act.move.duration
        else:
            self._gripper = act.gripper
            g_ok = gripper_feedback is None or abs(gripper_feedback - act.gripper) < 0.05
            finished = t >= self.cfg.gripper_time and g_ok
        if finished:
            measured = forward(self.geom, feedback)
            error = measured.distance(act.target)
            turn = measured.turn(act.target)  # a wrist that spun the wrong way shows here
            if self._within(feedback, act, error) and turn <= self.cfg.phi_tolerance:
                self.reached.append(Reached(act.phase, now, error))
                if act.phase is Phase.CLOSE_GRIPPER:
                    self.grip = grip = self.cfg.grip()
                    if not grip.held:
                        self.failure = (
                            f"close-gripper: the payload slips: {grip.capacity_n:.2f} N of "
                            f"friction ({self.cfg.grip_force:g} N per finger) for "
                            f"{grip.needed_n:.2f} N of weight and lift")
                        return Setpoint(self._command, self._gripper, self.phase)
                self._advance(now)
            else:
                end = act.move.duration if act.move is not None else self.cfg.gripper_time
                if t - end > self.cfg.settle_timeout:
                    self.failure = (
                        f"{act.phase.value}: feedback still {error * 1000:.1f} mm from the "
                        f"waypoint, tool yaw {math.degrees(turn):.1f} deg off, "
                        f"{self.cfg.settle_timeout} s after the move ended"
                    )
        return Setpoint(self._command, self._gripper, self.phase)

    def _advance(self, now: float) -> None:
        order = list(Phase)
        assert self._active is not None
        nxt = order[order.index(self._active.phase) + 1]
        if nxt is Phase.DONE:
            assert self._command is not None
            self._active = _Active(Phase.DONE, now, self._active.target, None, self._gripper)
            return
        self._enter(nxt, now)

    def _check_safe_z(self, pose: Pose) -> None:
        prev = self._last_pose
        self._last_pose = pose
        if prev is None:
            return
        low = min(prev.z, pose.z) < self.cfg.safe_z - 1e-9
        moved = math.hypot(pose.x - prev.x, pose.y - prev.y) > 1e-6
        if low and moved:
            raise SafeZViolation(
                f"XY move from ({prev.x:.4f}, {prev.y:.4f}) to ({pose.x:.4f}, {pose.y:.4f}) "
                f"at z={min(prev.z, pose.z):.4f} m, below the safe height {self.cfg.safe_z} m"
            )
