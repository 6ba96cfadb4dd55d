"""A world that steps every simulated robot in lock-step, as Webots does.

One :meth:`World.step`: pre-step hooks (pacing, host input), the clock moves
on one basic time step, the :class:`~bridge.sim.webots_serial.Ether`
delivers what was sent during the previous step, every robot's body moves
(``physics``), every robot's firmware runs once (``loop``), post-step hooks
(host output).

A firmware may block the way an Arduino sketch does (``delay``,
``waitForPress``): its board's clock then steps the whole world from inside
its ``loop``; the rest of the world goes on, and the blocked firmware's own
``loop`` is skipped until it returns, as a Webots controller blocked in
``Robot::step`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from fwbridge.bridge.sim.clock import SimClock, SimStopped
from fwbridge.bridge.sim.webots_serial import (
    ROBOT_LINK,
    SUPERVISOR_LINK,
    Emitter,
    Ether,
    LinkChannels,
    Receiver,
    WebotsSerialDrv,
)
from fwbridge.protocols.errors import StateError

__all__ = ["Board", "RobotModel", "SimRobot", "World", "open_serial"]

#: Bounded device buffers. Webots' default is -1 (unbounded); bounded here so
#: that a peer that stops reading cannot grow memory, and so "full" exists.
EMITTER_BUFFER = 4096
RECEIVER_BUFFER = 1 << 16


class Board(Protocol):
    """What a firmware model needs from its robot: Webots' ``Robot`` subset plus a clock."""

    clock: SimClock

    def getDevice(self, name: str) -> Any: ...

    def getBasicTimeStep(self) -> float: ...


class RobotModel(Protocol):
    """A simulated robot: its firmware (``setup``/``loop``) and its body (``physics``)."""

    name: str

    def setup(self, board: Board) -> None: ...

    def physics(self, dt: float) -> None: ...

    def loop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...

    @property
    def pose(self) -> tuple[float, float, float]:
        """True pose of the body: x, y (m), yaw (rad)."""
        ...


def open_serial(board: Board, link: LinkChannels = ROBOT_LINK) -> WebotsSerialDrv:
    """The firmware's serial port on ``link``: devices by name, channels set, receiver on."""
    emitter = board.getDevice(link.tx_name)
    receiver = board.getDevice(link.rx_name)
    if emitter is None or receiver is None:
        raise StateError(f"robot has no {link.tx_name}/{link.rx_name} devices")
    drv = WebotsSerialDrv(emitter, receiver)
    drv.setTxChannel(link.tx_channel)
    drv.setRxChannel(link.rx_channel)
    receiver.enable(int(board.getBasicTimeStep()))
    return drv


class SupervisorLines:
    """The supervisor link's text lines, from chunks of any size: one split per chunk
    (linear in it however many lines it holds) and a partial line held to ``limit``
    bytes (a longer one keeps its last ``limit + 1`` bytes, so its reader refuses it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The whole, non-blank lines that ``data`` completes."""
        lines: list[bytes] = []
        if b"\n" not in data:
            self._held += data
        else:
            *lines, tail = (bytes(self._held) + data).split(b"\n")
            self._held[:] = tail
        if len(self._held) > self.limit:
            del self._held[:-(self.limit + 1)]
        return [line for line in lines if line.strip()]


class SimRobot:
    """One robot in a :class:`World`: the board its model runs on (devices and clock)."""

    def __init__(
        self, world: World, name: str, model: RobotModel, links: tuple[LinkChannels, ...]
    ) -> None:
        self.world = world
        self.name = name
        self.model = model
        self.clock = world.clock
        self.devices: dict[str, Emitter | Receiver] = {}
        for link in links:
            self.devices[link.tx_name] = Emitter(
                world.ether, link.tx_name, self, channel=link.tx_channel, buffer_size=EMITTER_BUFFER
            )
            self.devices[link.rx_name] = Receiver(
                world.ether,
                link.rx_name,
                self,
                channel=link.rx_channel,
                buffer_size=RECEIVER_BUFFER,
            )
        self.blocked = 0  # >0 while the firmware is inside its own loop (blocking calls nest)

    # -- the Webots Robot subset --------------------------------------------
    def getDevice(self, name: str) -> Emitter | Receiver | None:
        return self.devices.get(name)

    def getBasicTimeStep(self) -> float:
        return float(self.clock.basic_time_step_ms)

    def getTime(self) -> float:
        return self.clock.seconds

    def getName(self) -> str:
        return self.name

    def step(self, duration_ms: int | None = None) -> int:
        """Step the world (``Robot.step``); returns -1 once the world has stopped."""
        steps = 1 if duration_ms is None else max(1, duration_ms // self.clock.basic_time_step_ms)
        for _ in range(steps):
            if self.world.step() == -1:
                return -1
        return 0


class World:
    """Robots, their devices on one ether, one clock; :meth:`step` moves them all."""

    def __init__(self, basic_time_step_ms: int = 1) -> None:
        self.clock = SimClock(basic_time_step_ms, stepper=self.step)
        self.ether = Ether()
        self.robots: list[SimRobot] = []
        self.pre_step: list[Callable[[int], None]] = []  # called with the time the step goes to
        self.post_step: list[Callable[[int], None]] = []
        self.steps = 0
        self.stopped = False

    def add_robot(
        self,
        model: RobotModel,
        name: str | None = None,
        links: tuple[LinkChannels, ...] = (ROBOT_LINK, SUPERVISOR_LINK),
    ) -> SimRobot:
        """Put ``model`` on a new robot with the serial devices of ``links`` and run its setup."""
        robot = SimRobot(self, name or model.name, model, links)
        self.robots.append(robot)
        robot.blocked += 1
        try:
            model.setup(robot)
        finally:
            robot.blocked -= 1
        return robot

    def step(self) -> int:
        """One basic time step for everything; -1 after :meth:`stop`."""
        if self.stopped:
            return -1
        clock = self.clock
        target = clock.millis() + clock.basic_time_step_ms
        try:
            for hook in self.pre_step:
                hook(target)
        except SimStopped:
            self.stopped = True
            return -1
        now = clock.advance()
        self.ether.deliver(now, clock.basic_time_step_ms)
        dt = clock.dt
        robots = self.robots
        for robot in robots:
            robot.model.physics(dt)
        for robot in robots:
            if not robot.blocked:
                robot.blocked += 1
                try:
                    robot.model.loop()
                finally:
                    robot.blocked -= 1
        try:
            for hook in self.post_step:
                hook(now)
        except SimStopped:
            self.stopped = True
        self.steps += 1
        return -1 if self.stopped else 0

    def stop(self) -> None:
        """End the simulation: every later step (and blocked firmware) sees -1."""
        self.stopped = True

    def run_for(self, ms: int) -> None:
        """Step until ``ms`` more simulated milliseconds have passed (or the world stops)."""
        end = self.clock.millis() + ms
        while self.clock.millis() < end and self.step() != -1:
            pass

    def run_until(self, done: Callable[[], bool], timeout_ms: int) -> bool:
        """Step until ``done()`` or ``timeout_ms`` of simulated time; return ``done()``."""
        end = self.clock.millis() + timeout_ms
        while not done():
            if self.clock.millis() >= end or self.step() == -1:
                return done()
        return True
