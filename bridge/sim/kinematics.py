"""Wheel kinematics and the motor model shared by the robot models.

Conventions: body frame x forward, y left, z up; yaw counter-clockwise
positive. Wheel speeds in rad/s, positive driving the robot forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DiffDrive",
    "Encoder",
    "Mecanum",
    "MotorModel",
    "integrate_pose",
    "wrap_deg",
]


@dataclass(frozen=True)
class Mecanum:
    """Four mecanum wheels (X configuration, rollers at 45°): fl, fr, rl, rr.

    ``lx``: half the wheelbase (front-rear), ``ly``: half the track (left-right).
    """

    wheel_radius: float = 0.03
    lx: float = 0.095
    ly: float = 0.085

    def inverse(self, vx: float, vy: float, wz: float) -> tuple[float, float, float, float]:
        """Body velocity (m/s, m/s, rad/s) -> wheel speeds (rad/s)."""
        k = self.lx + self.ly
        r = self.wheel_radius
        return (
            (vx - vy - k * wz) / r,
            (vx + vy + k * wz) / r,
            (vx + vy - k * wz) / r,
            (vx - vy + k * wz) / r,
        )

    def forward(self, fl: float, fr: float, rl: float, rr: float) -> tuple[float, float, float]:
        """Wheel speeds (rad/s) -> body velocity; the least-squares inverse of :meth:`inverse`."""
        q = self.wheel_radius / 4.0
        return (
            q * (fl + fr + rl + rr),
            q * (-fl + fr + rl - rr),
            q * (-fl + fr - rl + rr) / (self.lx + self.ly),
        )


@dataclass(frozen=True)
class DiffDrive:
    """Two wheels (or tracks) ``track`` metres apart: left, right."""

    wheel_radius: float = 0.0195
    track: float = 0.085

    def inverse(self, v: float, wz: float) -> tuple[float, float]:
        half = self.track / 2.0
        return (v - wz * half) / self.wheel_radius, (v + wz * half) / self.wheel_radius

    def forward(self, left: float, right: float) -> tuple[float, float]:
        r = self.wheel_radius
        return r * (left + right) / 2.0, r * (right - left) / self.track


@dataclass(frozen=True)
class MotorModel:
    """First-order velocity response with an acceleration limit and a speed limit.

    ``dw/dt = clamp((target - w) / tau, ±max_accel)``, ``|w| <= max_speed``;
    ``tau`` 0 is an ideal velocity-controlled motor (Webots' default: it reaches
    the target at the next step).
    """

    tau: float = 0.05  # s
    max_accel: float = 80.0  # rad/s^2
    max_speed: float = 30.0  # rad/s

    def step(self, w: float, target: float, dt: float) -> float:
        """The speed after ``dt`` seconds, from ``w`` towards ``target``."""
        lim = self.max_speed
        if target > lim:
            target = lim
        elif target < -lim:
            target = -lim
        if self.tau <= 0.0:
            return target
        if -1e-9 < target - w < 1e-9:
            return target  # settled: stop the asymptotic approach (and its cost)
        if dt >= self.tau:
            # Exact first-order step for long steps; the explicit form would overshoot.
            dw = (target - w) * (1.0 - math.exp(-dt / self.tau))
        else:
            dw = (target - w) * dt / self.tau
        cap = self.max_accel * dt
        if dw > cap:
            dw = cap
        elif dw < -cap:
            dw = -cap
        return w + dw

    def settling_time(self, delta: float, tolerance: float) -> float:
        """Upper bound on the time to come within ``tolerance`` of a step of size ``delta``.

        Acceleration-limited while ``|error| > max_accel * tau``, exponential after.
        """
        delta = abs(delta)
        if delta <= tolerance or self.tau <= 0.0:
            return 0.0
        knee = self.max_accel * self.tau
        t = 0.0
        if delta > knee:
            t += (delta - knee) / self.max_accel
            delta = knee
        if delta > tolerance:
            t += self.tau * math.log(delta / tolerance)
        return t


class Encoder:
    """Quadrature counts of a wheel from its angle (``cpr`` counts per wheel revolution)."""

    __slots__ = ("angle", "cpr", "scale")

    def __init__(self, cpr: float) -> None:
        self.cpr = cpr
        self.scale = cpr / (2.0 * math.pi)
        self.angle = 0.0

    def count(self) -> int:
        """Whole counts so far (truncated toward minus infinity, like a real counter)."""
        return math.floor(self.angle * self.scale)

    def rad_per_count(self) -> float:
        return 2.0 * math.pi / self.cpr


def integrate_pose(
    x: float, y: float, yaw: float, vx: float, vy: float, wz: float, dt: float
) -> tuple[float, float, float]:
    """Move a pose by a body velocity held for ``dt`` (midpoint heading)."""
    mid = yaw + 0.5 * wz * dt
    c = math.cos(mid)
    s = math.sin(mid)
    return x + (vx * c - vy * s) * dt, y + (vx * s + vy * c) * dt, yaw + wz * dt


def wrap_deg(angle: float) -> float:
    """Degrees wrapped into (-180, 180], in constant time (fmod, not 360-degree steps,
    which never end for 2^60 or infinity). Not finite: NaN (the frame reports what the
    firmware has; fmod would raise)."""
    if not math.isfinite(angle):
        return math.nan
    a = math.fmod(angle, 360.0)
    if a > 180.0:
        a -= 360.0
    elif a <= -180.0:
        a += 360.0
    return a
