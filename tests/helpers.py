"""Shared test helpers, in one place: the CLI as a subprocess, a firmware played
on a pty, the pty fixtures, clocks and lag, vcan, the fish example, the Webots
stand-in. Test modules import from here, never from each other."""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import queue
import re
import selectors
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, Any, TypeVar

import can
import pytest
import serial

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.base_core import NodeEvent
from fwbridge.bridge.node.config import RobotConfig, parse_config
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.sim.models.fish import RobotFish
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.can_bus.daemon import BusDaemon
from fwbridge.can_bus.ids import Direction, from_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.protocols import action_frame, cmd_frame
from fwbridge.protocols.action_frame import ActionFrame, SubCommand
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.families import action_group
from fwbridge.protocols.hextext import parse_hex

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"


def fwbridge_argv() -> list[str]:
    """The console script next to this interpreter, else ``python -m fwbridge.cli``."""
    script = Path(sys.executable).with_name("fwbridge")
    if script.exists():
        return [str(script)]
    found = shutil.which("fwbridge")
    return [found] if found else [sys.executable, "-m", "fwbridge.cli"]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: wide, uncoloured, and able to import
    the test-only packages (``tests.sim_stub``) that some tests point it at."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONPATH": path, **(extra or {})}


def run_cli(
    *args: str, input: bytes | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*fwbridge_argv(), *args], input=input, capture_output=True, timeout=timeout,
        env=cli_env(env), cwd=ROOT, check=False,
    )


SETTLE_MARK = b"\x00settled\x00"  # no frame header in it: every receiver discards it


@dataclass(frozen=True)
class Arrival:
    t: float  # time.monotonic() when the peer read it
    frame: CmdFrame
    raw: bytes


class FirmwarePeer(threading.Thread):
    """Plays the STM32 on ``pair``'s master side.

    Collects the command frames the host sends (with arrival times and their
    exact bytes) and all raw bytes; ``answer`` may return bytes to send back
    for each command (an odometry frame, say). Survives the pair being
    unplugged and plugged again.
    """

    def __init__(
        self, pair: PtyPair, answer: Callable[[CmdFrame], bytes | None] | None = None
    ) -> None:
        super().__init__(name="firmware-peer", daemon=True)
        self.pair = pair
        self.answer = answer
        self.rx = Sum8Receiver(cmd_frame.CODEC)
        self.arrivals: list[Arrival] = []
        self.raw = bytearray()
        self._cond = threading.Condition()
        self._halt = threading.Event()
        self._cut = 0  # settle() markers taken out of raw so far (bytes)

    def run(self) -> None:
        while not self._halt.is_set():
            fd = self.pair.master_fd
            if fd < 0:
                time.sleep(0.005)  # polling: unplugged, until the pair is plugged again
                continue
            try:
                data = self.pair.read(timeout=0.02)
            except (OSError, ValueError):  # unplugged under our feet
                time.sleep(0.005)  # polling: as above
                continue
            if not data:
                continue
            now = time.monotonic()
            with self._cond:
                self.raw += data
                for item in self.rx.feed(data):
                    start = item.offset - self._cut
                    raw = bytes(self.raw[start : start + cmd_frame.SIZE])
                    self.arrivals.append(Arrival(now, item.frame, raw))
                    if self.answer is not None:
                        reply = self.answer(item.frame)
                        if reply:
                            self.send(reply)
                self._cond.notify_all()

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # unplugged: the bytes are lost, as on a real cable
            self.pair.write(data)

    def wait_for(self, predicate: Callable[[list[Arrival]], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate(arrivals)`` holds; False after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.arrivals):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def frames(self) -> list[CmdFrame]:
        with self._cond:
            return [a.frame for a in self.arrivals]

    def settle(self, timeout: float = 20.0) -> None:
        """Wait until every byte written to the port so far has been read here.

        For the end of an exchange (the writer has exited, say): a pty hands
        bytes to its master side from a kernel work queue, so some may still be
        on their way. A marker written on the port after them comes after them
        (one queue, in order); once it is here so is all before it. The marker
        is taken out of ``raw`` again (the receiver discards it: no frame).
        """
        with self._cond:
            start = len(self.raw)
        fd = os.open(self.pair.slave_name, os.O_WRONLY | os.O_NOCTTY)
        try:
            os.write(fd, SETTLE_MARK)
        finally:
            os.close(fd)
        with self._cond:
            if not self._cond.wait_for(lambda: SETTLE_MARK in self.raw[start:], timeout):
                pytest.fail(f"the port's bytes did not settle within {timeout} s")
            at = self.raw.index(SETTLE_MARK, start)
            del self.raw[at : at + len(SETTLE_MARK)]
            self._cut += len(SETTLE_MARK)

    def stop(self) -> None:
        self._halt.set()
        self.join(2.0)


def unread(pair: PtyPair) -> int:
    """Bytes written on ``pair``'s device side that no reader of the port has taken yet."""
    fd = os.open(pair.slave_name, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, buf)
        return int.from_bytes(buf, sys.byteorder)
    finally:
        os.close(fd)


def waiting_for_input(pid: int) -> bool:
    """The process's main thread sleeps in select/poll: it is done with what it read
    (Linux: ``/proc/PID/wchan``; a ``time.sleep`` or a lock sleeps elsewhere)."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False
    return wchan in ("poll_schedule_timeout", "poll_schedule_timeout.constprop.0",
                     "do_select", "do_sys_poll")


# -- waiting for a process: its readiness line, or a condition, never a fixed sleep ----------
T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 20.0, what: str = "") -> T:
    """Poll ``predicate`` until it returns something true, and return that; fail the test
    (naming ``what``) after ``timeout`` seconds. A bound on waiting, not on speed."""
    end = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= end:
            pytest.fail(f"{what or 'the condition'} did not hold within {timeout} s")
        time.sleep(0.01)  # polling: between two checks of a bounded wait


def wait_for_line(source: subprocess.Popen[Any] | IO[Any] | int, pattern: str,
                  timeout: float = 20.0, *, stream: str = "stderr") -> str:
    """The first line of ``source`` that matches ``pattern`` (a regex, searched).

    ``source`` is a process (its ``stream``: ``"stderr"`` or ``"stdout"``, a pipe),
    a readable file or a descriptor (a pty's master side). It is read without
    blocking, a byte at a time, never past the end of the matching line, so
    what follows is still there for ``communicate()`` or the next wait (do not
    read the same stream through its buffered file object before). Fails the
    test, with the output seen so far, when the stream ends (the process
    exited) or after ``timeout`` seconds.
    """
    proc = source if isinstance(source, subprocess.Popen) else None
    stream_obj = getattr(proc, stream) if proc is not None else source
    if stream_obj is None:
        raise ValueError(f"the process's {stream} is not a pipe")
    fd = stream_obj if isinstance(stream_obj, int) else stream_obj.fileno()
    want = re.compile(pattern)
    seen = bytearray()
    line = bytearray()
    end = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = end - time.monotonic()
            if left <= 0 or not sel.select(left):
                why = f"no line matching {pattern!r} within {timeout} s"
                break
            try:
                byte = os.read(fd, 1)
            except OSError:  # EIO: a pty whose other side is closed
                byte = b""
            if not byte:
                if line and want.search(text := line.decode(errors="replace")):
                    return text  # a last line with no newline after it
                code = proc.poll() if proc is not None else None
                why = f"the stream ended (exit status {code}) before a line matching {pattern!r}"
                break
            seen += byte
            line += byte
            if byte == b"\n":
                text = line.decode(errors="replace")
                if want.search(text):
                    return text.rstrip("\r\n")
                line.clear()
    pytest.fail(f"{why}; seen:\n{seen.decode(errors='replace')[-3000:]}")


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """The process, killed and waited for on the way out if it is still running (a test
    that failed must not leave a verb behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run_verb(
    *args: str, input: bytes | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    """``fwbridge ARGS`` as a subprocess, to completion."""
    return run_cli(*args, input=input, timeout=timeout)


def spawn_verb(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``fwbridge ARGS`` started in the background (stdin/stdout/stderr as given)."""
    proc: subprocess.Popen[bytes] = subprocess.Popen(
        [*fwbridge_argv(), *args], env=cli_env(), cwd=ROOT, **kwargs
    )
    return proc


class Recorder:
    """Odometry records and events the node hands out, waitable; optionally a slow subscriber."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.records: list[Odometry] = []
        self.events: list[NodeEvent] = []
        self.cond = threading.Condition()

    def odometry(self, rec: Odometry) -> None:
        if self.delay:
            time.sleep(self.delay)  # not a readiness wait: a subscriber doing slow work
        with self.cond:
            self.records.append(rec)
            self.cond.notify_all()

    def event(self, ev: NodeEvent) -> None:
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()

    def wait(self, pred: Any, timeout: float = 5.0) -> bool:
        with self.cond:
            return bool(self.cond.wait_for(lambda: pred(self), timeout))

    def kinds(self) -> list[str]:
        with self.cond:
            return [e.kind for e in self.events]

    def count(self) -> int:
        with self.cond:
            return len(self.records)


class LagMeter(threading.Thread):
    """How late this machine wakes a sleeping thread, measured while a timed test runs.

    The worst oversleep is the measured lag: when it is large the machine
    could not keep real time, and a timing check that needs it skips with
    that figure instead of failing.
    """

    def __init__(self, step: float = 0.005) -> None:
        super().__init__(name="lag-meter", daemon=True)
        self.step = step
        self.worst = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            t0 = time.monotonic()
            time.sleep(self.step)  # not a readiness wait: how late it wakes is the figure
            self.worst = max(self.worst, time.monotonic() - t0 - self.step)

    def __enter__(self) -> LagMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self.join(1.0)


class ManualClock:
    """A clock the test moves by hand (thread-safe): the node's time, not the machine's."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.t

    def advance(self, dt: float) -> None:
        with self._lock:
            self.t += dt


def config(url: str, **sections: dict[str, Any]) -> RobotConfig:
    """A robot config for ``url`` with the given sections (as parsed from TOML)."""
    data: dict[str, Any] = {"link": {"url": url}, **sections}
    return parse_config(data)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[PtyPair]:
    """A pty pair; its slave also answers at a stable symlink path (for replugs)."""
    with PtyPair(tmp_path / "ttyBASE") as p:
        yield p


@pytest.fixture
def peer(pair: PtyPair) -> Iterator[FirmwarePeer]:
    """A thread playing the firmware on the pty's master side."""
    p = FirmwarePeer(pair)
    p.start()
    yield p
    p.stop()


@pytest.fixture
def mecanum() -> Iterator[str]:
    """A ``fwbridge sim mecanum`` (realtime) to point the host verbs at: its port."""
    proc = spawn_verb("sim", "mecanum", "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    with reaped(proc):
        yield str(json.loads(proc.stdout.readline())["port"])
        proc.send_signal(signal.SIGINT)
        proc.wait(20)

# -- CAN: is there a usable vcan0? -----------------------------------------------------
def vcan_reason() -> str | None:
    """Why the socketcan tests cannot run here, or None when vcan0 is usable."""
    if shutil.which("ip") is None:
        return "no 'ip' command to look for vcan0"
    probe = subprocess.run(["ip", "link", "show", "vcan0"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"vcan0 not present ({probe.stderr.strip() or 'ip link show vcan0 failed'})"
    try:
        can.Bus(interface="socketcan", channel="vcan0").shutdown()
    except (can.CanError, OSError) as exc:
        return f"vcan0 present but not usable: {exc}"
    return None


# -- the fish: the patent's worked example -----------------------------------------------
# It decodes only relaxed (header FE FF, a CRC that matches nothing): its
# content, re-encoded in a valid frame, is what the tests send.
_PATENT = action_frame.decode(parse_hex((FIXTURES / "patent_example.hex").read_text()),
                              relaxed=True)
EXAMPLE = ActionFrame(_PATENT.machine, _PATENT.type, _PATENT.sub, _PATENT.data)
STEPS = [[(e.servo_id, e.speed, e.angle) for e in st.servos]
         for st in action_group.from_frame(EXAMPLE).steps]
REPEAT = action_group.from_frame(EXAMPLE).repeat


# -- the stand-in of Webots' controller module -------------------------------------------
STANDIN = Path(__file__).parent / "webots_standin"


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(STANDIN))
    sys.modules.pop("controller", None)
    module = importlib.import_module("controller")
    yield module
    sys.modules.pop("controller", None)


def world(controller: ModuleType, end_ms: int, step: float = 8.0) -> tuple[object, object, object]:
    """A stand-in world: the robot, a host and a supervisor node on their channels."""
    sim = controller.Simulator(basic_time_step=step, end_ms=end_ms)
    # The robot node with the devices of PROTOCOLS.md 5; channels deliberately wrong
    # (0): the adapter must set them.
    sim.add_robot(
        "robot",
        [
            ("emitter", "serialComTx", 0),
            ("receiver", "serialComRx", 0),
            ("emitter", "supervisorComTx", 0),
            ("receiver", "supervisorComRx", 0),
        ],
    )
    host = sim.add_robot("host", [("emitter", "tx", 3), ("receiver", "rx", 4)])
    sup = sim.add_robot("supervisor", [("emitter", "tx", 1), ("receiver", "rx", 2)])
    host.devices["rx"].enable(8)
    sup.devices["rx"].enable(8)
    controller.install(sim)
    return sim, host, sup


def drain(rx: object) -> bytes:
    """Every byte queued on a stand-in Receiver."""
    out = b""
    while rx.getQueueLength():  # type: ignore[attr-defined]
        out += rx.getBytes()  # type: ignore[attr-defined]
        rx.nextPacket()  # type: ignore[attr-defined]
    return out


# -- the robot fish behind sim:// ------------------------------------------------------
FISH_URL = "sim://fish?pacing=afap"


class Fish:
    """A fish behind sim://, the host's ActionLink on it, and a CAN spy."""

    def __init__(self) -> None:
        offer_sim()
        self.port = serial.serial_for_url(FISH_URL, timeout=0.1)
        self.world = self.port.endpoint.world
        self.model: RobotFish = self.port.endpoint.model
        self.link = ActionLink(self.port)
        # The spy acknowledges like any node and keeps every servo command.
        self.spy = FwBridgeBus(self.model.can_channel, rx_queue_size=50_000, name="spy")
        self.spy.set_filters([{"can_id": 0x100, "can_mask": 0x700, "extended": False}])

    def close(self) -> None:
        self.spy.shutdown()
        self.model.close()
        self.port.close()

    def commands(self, command: int = SubCommand.SET_SERVO_POSITION
                 ) -> list[tuple[float, int, int, int]]:
        """(bus time, module, speed, angle) of the servo commands seen so far."""
        out = []
        while (msg := self.spy.recv(0)) is not None:
            got = from_message(msg)
            if got is not None and got.direction is Direction.COMMAND \
                    and got.struct.command == command:
                s = got.struct
                out.append((msg.timestamp - self.spy.sim.epoch, got.module, s.speed, s.angle))
        return out

    def run_until_group_done(self, limit_ms: int = 10_000) -> None:
        assert self.world.run_until(lambda: not self.model.controller.player.running, limit_ms)


@contextlib.contextmanager
def shared_bus(name: str, *options: str) -> Iterator[str]:
    """``fwbridge can bus up NAME --detach OPTIONS``, taken down on the way out (set
    FWBRIDGE_RUNTIME_DIR to a private directory first)."""
    up = run_verb("can", "bus", "up", name, "--detach", *options)
    assert up.returncode == 0, up.stderr
    try:
        yield name
    finally:
        run_verb("can", "bus", "down", name)


def bus_daemon(name: str, **options: Any) -> Iterator[tuple[BusDaemon, threading.Thread]]:
    """A shared bus daemon in this process, running on a thread until the generator is
    closed or resumed (a fixture's ``for dm, _ in bus_daemon(...): yield dm``); the
    thread is given for tests that check it outlived what they sent."""
    dm = BusDaemon(name, **options)
    dm.open()
    t = threading.Thread(target=dm.run, daemon=True)
    t.start()
    try:
        yield dm, t
    finally:
        dm.stop()
        t.join(5)
        dm.close()


class Lines:
    """The lines a process writes on a pipe, read by a thread, so a test waits for one
    with a bounded timeout instead of sleeping."""

    def __init__(self, stream: Any) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            self._queue.put(raw.decode(errors="replace") if isinstance(raw, bytes) else raw)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """The first line so far containing ``text``, waiting for it if none has yet (so
        lines that come in either order can be waited for one after the other)."""
        for line in self.seen:
            if text in line:
                return line
        return self._next(lambda line: text in line, f"no line with {text!r}", timeout)

    def next_line(self, start: str, timeout: float = 30.0) -> str:
        """The next line not read before that starts with ``start``: a report asked for
        again is a new line, never one seen before."""
        return self._next(lambda line: line.startswith(start), f"no new line {start!r}…",
                          timeout)

    def _next(self, want: Callable[[str], bool], missing: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"{missing}; got: {''.join(self.seen)[-3000:]}")
            self.seen.append(line)
            if want(line):
                return line

    def drain(self) -> str:
        """Every line so far, without waiting."""
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return "".join(self.seen)
            if line is not None:
                self.seen.append(line)

    def rest(self, timeout: float = 30.0) -> str:
        """Everything, once the pipe closes."""
        self._thread.join(timeout)
        return self.drain()


def can_frame_store() -> Any:
    """A rosbags type store (jazzy) that knows ``can_msgs/msg/Frame``, as the MCAP CAN
    recorder writes it."""
    from rosbags.typesys import get_types_from_msg

    from fwbridge.bridge.record.can_mcap import FRAME_SCHEMA, FRAME_TYPE
    from fwbridge.bridge.rosmsg import cdr

    ts: Any = cdr.typestore("jazzy")
    if FRAME_TYPE not in ts.types:
        ts.register(get_types_from_msg(FRAME_SCHEMA.split("\n" + "=" * 80)[0], FRAME_TYPE))
    return ts


class OdometryReader(threading.Thread):
    """Reads a board's odometry frames from ``fd`` with the host's receiver, in a thread;
    :meth:`wait` polls what it has for a condition, within a deadline."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        from fwbridge.protocols import odom_frame
        from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

        self.fd = fd
        self.rx = Sum8Receiver(odom_frame.CODEC)
        self.frames: list[Any] = []
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def run(self) -> None:
        import select

        while not self.halt.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                return
            got = [r.frame for r in self.rx.feed(data)]
            with self.lock:
                self.frames.extend(got)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.frames)

    def since(self, k: int) -> list[Any]:
        with self.lock:
            return self.frames[k:]

    def wait(self, what: str, pred: Callable[[list[Any]], bool], start: int,
             deadline: float = 20.0) -> list[Any]:
        """Frames from ``start`` on once ``pred`` holds for them; fails after ``deadline``."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            got = self.since(start)
            if pred(got):
                return got
            time.sleep(0.01)  # polling: the condition, within the deadline
        got = self.since(start)
        raise AssertionError(f"{what}: {len(got)} odometry frames since, last "
                             f"{got[-1] if got else None}")

    def stop(self) -> None:
        self.halt.set()
        self.join(2.0)
