"""The shared bus's wire and where it lives: runtime directory, packets, and the connection
a node keeps to the daemon (the node itself, a python-can Bus, is :mod:`can_bus.remote`).

The daemon owns the bus model and bus time; this process's Bus submits frames
and receives deliveries over a Unix socket in the user's runtime directory
(:func:`runtime_dir`). Wire format: packets of a 4-byte big-endian length, a
type byte and a body: JSON for the hello and the calls, a fixed header plus
data bytes for messages (:func:`pack_message`).
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
from collections import deque
from pathlib import Path
from typing import Any

import can
from can import CanInitializationError, CanOperationError

from fwbridge.can_bus.simchannel import SimBusError, SimBusInitError
from fwbridge.protocols.errors import CanFrameError

__all__ = ["attachable", "channel_socket", "daemon_info", "list_daemons", "pack_message",
           "packet", "runtime_dir", "unpack_message", "valid_name"]

PACKET_HEADER = struct.Struct(">IB")  # body length + 1 (type byte), type
MESSAGE_PACKET = struct.Struct(">dIBB")  # timestamp, arbitration id, flags, dlc; data follows
FLAG_EXT, FLAG_RTR, _ERR, FLAG_FD, FLAG_BRS, FLAG_ESI, FLAG_RX = 1, 2, 4, 8, 16, 32, 64
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
            raise SimBusInitError(f"{d} is not a private directory of this user "
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
    flags = ((FLAG_EXT if msg.is_extended_id else 0) | (FLAG_RTR if msg.is_remote_frame else 0)
             | (_ERR if msg.is_error_frame else 0) | (FLAG_FD if msg.is_fd else 0)
             | (FLAG_BRS if msg.bitrate_switch else 0)
             | (FLAG_ESI if msg.error_state_indicator else 0)
             | (FLAG_RX if msg.is_rx else 0))
    head = MESSAGE_PACKET.pack(msg.timestamp, msg.arbitration_id, flags, msg.dlc)
    return head + bytes(msg.data or b"")


def unpack_message(body: bytes | memoryview, channel: Any = None) -> can.Message:
    ts, can_id, flags, dlc = MESSAGE_PACKET.unpack_from(body)
    return can.Message(timestamp=ts, arbitration_id=can_id, is_extended_id=bool(flags & FLAG_EXT),
                       is_remote_frame=bool(flags & FLAG_RTR), is_error_frame=bool(flags & _ERR),
                       is_fd=bool(flags & FLAG_FD), bitrate_switch=bool(flags & FLAG_BRS),
                       error_state_indicator=bool(flags & FLAG_ESI), is_rx=bool(flags & FLAG_RX),
                       dlc=dlc, data=bytes(body[MESSAGE_PACKET.size:]), channel=channel,
                       check=False)


def packet(kind: bytes, body: bytes = b"") -> bytes:
    return PACKET_HEADER.pack(len(body) + 1, kind[0]) + body


class Connection:
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
            raise SimBusError(f"the bus daemon went away: {exc}") from None
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
                    size, kind = PACKET_HEADER.unpack_from(buf, pos)
                    if size < 1 or size > MAX_PACKET:
                        raise CanFrameError("broken packet")
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
            raise SimBusError("the node is shut down")
        with self.cond:
            self._calls = getattr(self, "_calls", 0) + 1
            cid = self._calls
        self.send(packet(b"R", json.dumps({"id": cid, "op": op, **args}).encode()))
        deadline = time.monotonic() + timeout
        with self.cond:
            while cid not in self.replies:
                if self.closed or time.monotonic() > deadline:
                    raise SimBusError(f"the bus daemon did not answer {op!r}")
                self.cond.wait(0.5)
            reply = self.replies.pop(cid)
        if "error" in reply:
            raise SimBusError(str(reply["error"]))
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
