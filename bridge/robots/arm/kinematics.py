"""SCARA (RRPR) kinematics: forward, geometric inverse, nearest-solution choice.

Geometry as in seed 001: two horizontal links (L1, L2) place the wrist in
XY, a prismatic joint gives z = d3, and the wrist angle gives the tool yaw
phi = theta1 + theta2 + theta4. The inverse uses the cosine rule and yields
both elbow solutions; solutions outside the joint limits are dropped and
the one nearest the current joints (differences normalised to (-pi, pi]) is
chosen. Unreachable targets raise :class:`UnreachableError`, never NaN.

Link lengths come from the robot config. The seed's code uses 0.55 m and
0.4 m while its prose says 0.6 m for the first link: the defaults follow
the code, a config can say otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from math import acos, atan2, pi, sqrt
from typing import Any, NamedTuple

import numpy as np

from fwbridge.protocols.errors import ArmError, ConfigError

__all__ = [
    "TAU",
    "ArmConfigError",
    "Joints",
    "Pose",
    "ScaraGeometry",
    "UnreachableError",
    "forward",
    "inverse",
    "inverse_all",
    "inverse_path",
    "joint_distance",
    "normalize_angle",
]

TAU = 2.0 * math.pi


class ArmConfigError(ArmError, ConfigError):
    """Arm geometry or an ``[arm]`` table that cannot be used: names the key."""


class UnreachableError(ArmError, ValueError):
    """The target cannot be reached; says why (workspace, limits, z range)."""


def normalize_angle(angle: float) -> float:
    """``angle`` wrapped to (-pi, pi]; a non-finite angle has no wrap and stays NaN (never
    an exception: a caller checks finiteness where it refuses a target)."""
    if not math.isfinite(angle):
        return math.nan
    a = math.fmod(angle, TAU)
    if a <= -math.pi:
        a += TAU
    elif a > math.pi:
        a -= TAU
    return a


class Joints(NamedTuple):
    """Joint positions: theta1, theta2, theta4 in rad; d3 (the z slide) in m.

    Named tuples (not dataclasses) for joints and poses: the IK makes one per
    call, and at control and benchmark rates their construction cost shows.
    """

    theta1: float = 0.0
    theta2: float = 0.0
    d3: float = 0.0
    theta4: float = 0.0

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.theta1, self.theta2, self.d3, self.theta4)


class Pose(NamedTuple):
    """Tool pose: x, y, z in m, phi (tool yaw) in rad."""

    x: float
    y: float
    z: float
    phi: float = 0.0

    def distance(self, other: Pose) -> float:
        """Cartesian distance in m (phi ignored)."""
        return math.dist((self.x, self.y, self.z), (other.x, other.y, other.z))

    def turn(self, other: Pose) -> float:
        """|phi difference| in rad, wrapped (an orientation, not a joint's travel)."""
        return abs(normalize_angle(self.phi - other.phi))


@dataclass(frozen=True, slots=True)
class ScaraGeometry:
    """Link lengths, joint limits and velocity limits of one arm (seed 001 values)."""

    l1: float = 0.55
    l2: float = 0.4
    limit1: float = 2.967  # rad, symmetric
    limit2: float = 2.967
    limit4: float = math.pi
    # The seed's 150 mm slide stroke, mounted to reach its pick height (PROTOCOLS.md 6.3).
    z_min: float = 0.10
    z_max: float = 0.25
    # Motor maxVelocity of the seed's world file: joints 1, 2 (rad/s), 3 (m/s), 4 (rad/s).
    vmax: tuple[float, float, float, float] = (2.0, 4.0, 0.5, 6.0)

    # Derived once, read by every IK call.
    r_min: float = field(init=False, repr=False)
    r_max: float = field(init=False, repr=False)
    l1l1_plus_l2l2: float = field(init=False, repr=False)
    l1l1_minus_l2l2: float = field(init=False, repr=False)
    two_l1l2: float = field(init=False, repr=False)
    #: Everything the IK reads, in one tuple: one attribute load per call.
    ik_constants: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.l1 > 0 and self.l2 > 0):
            raise ArmConfigError(f"link lengths must be positive, got l1={self.l1}, l2={self.l2}")
        if self.z_min > self.z_max:
            raise ArmConfigError(f"z_min {self.z_min} is above z_max {self.z_max}")
        derived = {
            "r_min": abs(self.l1 - self.l2),
            "r_max": self.l1 + self.l2,
            "l1l1_plus_l2l2": self.l1 * self.l1 + self.l2 * self.l2,
            "l1l1_minus_l2l2": self.l1 * self.l1 - self.l2 * self.l2,
            "two_l1l2": 2.0 * self.l1 * self.l2,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "ik_constants", (
            self.z_min, self.z_max, derived["r_min"], derived["r_max"],
            derived["l1l1_plus_l2l2"], derived["two_l1l2"], derived["l1l1_minus_l2l2"],
            2.0 * self.l1, self.limit1, self.limit2, self.limit4))

    def within_limits(self, j: Joints) -> bool:
        return (
            abs(j.theta1) <= self.limit1
            and abs(j.theta2) <= self.limit2
            and abs(j.theta4) <= self.limit4
            and self.z_min <= j.d3 <= self.z_max
        )


def forward(geom: ScaraGeometry, j: Joints) -> Pose:
    """Tool pose of joint positions ``j``."""
    a12 = j.theta1 + j.theta2
    return Pose(
        geom.l1 * math.cos(j.theta1) + geom.l2 * math.cos(a12),
        geom.l1 * math.sin(j.theta1) + geom.l2 * math.sin(a12),
        j.d3,
        normalize_angle(a12 + j.theta4),
    )


def _solve(
    geom: ScaraGeometry, pose: Pose, c1: float, c2: float,
    every: list[tuple[float, float, float]] | None = None,
) -> tuple[float, float, float] | None:
    """(theta1, theta2, theta4) of the elbow solution nearest (c1, c2), within the limits.

    With ``every``, also appends each solution within the limits to it.
    Raises :class:`UnreachableError` for targets outside the annulus
    |L1-L2| <= r <= L1+L2, outside the z range, or not finite. Written flat,
    wrapping inlined, no objects but the result: it is the IK's hot path.
    """
    x, y, z, phi = pose
    z_min, z_max, r_min, r_max, a2_b2, two_ab, a2_minus_b2, two_a, lim1, lim2, lim4 = (
        geom.ik_constants)
    r2 = x * x + y * y
    r = sqrt(r2)
    # Written so that NaN fails every test (comparisons with NaN are false).
    if not (z_min <= z <= z_max and r_min <= r <= r_max and r > 0.0):
        raise _unreachable(geom, pose, r)
    if not -pi < phi <= pi:
        if not math.isfinite(phi):
            raise _unreachable(geom, pose, r)
        phi = normalize_angle(phi)
    # Cosine rule; clamp only rounding error (the annulus test above is exact).
    ca = (a2_b2 - r2) / two_ab
    cg = (a2_minus_b2 + r2) / (two_a * r)
    elbow = pi - acos(1.0 if ca > 1.0 else -1.0 if ca < -1.0 else ca)  # in [0, pi]
    gamma = acos(1.0 if cg > 1.0 else -1.0 if cg < -1.0 else cg)
    beta = atan2(y, x)
    if elbow > lim2:
        return None
    best = None
    best_d = 1e300
    for sign in (1.0, -1.0):
        t1 = beta - sign * gamma
        if t1 > pi:
            t1 -= TAU
        elif t1 <= -pi:
            t1 += TAU
        if not -lim1 <= t1 <= lim1:
            continue
        t2 = sign * elbow
        t4 = phi - t1 - t2  # within (-3pi, 3pi): one wrap brings it home
        if t4 > pi:
            t4 -= TAU
        elif t4 <= -pi:
            t4 += TAU
        if not -lim4 <= t4 <= lim4:
            continue
        # Plain differences: theta1/theta2 are limited to less than a half turn each
        # way, so they cannot wrap, and the travel they make is the plain one.
        d = abs(t1 - c1) + abs(t2 - c2)
        sol = (t1, t2, t4)
        if every is not None and sol not in every:  # stretched or folded: one solution
            every.append(sol)
        if d < best_d:
            best, best_d = sol, d
    return best


def _unreachable(geom: ScaraGeometry, pose: Pose, r: float) -> UnreachableError:
    """The error that says which test a target failed (off the hot path)."""
    if not all(math.isfinite(v) for v in pose):
        return UnreachableError(f"target {tuple(pose)} is not finite")
    if not geom.z_min <= pose.z <= geom.z_max:
        return UnreachableError(
            f"z={pose.z:.4f} m is outside the slide's range [{geom.z_min}, {geom.z_max}] m"
        )
    return UnreachableError(
        f"target ({pose.x:.4f}, {pose.y:.4f}) at r={r:.4f} m is outside the workspace "
        f"{geom.r_min:.4f} <= r <= {geom.r_max:.4f} m"
    )


_new_joints = tuple.__new__  # Joints(...) goes through a Python-level __new__


def inverse_all(geom: ScaraGeometry, pose: Pose) -> list[Joints]:
    """Both elbow solutions that lie within the limits (possibly none).

    Raises :class:`UnreachableError` when the target is outside the annulus
    |L1-L2| <= r <= L1+L2 or outside the z range.
    """
    every: list[tuple[float, float, float]] = []
    _solve(geom, pose, 0.0, 0.0, every)
    return [Joints(t1, t2, pose.z, t4) for t1, t2, t4 in every]


def joint_distance(a: Joints, b: Joints) -> float:
    """Sum of |theta1, theta2 differences|: the travel the two arm joints make.

    Not wrapped: the joints are limited to +-2.967 rad and cannot pass +-pi,
    so +2.9 to -2.9 is 5.8 rad of travel, not 0.48.
    """
    return abs(a.theta1 - b.theta1) + abs(a.theta2 - b.theta2)


def inverse(geom: ScaraGeometry, pose: Pose, current: Joints | None = None) -> Joints:
    """The solution nearest ``current`` (default: all zeros); raises when none exists.

    Nearest means the smallest :func:`joint_distance`: the travel the joints
    actually make (they cannot wrap, so a joint near +pi and a candidate near
    -pi are far apart).
    """
    if current is None:
        c1 = c2 = 0.0
    else:
        c1, c2 = current[0], current[1]  # as they are: the joints do not wrap
    best = _solve(geom, pose, c1, c2)
    if best is None:
        raise UnreachableError(
            f"target ({pose.x:.4f}, {pose.y:.4f}) needs joints outside the limits "
            f"(|theta1| <= {geom.limit1}, |theta2| <= {geom.limit2} rad)"
        )
    return _new_joints(Joints, (best[0], best[1], pose[2], best[2]))


def inverse_path(
    geom: ScaraGeometry,
    xyz_phi: np.ndarray[Any, Any],
    current: Joints | None = None,
) -> np.ndarray[Any, Any]:
    """IK of a whole path at once: an (N, 4) array of x, y, z, phi -> (N, 4) joints.

    Each point takes the elbow nearest the previous point's solution (the
    first, the one nearest ``current``), exactly as calling :func:`inverse`
    point by point would; the trigonometry is vectorised and only the elbow
    choice, a two-state scan, runs per point. Raises
    :class:`UnreachableError` naming the first point that cannot be reached.
    """
    p = np.asarray(xyz_phi, dtype=np.float64).reshape(-1, 4)
    x, y, z, phi = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
    r2 = x * x + y * y
    r = np.sqrt(r2)
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (z >= geom.z_min) & (z <= geom.z_max) & (r >= geom.r_min) & (r <= geom.r_max)
        ok &= (r > 0.0) & np.isfinite(phi)
        if not ok.all():
            k = int(np.argmin(ok))
            raise UnreachableError(f"point {k}: {_unreachable(geom, Pose(*p[k]), float(r[k]))}")
        alpha = np.arccos(np.clip((geom.l1l1_plus_l2l2 - r2) / geom.two_l1l2, -1.0, 1.0))
        gamma = np.arccos(np.clip((geom.l1l1_minus_l2l2 + r2) / (2.0 * geom.l1 * r), -1.0, 1.0))
    beta = np.arctan2(y, x)
    elbow = math.pi - alpha
    # The same operations, in the same order, as the scalar _solve: so the
    # results agree to the last bit, wrapping included.
    out = ~((phi > -math.pi) & (phi <= math.pi))
    if out.any():
        phi = phi.copy()
        phi[out] = [normalize_angle(v) for v in phi[out]]
    t1 = np.stack([_wrap_array(beta - gamma), _wrap_array(beta + gamma)])  # (2, N)
    t2 = np.stack([elbow, -elbow])
    t4 = _wrap_array(phi - t1 - t2)
    valid = (np.abs(t1) <= geom.limit1) & (np.abs(t2) <= geom.limit2) & (np.abs(t4) <= geom.limit4)
    if not valid.any(axis=0).all():
        k = int(np.argmin(valid.any(axis=0)))
        raise UnreachableError(f"point {k}: target ({x[k]:.4f}, {y[k]:.4f}) needs joints "
                               f"outside the limits")
    # Distance from each candidate at k to each candidate at k-1: (2 new, 2 prev, N-1).
    d = np.abs(t1[:, None, 1:] - t1[None, :, :-1])  # plain travel, as _solve
    d += np.abs(t2[:, None, 1:] - t2[None, :, :-1])
    d[~valid[:, None, 1:].repeat(2, axis=1)] = np.inf
    # choice_given_prev[e][k]: the elbow chosen at k+1 when elbow e was chosen at k.
    pick = (d[1] < d[0]).astype(np.int8)  # (2 prev, N-1)
    ref = current if current is not None else Joints()
    c1, c2 = float(ref[0]), float(ref[1])
    d0 = np.abs(t1[:, 0] - c1) + np.abs(t2[:, 0] - c2)
    d0[~valid[:, 0]] = np.inf
    state = int(d0[1] < d0[0])
    chosen = [state]
    given0, given1 = pick[0].tolist(), pick[1].tolist()
    for k in range(len(given0)):
        state = given1[k] if state else given0[k]
        chosen.append(state)
    idx = np.asarray(chosen)
    cols = np.arange(len(idx))
    return np.stack([t1[idx, cols], t2[idx, cols], z, t4[idx, cols]], axis=1)


def _wrap_array(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """One conditional wrap toward (-pi, pi], element-wise, exactly as the scalar code."""
    return np.where(a > math.pi, a - TAU, np.where(a <= -math.pi, a + TAU, a))
