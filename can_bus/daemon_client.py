"""The connection a node keeps to the shared bus's daemon, and frames as packets (the node
itself is :mod:`can_bus.remote`).

The daemon owns the bus model and bus time; this process's Bus submits frames
and receives deliveries over a Unix socket in the user's runtime directory
(:mod:`can_bus.daemon_dir`). The wire, its packet kinds and their checks, is
:mod:`protocols.bus_wire`: a daemon's packets are checked as any peer's are.
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import threading
import time
from collections import deque
from typing import Any

import can
from can import CanOperationError

from fwbridge.can_bus.simchannel import SimBusError
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import (
    FLAG_BRS,
    FLAG_ERR,
    FLAG_ESI,
    FLAG_EXT,
    FLAG_FD,
    FLAG_RTR,
    FLAG_RX,
    Kind,
    WireError,
)

__all__ = ["Connection", "DaemonGone", "pack_message", "unpack_message"]


def pack_message(msg: can.Message) -> bytes:
    flags = bus_wire.frame_flags(extended=msg.is_extended_id, remote=msg.is_remote_frame,
                                 error=msg.is_error_frame, fd=msg.is_fd,
                                 brs=msg.bitrate_switch, esi=msg.error_state_indicator,
                                 rx=msg.is_rx)
    return bus_wire.pack_message(msg.timestamp, msg.arbitration_id, flags, msg.dlc,
                                 bytes(msg.data or b""))


_SLOTS = frozenset({"arbitration_id", "bitrate_switch", "channel", "data", "dlc",
                    "error_state_indicator", "is_error_frame", "is_extended_id", "is_fd",
                    "is_remote_frame", "is_rx", "timestamp"})
# python-can's Message is these slots and nothing else: filling them is what its __init__
# does for a checked frame, in a third of the time (every frame a node receives comes here)
_FILL = set(getattr(can.Message, "__slots__", ())) - {"__weakref__"} == _SLOTS


def unpack_message(body: bytes, channel: Any = None) -> can.Message:
    """A frame packet's body as a python-can Message (checked: :class:`WireError`)."""
    ts, can_id, flags, dlc, data = bus_wire.unpack_message(body)
    if _FILL:
        m: can.Message = can.Message.__new__(can.Message)
        m.timestamp, m.arbitration_id, m.channel, m.dlc = ts, can_id, channel, dlc
        m.is_extended_id, m.is_remote_frame = bool(flags & FLAG_EXT), bool(flags & FLAG_RTR)
        m.is_error_frame, m.is_fd = bool(flags & FLAG_ERR), bool(flags & FLAG_FD)
        m.bitrate_switch, m.error_state_indicator = bool(flags & FLAG_BRS), bool(flags & FLAG_ESI)
        m.is_rx, m.data = bool(flags & FLAG_RX), bytearray(data)
        return m
    return can.Message(timestamp=ts, arbitration_id=can_id, is_extended_id=bool(flags & FLAG_EXT),
                       is_remote_frame=bool(flags & FLAG_RTR),
                       is_error_frame=bool(flags & FLAG_ERR),
                       is_fd=bool(flags & FLAG_FD), bitrate_switch=bool(flags & FLAG_BRS),
                       error_state_indicator=bool(flags & FLAG_ESI), is_rx=bool(flags & FLAG_RX),
                       dlc=dlc, data=data, channel=channel, check=False)


#: s after an application thread last waited on a connection during which its reader
#: thread leaves the socket to it (a program that calls ``recv`` in a loop reads its own
#: frames: no hand-off between threads on their way in)
HANDOVER = 0.05
#: s: a frame sent sooner than this after the previous write goes out with the ones that
#: follow, through the flusher thread (one system call for a burst); a lone frame is
#: written at once (no hand-off on its way out)
BURST = 200e-6


class DaemonGone(SimBusError):
    """The shared bus's daemon went away under a node (killed, crashed): every operation
    of the node says so, instead of a full transmit buffer or a shut-down bus."""


class Connection:
    """The socket to the daemon and what arrives on it; owned by a RemoteNode. Whichever
    thread waits on it (``recv``, a call, a full transmit buffer) reads the socket itself;
    a reader thread reads it while none does (so frames queue, replies arrive and a gone
    daemon is seen), and never refers to the Bus (so an abandoned Bus can be collected)."""

    def __init__(self, sock: socket.socket, rx_size: int, channel: Any, name: str = "") -> None:
        self.sock = sock
        self.channel = channel
        self.name = name  # the shared bus's name, for what is said when the daemon goes
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)  # something arrived (or the end)
        self._parked = threading.Condition(self.lock)  # the reader thread's own wake-ups
        self.send_lock = threading.Lock()
        self.out = bytearray()
        self.kick = threading.Event()
        self.flusher: threading.Thread | None = None
        self._last_write = 0.0
        self.rx: deque[can.Message] = deque(maxlen=rx_size or None)
        self.replies: dict[int, Any] = {}
        self.outstanding = 0
        self.reached = 0  # advance_to answers
        self.closed = False
        self.waiting = False  # blocked on the bus (afap); a new node is idle
        self.lockstep = True  # afap: frames handed to it hold bus time (it waits anew)
        self.hello: dict[str, Any] | None = None
        self.error: str | None = None  # why the daemon ended the connection
        self.gone: str | None = None  # the daemon went away without a word: how
        self._shut = False  # this end closed it (close())
        self._packets = bus_wire.PacketReader(to="node")
        self._reading = False  # a thread reads the socket (changed with the lock held)
        self.active = 0.0  # monotonic time an application thread last waited or read here
        self._calls = 0  # the last call's id
        self.thread = threading.Thread(target=self._background, name="fwbridge-remote",
                                       daemon=True)

    # -- out ------------------------------------------------------------------------------
    def send(self, data: bytes, now: bool = True) -> None:
        """Write a packet. A frame (``now=False``) that follows another within
        :data:`BURST` waits a moment for the flusher thread to write it with the ones
        after it; any other packet writes what waits first, so the daemon sees
        everything in order."""
        with self.send_lock:
            self.out += data
            t = time.monotonic()
            if not now and len(self.out) < 1 << 15 and (
                    t - self._last_write < BURST or len(self.out) > len(data)):
                if self.flusher is None:
                    self.flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                    name="fwbridge-remote-tx")
                    self.flusher.start()
                self._last_write = t
                self.kick.set()
                return
            self._last_write = t
            self._write()

    def _write(self) -> None:
        if not self.out:
            return
        try:
            self.sock.sendall(self.out)
        except OSError as exc:
            if self._shut:
                raise SimBusError("the node is shut down") from None
            # flags only: the lock may be held by a thread waiting for send_lock
            self._lost("connection closed" if isinstance(
                exc, BrokenPipeError | ConnectionResetError) else (exc.strerror or str(exc)))
            self.closed = True
            raise self.gone_error() from None
        finally:
            self.out.clear()

    def _lost(self, how: str) -> None:
        """The connection ended: the daemon went away, unless this end closed it or the
        daemon said why first (then that is what is said)."""
        if not self._shut and self.error is None and self.gone is None:
            self.gone = how

    def gone_error(self, shut: str | None = None) -> SimBusError:
        """What an operation raises once the connection ended: :class:`DaemonGone` when
        the daemon went away, else ``shut`` (the caller's words), else the daemon's error."""
        if self.gone is not None:
            return DaemonGone(f"shared bus {self.name!r}: daemon gone ({self.gone})")
        return SimBusError(shut or self.error or "the node is shut down")

    def _flush_loop(self) -> None:
        while not self.closed:
            self.kick.wait(1.0)
            self.kick.clear()
            with self.send_lock, contextlib.suppress(CanOperationError):
                self._write()

    # -- in -------------------------------------------------------------------------------
    def wait(self, timeout: float) -> None:
        """Wait (lock held) up to ``timeout`` s for something from the daemon, reading the
        socket in this thread unless another one does; may return early (callers loop)."""
        self.active = time.monotonic()
        if self._reading or self.closed:
            self.cond.wait(min(timeout, HANDOVER))
            return
        self._reading = True
        depth = 0
        try:  # let go of the lock, however deep this thread holds it, while it reads
            while True:
                self.lock.release()
                depth += 1
        except RuntimeError:
            pass
        try:
            self._pump(timeout)
        finally:
            for _ in range(depth):
                self.lock.acquire()
            self._reading = False
            self.active = time.monotonic()
            if self.closed:
                self._close_socket()

    def _background(self) -> None:
        while True:
            with self.lock:
                if self.closed:
                    return
                if self._reading or time.monotonic() - self.active < HANDOVER:
                    self._parked.wait(HANDOVER)
                    continue
                self._reading = True
            try:
                self._pump(HANDOVER)
            finally:
                with self.lock:
                    self._reading = False
                    self.cond.notify_all()  # a thread that came to wait meanwhile reads now
                    if self.closed:
                        self._close_socket()

    def _pump(self, timeout: float) -> None:
        """Read what the daemon sent, waiting up to ``timeout`` for it (lock not held)."""
        sock = self.sock
        try:
            fd = sock.fileno()
            if fd < 0:
                chunk = b""
            else:
                if fd < 1024:  # select: microseconds (poll rounds up to a millisecond)
                    ready = bool(select.select([fd], [], [], max(0.0, timeout))[0])
                else:
                    p = select.poll()
                    p.register(fd, select.POLLIN)
                    ready = bool(p.poll(max(0.0, timeout) * 1000))
                if not ready:
                    return
                chunk = sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except (OSError, ValueError):
            chunk = b""
        if not chunk:
            self._lost("connection closed")
            self._end()
            return
        msgs: list[can.Message] = []
        try:
            for kind, body in self._packets.feed(chunk):
                if kind is Kind.MESSAGE:  # a message for us (handed over in one go below)
                    msgs.append(unpack_message(body, self.channel))
                else:
                    self._handle(kind, body)
        except WireError as exc:
            self.error = f"the bus daemon sent a broken packet: {exc}"
            self._end()
            return
        with self.lock:
            if msgs:
                self.rx.extend(msgs)
                if self.lockstep:
                    self.waiting = False  # the daemon holds time until we call again
            self.cond.notify_all()

    def _end(self) -> None:
        with self.lock:
            self.closed = True
            self.cond.notify_all()
            self._parked.notify_all()

    def _handle(self, kind: Kind, body: bytes) -> None:
        if kind is Kind.DONE:  # frames of ours done (sent, flushed or dropped)
            n = bus_wire.parse_done(body)
            with self.lock:
                self.outstanding -= n
        elif kind is Kind.REACHED:
            with self.lock:
                self.reached += 1
                self.waiting = False
        elif kind is Kind.ERROR:
            reply = bus_wire.parse_json(body)
            why = reply.get("error") if isinstance(reply, dict) else None
            self.error = f"the bus daemon ended the connection: {why or 'protocol error'}"
        else:  # REPLY, WELCOME
            reply = bus_wire.parse_json(body)
            if not isinstance(reply, dict):
                raise WireError("a reply that is not a JSON object")
            with self.lock:
                if kind is Kind.WELCOME:
                    self.hello = reply
                else:
                    self.replies[int(reply.get("id", -1))] = reply

    def call(self, op: str, timeout: float = 10.0, **args: Any) -> Any:
        if self.closed:
            raise self.gone_error()
        with self.lock:
            self._calls += 1
            cid = self._calls
        self.send(bus_wire.pack_call(cid, op, **args))
        deadline = time.monotonic() + timeout
        with self.lock:
            while cid not in self.replies:
                if self.closed:
                    raise self.gone_error()
                if time.monotonic() > deadline:
                    raise SimBusError(self.error or f"the bus daemon did not answer {op!r}")
                self.wait(0.5)
            reply = self.replies.pop(cid)
        if "error" in reply:
            raise SimBusError(str(reply["error"]))
        return reply.get("result")

    def wait_flag(self, horizon: float = math.inf) -> None:
        """Afap: this node blocks on the bus (up to bus time ``horizon``). A frame handed
        to it then makes it busy: the daemon holds bus time until it calls again."""
        if not self.waiting or horizon != math.inf:
            self.waiting = True
            horizon = min(max(0.0, horizon), bus_wire.MAX_HORIZON) if horizon != math.inf \
                else horizon
            self.send(bus_wire.pack_wait(horizon))

    def idle(self) -> None:
        """Afap: this node is not blocked on the bus and holds no bus time."""
        self.waiting = False
        self.send(bus_wire.pack(Kind.IDLE))

    def close(self) -> None:
        with self.send_lock, contextlib.suppress(CanOperationError):
            self._write()  # frames still waiting for the flusher
        self._shut = True
        self.closed = True
        self.kick.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with self.lock:
            self.cond.notify_all()
            self._parked.notify_all()
            if not self._reading:  # else the thread in select() on it closes it when it wakes
                self._close_socket()

    def _close_socket(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
