"""A node of a shared simulated bus: ``can.Bus(interface="fwbridge", channel=NAME)`` when a
``fwbridge can bus up NAME`` daemon runs (see :mod:`can_bus.daemon`).

The daemon owns the bus model and bus time; this process's Bus submits frames
and receives deliveries over a Unix socket in the user's runtime directory
(:func:`runtime_dir`). Wire format: packets of a 4-byte big-endian length, a
type byte and a body: JSON for the hello and the calls, a fixed header plus
data bytes for messages (:func:`pack_message`).

Afap buses across processes: as in one process, bus time moves while some node
waits on the bus (``recv`` with a timeout other than 0, a full transmit
buffer, ``wait_sent``, ``advance_to``). A node that was waiting for traffic
and is handed a frame is busy until it calls the bus again: time stands still
meanwhile, so its answer arbitrates at the instant it would in one process.
Frames submitted before the bus runs contend together.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import stat
import struct
import tempfile
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import Any

import can
from can import BusState, CanInitializationError, CanOperationError

__all__ = ["RemoteBus", "attachable", "channel_socket", "daemon_info", "list_daemons",
           "pack_message", "runtime_dir", "unpack_message", "valid_name"]

_HDR = struct.Struct(">IB")  # body length + 1 (type byte), type
_MSG = struct.Struct(">dIBB")  # timestamp, arbitration id, flags, dlc; data follows
_EXT, _RTR, _ERR, _FD, _BRS, _ESI, _RX = 1, 2, 4, 8, 16, 32, 64
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_PACKET = 1 << 16  # no packet of this protocol is longer: a longer one is a broken peer


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and name not in (".", "..")


def runtime_dir(create: bool = False) -> Path:
    """Where daemons put their sockets: ``$FWBRIDGE_RUNTIME_DIR``, else
    ``$XDG_RUNTIME_DIR/fwbridge``, else ``/tmp/fwbridge-<uid>``; private (0700, ours)."""
    env = os.environ.get("FWBRIDGE_RUNTIME_DIR")
    if env:
        d = Path(env)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        d = Path(os.environ["XDG_RUNTIME_DIR"]) / "fwbridge"
    else:
        d = Path(tempfile.gettempdir()) / f"fwbridge-{os.getuid()}"
    if create:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    if d.exists():
        st = d.stat()
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise CanInitializationError(f"{d} is not a private directory of this user "
                                         "(owner and mode 0700 expected)")
    return d


def channel_socket(name: str) -> Path:
    return runtime_dir() / f"{name}.sock"


def daemon_info(name: str) -> dict[str, Any] | None:
    """The daemon ``name``'s description if it is running (its socket answers), else None."""
    try:
        path = runtime_dir() / f"{name}.json"
        info: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError, CanInitializationError):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(runtime_dir() / f"{name}.sock"))
    except OSError:
        return None
    return info


def attachable(name: str) -> bool:
    """A daemon serves the channel ``name`` (its socket answers)."""
    if not valid_name(name):
        return False
    try:
        path = runtime_dir() / f"{name}.sock"
    except CanInitializationError:
        return False
    if not path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(path))
    except OSError:
        return False
    return True


def list_daemons() -> list[dict[str, Any]]:
    try:
        d = runtime_dir()
    except CanInitializationError:
        return []
    if not d.is_dir():
        return []
    found = [daemon_info(p.stem) for p in sorted(d.glob("*.json"))]
    return [i for i in found if i is not None]


def pack_message(msg: can.Message) -> bytes:
    flags = ((_EXT if msg.is_extended_id else 0) | (_RTR if msg.is_remote_frame else 0)
             | (_ERR if msg.is_error_frame else 0) | (_FD if msg.is_fd else 0)
             | (_BRS if msg.bitrate_switch else 0) | (_ESI if msg.error_state_indicator else 0)
             | (_RX if msg.is_rx else 0))
    return _MSG.pack(msg.timestamp, msg.arbitration_id, flags, msg.dlc) + bytes(msg.data or b"")


def unpack_message(body: bytes | memoryview, channel: Any = None) -> can.Message:
    ts, can_id, flags, dlc = _MSG.unpack_from(body)
    return can.Message(timestamp=ts, arbitration_id=can_id, is_extended_id=bool(flags & _EXT),
                       is_remote_frame=bool(flags & _RTR), is_error_frame=bool(flags & _ERR),
                       is_fd=bool(flags & _FD), bitrate_switch=bool(flags & _BRS),
                       error_state_indicator=bool(flags & _ESI), is_rx=bool(flags & _RX),
                       dlc=dlc, data=bytes(body[_MSG.size:]), channel=channel,
                       check=False)


def packet(kind: bytes, body: bytes = b"") -> bytes:
    return _HDR.pack(len(body) + 1, kind[0]) + body


class _Conn:
    """The socket to the daemon and what arrives on it; owned by a RemoteBus, read by a
    thread that never refers to the Bus (so an abandoned Bus can be collected)."""

    def __init__(self, sock: socket.socket, rx_size: int, channel: Any) -> None:
        self.sock = sock
        self.channel = channel
        self.cond = threading.Condition()
        self.send_lock = threading.Lock()
        self.out = bytearray()
        self.kick = threading.Event()
        self.flusher: threading.Thread | None = None
        self.rx: deque[can.Message] = deque(maxlen=rx_size or None)
        self.replies: dict[int, Any] = {}
        self.outstanding = 0
        self.reached = 0  # advance_to answers
        self.closed = False
        self.waiting = False  # blocked on the bus (afap); a new node is idle
        self.hello: dict[str, Any] | None = None
        self.thread = threading.Thread(target=self._read, name="fwbridge-remote", daemon=True)

    def send(self, data: bytes, now: bool = True) -> None:
        """Write a packet; frames (``now=False``) may wait a moment for a flusher thread to
        write them with the ones that follow (one system call for a burst). Any other
        packet writes what waits first, so the daemon sees everything in order."""
        with self.send_lock:
            self.out += data
            if not now and len(self.out) < 1 << 15:
                if self.flusher is None:
                    self.flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                    name="fwbridge-remote-tx")
                    self.flusher.start()
                self.kick.set()
                return
            self._write()

    def _write(self) -> None:
        if not self.out:
            return
        try:
            self.sock.sendall(self.out)
        except OSError as exc:
            raise CanOperationError(f"the bus daemon went away: {exc}") from None
        finally:
            self.out.clear()

    def _flush_loop(self) -> None:
        while not self.closed:
            self.kick.wait(1.0)
            self.kick.clear()
            with self.send_lock, contextlib.suppress(CanOperationError):
                self._write()

    def _read(self) -> None:
        buf = bytearray()
        sock = self.sock
        try:
            while True:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                pos, got = 0, False
                msgs: list[can.Message] = []
                while len(buf) - pos >= 5:
                    size, kind = _HDR.unpack_from(buf, pos)
                    if size < 1 or size > MAX_PACKET:
                        raise ValueError("broken packet")
                    if len(buf) - pos < 4 + size:
                        break
                    body = bytes(buf[pos + 5:pos + 4 + size])
                    pos += 4 + size
                    got = True
                    if kind == 0x6D:  # "m": a message for us (handed over in one go below)
                        msgs.append(unpack_message(body, self.channel))
                    else:
                        self._handle(kind, body)
                del buf[:pos]
                if got:
                    with self.cond:
                        if msgs:
                            self.rx.extend(msgs)
                            self.waiting = False  # the daemon holds time until we call again
                        self.cond.notify_all()
        except (OSError, ValueError):
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _handle(self, kind: int, body: bytes) -> None:
        if kind == 0x63:  # "c": frames of ours done (sent, or flushed)
            with self.cond:
                self.outstanding -= struct.unpack(">I", body)[0]
        elif kind == 0x74:  # "t": advance_to reached
            with self.cond:
                self.reached += 1
                self.waiting = False
        elif kind in (0x72, 0x68):  # "r" reply, "h" hello
            reply = json.loads(body)
            with self.cond:
                if kind == 0x68:
                    self.hello = reply
                else:
                    self.replies[int(reply.get("id", -1))] = reply

    def call(self, op: str, timeout: float = 10.0, **args: Any) -> Any:
        if self.closed:
            raise CanOperationError("the node is shut down")
        with self.cond:
            self._calls = getattr(self, "_calls", 0) + 1
            cid = self._calls
        self.send(packet(b"R", json.dumps({"id": cid, "op": op, **args}).encode()))
        deadline = time.monotonic() + timeout
        with self.cond:
            while cid not in self.replies:
                if self.closed or time.monotonic() > deadline:
                    raise CanOperationError(f"the bus daemon did not answer {op!r}")
                self.cond.wait(0.5)
            reply = self.replies.pop(cid)
        if "error" in reply:
            raise CanOperationError(str(reply["error"]))
        return reply.get("result")

    def wait_flag(self, horizon: float = math.inf) -> None:
        """Afap: this node blocks on the bus (up to bus time ``horizon``). A frame handed
        to it then makes it busy: the daemon holds bus time until it calls again."""
        if not self.waiting or horizon != math.inf:
            self.waiting = True
            self.send(packet(b"W", struct.pack(">d", horizon)))

    def idle(self) -> None:
        """Afap: this node is not blocked on the bus and holds no bus time."""
        self.waiting = False
        self.send(packet(b"I"))

    def close(self) -> None:
        with self.send_lock, contextlib.suppress(CanOperationError):
            self._write()  # frames still waiting for the flusher
        self.closed = True
        self.kick.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


class RemoteSim:
    """What the CLI and the node runner read from a simulated channel, for a remote one."""

    def __init__(self, conn: _Conn, name: str, hello: dict[str, Any]) -> None:
        self._conn = conn
        self.name = name
        self.bitrate = int(hello["bitrate"])
        self.data_bitrate = int(hello["data_bitrate"])
        self.pacing = str(hello["pacing"])
        self.afap = self.pacing == "afap"
        self.epoch = float(hello["epoch"])
        self.lock = threading.RLock()
        self.last_endpoints: list[int] = []

    def bus_time(self) -> float:
        return float(self._conn.call("bus_time"))

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._conn.call("stats")
        return result

    @property
    def endpoints(self) -> list[int]:
        """The bus's nodes (as last seen, once this node is shut down)."""
        if not self._conn.closed:
            self.last_endpoints = list(self._conn.call("endpoints"))
        return self.last_endpoints

    def advance_to(self, t: float) -> None:
        """Afap: wait until the daemon's bus time reaches ``t`` seconds."""
        conn = self._conn
        with conn.cond:
            before = conn.reached
            conn.wait_flag(t)
            while conn.reached == before and not conn.closed:
                conn.cond.wait(1.0)
            conn.waiting = False  # the daemon holds time until we call again


from fwbridge.can_bus.interface import FwBridgeBus  # noqa: E402  (it imports this module lazily)


class RemoteBus(FwBridgeBus):
    """One node on a daemon's bus; the same API as the in-process :class:`FwBridgeBus`."""

    def __init__(self, channel: Any = "sim0", can_filters: Any = None, *,
                 bitrate: int | None = None, data_bitrate: int | None = None,
                 fd: bool = False, pacing: str | None = None,
                 receive_own_messages: bool = False, receive_error_frames: bool = False,
                 listen_only: bool = False, auto_recovery: bool = True,
                 tx_queue_size: int = 256, rx_queue_size: int = 0, tx_order: str = "priority",
                 name: str | None = None, modules: int = 0, capture: str | None = None,
                 **kwargs: Any) -> None:
        from fwbridge.can_bus.interface import _as_bool

        self.channel_name = str(channel)
        if int(modules) or capture:
            raise CanInitializationError(
                f"{self.channel_name} is a shared bus (daemon): modules= and capture= belong to"
                " an in-process channel; run 'fwbridge can sim' or 'fwbridge can record' on it")
        timing = kwargs.get("timing")
        if timing is not None and hasattr(timing, "nom_bitrate"):
            fd, bitrate, data_bitrate = True, int(timing.nom_bitrate), int(timing.data_bitrate)
        fd = _as_bool(kwargs.get("fd", fd))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(channel_socket(self.channel_name)))
        except OSError as exc:
            sock.close()
            raise CanInitializationError(f"bus daemon {self.channel_name}: {exc}") from None
        self.tx_queue_size = max(1, int(tx_queue_size))
        self._fd = fd
        conn = self._conn = _Conn(sock, int(rx_queue_size), channel)
        conn.thread.start()
        self._finalizer: Any = weakref.finalize(self, conn.close)
        hello = {"name": name or "", "fd": fd, "listen_only": _as_bool(listen_only),
                 "auto_recovery": _as_bool(auto_recovery), "fifo": str(tx_order) == "fifo",
                 "receive_own_messages": _as_bool(receive_own_messages),
                 "receive_error_frames": _as_bool(receive_error_frames),
                 "bitrate": None if bitrate is None else int(bitrate),
                 "data_bitrate": None if data_bitrate is None else int(data_bitrate),
                 "pacing": pacing}
        conn.send(packet(b"H", json.dumps(hello).encode()))
        deadline = time.monotonic() + 10.0
        with conn.cond:
            while conn.hello is None and not conn.closed and time.monotonic() < deadline:
                conn.cond.wait(0.5)
        reply = conn.hello
        if reply is None or "error" in reply:
            self._finalizer()
            why = "no answer" if reply is None else reply["error"]
            raise CanInitializationError(f"bus daemon {self.channel_name}: {why}")
        self.node_id = int(reply["node_id"])
        self._sim = RemoteSim(conn, self.channel_name, reply)
        self.channel_info = (f"fwbridge shared CAN{' FD' if fd else ''} {self.channel_name}"
                             f" @ {self._sim.bitrate} bit/s ({self._sim.pacing}, daemon), "
                             f"node {self.node_id}")
        self._can_protocol = can.CanProtocol.CAN_FD if fd else can.CanProtocol.CAN_20
        self._own = _as_bool(receive_own_messages)
        self._errors = _as_bool(receive_error_frames)
        can.BusABC.__init__(self, channel, can_filters=can_filters)

    # -- python-can API ----------------------------------------------------------------------
    def _apply_filters(self, filters: Any) -> None:
        self._conn.call("filters", filters=list(filters or []))

    @property
    def receive_own_messages(self) -> bool:
        return self._own

    @receive_own_messages.setter
    def receive_own_messages(self, flag: bool) -> None:
        self._own = bool(flag)
        self._conn.call("own", flag=self._own)

    @property
    def receive_error_frames(self) -> bool:
        return self._errors

    @receive_error_frames.setter
    def receive_error_frames(self, flag: bool) -> None:
        raise CanOperationError("receive_error_frames of a shared-bus node is set when it opens")

    @property
    def _closed(self) -> bool:
        return self._conn.closed or not self._finalizer.alive

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        with conn.cond:
            while True:
                if conn.rx:
                    return conn.rx.popleft(), True
                if self._closed:
                    raise CanOperationError(f"{self.channel_info}: bus is shut down")
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    if self._sim.afap and conn.waiting:
                        conn.idle()
                    return None, True
                if self._sim.afap:
                    conn.wait_flag()
                conn.cond.wait(min(remaining, 1.0))

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        from fwbridge.can_bus.simchannel import make_frame

        make_frame(msg, self._fd)  # checked here: one clear error, nothing sent
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        with conn.cond:
            if self._closed:
                raise CanOperationError(f"{self.channel_info}: bus is shut down")
            checked = time.monotonic()
            while conn.outstanding >= self.tx_queue_size:
                now = time.monotonic()
                if now - checked > 0.2:
                    checked = now
                    st = conn.call("state")
                    if st["stalled"]:
                        raise CanOperationError(
                            f"{self.channel_info}: transmit buffer full, no acknowledgement: no"
                            f" other node on {self.channel_name} can receive")
                remaining = 1.0 if deadline is None else deadline - now
                if remaining <= 0 or conn.closed:
                    raise CanOperationError(
                        f"{self.channel_info}: transmit buffer full ({self.tx_queue_size} frames)")
                if self._sim.afap:
                    conn.wait_flag()
                conn.cond.wait(min(remaining, 0.2))
            conn.outstanding += 1
            conn.send(packet(b"S", pack_message(msg)), now=False)
            if self._sim.afap and conn.waiting:
                conn.idle()  # submitted: whatever it sends next need not hold the bus

    def flush_tx_buffer(self) -> None:
        self._conn.call("flush")

    @property
    def state(self) -> BusState:
        st = self._conn.call("state")
        if st["state"] == "BUS_OFF":
            return BusState.ERROR
        return BusState.PASSIVE if st["state"] == "PASSIVE" or st["listen_only"] \
            else BusState.ACTIVE

    @state.setter
    def state(self, new_state: BusState) -> None:
        if new_state is BusState.ERROR:
            raise CanOperationError("a node cannot be put into bus-off on request")
        self._conn.call("set_state", listen_only=new_state is BusState.PASSIVE)

    def shutdown(self) -> None:
        if self._is_shutdown or self._closed:
            can.BusABC.shutdown(self)
            return
        with contextlib.suppress(CanOperationError):
            self.wait_sent()
            _ = self._sim.endpoints  # remembered for what is said after shutdown
        self._finalizer()
        can.BusABC.shutdown(self)

    # -- simulator extras --------------------------------------------------------------------
    @property
    def sim(self) -> Any:
        return self._sim

    @property
    def time(self) -> float:
        return self._sim.bus_time()

    @property
    def error_counters(self) -> tuple[int, int]:
        st = self._conn.call("state")
        return int(st["tec"]), int(st["rec"])

    def error_state(self) -> Any:
        from fwbridge.can_bus.model import ErrorState

        return ErrorState[self._conn.call("state")["state"]]

    def advance_to(self, t: float) -> None:
        self._sim.advance_to(t)

    def advance(self, dt: float) -> None:
        self._sim.advance_to(self._sim.bus_time() + dt)

    def inject(self, *, bit_error_rate: float | None = None, stuck_dominant: bool | None = None,
               disconnected: bool | None = None, seed: int | None = None) -> None:
        self._conn.call("inject", bit_error_rate=bit_error_rate, stuck_dominant=stuck_dominant,
                        disconnected=disconnected, seed=seed)

    def recover(self) -> None:
        self._conn.call("recover")

    def wait_sent(self, timeout: float = 2.0) -> int:
        """Wait until this node's frames are on the bus (or cannot be); how many are left."""
        conn = self._conn
        deadline = time.monotonic() + timeout
        with conn.cond:
            while conn.outstanding > 0 and not conn.closed:
                st = conn.call("state")
                if st["stalled"] or st["state"] == "BUS_OFF":
                    break
                if not self._sim.afap and time.monotonic() > deadline:
                    break
                if self._sim.afap:
                    conn.wait_flag()
                conn.cond.wait(0.05)
            if self._sim.afap and conn.waiting:
                conn.idle()
            return max(0, conn.outstanding)
