"""ZumoHALWebots' HAL (seed 000) over a simulated Zumo body.

The classes keep the HAL's names and semantics:

- :class:`ZumoMotors`: speeds -400..400 become wheel velocities of
  ``speed * 0.01`` rad/s (so ±4 rad/s) on velocity-controlled motors that
  reach their set-point at the next step (Webots' default, infinite
  acceleration); encoder counts integrate the wheel velocity every step;
  ``setBrake`` holds 0; ``setCoast`` is the seed's infinite-position mode:
  the motors are released to velocity control and run free, neither driven
  to a new speed nor braked (Webots' motors have no friction of their own,
  so a free-running wheel keeps the speed it had until the next command).
- :class:`ZumoReflectanceSensorArray`: six downward sensors over a
  :class:`FloorMap`; ``read`` gives raw 0..1023, ``calibrate`` records each
  sensor's minimum and maximum, ``readCalibrated`` scales to 0..1000.
  **choice**: 0 is the most reflective (white) and 1000 the least (black),
  as Pololu's library does; the seed's sentence says the reverse of itself.
  ``read(sensor)`` (the seed's overload) reads one sensor, ``read(values)``
  all six. ``getWhiteLine`` is the position of a white line on a dark floor
  (below).
- :class:`ZumoLED`: the RGB LED, each channel's brightness 0..255.
- :class:`Keyboard`: ``getPressedButtons`` reads the simulator's keyboard
  (call it at the start of every loop, as the seed's REQ-4 says); keys A, B
  and C press the Zumo's buttons while they are held.
- :class:`ZumoButton`: ``isPressed`` (now), ``wasPressed`` (a press began
  since the last call), ``waitForPress``/``waitForRelease`` step simulated
  time until it happens.
- :class:`ZumoBuzzer`: ``playFrequency``/``playNote`` start a sound on the
  speaker; ``isPlaying`` stays true until ``process()`` is called after the
  sound has ended, and ``process`` then steps time once, the pitfall the
  seed documents (call ``process`` in every loop).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import ClassVar, overload

from fwbridge.bridge.sim.clock import SimClock
from fwbridge.bridge.sim.kinematics import DiffDrive

__all__ = [
    "FloorMap",
    "Keyboard",
    "ZumoBody",
    "ZumoButton",
    "ZumoBuzzer",
    "ZumoLED",
    "ZumoMotors",
    "ZumoReflectanceSensorArray",
]

SPEED_SCALE = 0.01  # HAL speed unit -> rad/s
MAX_SPEED = 400
LINE_NOISE = 50  # calibrated readings at or below this are ignored by the line position
LINE_SEEN = 200  # a reading above this means the sensor sees the line
SENSOR_COUNT = 6


@dataclass(frozen=True)
class FloorMap:
    """A white floor with black tape: polylines of ``width`` metres.

    ``darkness(x, y)`` is the fraction of a sensor's spot (radius ``spot``)
    over tape, 0 (white) .. 1 (black), smooth at the tape's edges.
    """

    lines: tuple[tuple[tuple[float, float], ...], ...] = (((-100.0, 0.0), (100.0, 0.0)),)
    width: float = 0.02
    spot: float = 0.004

    @classmethod
    def square(cls, side: float = 1.0, width: float = 0.02) -> FloorMap:
        """A closed square track with a corner at the origin, first side along +x."""
        pts = ((0.0, 0.0), (side, 0.0), (side, side), (0.0, side), (0.0, 0.0))
        return cls((pts,), width)

    def darkness(self, x: float, y: float) -> float:
        best = math.inf
        for line in self.lines:
            for (ax, ay), (bx, by) in itertools.pairwise(line):
                dx, dy = bx - ax, by - ay
                n2 = dx * dx + dy * dy
                t = 0.0 if n2 == 0 else max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / n2))
                d = math.hypot(x - (ax + t * dx), y - (ay + t * dy))
                best = min(best, d)
        cover = (self.width / 2.0 + self.spot - best) / (2.0 * self.spot)
        return max(0.0, min(1.0, cover))


@dataclass
class _ButtonState:
    pressed: bool = False
    presses: int = 0  # press edges so far
    release_ms: int = -1


@dataclass
class ZumoBody:
    """The Zumo's body: two tracks, encoders, sensors, buttons, speaker."""

    clock: SimClock
    drive: DiffDrive = field(default_factory=DiffDrive)
    cpr: float = 909.72  # counts per wheel revolution (12 CPR x 75.81:1)
    floor: FloorMap = field(default_factory=FloorMap)
    sensor_ahead: float = 0.035  # m in front of the axle
    sensor_pitch: float = 0.011  # m between sensors
    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0

    def __post_init__(self) -> None:
        self.setpoint = [0.0, 0.0]  # rad/s, left/right
        self.velocity = [0.0, 0.0]
        self.coasting = False
        self.count_acc = [0.0, 0.0]  # counts, fractional
        self.buttons = {name: _ButtonState() for name in "ABC"}
        self.sound_end_ms = -1
        self.led = [0, 0, 0]  # RGB brightness 0..255
        self.keys: set[int] = set()  # keyboard keys held down (key codes)
        self.key_buttons: set[str] = set()  # buttons held by a key
        self.external = False  # Webots moves the tracks (webots_devices): no own motion
        self.external_raw: list[int] | None = None  # line readings from Webots sensors
        self.sound_log: deque[tuple[int, float, int]] = deque(maxlen=64)  # (t, Hz, ms)
        mid = (SENSOR_COUNT - 1) / 2.0
        # Sensor 0 is the leftmost (+y), as on Pololu's array seen from above.
        self.sensor_offsets = [
            (self.sensor_ahead, (mid - i) * self.sensor_pitch) for i in range(SENSOR_COUNT)
        ]
        # Fixed per-sensor spread so calibration has something to do (deterministic).
        self.sensor_white = [110 + 17 * ((3 * i) % 5) for i in range(SENSOR_COUNT)]
        self.sensor_black = [930 - 23 * ((2 * i + 1) % 4) for i in range(SENSOR_COUNT)]

    def physics(self, dt: float) -> None:
        now = self.clock.millis()
        for state in self.buttons.values():
            if state.pressed and 0 <= state.release_ms <= now:
                state.pressed = False
        if self.external:
            return
        v = self.velocity
        if not self.coasting:  # coasting: free-running, the wheels keep their speed
            v[0], v[1] = self.setpoint
        left, right = v
        if left or right:
            k = self.cpr / (2.0 * math.pi) * dt
            self.count_acc[0] += left * k
            self.count_acc[1] += right * k
            vx, wz = self.drive.forward(left, right)
            mid = self.yaw + 0.5 * wz * dt
            self.x += vx * math.cos(mid) * dt
            self.y += vx * math.sin(mid) * dt
            self.yaw += wz * dt

    def counts(self, side: int) -> int:
        return math.floor(self.count_acc[side])

    def sensor_raw(self, i: int) -> int:
        if self.external_raw is not None:
            return self.external_raw[i]
        ax, ay = self.sensor_offsets[i]
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        dark = self.floor.darkness(self.x + ax * c - ay * s, self.y + ax * s + ay * c)
        white, black = self.sensor_white[i], self.sensor_black[i]
        return max(0, min(1023, round(white + dark * (black - white))))

    def press(self, button: str, ms: int = 100) -> None:
        """A finger on ``button`` for ``ms`` of simulated time (0: until :meth:`release`)."""
        state = self.buttons[button.upper()]
        if not state.pressed:
            state.presses += 1
        state.pressed = True
        state.release_ms = self.clock.millis() + ms if ms > 0 else -1

    def release(self, button: str) -> None:
        self.buttons[button.upper()].pressed = False


class ZumoMotors:
    """``ZumoMotors``: speeds -400..400, encoder counts."""

    def __init__(self, body: ZumoBody) -> None:
        self.body = body
        self.speeds = [0, 0]

    def init(self) -> None:
        self.setSpeeds(0, 0)

    def _set(self, side: int, speed: int) -> None:
        speed = max(-MAX_SPEED, min(MAX_SPEED, int(speed)))
        self.speeds[side] = speed
        self.body.coasting = False
        self.body.setpoint[side] = speed * SPEED_SCALE

    def setLeftSpeed(self, speed: int) -> None:
        self._set(0, speed)

    def setRightSpeed(self, speed: int) -> None:
        self._set(1, speed)

    def setSpeeds(self, left: int, right: int) -> None:
        self._set(0, left)
        self._set(1, right)

    def setBrake(self) -> None:
        self.setSpeeds(0, 0)

    def setCoast(self) -> None:
        self.speeds = [0, 0]
        self.body.coasting = True

    def getCountsLeft(self) -> int:
        return self.body.counts(0)

    def getCountsRight(self) -> int:
        return self.body.counts(1)

    def resetCounts(self) -> None:
        # Keep the fraction: the encoder's phase does not jump when the counter is cleared.
        acc = self.body.count_acc
        acc[0] -= math.floor(acc[0])
        acc[1] -= math.floor(acc[1])


class ZumoReflectanceSensorArray:
    """``ZumoReflectanceSensorArray``: six sensors, raw 0..1023, calibrated 0..1000."""

    def __init__(self, body: ZumoBody) -> None:
        self.body = body
        self.calibrated_min = [1023] * SENSOR_COUNT
        self.calibrated_max = [0] * SENSOR_COUNT
        self._last_white = 0

    def init(self) -> None:
        self.calibrated_min = [1023] * SENSOR_COUNT
        self.calibrated_max = [0] * SENSOR_COUNT

    @overload
    def read(self, values: int, /) -> int: ...

    @overload
    def read(self, values: list[int] | None = None, /) -> list[int]: ...

    def read(self, values: list[int] | int | None = None, /) -> list[int] | int:
        """All six raw readings (filled into ``values`` when given); ``read(sensor)``
        with a sensor index, the seed's ``read(uint8_t sensor)``: that one reading."""
        if isinstance(values, int):
            return self.body.sensor_raw(values)
        raw = [self.body.sensor_raw(i) for i in range(SENSOR_COUNT)]
        if values is not None:
            values[:] = raw
        return raw

    def readSensor(self, sensor: int) -> int:
        return self.body.sensor_raw(sensor)

    def getWhiteLine(self) -> int:
        """Where a white line is under the array, 0 (under sensor 0) .. 5000 (sensor 5).

        The seed's formula over the calibrated readings ``c_i`` (0 white .. 1000
        black), each turned into whiteness ``w_i = 1000 - c_i``::

            position = sum(1000 * i * w_i) / sum(w_i)   over the w_i > 50

        (integer division). When no sensor sees the line (every ``w_i <= 200``)
        it is 0 or 5000, the side it was last seen on.
        """
        white = [1000 - self.readCalibrated(i) for i in range(SENSOR_COUNT)]
        if not any(w > LINE_SEEN for w in white):
            return 0 if self._last_white < (SENSOR_COUNT - 1) * 500 else (SENSOR_COUNT - 1) * 1000
        total = sum(w for w in white if w > LINE_NOISE)
        self._last_white = sum(1000 * i * w for i, w in enumerate(white) if w > LINE_NOISE) // total
        return self._last_white

    def calibrate(self) -> None:
        """Widen each sensor's recorded range with one reading (call it while sweeping)."""
        for i, v in enumerate(self.read()):
            self.calibrated_min[i] = min(self.calibrated_min[i], v)
            self.calibrated_max[i] = max(self.calibrated_max[i], v)

    def readCalibrated(self, sensor: int) -> int:
        lo, hi = self.calibrated_min[sensor], self.calibrated_max[sensor]
        if hi <= lo:
            return 0  # not calibrated over a contrast yet
        v = (self.body.sensor_raw(sensor) - lo) * 1000 // (hi - lo)
        return max(0, min(1000, v))

    def readLine(self, values: list[int] | None = None, white_line: bool = False) -> int:
        """Pololu's line position 0..5000 (weighted mean of calibrated readings)."""
        cal = [self.readCalibrated(i) for i in range(SENSOR_COUNT)]
        if white_line:
            cal = [1000 - v for v in cal]
        if values is not None:
            values[:] = cal
        total = sum(v for v in cal if v > 50)
        if total == 0:
            return 0
        return sum(1000 * i * v for i, v in enumerate(cal) if v > 50) // total


class ZumoButton:
    """``ZumoButton``: one of A, B, C."""

    A, B, C = "A", "B", "C"

    def __init__(self, body: ZumoBody, which: str = "A") -> None:
        self.body = body
        self.which = which.upper()
        self._state = body.buttons[self.which]
        self._seen = self._state.presses

    def isPressed(self) -> bool:
        return self._state.pressed

    def wasPressed(self) -> bool:
        """True once for each press that began since the last call."""
        if self._state.presses != self._seen:
            self._seen = self._state.presses
            return True
        return False

    def waitForPress(self) -> None:
        clock = self.body.clock
        while not self._state.pressed:
            if clock.step() == -1:
                return
        self._seen = self._state.presses

    def waitForRelease(self) -> None:
        clock = self.body.clock
        while self._state.pressed:
            if clock.step() == -1:
                return

    def waitForButton(self) -> None:
        self.waitForPress()
        self.waitForRelease()


class ZumoBuzzer:
    """``ZumoBuzzer`` over a Webots-like speaker."""

    def __init__(self, body: ZumoBody) -> None:
        self.body = body
        self._playing = False

    def playFrequency(self, frequency: float, duration_ms: int, volume: int = 15) -> None:
        now = self.body.clock.millis()
        self.body.sound_end_ms = now + int(duration_ms)
        self.body.sound_log.append((now, float(frequency), int(duration_ms)))
        self._playing = volume > 0 and duration_ms > 0

    def playNote(self, note: int, duration_ms: int, volume: int = 15) -> None:
        """Pololu note numbers: octave * 12 + semitone from C; A4 (440 Hz) is 57; 255 is silence."""
        if note == 255:
            self.playFrequency(1000, duration_ms, 0)
        else:
            self.playFrequency(440.0 * 2.0 ** ((note - 57) / 12.0), duration_ms, volume)

    def stopPlaying(self) -> None:
        self.body.sound_end_ms = self.body.clock.millis()

    def isSoundPlaying(self) -> bool:
        """The speaker's own state (Webots' ``Speaker.isSoundPlaying``)."""
        return self.body.clock.millis() < self.body.sound_end_ms

    def isPlaying(self) -> bool:
        """The HAL's flag: cleared only by :meth:`process` once the sound has ended."""
        return self._playing

    def process(self) -> None:
        if self._playing and not self.isSoundPlaying():
            self.body.clock.step()  # as the HAL does, to let the simulator finish the sound
            self._playing = False


class ZumoLED:
    """``ZumoLED``: the RGB LED, each channel's brightness 0..255 (0: off)."""

    def __init__(self, body: ZumoBody) -> None:
        self.body = body

    def _set(self, channel: int, value: int) -> None:
        self.body.led[channel] = max(0, min(255, int(value)))

    def setRed(self, value: int) -> None:
        self._set(0, value)

    def setGreen(self, value: int) -> None:
        self._set(1, value)

    def setBlue(self, value: int) -> None:
        self._set(2, value)

    def setColor(self, red: int, green: int, blue: int) -> None:
        for k, v in enumerate((red, green, blue)):
            self._set(k, v)

    def off(self) -> None:
        self.setColor(0, 0, 0)

    def getColor(self) -> tuple[int, int, int]:
        r, g, b = self.body.led
        return r, g, b

    @property
    def rgb(self) -> int:
        """0xRRGGBB, the value a Webots RGB ``LED.set`` takes."""
        r, g, b = self.body.led
        return r << 16 | g << 8 | b


class Keyboard:
    """``Keyboard::getPressedButtons``: the simulator's keyboard drives the buttons.

    Keys ``A``, ``B``, ``C`` (upper or lower case) hold the button of that name
    pressed while they are down: a key going down is one press, going up its
    release. Call it at the start of every loop.
    """

    KEYS: ClassVar[dict[int, str]] = {ord("A"): "A", ord("B"): "B", ord("C"): "C",
                                      ord("a"): "A", ord("b"): "B", ord("c"): "C"}

    def __init__(self, body: ZumoBody) -> None:
        self.body = body

    def getPressedButtons(self) -> tuple[str, ...]:
        """Refresh the buttons from the keys held now; the buttons held by keys."""
        body = self.body
        held = {self.KEYS[k] for k in body.keys if k in self.KEYS}
        for name in sorted(held - body.key_buttons):
            body.press(name, ms=0)
        for name in sorted(body.key_buttons - held):
            body.release(name)
        body.key_buttons = held
        return tuple(sorted(held))
