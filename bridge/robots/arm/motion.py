"""Motion profiles for the arm: synchronised trapezoidal joint moves and MoveL.

Pure functions of time (``t`` in seconds since the move started): the task
samples them every control period. Velocity limits are the seed's motor
limits, or the seed's ramp speeds (:class:`RampSpeeds`, the pick-and-place
default); the acceleration limits are a choice (each joint reaches its top
speed in 0.25 s), kept in :class:`Limits`. :class:`MoveL` is the seed's
``MoveL(start, end, duration)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbridge.bridge.robots.arm.kinematics import (
    TAU,
    ArmConfigError,
    Joints,
    Pose,
    ScaraGeometry,
    UnreachableError,
    inverse,
    inverse_path,
    normalize_angle,
)

__all__ = ["JointMove", "Limits", "LinearMove", "Trapezoid"]


@dataclass(frozen=True, slots=True)
class Trapezoid:
    """1-D trapezoidal (or triangular) profile from ``start`` to ``goal``.

    ``duration`` may be stretched beyond the minimum so several joints
    finish together; the cruise speed is then lowered to fit.
    """

    start: float
    goal: float
    vmax: float
    amax: float
    duration: float
    cruise: float  # speed actually used (<= vmax)

    @classmethod
    def plan(cls, start: float, goal: float, vmax: float, amax: float) -> Trapezoid:
        d = abs(goal - start)
        if d == 0.0:
            return cls(start, goal, vmax, amax, 0.0, 0.0)
        if d <= vmax * vmax / amax:  # never reaches vmax: triangle
            v = math.sqrt(d * amax)
            return cls(start, goal, vmax, amax, 2.0 * v / amax, v)
        return cls(start, goal, vmax, amax, d / vmax + vmax / amax, vmax)

    def stretched(self, duration: float) -> Trapezoid:
        """The same move taking ``duration`` (>= the minimum) seconds."""
        if duration <= self.duration or self.cruise == 0.0:
            return self
        d = abs(self.goal - self.start)
        a = self.amax
        # Cruise speed v with accel a over total time T: d = v*T - v^2/a.
        disc = max(0.0, a * a * duration * duration - 4.0 * a * d)
        v = (a * duration - math.sqrt(disc)) / 2.0
        return Trapezoid(self.start, self.goal, self.vmax, a, duration, v)

    def position(self, t: float) -> float:
        if t <= 0.0 or self.cruise == 0.0:
            return self.start if t <= 0.0 or self.duration == 0.0 else self.goal
        if t >= self.duration:
            return self.goal
        v, a, big_t = self.cruise, self.amax, self.duration
        ta = v / a
        if t < ta:
            s = 0.5 * a * t * t
        elif t <= big_t - ta:
            s = 0.5 * a * ta * ta + v * (t - ta)
        else:
            s = abs(self.goal - self.start) - 0.5 * a * (big_t - t) ** 2
        return self.start + math.copysign(s, self.goal - self.start)


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-joint velocity and acceleration limits (theta1, theta2, d3, theta4)."""

    vmax: tuple[float, float, float, float] = (2.0, 4.0, 0.5, 6.0)
    amax: tuple[float, float, float, float] = (8.0, 16.0, 2.0, 24.0)
    cartesian_speed: float = 0.25  # m/s, MoveL's top speed along the line
    cartesian_accel: float = 1.0  # m/s^2

    @classmethod
    def from_geometry(cls, geom: ScaraGeometry) -> Limits:
        return cls(vmax=geom.vmax, amax=tuple(4.0 * v for v in geom.vmax))  # type: ignore[arg-type]


class JointMove:
    """All joints from ``a`` to ``b``, trapezoidal, finishing together.

    Every joint, the wrist included, goes the plain way from ``a`` to ``b``:
    the joints are limited to +-pi or less (theta4: +-pi, a hard stop), so
    the short way across +-pi would pass the limit and is not a move the
    module can make. Each sample then lies between ``a`` and ``b``, within
    the limits, and is sent as it is (never re-wrapped).
    """

    def __init__(self, a: Joints, b: Joints, limits: Limits) -> None:
        self.a, self.b = a, b
        goals = (b.theta1, b.theta2, b.d3, b.theta4)
        plans = [
            Trapezoid.plan(s, g, v, acc)
            for s, g, v, acc in zip(a.as_tuple(), goals, limits.vmax, limits.amax)
        ]
        self.duration = max(p.duration for p in plans)
        self.profiles = [p.stretched(self.duration) for p in plans]

    def sample(self, t: float) -> Joints:
        t1, t2, d3, t4 = (p.position(t) for p in self.profiles)
        return Joints(t1, t2, d3, t4)


def _wrist_shift(raw: float, near: float, limit: float) -> float:
    """The multiple of 2 pi that puts ``raw`` within +-``limit``, nearest ``near``."""
    m0 = round(-raw / TAU)
    fits = [m for m in (m0 - 1, m0, m0 + 1) if abs(raw + m * TAU) <= limit + 1e-9]
    return TAU * min(fits or [m0], key=lambda m: abs(raw + m * TAU - near))


def _line_path(
    geom: ScaraGeometry, p0: Pose, p1: Pose, fractions: np.ndarray[Any, Any], start: Joints
) -> tuple[np.ndarray[Any, Any], float, float]:
    """Joints along the line ``p0``-``p1`` at ``fractions`` (0..1), theta4 unwrapped.

    The tool yaw turns the short way unless that takes the wrist past its stop
    (theta4 = phi - theta1 - theta2, limited to +-pi), then the long way. theta4
    is phi - theta1 - theta2 plus one fixed multiple of 2 pi (the first sample
    within the limits, nearest ``start``), so it is continuous, as the module
    moves. Returns (joints, the yaw turn, that multiple); raises
    :class:`UnreachableError` when no way keeps the wrist within its limits.
    """
    f = np.asarray(fractions, dtype=np.float64)
    poses = np.empty((len(f), 4))
    for col in range(3):
        poses[:, col] = p0[col] + f * (p1[col] - p0[col])
    short = normalize_angle(p1.phi - p0.phi)
    lim = geom.limit4
    for turn in sorted((short, short - TAU, short + TAU), key=abs):
        poses[:, 3] = p0.phi + f * turn
        path = inverse_path(geom, poses, start)
        raw = poses[:, 3] - path[:, 0] - path[:, 1]
        shift = _wrist_shift(float(raw[0]), start.theta4, lim)
        theta4 = raw + shift
        if bool((np.abs(theta4) <= lim + 1e-9).all()):
            path[:, 3] = np.clip(theta4, -lim, lim)
            return path, turn, shift
    raise UnreachableError(
        f"the tool's yaw from {p0.phi:.4f} to {p1.phi:.4f} rad takes the wrist past its "
        f"+-{lim:.4f} rad stop either way round")


def _joint_steps(start: Joints, path: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each sample's travel from the one before (the first from ``start``), not wrapped:
    the joints cannot pass +-pi, so the plain difference is the travel they make."""
    return np.diff(np.vstack([np.asarray(start, dtype=np.float64), path]), axis=0)


class LinearMove:
    """MoveL: the tool on a straight line from ``p0`` to ``p1``, through the IK.

    The path parameter follows a trapezoid in path length; every sample is
    solved with the previous solution as the current joints, so the elbow
    never flips mid-line. The tool yaw turns the way that keeps the wrist
    within its +-pi stop (the long way when the short way would cross it), and
    theta4 is sent unwrapped. If a joint would exceed its speed limit at the
    given Cartesian speed, the move is planned slower until none does. A turn
    in place (no travel) follows a trapezoid in the wrist's angle, at its limits.
    """

    def __init__(
        self,
        geom: ScaraGeometry,
        p0: Pose,
        p1: Pose,
        start: Joints,
        limits: Limits,
        period: float,
    ) -> None:
        self.geom, self.p0, self.p1, self.period = geom, p0, p1, period
        length = p0.distance(p1)
        if length == 0.0:
            _, self.turn, self._shift = _line_path(geom, p0, p1, np.array([0.0, 1.0]), start)
            self.path = Trapezoid.plan(0.0, abs(self.turn), limits.vmax[3], limits.amax[3])
            self.duration = self.path.duration
        else:
            speed = limits.cartesian_speed
            for _ in range(12):  # bounded: each retry slows by the excess, at least half
                self.path = Trapezoid.plan(0.0, length, speed, limits.cartesian_accel)
                self.duration = self.path.duration
                over = self._speed_excess(start, limits)
                if over <= 1.0:
                    break
                speed = self.path.cruise / max(2.0, over)  # cruise: a triangle's peak
        self._last = start

    def _fraction(self, t: float) -> float:
        span = self.path.goal
        return 1.0 if span == 0.0 else self.path.position(t) / span

    def _pose_at(self, t: float) -> Pose:
        f = self._fraction(t)
        p0, p1 = self.p0, self.p1
        return Pose(
            p0.x + f * (p1.x - p0.x),
            p0.y + f * (p1.y - p0.y),
            p0.z + f * (p1.z - p0.z),
            p0.phi + f * self.turn,  # not wrapped: the turn chosen for the wrist
        )

    def _speed_excess(self, start: Joints, limits: Limits) -> float:
        """Solve the whole line at the control period (choosing the wrist's way round);
        the largest joint step over its limit (<= 1: within), the wrist's on its real
        travel."""
        steps = max(1, math.ceil(self.duration / self.period))
        fractions = [self._fraction(k * self.period) for k in range(steps + 1)]
        joints, self.turn, self._shift = _line_path(
            self.geom, self.p0, self.p1, np.array(fractions), start)
        allowed = np.asarray(limits.vmax) * self.period * 1.0001
        return float((np.abs(_joint_steps(start, joints)) / allowed).max())

    def sample(self, t: float) -> Joints:
        """Joints at time ``t``; call with increasing ``t`` (continuity)."""
        pose = self._pose_at(t)
        j = inverse(self.geom, pose, self._last)
        lim = self.geom.limit4
        t4 = pose.phi - j.theta1 - j.theta2 + self._shift  # unwrapped, as planned
        self._last = Joints(j.theta1, j.theta2, j.d3, min(max(t4, -lim), lim))
        return self._last


@dataclass(frozen=True, slots=True)
class RampSpeeds:
    """The seed's ramp speeds (``setMotorTargetWithSmoothing``): rad/s for the revolute
    joints while resetting and while moving, m/s for the slide."""

    reset: float = 0.8
    move: float = 1.0
    slide: float = 0.4

    def limits(self, resetting: bool, base: Limits | None = None) -> Limits:
        """:class:`Limits` with these speeds (each joint at top speed in 0.25 s, as before)."""
        base = base or Limits()
        r = self.reset if resetting else self.move
        vmax = (r, r, self.slide, r)
        return Limits(vmax=vmax, amax=tuple(4.0 * v for v in vmax),  # type: ignore[arg-type]
                      cartesian_speed=base.cartesian_speed, cartesian_accel=base.cartesian_accel)


class MoveL:
    """The seed's ``MoveL(start, end, duration)``: the tool on a straight line, a new
    target every ``period`` (its 16 ms), position interpolated linearly in time, so the
    move takes exactly ``duration`` seconds.

    ``joints``: the arm's joints now (each sample is solved nearest to the one
    before, so the elbow never flips). ``limits``: the joint speeds the move may
    ask for; a duration too short for them is refused (ValueError) with the
    shortest one that fits, rather than met late. The tool yaw turns the way that
    keeps the wrist within its +-pi stop, as :class:`LinearMove`'s does, and the
    targets carry theta4 unwrapped; the speeds are checked on that real travel.
    """

    def __init__(self, geom: ScaraGeometry, start: Pose, end: Pose, duration: float,
                 joints: Joints, *, period: float = 0.016, limits: Limits | None = None) -> None:
        if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
            raise ArmConfigError(f"MoveL duration must be a positive number of seconds, "
                             f"got {duration!r}")
        if not (math.isfinite(period) and period > 0):
            raise ArmConfigError(f"MoveL period must be positive, got {period!r}")
        self.geom, self.start, self.end = geom, start, end
        self.duration, self.period = float(duration), period
        self.steps = max(1, math.ceil(self.duration / period))
        fractions = np.array([min(k * period / self.duration, 1.0)
                              for k in range(self.steps + 1)])
        # Raises UnreachableError off the workspace or when the wrist cannot turn either way.
        path, self.turn, _ = _line_path(geom, start, end, fractions, joints)
        deltas = _joint_steps(joints, path)
        vmax = np.asarray((limits or Limits.from_geometry(geom)).vmax)
        # The first row is the jump from the joints now to the start pose (not a speed).
        need = (np.abs(deltas[1:]) / period).max(axis=0) if len(deltas) > 1 else np.zeros(4)
        over = float((need / vmax).max())
        if over > 1.0001:
            # The speed asked scales as 1/duration; 3 % for the sampling of the line.
            shortest = math.ceil(self.duration * over * 1.03 * 1000) / 1000
            raise UnreachableError(f"MoveL over {start.distance(end) * 1000:.0f} mm in "
                             f"{self.duration:g} s asks a joint for {over:.2f}x its speed "
                             f"limit; {shortest:.3f} s at least")
        self._path = [Joints(*(float(v) for v in row)) for row in path]

    def pose(self, t: float) -> Pose:
        """The tool's target at ``t`` (clamped to the move)."""
        f = min(max(t / self.duration, 0.0), 1.0)
        a, b = self.start, self.end
        return Pose(a.x + f * (b.x - a.x), a.y + f * (b.y - a.y), a.z + f * (b.z - a.z),
                    normalize_angle(a.phi + f * self.turn))

    def sample(self, t: float) -> Joints:
        """The joint target of the control period that contains ``t``."""
        k = min(max(math.floor(t / self.period + 1e-9), 0), self.steps)
        if k >= self.steps or t >= self.duration:
            return self._path[-1]
        return self._path[k]
