"""A simulated endpoint: one robot model in a world, its host ports, faults and pacing.

This is what ``sim://MODEL`` and ``fwbridge sim MODEL`` run. The host end of
each serial link is a :class:`HostPort`: a peer on the emulated ether (its
own Emitter and Receiver, on the channels that face the robot's) with a
thread-safe byte interface, so a pty pump or a pyserial object can sit on
it while the world steps in another thread.

Pacing (a pre-step hook of the world):

- ``realtime``: simulated time follows the wall clock (times ``speed``);
  when the process falls more than ``max_lag`` behind, it re-anchors
  instead of racing to catch up, and counts it;
- ``fast``: as fast as possible; no wall clock is read, so a run is a
  deterministic function of its inputs.

A realtime world sleeps before every step by default: a thousand wake-ups a
second at 1 ms steps, which cost far more than the steps (about 40 us each
against 3 us of stepping). With a *quantum* (``quantum_ms``) it runs ahead of
the wall clock by up to one quantum and then sleeps, so it wakes once a quantum;
a write from the host ends the sleep at once, so commands are not held back by
it. Replies may then leave up to a quantum before their simulated time, for a
tenth of the CPU. Many worlds need no thread each at all: a
:class:`~fwbridge.bridge.sim.scheduler.WorldScheduler` steps them from its owner's
thread (:meth:`SimEndpoint.paced_by_owner`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.sim.clock import SimStopped
from fwbridge.bridge.sim.faults import FaultInjector, FaultSpec
from fwbridge.bridge.sim.models import create_model
from fwbridge.bridge.sim.webots_serial import (
    ROBOT_LINK,
    SUPERVISOR_LINK,
    Emitter,
    LinkChannels,
    Receiver,
)
from fwbridge.bridge.sim.world import EMITTER_BUFFER, RECEIVER_BUFFER, RobotModel, World
from fwbridge.protocols.counters import Counters
from fwbridge.protocols.errors import ConfigError, StateError
from fwbridge.protocols.pacing import AFAP, PACINGS, parse_pacing

__all__ = ["MAX_QUANTUM_MS", "PACINGS", "SIM_THREAD", "HostPort", "Pacer", "SimEndpoint"]

#: The name of a realtime world's thread, in Python and (on Linux) for ``top -H`` and
#: ``/proc/PID/task/*/comm``, so the simulated firmware's CPU can be told from the rest.
SIM_THREAD = "fwbridge-sim"


def _name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` in the kernel too (Linux; elsewhere nothing)."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15])  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


#: The longest quantum a realtime world may run ahead of the wall clock, ms.
MAX_QUANTUM_MS = 50



@dataclass
class PortStats(Counters):
    bytes_in: int = 0  # host -> robot, accepted
    bytes_out: int = 0  # robot -> host, handed to the host
    packets_in: int = 0
    overruns: int = 0  # robot -> host bytes lost because the host did not read


class HostPort:
    """The host's end of one serial link: bounded byte queues both ways, thread-safe."""

    def __init__(
        self,
        world: World,
        name: str,
        link: LinkChannels,
        *,
        in_capacity: int = 1 << 16,
        out_capacity: int = 1 << 16,
    ) -> None:
        tx, rx = link.peer
        self.name = name
        self.emitter = Emitter(
            world.ether, f"{name}Tx", self, channel=tx, buffer_size=EMITTER_BUFFER
        )
        self.receiver = Receiver(
            world.ether, f"{name}Rx", self, channel=rx, buffer_size=RECEIVER_BUFFER
        )
        self.receiver.enable(world.clock.basic_time_step_ms)
        self.in_capacity = in_capacity
        self.out_capacity = out_capacity
        self.stats = PortStats()
        self._in: deque[bytes] = deque()  # host writes not yet handed to the emitter
        self._in_bytes = 0
        self._out = bytearray()
        self._cond = threading.Condition()
        self._cancel = False
        #: called after each write the port takes (the pacer's wake-up, in a quantum)
        self.on_write: Callable[[], Any] | None = None

    # -- the host's side (any thread) ---------------------------------------
    def write(self, data: bytes) -> int:
        """Queue ``data`` for the next step (one write, one packet); return bytes taken."""
        if not data:
            return 0
        with self._cond:
            room = self.in_capacity - self._in_bytes
            if room <= 0:
                return 0
            chunk = bytes(data[:room])
            self._in.append(chunk)
            self._in_bytes += len(chunk)
        on_write = self.on_write
        if on_write is not None:
            on_write()
        return len(chunk)

    @property
    def in_room(self) -> int:
        return self.in_capacity - self._in_bytes

    @property
    def pending_in(self) -> int:
        """Host bytes not yet on the ether."""
        return self._in_bytes + self.emitter.queued_bytes

    @property
    def in_waiting(self) -> int:
        return len(self._out)

    def take(self, limit: int = 1 << 30) -> bytes:
        """What the robot sent that the host has not read yet (no waiting)."""
        if not self._out:
            return b""
        with self._cond:
            data = bytes(self._out[:limit])
            del self._out[:limit]
        return data

    def wait(self, timeout: float | None) -> bool:
        """Wait until bytes are readable (True), the timeout passes or a cancel (False)."""
        with self._cond:
            if not self._out and not self._cancel:
                self._cond.wait(timeout)
            cancelled, self._cancel = self._cancel, False
            return bool(self._out) and not cancelled

    def cancel(self) -> None:
        with self._cond:
            self._cancel = True
            self._cond.notify_all()

    def clear(self, incoming: bool = True, outgoing: bool = True) -> None:
        with self._cond:
            if outgoing:
                self._out.clear()
            if incoming:
                self._in.clear()
                self._in_bytes = 0

    # -- the world's side (pre/post step hooks) -----------------------------
    def pre_step(self, target_ms: int) -> None:
        if not self._in:
            return
        em = self.emitter
        with self._cond:
            while self._in:
                chunk = self._in[0]
                free = em.free()
                if free <= 0:
                    break
                if len(chunk) > free:  # split a write larger than the emitter's buffer
                    self._in[0] = chunk[free:]
                    chunk = chunk[:free]
                else:
                    self._in.popleft()
                em.send(chunk)
                self._in_bytes -= len(chunk)
                self.stats.bytes_in += len(chunk)
                self.stats.packets_in += 1

    def post_step(self, now_ms: int) -> None:
        rx = self.receiver
        if not rx.queue:
            return
        with self._cond:
            out = self._out
            while rx.queue:
                packet = rx.queue[0]
                rx.nextPacket()
                room = self.out_capacity - len(out)
                if len(packet) > room:  # a UART whose reader is asleep loses bytes
                    self.stats.overruns += len(packet) - max(room, 0)
                    packet = packet[: max(room, 0)]
                out += packet
                self.stats.bytes_out += len(packet)
            self._cond.notify_all()


class Pacer:
    """Pre-step hook that ties simulated time to the wall clock (or not, in ``afap``);
    ``quantum_ms`` > 0: realtime, waking once a quantum (see the module's docstring)."""

    def __init__(
        self,
        pacing: str = "realtime",
        speed: float = 1.0,
        stop: threading.Event | None = None,
        max_lag: float = 0.25,
        quantum_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not speed > 0:
            raise ConfigError(f"speed must be positive, got {speed!r}")
        if not 0 <= quantum_ms <= MAX_QUANTUM_MS:
            raise ConfigError(f"quantum_ms must be 0 to {MAX_QUANTUM_MS}, got {quantum_ms!r}")
        self.quantum = quantum_ms / 1000.0
        #: set by a host write (and a stop): a sleeping quantum ends at once
        self.wake = threading.Event()
        self.clock = clock
        self.pacing = parse_pacing(pacing)
        self.speed = speed
        self.stop = stop or threading.Event()
        self.max_lag = max_lag
        self.wait: Callable[[float], None] = self._sleep
        self.lag_resets = 0
        self._t0: float | None = None
        self._ms0 = 0

    def _sleep(self, timeout: float) -> None:
        self.stop.wait(timeout)

    def _sleep_quantum(self, remaining: float) -> None:
        """Sleep until simulated time is due, or a host write: what the host sent is
        taken at the next step, not a quantum later."""
        wake = self.wake
        if wake.wait(remaining):
            wake.clear()
        if self.stop.is_set():
            raise SimStopped

    def reanchor(self) -> None:
        self._t0 = None

    def __call__(self, target_ms: int) -> None:
        if self.stop.is_set():
            raise SimStopped
        if self.pacing == AFAP:
            return
        now = self.clock()
        if self._t0 is None:
            self._t0, self._ms0 = now, target_ms
            return
        deadline = self._t0 + (target_ms - self._ms0) / 1000.0 / self.speed
        remaining = deadline - now
        if remaining < -self.max_lag:
            self.lag_resets += 1  # too far behind: let simulated time slip, do not race
            self._t0, self._ms0 = now, target_ms
            return
        if self.quantum:
            if remaining >= self.quantum:
                self._sleep_quantum(remaining)
            return
        while remaining > 0:
            self.wait(remaining)
            if self.stop.is_set():
                raise SimStopped
            remaining = deadline - self.clock()


class SimEndpoint:
    """One robot model on the emulated Webots serial link, with its host ports.

    ``model``: a name of :data:`~bridge.sim.models.MODELS` or a model object.
    ``faults`` are injected on both directions of the robot link (never on
    the supervisor link); ``baud`` > 0 limits both directions to that line
    rate (10 bits a byte, as 8N1).
    """

    def __init__(
        self,
        model: str | RobotModel = "mecanum",
        *,
        pacing: str = "realtime",
        speed: float = 1.0,
        step_ms: int = 1,
        faults: FaultSpec | None = None,
        baud: int = -1,
        watchdog_ms: int | None = None,
        quantum_ms: int = 0,
    ) -> None:
        self.world = World(step_ms)
        self.model = create_model(model) if isinstance(model, str) else model
        if watchdog_ms is not None:  # None: the model's default
            if not hasattr(self.model, "cmd_timeout_ms"):
                raise ConfigError(f"the {self.model.name} model has no command watchdog")
            if watchdog_ms < 0:
                raise ConfigError(f"watchdog must be >= 0 ms (0: off), not {watchdog_ms}")
            setattr(self.model, "cmd_timeout_ms", watchdog_ms)  # noqa: B010 - not in RobotModel
        self.robot = self.world.add_robot(self.model)
        self.link = HostPort(self.world, "host", ROBOT_LINK)
        self.supervisor = HostPort(self.world, "supervisor", SUPERVISOR_LINK)
        self.faults = faults or FaultSpec()
        self.injectors: dict[str, FaultInjector] = {}
        if self.faults.enabled:
            down = FaultInjector(self.faults, "host->robot")
            up = FaultInjector(self.faults, "robot->host")
            self.world.ether.set_faults(ROBOT_LINK.rx_channel, down)
            self.world.ether.set_faults(ROBOT_LINK.tx_channel, up)
            self.injectors = {"host->robot": down, "robot->host": up}
        if baud > 0:
            for em in (self.link.emitter, self.robot.getDevice(ROBOT_LINK.tx_name)):
                if isinstance(em, Emitter):
                    em.baud_rate, em.byte_size = baud, 10
        self.stop_event = threading.Event()
        self.pacer = Pacer(pacing, speed, self.stop_event, quantum_ms=quantum_ms)
        if quantum_ms:
            self.link.on_write = self.supervisor.on_write = self.pacer.wake.set
        self.world.pre_step[:] = [self.pacer, self.link.pre_step, self.supervisor.pre_step]
        self.world.post_step[:] = [self.link.post_step, self.supervisor.post_step]
        self._thread: threading.Thread | None = None
        self._wall0 = time.monotonic()
        self.error: BaseException | None = None
        #: stepped by its owner (:meth:`paced_by_owner`), not by a thread of its own
        self.owner_paced = False

    @property
    def pacing(self) -> str:
        """``realtime`` or ``afap`` (see :mod:`fwbridge.protocols.pacing`)."""
        return self.pacer.pacing

    @property
    def clock(self) -> Any:
        return self.world.clock

    def run(self, duration_ms: int | None = None) -> None:
        """Step until stopped (or ``duration_ms`` of simulated time)."""
        world = self.world
        end = None if duration_ms is None else world.clock.millis() + duration_ms
        self._wall0 = time.monotonic()
        self._sim0 = world.clock.millis()
        step = world.step
        if end is None:
            while step() != -1:
                pass
        else:
            clock = world.clock
            while clock.millis() < end and step() != -1:
                pass

    def paced_by_owner(self) -> None:
        """From now on its owner steps it (:meth:`step_to`), at the pace it chooses:
        :class:`~fwbridge.bridge.sim.scheduler.WorldScheduler` steps many worlds from one
        thread, reading the wall clock once a round for all of them. No thread of its
        own, and the pacer leaves the pre-step hooks (one pacing authority, and a call
        less per step)."""
        if self._thread is not None:
            raise StateError("endpoint already running in its own thread")
        self.owner_paced = True
        self.world.pre_step[:] = [self.link.pre_step, self.supervisor.pre_step]
        self._wall0 = time.monotonic()
        self._sim0 = self.world.clock.millis()

    def step_to(self, target_ms: int) -> bool:
        """Step until simulated time reaches ``target_ms`` (its owner's pacing); False once
        the world has stopped."""
        world = self.world
        step, clock = world.step, world.clock
        while clock.millis() < target_ms:
            if step() == -1:
                return False
        return not world.stopped

    def start(self, duration_ms: int | None = None) -> None:
        """Run in a daemon thread (the realtime mode of ``sim://`` and the CLI)."""
        if self._thread is not None or self.owner_paced:
            raise StateError("endpoint already running")

        def target() -> None:
            _name_os_thread(SIM_THREAD)
            try:
                self.run(duration_ms)
            except BaseException as exc:  # surfaced by status() and the CLI
                self.error = exc
                raise

        self._thread = threading.Thread(target=target, name=SIM_THREAD, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        if self.owner_paced:
            return not self.world.stopped
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        self.stop_event.set()
        self.pacer.wake.set()
        self.world.stop()
        self.link.cancel()
        thread = self._thread
        # not alive: never started (a stop signal between creating and starting it) or done
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
        close = getattr(self.model, "close", None)  # a model with parts of its own (CAN nodes)
        if callable(close) and (thread is None or not thread.is_alive()):
            close()

    def status(self) -> dict[str, Any]:
        """A snapshot for status lines and tests (safe to call from another thread)."""
        clock = self.world.clock
        wall = max(time.monotonic() - self._wall0, 1e-9)
        sim_s = (clock.millis() - getattr(self, "_sim0", 0)) / 1000.0
        x, y, yaw = self.model.pose
        out: dict[str, Any] = {
            "model": self.model.name,
            "pacing": self.pacing,
            "t": clock.millis(),
            "rtf": sim_s / wall,
            "pose": [x, y, yaw],
            "link": self.link.stats.as_dict(),
            "ether": self.world.ether.stats.as_dict(),
            "lag_resets": self.pacer.lag_resets,
        }
        if self.injectors:
            out["faults"] = {k: v.stats.as_dict() for k, v in self.injectors.items()}
        rx = getattr(self.model, "rx_stats", None)
        if rx is not None:
            out["firmware_rx"] = rx
        counters = getattr(self.model, "counters", None)
        if counters is not None:
            out["firmware"] = counters.as_dict()
        return out
