"""The fish's light sensors and laser receivers (the patent's visible-light and laser sensing).

The patent mounts visible-light sensors on both sides of the body (the fish
compares the two to swim towards or away from light) and laser receivers on
the body (a user points a modulated laser at one of them to trigger an
action). Here: point lights in the pool (``Light``, lux at 1 m) seen by one
sensor per side, each weighting a light by the cosine between its side's
normal and the direction to the light, over the distance squared; a laser
hit on receiver ``k`` is seen for ``LASER_HOLD`` seconds. Both feed the
scenes of the user configuration (sensors 5-7 of PROTOCOLS.md 6.2).
Deterministic, no noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fwbridge.protocols.errors import ConfigError

__all__ = ["LASER_HOLD", "LASER_RECEIVERS", "MAX_LIGHTS", "Light", "Senses"]

MAX_LIGHTS = 16
LASER_RECEIVERS = 4  # receivers 0..3
LASER_HOLD = 0.5  # s a hit stays seen


@dataclass(frozen=True, slots=True)
class Light:
    """A point light in the pool: position (m), illuminance at 1 m (lux)."""

    x: float
    y: float
    lux_at_1m: float


@dataclass
class Senses:
    lights: list[Light] = field(default_factory=list)
    _laser_until: dict[int, float] = field(default_factory=dict)

    def add_light(self, light: Light) -> None:
        if len(self.lights) >= MAX_LIGHTS:  # bounded
            raise ConfigError(f"at most {MAX_LIGHTS} lights")
        if not all(math.isfinite(v) for v in (light.x, light.y, light.lux_at_1m)):
            raise ConfigError("a light needs finite x, y and lux")
        self.lights.append(light)

    def light_levels(self, x: float, y: float, yaw: float) -> tuple[float, float]:
        """(left, right) illuminance in lux at the fish's two side sensors."""
        out = []
        for side in (1.0, -1.0):
            normal = yaw + side * math.pi / 2.0
            lux = 0.0
            for li in self.lights:
                dx, dy = li.x - x, li.y - y
                d2 = max(dx * dx + dy * dy, 0.01)
                cos = (dx * math.cos(normal) + dy * math.sin(normal)) / math.sqrt(d2)
                if cos > 0:
                    lux += li.lux_at_1m * cos / d2
            out.append(lux)
        return out[0], out[1]

    def laser_hit(self, receiver: int, now: float) -> None:
        if not 0 <= receiver < LASER_RECEIVERS:
            raise ConfigError(f"laser receiver {receiver} is not 0..{LASER_RECEIVERS - 1}")
        self._laser_until[receiver] = now + LASER_HOLD

    def laser(self, now: float) -> int:
        """The receiver lit now (the lowest, when several), -1 for none."""
        lit = [k for k, until in self._laser_until.items() if now < until]
        return min(lit) if lit else -1
