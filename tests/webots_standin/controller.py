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
  ``getBytes()`` (R2023b), ``getData()`` (older), ``nextPacket()``.

A packet sent before a step is delivered during that step to every enabled
receiver on the channel of other robots. The test owns a
:class:`Simulator` (:func:`install`) and plays the other robots as peers.
"""

from __future__ import annotations

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


class Peer:
    """Another robot of the world (played by the test): its own devices."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.devices: dict[str, Device] = {}

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

    def advance(self, ms: int) -> int:
        if self.time_ms >= self.end_ms:
            return -1
        self.time_ms += ms
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

    def getTime(self) -> float:
        return self._sim.time_ms / 1000.0

    def getName(self) -> str:
        return self._peer.name
