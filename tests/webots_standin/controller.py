"""A stand-in for Webots' Python ``controller`` module: the subset fwbridge's adapter uses.

Written from the Webots reference manual (Robot, Emitter, Receiver), not
from fwbridge's own emulation, so the adapter is checked against the
documented API rather than against itself:

- ``Robot``: ``getBasicTimeStep()``, ``step(ms)`` (-1 at the end),
  ``getDevice(name)`` (None when absent), ``getTime()``, ``getName()``;
- ``Emitter``: ``send(data)`` -> 1, or 0 when ``bufferSize`` would be
  exceeded; ``setChannel``/``getChannel``/``getBufferSize``;
- ``Receiver``: ``enable(period)``, ``disable()``, ``getSamplingPeriod()``,
  ``setChannel``/``getChannel``, ``getQueueLength()``, ``getDataSize()``,
  ``getBytes()`` (R2023b), ``getData()`` (older), ``nextPacket()``;
- ``Motor`` (``setPosition``, ``setVelocity``, ``getVelocity``,
  ``getMaxVelocity``, ``getTargetPosition``; ``setPosition(inf)`` is velocity
  control), ``PositionSensor``, ``DistanceSensor``, ``TouchSensor``,
  ``InertialUnit`` (``enable``, ``getValue``/``getRollPitchYaw``; nothing before
  ``enable``), ``LED`` (``set``/``get``), ``Speaker`` (static ``playSound``,
  ``isSoundPlaying``, ``stop``), ``Keyboard`` (``Robot.getKeyboard()``,
  ``enable``, ``getKey`` until -1).

A packet sent before a step is delivered during that step to every enabled
receiver on the channel of other robots. The test owns a
:class:`Simulator` (:func:`install`) and plays the other robots as peers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_simulator: Simulator | None = None


def install(sim: Simulator) -> None:
    global _simulator
    _simulator = sim


class Device:
    def __init__(self, name: str, owner: object) -> None:
        self._name = name
        self._owner = owner

    def getName(self) -> str:
        return self._name


class Emitter(Device):
    CHANNEL_BROADCAST = -1

    def __init__(self, name: str, owner: object, channel: int = 0, bufferSize: int = -1) -> None:
        super().__init__(name, owner)
        self._channel = channel
        self._buffer_size = bufferSize
        self._queue: list[bytes] = []

    def send(self, data: bytes) -> int:
        if self._buffer_size != -1 and sum(map(len, self._queue)) + len(data) > self._buffer_size:
            return 0
        self._queue.append(bytes(data))
        return 1

    def setChannel(self, channel: int) -> None:
        self._channel = channel

    def getChannel(self) -> int:
        return self._channel

    def getBufferSize(self) -> int:
        return self._buffer_size


class Receiver(Device):
    def __init__(self, name: str, owner: object, channel: int = 0) -> None:
        super().__init__(name, owner)
        self._channel = channel
        self._period = 0
        self._queue: list[bytes] = []

    def enable(self, samplingPeriod: int) -> None:
        self._period = samplingPeriod

    def disable(self) -> None:
        self._period = 0

    def getSamplingPeriod(self) -> int:
        return self._period

    def setChannel(self, channel: int) -> None:
        self._channel = channel

    def getChannel(self) -> int:
        return self._channel

    def getQueueLength(self) -> int:
        return len(self._queue)

    def getDataSize(self) -> int:
        return len(self._queue[0])

    def getBytes(self) -> bytes:
        return self._queue[0]

    def getData(self) -> bytes:
        return self._queue[0]

    def nextPacket(self) -> None:
        self._queue.pop(0)


class Motor(Device):
    """``Motor`` (RotationalMotor): position control, or velocity control after
    ``setPosition(inf)``; ``setVelocity`` above ``getMaxVelocity()`` is clamped (Webots
    warns). The simulator moves it each step; its ``PositionSensor`` reads it."""

    def __init__(self, name: str, owner: object, max_velocity: float = 10.0) -> None:
        super().__init__(name, owner)
        self._max = max_velocity
        self._target = 0.0
        self._velocity = max_velocity  # Webots' default velocity: maxVelocity
        self.position = 0.0
        self.warnings = 0

    def setPosition(self, position: float) -> None:
        self._target = float(position)

    def getTargetPosition(self) -> float:
        return self._target

    def setVelocity(self, velocity: float) -> None:
        v = float(velocity)
        if abs(v) > self._max:
            self.warnings += 1  # "too big requested velocity": clamped
            v = math.copysign(self._max, v)
        self._velocity = v

    def getVelocity(self) -> float:
        return self._velocity

    def getMaxVelocity(self) -> float:
        return self._max

    def _advance(self, dt: float) -> None:
        if math.isinf(self._target):  # velocity control
            self.position += self._velocity * dt
            return
        err = self._target - self.position
        step = abs(self._velocity) * dt
        self.position += max(-step, min(step, err))


class _Sampled(Device):
    """A sensor: ``enable(period)``, ``disable()``, ``getSamplingPeriod()``; ``getValue()``
    is NaN until enabled and sampled (Webots returns no value from a disabled sensor)."""

    def __init__(self, name: str, owner: object) -> None:
        super().__init__(name, owner)
        self._period = 0
        self._sampled: float = math.nan

    def enable(self, samplingPeriod: int) -> None:
        self._period = samplingPeriod

    def disable(self) -> None:
        self._period = 0
        self._sampled = math.nan

    def getSamplingPeriod(self) -> int:
        return self._period

    def getValue(self) -> float:
        return self._sampled

    def _now(self) -> float:
        raise NotImplementedError

    def _sample(self) -> None:
        if self._period > 0:
            self._sampled = self._now()


class PositionSensor(_Sampled):
    """``PositionSensor``: the motor's position (rad), sampled each step when enabled."""

    def __init__(self, name: str, owner: object, motor: Motor) -> None:
        super().__init__(name, owner)
        self._motor = motor

    def _now(self) -> float:
        return self._motor.position


class DistanceSensor(_Sampled):
    """``DistanceSensor``: the value of its lookup table; the test sets ``value``."""

    def __init__(self, name: str, owner: object, value: float = 0.0) -> None:
        super().__init__(name, owner)
        self.value = value

    def _now(self) -> float:
        return self.value

    def getMinValue(self) -> float:
        return 0.0

    def getMaxValue(self) -> float:
        return 1023.0


class TouchSensor(_Sampled):
    """``TouchSensor`` of type bumper: 1.0 while touched, else 0.0; the test sets ``touched``."""

    def __init__(self, name: str, owner: object) -> None:
        super().__init__(name, owner)
        self.touched = False

    def _now(self) -> float:
        return 1.0 if self.touched else 0.0


class InertialUnit(_Sampled):
    """``InertialUnit``: ``getRollPitchYaw()``; the test sets ``yaw``."""

    def __init__(self, name: str, owner: object) -> None:
        super().__init__(name, owner)
        self.yaw = 0.0
        self._rpy = [math.nan, math.nan, math.nan]

    def _now(self) -> float:
        return self.yaw

    def _sample(self) -> None:
        if self._period > 0:
            self._rpy = [0.0, 0.0, self.yaw]

    def getRollPitchYaw(self) -> list[float]:
        return list(self._rpy)


class LED(Device):
    """``LED``: ``set(value)`` (an RGB LED takes 0xRRGGBB), ``get()``."""

    def __init__(self, name: str, owner: object) -> None:
        super().__init__(name, owner)
        self._value = 0
        self.history: list[int] = []

    def set(self, value: int) -> None:
        if value != self._value:
            self.history.append(int(value))
        self._value = int(value)

    def get(self) -> int:
        return self._value


class Speaker(Device):
    """``Speaker``: ``Speaker.playSound(left, right, sound, volume, pitch, balance, loop)``
    (a static method), ``isSoundPlaying(sound)`` ('' = any), ``stop(sound)``. A sound
    plays for ``duration_ms`` of simulated time (the test's stand-in for the file's length)."""

    duration_ms = 100

    def __init__(self, name: str, owner: object) -> None:
        super().__init__(name, owner)
        self.played: list[tuple[str, float, float, float, bool]] = []
        self._until: dict[str, int] = {}
        self._now_ms = 0

    @staticmethod
    def playSound(left: Speaker, right: Speaker, sound: str, volume: float, pitch: float,
                  balance: float, loop: bool) -> None:
        for spk in {id(left): left, id(right): right}.values():
            spk.played.append((sound, volume, pitch, balance, loop))
            spk._until[sound] = spk._now_ms + spk.duration_ms

    def isSoundPlaying(self, sound: str) -> bool:
        if sound:
            return self._until.get(sound, -1) > self._now_ms
        return any(t > self._now_ms for t in self._until.values())

    def stop(self, sound: str) -> None:
        for key in list(self._until):
            if not sound or key == sound:
                del self._until[key]


class Keyboard:
    """``Keyboard``: ``enable(period)``, ``getKey()`` (one held key per call, -1 after the
    last); the test holds keys in ``held``."""

    def __init__(self) -> None:
        self._period = 0
        self.held: list[int] = []
        self._pending: list[int] = []

    def enable(self, samplingPeriod: int) -> None:
        self._period = samplingPeriod

    def disable(self) -> None:
        self._period = 0

    def getSamplingPeriod(self) -> int:
        return self._period

    def getKey(self) -> int:
        return self._pending.pop(0) if self._pending else -1

    def _sample(self) -> None:
        self._pending = list(self.held) if self._period > 0 else []


class Peer:
    """Another robot of the world (played by the test): its own devices."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.devices: dict[str, Device] = {}
        self.keyboard = Keyboard()

    def add(self, device: Device) -> Device:
        self.devices[device.getName()] = device
        return device


class Simulator:
    """The world: robots, their devices, the time; ``on_step`` runs each peer's code."""

    def __init__(self, basic_time_step: float = 8.0, end_ms: int = 1000) -> None:
        self.basic_time_step = basic_time_step
        self.end_ms = end_ms
        self.time_ms = 0
        self.robots: list[Peer] = []
        self.on_step: list[Callable[[int], None]] = []

    def add_robot(self, name: str, devices: list[tuple[str, str, int]]) -> Peer:
        """A robot with (kind "emitter"/"receiver", name, channel) devices."""
        robot = Peer(name)
        for kind, dev_name, channel in devices:
            if kind == "emitter":
                robot.add(Emitter(dev_name, robot, channel, bufferSize=4096))
            else:
                robot.add(Receiver(dev_name, robot, channel))
        self.robots.append(robot)
        return robot

    def add_device(self, robot: Peer, device: Device) -> Device:
        """Another device on ``robot`` (motors, sensors, LED, speaker)."""
        return robot.add(device)

    def advance(self, ms: int) -> int:
        if self.time_ms >= self.end_ms:
            return -1
        self.time_ms += ms
        for r in self.robots:
            for d in r.devices.values():
                if isinstance(d, Motor):
                    d._advance(ms / 1000.0)
            for d in r.devices.values():
                if isinstance(d, _Sampled):
                    d._sample()
                elif isinstance(d, Speaker):
                    d._now_ms = self.time_ms
            r.keyboard._sample()
        emitters = [d for r in self.robots for d in r.devices.values() if isinstance(d, Emitter)]
        receivers = [d for r in self.robots for d in r.devices.values() if isinstance(d, Receiver)]
        for em in emitters:
            for packet in em._queue:
                for rx in receivers:
                    same = rx._channel == em._channel or -1 in (rx._channel, em._channel)
                    if same and rx._owner is not em._owner and rx._period > 0:
                        rx._queue.append(packet)
            em._queue.clear()
        for hook in self.on_step:
            hook(self.time_ms)
        return 0


class Robot:
    """The controller's robot: the first robot of the installed simulator named 'robot'."""

    def __init__(self) -> None:
        if _simulator is None:
            raise RuntimeError("stand-in controller: no simulator installed")
        self._sim = _simulator
        self._peer = next(r for r in _simulator.robots if r.name == "robot")

    def getBasicTimeStep(self) -> float:
        return self._sim.basic_time_step

    def step(self, duration: int) -> int:
        return self._sim.advance(int(duration))

    def getDevice(self, name: str) -> Any:
        return self._peer.devices.get(name)

    def getKeyboard(self) -> Keyboard:
        return self._peer.keyboard

    def getTime(self) -> float:
        return self._sim.time_ms / 1000.0

    def getName(self) -> str:
        return self._peer.name
