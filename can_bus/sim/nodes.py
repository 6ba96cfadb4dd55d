"""Main controller and actuator modules that run on any python-can bus.

The simulator (``fwbridge``), ``virtual``, ``socketcan``/``vcan`` or a real
adapter: each node owns one python-can Bus and only reads it through ``ids.drain``
(with the node's acceptance filter, set on the bus too where the interface filters as
frames arrive: ``ids.accept``), ``send`` and ``state`` on it. Nodes are stepped:
``node.step(now)`` reads what arrived, advances the physics to ``now``
(seconds, any monotonic clock) and sends what is due, so tests drive them
deterministically; :class:`NodeRunner` steps them from a thread, and
:func:`start_modules` runs N actuator modules on a channel, each on a Bus of its own.

Model choices for the modules (PROTOCOLS.md 4 leaves units open):

- speed byte: percent of the module's maximum rate, 0 meaning "maximum";
  feedback speed in the same unit;
- angle follows its target with a first-order lag (time constant ``tau``)
  limited to the commanded rate; the stepper has no lag and moves in 1.8°
  steps;
- current (100 mA units) = idle current + a term proportional to the rate;
  the command's current byte is a limit (0 = none) whose excess is reported
  as over-current;
- the CAN-error fault bit is set while the module's bus is not error-active.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import can

from fwbridge.can_bus.bits import Frame, arbitration_key
from fwbridge.can_bus.ids import (
    MAX_MODULE,
    Direction,
    accept,
    command_filter,
    drain,
    feedback_filter,
    from_message,
    to_message,
)
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault

__all__ = ["ActuatorModule", "Dynamics", "HealthEvent", "Kind", "MainController",
           "ModuleHealth", "Modules", "NodeRunner", "Status", "TxQueue", "start_modules"]


class TxQueue:
    """A node's transmit queue: lowest arbitration ID first, so a high-priority frame
    never waits behind a low one; a newer frame replaces an unsent one with the same ID."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int]] = []  # key, seq, ID slot
        self._frames: dict[int, can.Message] = {}
        self._seq = 0
        self.sent = 0
        self.errors = 0

    @staticmethod
    def _key(msg: can.Message) -> int:
        return arbitration_key(Frame(msg.arbitration_id, msg.is_extended_id,
                                     msg.is_remote_frame, 0, b""))

    def put(self, msg: can.Message) -> None:
        key = self._key(msg)
        if key not in self._frames:
            self._seq += 1
            heapq.heappush(self._heap, (key, self._seq, key))
        self._frames[key] = msg

    def __len__(self) -> int:
        return len(self._frames)

    def pump(self, bus: can.BusABC, limit: int | None = None) -> int:
        """Send queued frames in ID order until empty or the bus refuses one."""
        n = 0
        while self._heap and (limit is None or n < limit):
            key = self._heap[0][2]
            try:
                bus.send(self._frames[key], timeout=0)
            except can.CanError:
                self.errors += 1
                break  # buffer full or bus-off: keep it, try again next step
            heapq.heappop(self._heap)
            del self._frames[key]
            n += 1
        self.sent += n
        return n


class Kind(Enum):
    SERVO = "servo"
    SERVO_MOTOR = "servo-motor"
    STEPPER = "stepper"


@dataclass(frozen=True)
class Dynamics:
    tau: float  # first-order time constant, s (0: none)
    max_rate: float  # deg/s at speed 100 %
    quantum: float  # position step, deg (0: continuous)
    idle_amps: float
    amps_per_dps: float


DYNAMICS = {
    Kind.SERVO: Dynamics(0.08, 300.0, 0.0, 0.1, 0.004),
    Kind.SERVO_MOTOR: Dynamics(0.03, 600.0, 0.0, 0.2, 0.003),
    Kind.STEPPER: Dynamics(0.0, 180.0, 1.8, 0.4, 0.002),
}


def _clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


class ActuatorModule:
    """A servo, servo motor or stepper: commands on ``0x100 + id``, feedback on ``0x200 + id``."""

    def __init__(self, bus: can.BusABC, module_id: int, kind: Kind = Kind.SERVO, *,
                 feedback_period: float = 0.02, angle: float = 0.0) -> None:
        self.bus = bus
        self.module_id = module_id
        self.kind = kind
        self.dyn = DYNAMICS[kind]
        self.feedback_period = feedback_period
        self.accept = accept(bus, command_filter(module_id))  # the acceptance filter
        self.position = angle  # continuous; a stepper reports it in whole steps
        self.target = angle
        self.rate = 0.0
        self.speed = 0
        self.current_limit = 0
        self.free = False
        self.last_command: SubCommand | int = 0
        self.faults = Fault.NONE  # injected sensor faults, reported as they are
        self.tx = TxQueue()
        self.commands = 0
        self.bad_frames = 0
        self._last: float | None = None
        self._next_feedback = 0.0
        self._query = False

    @property
    def angle(self) -> float:
        """Shaft angle in degrees, as the module's sensor reports it."""
        q = self.dyn.quantum
        return round(self.position / q) * q if q else self.position

    @property
    def current(self) -> float:
        """Motor current in amperes."""
        return 0.0 if self.free else self.dyn.idle_amps + self.dyn.amps_per_dps * abs(self.rate)

    def step(self, now: float) -> None:
        if self._last is None:
            self._last, self._next_feedback = now, now
        for msg in drain(self.bus, self.accept):
            self._on_command(msg)
        self._integrate(now - self._last)
        self._last = now
        if now >= self._next_feedback or self._query:
            self.tx.put(to_message(self.feedback(), Direction.FEEDBACK, self.module_id))
            if now >= self._next_feedback:
                self._next_feedback = max(self._next_feedback + self.feedback_period, now)
            self._query = False
        self.tx.pump(self.bus)

    def _on_command(self, msg: can.Message) -> None:
        try:
            got = from_message(msg)
        except FrameError:
            self.bad_frames += 1
            return
        if got is None or got.direction is not Direction.COMMAND or got.module != self.module_id:
            return
        self._apply(got.struct)

    def _apply(self, s: ActuatorStruct) -> None:
        """Act on one command addressed to this module (subclasses change what it means)."""
        self.commands += 1
        self.last_command = s.command
        if s.command in (SubCommand.SET_SERVO_POSITION, SubCommand.REALTIME_SERVO_CONTROL):
            self.target, self.speed, self.current_limit = float(s.angle), s.speed, s.current
            self.free = False
        elif s.command == SubCommand.ENTER_FREE_MODE:
            self.free = True
        elif s.command in (SubCommand.ENTER_IDLE, SubCommand.STAND_STILL):
            self.target, self.free = self.position, False
        elif s.command == SubCommand.QUERY_SERVO_INFO:
            self._query = True

    def _integrate(self, dt: float) -> None:
        if dt <= 0:
            return
        if self.free:
            self.rate = 0.0
            return
        dyn = self.dyn
        limit = dyn.max_rate * (min(self.speed, 100) / 100.0 if self.speed else 1.0)
        err = self.target - self.position
        delta = err * (1.0 - math.exp(-dt / dyn.tau)) if dyn.tau > 0 else err
        delta = _clamp(delta, -limit * dt, limit * dt)
        self.position += delta
        self.rate = delta / dt

    def feedback(self) -> ActuatorStruct:
        """The feedback struct as it would be sent now."""
        fault = self.faults
        amps = self.current
        if self.current_limit and amps > self.current_limit / 10.0:
            fault |= Fault.OVER_CURRENT
        if self.bus.state is not can.BusState.ACTIVE:
            fault |= Fault.CAN_ERROR
        speed = round(abs(self.rate) / self.dyn.max_rate * 100.0)
        return ActuatorStruct(
            angle=int(_clamp(round(self.angle), -128, 127)), speed=int(_clamp(speed, 0, 255)),
            current=int(_clamp(round(amps * 10.0), 0, 255)), module_id=self.module_id,
            command=self.last_command, fault=fault)


class Status(str, Enum):
    UNKNOWN = "unknown"  # nothing heard yet
    OK = "ok"
    DEGRADED = "degraded"  # reports faults or a CAN error, still addressed
    SILENT = "silent"  # no feedback: bus-off, disconnected or dead; no longer addressed


@dataclass
class ModuleHealth:
    module: int
    status: Status = Status.UNKNOWN
    since: float = 0.0
    last_seen: float | None = None
    feedback: ActuatorStruct | None = None
    frames: int = 0
    commands_sent: int = 0
    commands_held: int = 0  # not sent because the module was silent

    @property
    def addressed(self) -> bool:
        return self.status is not Status.SILENT

    def age(self, now: float) -> float | None:
        return None if self.last_seen is None else now - self.last_seen

    def as_dict(self, now: float) -> dict[str, Any]:
        fb = self.feedback
        return {"module": self.module, "status": self.status.value, "since": round(self.since, 6),
                "age": None if self.last_seen is None else round(now - self.last_seen, 6),
                "frames": self.frames, "commands_sent": self.commands_sent,
                "commands_held": self.commands_held,
                "angle": fb.angle if fb else None, "speed": fb.speed if fb else None,
                "current_ma": fb.current_ma if fb else None,
                "fault": str(fb.fault.name or int(fb.fault)) if fb and fb.fault else None}


@dataclass(frozen=True)
class HealthEvent:
    time: float
    module: int
    old: Status
    new: Status
    reason: str


@dataclass
class _Target:
    angle: int
    speed: int
    command: int
    current: int = 0


class MainController:
    """The master: sends each module's target periodically, reads feedback, tracks health.

    A module whose feedback is older than ``silence_timeout`` (never heard:
    since the controller started) is declared silent and no longer addressed
    until it is heard again; every change is recorded in :attr:`events`, the
    newest ``max_events`` of them (a module flapping for days must not grow
    memory): older ones are dropped and counted in :attr:`events_dropped`.
    """

    def __init__(self, bus: can.BusABC, modules: Iterable[int], *,
                 silence_timeout: float = 0.1, command_period: float = 0.02,
                 max_events: int = 1000) -> None:
        self.bus = bus
        self.silence_timeout = silence_timeout
        self.command_period = command_period
        self.accept = accept(bus, feedback_filter())
        self.health = {k: ModuleHealth(k) for k in modules}
        self.targets: dict[int, _Target] = {}
        self.events: deque[HealthEvent] = deque(maxlen=max(1, max_events))
        self.events_dropped = 0
        self.tx = TxQueue()
        self.bad_frames = 0
        self._start: float | None = None
        self._next_command = 0.0

    def set_target(self, module: int, angle: int, speed: int = 0,
                   command: int = SubCommand.SET_SERVO_POSITION, current: int = 0) -> None:
        """The target sent to ``module`` every ``command_period`` from now on."""
        self.health.setdefault(module, ModuleHealth(module))
        self.targets[module] = _Target(int(_clamp(angle, -128, 127)), speed, command, current)

    def step(self, now: float) -> None:
        if self._start is None:
            self._start = self._next_command = now
            for h in self.health.values():
                h.since = now
        for msg in drain(self.bus, self.accept):
            self._on_feedback(msg, now)
        for h in self.health.values():
            heard = h.last_seen if h.last_seen is not None else self._start
            if h.status is not Status.SILENT and now - heard > self.silence_timeout:
                why = ("never heard" if h.last_seen is None
                       else f"no feedback for {now - heard:.3f} s")
                self._change(h, Status.SILENT, now, why + " (bus-off, disconnected or dead)")
        if now >= self._next_command:
            self._next_command = max(self._next_command + self.command_period, now)
            for k, tgt in self.targets.items():
                h = self.health[k]
                if not h.addressed:
                    h.commands_held += 1
                    continue
                s = ActuatorStruct(angle=tgt.angle, speed=tgt.speed, current=tgt.current,
                                   module_id=k, command=tgt.command)
                self.tx.put(to_message(s, Direction.COMMAND, k))
                h.commands_sent += 1
        self.tx.pump(self.bus)

    def _on_feedback(self, msg: can.Message, now: float) -> None:
        try:
            got = from_message(msg)
        except FrameError:
            self.bad_frames += 1
            return
        if got is None or got.direction is not Direction.FEEDBACK:
            return
        h = self.health.setdefault(got.module, ModuleHealth(got.module, since=now))
        h.last_seen, h.feedback = now, got.struct
        h.frames += 1
        fault = got.struct.fault
        new = Status.DEGRADED if fault else Status.OK
        if new is not h.status:
            reason = f"reports {fault!r}" if fault else (
                "heard again" if h.status is Status.SILENT else "feedback ok")
            self._change(h, new, now, reason)

    def _change(self, h: ModuleHealth, new: Status, now: float, reason: str) -> None:
        if len(self.events) == self.events.maxlen:
            self.events_dropped += 1
        self.events.append(HealthEvent(now, h.module, h.status, new, reason))
        h.status, h.since = new, now

    def report(self, now: float) -> list[dict[str, Any]]:
        """One row per module, for tables and JSON."""
        return [self.health[k].as_dict(now) for k in sorted(self.health)]


class Steppable(Protocol):
    def step(self, now: float) -> None: ...


@dataclass
class NodeRunner:
    """Steps nodes from a daemon thread every ``period`` seconds.

    On a realtime bus (or any other python-can bus) ``now`` is ``clock()``
    (default ``time.monotonic``); on an afap ``fwbridge`` channel (``sim``)
    the runner drives bus time itself, as fast as the CPU allows.
    """

    nodes: Sequence[Steppable]
    period: float = 0.001
    sim: Any = None  # a can_bus.simchannel.SimChannel
    clock: Callable[[], float] | None = None
    on_step: Callable[[float], None] | None = None
    until: float | None = None  # stop once ``now`` reaches it
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fwbridge-nodes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def now(self) -> float:
        if self.sim is not None:
            with self.sim.lock:
                return float(self.sim.bus_time())
        return (self.clock or time.monotonic)()

    def _run(self) -> None:
        try:
            if self.sim is not None and self.sim.afap:
                t = self.now()
                self._step(t)
                while not self._stop.is_set():
                    t += self.period
                    with self.sim.lock:  # deliver up to t first: nodes then answer at t
                        self.sim.advance_to(t)
                    self._step(t)
            else:
                while not self._stop.is_set():
                    self._step(self.now())
                    self._stop.wait(self.period)
        except BaseException as exc:  # reported to whoever owns the runner
            self.error = exc

    def _step(self, now: float) -> None:
        if self.on_step is not None:
            self.on_step(now)
        for node in self.nodes:
            node.step(now)
        if self.until is not None and now >= self.until:
            self._stop.set()


@dataclass
class Modules:
    """Simulated actuator modules running on a bus (:func:`start_modules`), until
    :meth:`stop`; a context manager too."""

    modules: list[ActuatorModule]
    buses: list[can.BusABC]
    runner: NodeRunner

    @property
    def error(self) -> BaseException | None:
        """What stopped the runner, if something did."""
        return self.runner.error

    def stop(self) -> None:
        """Stop stepping the modules and shut their buses down (idempotent)."""
        self.runner.stop()
        for bus in self.buses:
            bus.shutdown()

    def __enter__(self) -> Modules:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_modules(channel: Any, count: int, *, interface: str = "fwbridge",
                  kind: Kind = Kind.SERVO, feedback_period: float = 0.02,
                  period: float = 0.002, **bus_kwargs: Any) -> Modules:
    """Start ``count`` simulated actuator modules (IDs 1..count) on ``channel``.

    Each module is a node on a python-can Bus of its own
    (``can.Bus(interface=interface, channel=channel, **bus_kwargs)``; on ``fwbridge``
    named ``module<k>``, and ``"shared:NAME"`` puts them on a shared bus), stepped
    every ``period`` seconds by a :class:`NodeRunner` thread: on an afap ``fwbridge``
    bus the runner drives bus time. ``fwbridge can sim N`` is the same from the
    command line, with a controller.
    """
    if not 1 <= count <= MAX_MODULE:
        raise ConfigError(f"{count} modules: module IDs are 1..{MAX_MODULE}")
    buses: list[can.BusABC] = []
    try:
        for k in range(1, count + 1):
            kw = dict(bus_kwargs)
            if interface == "fwbridge":
                kw["name"] = f"module{k}"
            buses.append(can.Bus(interface=interface, channel=channel, **kw))
        modules = [ActuatorModule(bus, k, kind, feedback_period=feedback_period)
                   for k, bus in enumerate(buses, start=1)]
        runner = NodeRunner(modules, period=period,
                            sim=getattr(buses[0], "sim", None) if interface == "fwbridge"
                            else None)
        runner.start()
    except BaseException:
        for bus in buses:
            bus.shutdown()
        raise
    return Modules(modules, buses, runner)
