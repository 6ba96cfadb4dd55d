"""The Zumo's and the mecanum base's motors, encoders, sensors and speaker on Webots devices.

When the robot node of a Webots world has the devices below, the controller
adapter (:mod:`fwbridge.bridge.sim.webots_adapter`) runs the same model code
on them: after every step the model's motor set-points go to Webots motors
(``Motor.setPosition(inf)`` once, velocity control, then
``Motor.setVelocity``), and before the model's loop its encoders, line
sensors, buttons, keyboard and heading are read from Webots
(``PositionSensor.getValue``, ``DistanceSensor.getValue``,
``TouchSensor.getValue``, ``Keyboard.getKey``, ``InertialUnit``); the LED
and the buzzer play on ``LED.set`` and ``Speaker.playSound``. Webots' physics
then moves the robot; the model's own body only keeps its bookkeeping.

Device names (**choice**; the motor and position-sensor names of the Zumo are
those of the Zumo32U4 Webots model of the ZumoHALWebots projects, the rest
follow the same pattern):

=============  =====================================================================
 model          devices
=============  =====================================================================
 zumo           ``motor_left``, ``motor_right`` (RotationalMotor, rad/s: the HAL's
                speed x 0.01), ``position_sensor_left``/``_right``, line sensors
                ``lightsensor_0`` .. ``lightsensor_5`` (DistanceSensor, lookup table
                giving 0..1023 ADC counts; 0 is sensor 0, the leftmost), buttons
                ``button_a``/``_b``/``_c`` (TouchSensor, bumper), ``led`` (RGB LED,
                0xRRGGBB), ``speaker``, ``inertial unit`` (optional), the keyboard
 mecanum        ``wheel_fl``, ``wheel_fr``, ``wheel_rl``, ``wheel_rr`` (RotationalMotor,
                rad/s), ``wheel_fl_sensor`` .. ``wheel_rr_sensor`` (PositionSensor),
                ``inertial unit`` (optional: otherwise the heading is integrated
                from the wheels)
=============  =====================================================================

A model whose devices are not all there keeps its own body, as before (the
serial link alone is Webots').
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

__all__ = ["MecanumDevices", "ZumoDevices", "devices_for"]

#: The sound file the buzzer plays, at a pitch of frequency / 1000 Hz (Webots'
#: ``Speaker.playSound`` takes files; ZumoHALWebots copies its sounds next to
#: the controller).
BUZZER_SOUND = "sounds/buzzer_1000Hz.wav"


def _motor(board: Any, name: str) -> Any:
    motor = board.getDevice(name)
    if motor is not None:
        motor.setPosition(math.inf)  # velocity control
        motor.setVelocity(0.0)
    return motor


def _sensor(board: Any, name: str, period: int) -> Any:
    dev = board.getDevice(name)
    if dev is not None:
        dev.enable(period)
    return dev


def _value(dev: Any, default: float = 0.0) -> float:
    v = float(dev.getValue())
    return default if math.isnan(v) else v


def _set_velocity(motor: Any, value: float) -> None:
    top = float(motor.getMaxVelocity())
    motor.setVelocity(max(-top, min(top, value)))


class ZumoDevices:
    """The Zumo's HAL body on Webots devices."""

    keeps_physics = True  # the body's own step still times button releases
    LINE = tuple(f"lightsensor_{i}" for i in range(6))
    BUTTONS: ClassVar[dict[str, str]] = {"A": "button_a", "B": "button_b", "C": "button_c"}

    def __init__(self, board: Any, model: Any) -> None:
        self.model = model
        self.body = body = model.body
        period = int(board.getBasicTimeStep())
        self.motors = [_motor(board, "motor_left"), _motor(board, "motor_right")]
        self.encoders = [_sensor(board, "position_sensor_left", period),
                         _sensor(board, "position_sensor_right", period)]
        self.line = [_sensor(board, n, period) for n in self.LINE]
        self.buttons = {k: _sensor(board, n, period) for k, n in self.BUTTONS.items()}
        self.led = board.getDevice("led")
        self.speaker = board.getDevice("speaker")
        self.imu = _sensor(board, "inertial unit", period)
        get_keyboard = getattr(board.robot, "getKeyboard", None) if hasattr(board, "robot") \
            else None
        self.keyboard = get_keyboard() if get_keyboard is not None else None
        if self.keyboard is not None:
            self.keyboard.enable(period)
        self._angles: list[float | None] = [None, None]
        self._touched: set[str] = set()
        self._last_sound = body.sound_log[-1] if body.sound_log else None
        self.complete = all(d is not None for d in (*self.motors, *self.encoders))
        if self.complete:
            body.external = True  # Webots moves the tracks; the body keeps the books

    def sense(self, dt: float) -> None:
        """Before the model's loop: what Webots measured during the step."""
        body = self.body
        k = body.cpr / (2.0 * math.pi)
        for i, enc in enumerate(self.encoders):
            angle = _value(enc, math.nan)
            if math.isnan(angle):
                continue
            last = self._angles[i]
            self._angles[i] = angle
            if last is None:
                continue
            body.count_acc[i] += (angle - last) * k
            body.velocity[i] = (angle - last) / dt if dt > 0 else 0.0
        left, right = body.velocity
        vx, wz = body.drive.forward(left, right)
        if self.imu is not None and not math.isnan(self.imu.getRollPitchYaw()[2]):
            yaw = self.imu.getRollPitchYaw()[2]
            mid = 0.5 * (body.yaw + yaw)
        else:
            yaw = body.yaw + wz * dt
            mid = body.yaw + 0.5 * wz * dt
        body.x += vx * math.cos(mid) * dt
        body.y += vx * math.sin(mid) * dt
        body.yaw = yaw
        if all(s is not None for s in self.line):
            body.external_raw = [max(0, min(1023, round(_value(s)))) for s in self.line]
        for name, dev in self.buttons.items():
            if dev is None:
                continue
            touched = _value(dev) > 0.5
            if touched and name not in self._touched:
                body.press(name, ms=0)
                self._touched.add(name)
            elif not touched and name in self._touched:
                body.release(name)
                self._touched.discard(name)
        if self.keyboard is not None:
            keys: set[int] = set()
            while (key := self.keyboard.getKey()) != -1 and len(keys) < 16:
                keys.add(int(key))
            body.keys = keys

    def actuate(self) -> None:
        """After the model's loop: set-points, LED and new sounds to Webots."""
        body = self.body
        if self.complete:
            # Coasting runs free: the velocity it has, no new drive, no brake.
            wanted = body.velocity if body.coasting else body.setpoint
            for motor, v in zip(self.motors, wanted):
                _set_velocity(motor, v)
        if self.led is not None:
            r, g, b = body.led
            self.led.set(r << 16 | g << 8 | b)
        log = body.sound_log
        if log and log[-1] is not self._last_sound:  # a sound started during the loop
            self._last_sound = log[-1]
            _t, freq, _ms = log[-1]
            spk = self.speaker
            if spk is not None:
                type(spk).playSound(spk, spk, BUZZER_SOUND, 1.0, freq / 1000.0, 0.0, False)


class MecanumDevices:
    """The mecanum base's four motors and encoders on Webots devices."""

    keeps_physics = False
    WHEELS = ("wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr")

    def __init__(self, board: Any, model: Any) -> None:
        self.model = model
        period = int(board.getBasicTimeStep())
        self.motors = [_motor(board, n) for n in self.WHEELS]
        self.encoders = [_sensor(board, f"{n}_sensor", period) for n in self.WHEELS]
        self.imu = _sensor(board, "inertial unit", period)
        self._angles: list[float | None] = [None] * 4
        self.complete = all(d is not None for d in (*self.motors, *self.encoders))

    def sense(self, dt: float) -> None:
        m = self.model
        for i, enc in enumerate(self.encoders):
            angle = _value(enc, math.nan)
            if math.isnan(angle):
                continue
            last = self._angles[i]
            self._angles[i] = angle
            if last is None:
                continue
            m.encoders[i].angle += angle - last
            m.wheels[i] = (angle - last) / dt if dt > 0 else 0.0
        vx, vy, wz = m.kin.forward(*m.wheels)
        if self.imu is not None and not math.isnan(self.imu.getRollPitchYaw()[2]):
            yaw = self.imu.getRollPitchYaw()[2]
            mid = 0.5 * (m.yaw + yaw)
        else:
            yaw = m.yaw + wz * dt
            mid = m.yaw + 0.5 * wz * dt
        c, s = math.cos(mid), math.sin(mid)
        m.x += (vx * c - vy * s) * dt
        m.y += (vx * s + vy * c) * dt
        m.yaw = yaw

    def actuate(self) -> None:
        for motor, v in zip(self.motors, self.model.targets):
            _set_velocity(motor, v)


def devices_for(board: Any, model: Any) -> ZumoDevices | MecanumDevices | None:
    """The device layer of ``model`` when the robot node has all its motors and encoders."""
    name = getattr(model, "name", "")
    layer: ZumoDevices | MecanumDevices
    if name == "zumo":
        layer = ZumoDevices(board, model)
    elif name == "mecanum":
        layer = MecanumDevices(board, model)
    else:
        return None
    return layer if layer.complete else None
