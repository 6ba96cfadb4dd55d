"""The Zumo of seed 000 as a seed-002 differential base.

Firmware on ZumoHALWebots' HAL (:mod:`.zumo_hal`): a velocity command
(vx, wz; vy is ignored) becomes left/right wheel speeds in the HAL's unit
(0.01 rad/s), both scaled down together when one would pass ±400 (so the
curvature is kept; **choice**), then rounded; odometry every 20 ms
from the encoder counts (vy reported 0) with the heading of the gyro in
degrees. It beeps when commands resume after a second of silence and
calls ``buzzer.process()`` in every loop, as the HAL asks.

Supervisor JSON lines: ``{"cmd": "press", "button": "A", "ms": 100}``
presses a button; ``{"cmd": "status"}`` asks for a status line now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fwbridge.bridge.sim.kinematics import DiffDrive, wrap_deg
from fwbridge.bridge.sim.models.base import FirmwareBase
from fwbridge.bridge.sim.models.zumo_hal import (
    MAX_SPEED,
    SPEED_SCALE,
    FloorMap,
    Keyboard,
    ZumoBody,
    ZumoButton,
    ZumoBuzzer,
    ZumoLED,
    ZumoMotors,
    ZumoReflectanceSensorArray,
)
from fwbridge.bridge.sim.world import Board
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame

__all__ = ["Zumo", "ZumoParams"]


@dataclass(frozen=True)
class ZumoParams:
    drive: DiffDrive = field(default_factory=DiffDrive)
    cpr: float = 909.72
    floor: FloorMap = field(default_factory=FloorMap)
    odom_period_ms: int = 20
    status_period_ms: int = 100
    wake_beep_after_ms: int = 1000

    @property
    def max_speed(self) -> float:
        """Top straight-line speed, m/s (400 * 0.01 rad/s on the wheel radius)."""
        return MAX_SPEED * SPEED_SCALE * self.drive.wheel_radius


class Zumo(FirmwareBase):
    """Pololu Zumo on ZumoHALWebots' HAL, speaking the seed-002 frames."""

    name = "zumo"

    def __init__(self, params: ZumoParams | None = None) -> None:
        p = params or ZumoParams()
        super().__init__(p.odom_period_ms, p.status_period_ms)
        self.params = p

    def setup(self, board: Board) -> None:
        p = self.params
        self.body = ZumoBody(board.clock, drive=p.drive, cpr=p.cpr, floor=p.floor)
        self.motors = ZumoMotors(self.body)
        self.sensors = ZumoReflectanceSensorArray(self.body)
        self.button_a = ZumoButton(self.body, "A")
        self.button_b = ZumoButton(self.body, "B")
        self.button_c = ZumoButton(self.body, "C")
        self.buzzer = ZumoBuzzer(self.body)
        self.led = ZumoLED(self.body)
        self.keyboard = Keyboard(self.body)
        super().setup(board)

    # -- firmware ---------------------------------------------------------
    def begin(self) -> None:
        self.motors.init()
        self.sensors.init()
        self._last_odom_ms = self.clock.millis()
        self._last_counts = (0, 0)

    def command(self, frame: CmdFrame) -> None:
        p = self.params
        left, right = (w / SPEED_SCALE for w in p.drive.inverse(frame.vx, frame.wz))
        top = max(abs(left), abs(right))
        if top > MAX_SPEED:  # keep the curvature: scale both tracks, as the mecanum does
            left, right = left * MAX_SPEED / top, right * MAX_SPEED / top
        self.motors.setSpeeds(round(left), round(right))
        gap = p.wake_beep_after_ms
        if gap > 0 and (self.cmd_ms < 0 or self.clock.millis() - self.cmd_ms >= gap):
            self.buzzer.playFrequency(880, 40)  # commands resumed

    def control(self, now_ms: int) -> None:
        self.keyboard.getPressedButtons()  # the seed's REQ-4: at the start of every loop
        moving = any(self.motors.speeds)
        self.led.setColor(0, 255 if moving else 0, 0 if moving else 64)  # green: driving
        self.buzzer.process()

    def odometry(self, now_ms: int) -> OdomFrame:
        window = (now_ms - self._last_odom_ms) / 1000.0
        self._last_odom_ms = now_ms
        counts = (self.motors.getCountsLeft(), self.motors.getCountsRight())
        last = self._last_counts
        self._last_counts = counts
        k = 2.0 * math.pi / self.params.cpr / window if window > 0 else 0.0
        v, wz = self.params.drive.forward((counts[0] - last[0]) * k, (counts[1] - last[1]) * k)
        return OdomFrame(v, 0.0, wz, wrap_deg(math.degrees(self.body.yaw)))

    def supervisor_command(self, msg: dict[str, Any]) -> None:
        if msg.get("cmd") == "press" and str(msg.get("button", "")).upper() in ("A", "B", "C"):
            self.body.press(str(msg["button"]), int(msg.get("ms", 100)))
        elif msg.get("cmd") == "key" and isinstance(msg.get("key"), str) and len(msg["key"]) == 1:
            keys = self.body.keys
            (keys.add if msg.get("down", True) else keys.discard)(ord(msg["key"]))
        else:
            super().supervisor_command(msg)

    def status_extra(self) -> dict[str, Any]:
        b = self.body
        return {
            "speeds": list(self.motors.speeds),
            "counts": [self.motors.getCountsLeft(), self.motors.getCountsRight()],
            "sensors": self.sensors.read(),
            "buttons": "".join(k for k, s in b.buttons.items() if s.pressed),
            "buzzer": self.buzzer.isPlaying(),
            "led": list(b.led),
        }

    # -- body ---------------------------------------------------------------
    def physics(self, dt: float) -> None:
        self.body.physics(dt)

    @property
    def pose(self) -> tuple[float, float, float]:
        return self.body.x, self.body.y, self.body.yaw
