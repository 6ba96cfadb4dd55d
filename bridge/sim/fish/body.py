"""The robot fish's body in a pool: pose, two forward sonars, the buoyancy tank.

A kinematic model, enough to close the loop of the free mode, not a fluid
simulation:

- forward speed follows (first order, ``speed_tau``) a thrust proportional
  to how fast the two power servos swing (mean |rate|, deg/s);
- yaw rate: the direction servo's angle (positive = head turned left,
  counter-clockwise) plus the fins: fins beating on one side turn the fish
  to the other side, as the patent describes (left fins for a right turn);
- the ballast tank (a pump filling or draining it, flow meters counting
  both ways) makes the fish sink above half full and rise below; depth is
  read by the water-pressure sensor;
- two sonars under the head, ``sonar_spread`` apart (20° in the patent),
  range to the nearest obstacle (circles) or pool wall along each beam,
  infinite beyond ``sonar_range`` (no echo). No noise: deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from fwbridge.protocols.errors import ConfigError

__all__ = ["FishBody", "FishBodyParams", "Obstacle", "ray_range"]

MAX_OBSTACLES = 64
PA_PER_M = 9806.65  # hydrostatic pressure of fresh water per metre
SURFACE_HPA = 1013.25


@dataclass(frozen=True, slots=True)
class Obstacle:
    """A vertical cylinder in the pool (x, y, radius in m)."""

    x: float
    y: float
    r: float


@dataclass(frozen=True)
class FishBodyParams:
    pool_half_x: float = 5.0  # m: the pool spans -5..5
    pool_half_y: float = 3.0
    pool_depth: float = 3.0  # deeper than the "too deep" scene (2 m)
    head_offset: float = 0.15  # m: sonars ahead of the body centre
    speed_per_dps: float = 0.00125  # m/s per deg/s of power-servo swing (240 deg/s: 0.3 m/s)
    speed_tau: float = 0.5  # s
    yaw_per_degree: float = 0.02  # rad/s per degree of the direction servo (30°: 0.6 rad/s)
    yaw_per_fin_dps: float = 0.002  # rad/s per deg/s of fin-beat difference
    sonar_spread: float = 20.0  # degrees between the two beams
    sonar_range: float = 4.0  # m
    tank_ml: float = 500.0
    pump_ml_s: float = 100.0
    sink_speed: float = 0.1  # m/s with the tank full (rise as fast when empty)


def ray_range(x: float, y: float, heading: float, obstacles: list[Obstacle],
              half_x: float, half_y: float) -> float:
    """Distance along a beam from (x, y) to the first circle or wall it meets."""
    dx, dy = math.cos(heading), math.sin(heading)
    best = math.inf
    for wall, d in ((half_x - x, dx), (-half_x - x, dx), (half_y - y, dy), (-half_y - y, dy)):
        if d and wall / d > 0:
            best = min(best, wall / d)
    for ob in obstacles:
        ox, oy = ob.x - x, ob.y - y
        along = ox * dx + oy * dy
        across2 = ox * ox + oy * oy - along * along
        if across2 > ob.r * ob.r:
            continue
        t = along - math.sqrt(ob.r * ob.r - across2)
        if t < 0 and along + math.sqrt(ob.r * ob.r - across2) > 0:
            t = 0.0  # the sonar is inside the obstacle
        if t >= 0:
            best = min(best, t)
    return best


class FishBody:
    """Pose, speed, depth and tank of the fish; :meth:`step` moves it."""

    def __init__(self, params: FishBodyParams | None = None) -> None:
        self.p = params or FishBodyParams()
        self.x = self.y = self.yaw = 0.0
        self.speed = 0.0
        self.depth = 0.5
        self.tank_ml = self.p.tank_ml / 2  # neutral
        self.tank_target: float | None = None  # fraction the pump works towards
        self.pump = 0  # -1 draining, 0 off, 1 filling
        self.water_in_ml = 0.0
        self.water_out_ml = 0.0
        self.obstacles: list[Obstacle] = []

    def add_obstacle(self, ob: Obstacle) -> None:
        if len(self.obstacles) >= MAX_OBSTACLES:  # bounded: a script cannot grow it forever
            raise ConfigError(f"at most {MAX_OBSTACLES} obstacles")
        self.obstacles.append(ob)

    @property
    def fill(self) -> float:
        return self.tank_ml / self.p.tank_ml

    @property
    def pressure_hpa(self) -> float:
        return SURFACE_HPA + self.depth * PA_PER_M / 100.0

    def sonars(self) -> tuple[float, float]:
        """(left, right) ranges in m; ``inf`` when nothing is within ``sonar_range``."""
        p = self.p
        hx = self.x + p.head_offset * math.cos(self.yaw)
        hy = self.y + p.head_offset * math.sin(self.yaw)
        half = math.radians(p.sonar_spread / 2)
        out = []
        for side in (half, -half):
            r = ray_range(hx, hy, self.yaw + side, self.obstacles, p.pool_half_x, p.pool_half_y)
            out.append(r if r <= p.sonar_range else math.inf)
        return out[0], out[1]

    def step(self, dt: float, angles: Mapping[int, float], rates: Mapping[int, float]) -> None:
        """Move by ``dt`` s given the servos' angles (deg) and rates (deg/s) by module ID."""
        p = self.p
        swing = (abs(rates.get(1, 0.0)) + abs(rates.get(2, 0.0))) / 2
        target = p.speed_per_dps * swing
        self.speed += (target - self.speed) * (1.0 - math.exp(-dt / p.speed_tau))
        left = abs(rates.get(4, 0.0)) + abs(rates.get(6, 0.0))
        right = abs(rates.get(5, 0.0)) + abs(rates.get(7, 0.0))
        wz = p.yaw_per_degree * angles.get(3, 0.0) + p.yaw_per_fin_dps * (right - left) / 2
        mid = self.yaw + 0.5 * wz * dt
        nx = self.x + self.speed * math.cos(mid) * dt
        ny = self.y + self.speed * math.sin(mid) * dt
        # The pool walls stop the body (it stays inside, with its head clear of the wall).
        lim_x, lim_y = p.pool_half_x - p.head_offset, p.pool_half_y - p.head_offset
        self.x = min(max(nx, -lim_x), lim_x)
        self.y = min(max(ny, -lim_y), lim_y)
        self.yaw += wz * dt
        self._tank(dt)
        self.depth = min(max(self.depth + p.sink_speed * (2 * self.fill - 1) * dt, 0.0),
                         p.pool_depth)

    def _tank(self, dt: float) -> None:
        p = self.p
        self.pump = 0
        if self.tank_target is None:
            return
        want = min(max(self.tank_target, 0.0), 1.0) * p.tank_ml
        flow = min(p.pump_ml_s * dt, abs(want - self.tank_ml))
        if flow <= 1e-9:
            return
        if want > self.tank_ml:
            self.tank_ml += flow
            self.water_in_ml += flow
            self.pump = 1
        else:
            self.tank_ml -= flow
            self.water_out_ml += flow
            self.pump = -1

    @property
    def heading_deg(self) -> float:
        """The gyro heading, degrees in (-180, 180]."""
        d = math.degrees(math.atan2(math.sin(self.yaw), math.cos(self.yaw)))
        return 180.0 if d == -180.0 else d

    def heading_rounded(self, digits: int) -> float:
        """:attr:`heading_deg` rounded to ``digits`` decimals and still in (-180, 180]:
        -179.996 rounds to 180.00, not to -180.00."""
        d = round(self.heading_deg, digits)
        return 180.0 if d <= -180.0 else d
