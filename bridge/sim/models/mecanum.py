"""The mecanum STM32 base of seed 002, as a simulated firmware and body.

Firmware: a velocity command (vx, vy, wz) goes through mecanum inverse
kinematics to four wheel set-points; if one exceeds the motors' top speed,
all four are scaled down together so the direction of travel is kept
(**choice**: the seed does not say). Every ``odom_period_ms`` (20 ms, 50 Hz)
it measures each wheel's speed from its encoder counts over the window,
applies forward kinematics and sends ``vx, vy, wz`` with the IMU yaw in
degrees (the wire format of PROTOCOLS.md 1). A command watchdog zeroes the
wheel set-points after ``cmd_timeout_ms`` (500 ms) without a valid command,
so a base whose host died stops; 0 turns it off, which is the seed
firmware's behaviour (it keeps the last command for ever).

Body: four motors with a first-order response, an acceleration limit and a
speed limit (:class:`~bridge.sim.kinematics.MotorModel`), no wheel slip, so
the body moves with the forward kinematics of the true wheel speeds; the
IMU reads the true yaw (no bias, no noise: deterministic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fwbridge.bridge.sim.kinematics import Encoder, Mecanum, MotorModel, wrap_deg
from fwbridge.bridge.sim.models.base import FirmwareBase
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame

__all__ = ["WATCHDOG_MS", "MecanumBase", "MecanumParams"]

#: Default command silence after which the firmware stops the motors, ms.
WATCHDOG_MS = 500


@dataclass(frozen=True)
class MecanumParams:
    geometry: Mecanum = field(default_factory=Mecanum)
    motor: MotorModel = field(default_factory=MotorModel)
    cpr: float = 1320.0  # encoder counts per wheel revolution (11 PPR x 30:1 x 4 edges)
    odom_period_ms: int = 20
    status_period_ms: int = 100
    cmd_timeout_ms: int = WATCHDOG_MS  # 0: off (the seed firmware keeps the last command)

    @property
    def max_speed(self) -> float:
        """Top straight-line speed, m/s."""
        return self.motor.max_speed * self.geometry.wheel_radius

    def velocity_tolerance(self) -> float:
        """Bound on the odometry's speed error from encoder quantisation (m/s).

        Each wheel's speed is known to one count per window; forward
        kinematics averages four wheels with weight r/4 each.
        """
        window = self.odom_period_ms / 1000.0
        return self.geometry.wheel_radius * (2.0 * math.pi / self.cpr) / window


class MecanumBase(FirmwareBase):
    """Mecanum STM32 base: seed-002 firmware over a four-motor body."""

    name = "mecanum"

    def __init__(self, params: MecanumParams | None = None) -> None:
        p = params or MecanumParams()
        super().__init__(p.odom_period_ms, p.status_period_ms)
        self.params = p
        self.kin = p.geometry
        self.motor = p.motor
        self.wheels = [0.0, 0.0, 0.0, 0.0]  # true speeds, rad/s
        self.targets = [0.0, 0.0, 0.0, 0.0]
        self.encoders = [Encoder(p.cpr) for _ in range(4)]
        self._last_counts = [0, 0, 0, 0]
        self._last_odom_ms = 0
        self.cmd_timeout_ms = p.cmd_timeout_ms  # the watchdog; settable (sim://…?watchdog=MS)
        self.watchdog_trips = 0

    # -- firmware ---------------------------------------------------------
    def begin(self) -> None:
        self._last_odom_ms = self.clock.millis()
        self._last_counts = [e.count() for e in self.encoders]

    def command(self, frame: CmdFrame) -> None:
        targets = self.kin.inverse(frame.vx, frame.vy, frame.wz)
        top = max(abs(w) for w in targets)
        limit = self.motor.max_speed
        scale = limit / top if top > limit else 1.0
        self.targets = [w * scale for w in targets]

    def control(self, now_ms: int) -> None:
        timeout = self.cmd_timeout_ms
        if (
            timeout > 0
            and self.cmd_ms >= 0
            and now_ms - self.cmd_ms > timeout
            and any(self.targets)
        ):
            self.targets = [0.0, 0.0, 0.0, 0.0]  # the host went quiet: stop
            self.watchdog_trips += 1

    def odometry(self, now_ms: int) -> OdomFrame:
        window = (now_ms - self._last_odom_ms) / 1000.0
        self._last_odom_ms = now_ms
        counts = [e.count() for e in self.encoders]
        last = self._last_counts
        self._last_counts = counts
        k = self.encoders[0].rad_per_count() / window if window > 0 else 0.0
        fl, fr, rl, rr = ((c - p) * k for c, p in zip(counts, last))
        vx, vy, wz = self.kin.forward(fl, fr, rl, rr)
        return OdomFrame(vx, vy, wz, wrap_deg(math.degrees(self.yaw)))

    def status_extra(self) -> dict[str, Any]:
        return {
            "wheels": [round(w, 5) for w in self.wheels],
            "counts": [e.count() for e in self.encoders],
            "watchdog_ms": self.cmd_timeout_ms,
            "watchdog_trips": self.watchdog_trips,
        }

    # -- body ---------------------------------------------------------------
    def physics(self, dt: float) -> None:
        step = self.motor.step
        w = self.wheels
        t = self.targets
        enc = self.encoders
        for i in range(4):
            wi = w[i]
            if wi != t[i]:
                wi = w[i] = step(wi, t[i], dt)
            if wi:
                enc[i].angle += wi * dt
        fl, fr, rl, rr = w
        if fl or fr or rl or rr:
            vx, vy, wz = self.kin.forward(fl, fr, rl, rr)
            mid = self.yaw + 0.5 * wz * dt
            c = math.cos(mid)
            s = math.sin(mid)
            self.x += (vx * c - vy * s) * dt
            self.y += (vx * s + vy * c) * dt
            self.yaw += wz * dt
