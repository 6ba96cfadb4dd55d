"""The shared CAN bus's wire (``fwbridge can bus up``): packet kinds, packing, and the
checks every packet passes before either end acts on it. Sans-I/O: bytes in, values out.

A packet is a 4-byte big-endian length (the body's plus one), a kind byte and a body:
JSON for the hello and the calls, a fixed header plus data bytes for frames. A socket
is an interface: whatever arrives on it is checked here, and anything that is not
exactly a packet of this protocol raises :class:`WireError` (the daemon answers with
an :attr:`Kind.ERROR` packet and drops that client).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any, NamedTuple

from fwbridge.protocols.config_text import TextLimitError
from fwbridge.protocols.config_text import parse_json as parse_json_text
from fwbridge.protocols.errors import CanFrameError

__all__ = ["HEADER", "MAX_PACKET", "MESSAGE", "Call", "Hello", "Kind", "Message",
           "PacketReader", "WireError", "frame_flags", "message_packet", "pack", "pack_call",
           "pack_done", "pack_hello", "pack_json", "pack_message", "pack_wait", "packet_message",
           "parse_call", "parse_done", "parse_hello", "parse_json", "parse_wait",
           "unpack_message"]

HEADER = struct.Struct(">IB")  # body length + 1 (the kind byte), kind
MESSAGE = struct.Struct(">dIBB")  # timestamp, arbitration id, flags, dlc; data follows
WAIT = struct.Struct(">d")  # the horizon, seconds of bus time
DONE = struct.Struct(">I")  # frames done
MAX_PACKET = 1 << 16  # no packet of this protocol is longer: a longer one is a broken peer
FLAG_EXT, FLAG_RTR, FLAG_ERR, FLAG_FD, FLAG_BRS, FLAG_ESI, FLAG_RX = 1, 2, 4, 8, 16, 32, 64
_FLAGS = 127
MAX_HORIZON = 1e9  # seconds of bus time (31 years): a later horizon is a broken peer
_CAN_ID = {False: 1 << 11, True: 1 << 29}


class WireError(CanFrameError):
    """Bytes that are not a packet of the shared bus's protocol."""


class Kind(IntEnum):
    """Packet kinds; upper case from a node to the daemon, lower case back."""

    SEND = ord("S")  # a frame to send
    WAIT = ord("W")  # afap: blocked on the bus up to a bus time (inf: for traffic)
    IDLE = ord("I")  # afap: holds no bus time
    HELLO = ord("H")  # attach, with the node's settings (JSON)
    CALL = ord("R")  # a call (JSON: id, op, arguments)
    MESSAGE = ord("m")  # a frame delivered
    DONE = ord("c")  # so many of the node's frames are done (sent, flushed or dropped)
    REACHED = ord("t")  # afap: the horizon of the last WAIT is reached
    REPLY = ord("r")  # a call's answer (JSON)
    WELCOME = ord("h")  # the hello's answer (JSON: node id and the bus, or an error)
    ERROR = ord("e")  # the peer broke the protocol (JSON: error); the connection ends


_TO_DAEMON = frozenset({Kind.SEND, Kind.WAIT, Kind.IDLE, Kind.HELLO, Kind.CALL})
_TO_NODE = frozenset(set(Kind) - _TO_DAEMON)
_KINDS = {int(k): k for k in Kind}  # a dict look-up: Kind(byte) costs a microsecond a packet


def pack(kind: Kind, body: bytes = b"") -> bytes:
    return HEADER.pack(len(body) + 1, int(kind)) + body


def pack_json(kind: Kind, obj: Any) -> bytes:
    """A packet with a JSON body (hello, call, reply, welcome, error)."""
    return pack(kind, json.dumps(obj).encode())


def pack_wait(horizon: float) -> bytes:
    """A WAIT packet: blocked on the bus up to ``horizon`` (inf: for traffic)."""
    return pack(Kind.WAIT, WAIT.pack(horizon))


def pack_done(n: int) -> bytes:
    """A DONE packet: ``n`` of the node's frames are done."""
    return pack(Kind.DONE, DONE.pack(n))


class PacketReader:
    """Splits a byte stream into ``(kind, body)`` packets, whatever its chunking. ``to``
    is the side reading ("daemon" or "node"): a kind meant for the other side is an error."""

    def __init__(self, to: str = "daemon") -> None:
        self._buf = bytearray()
        self._kinds = {b: k for b, k in _KINDS.items()
                       if k in (_TO_DAEMON if to == "daemon" else _TO_NODE)}

    @property
    def pending(self) -> int:
        """Bytes held for a packet not yet whole (at most one packet)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> Iterator[tuple[Kind, bytes]]:
        """The whole packets ``chunk`` completes; raises :class:`WireError` at the first
        broken one (what follows it is never read)."""
        buf = self._buf
        buf += chunk
        pos = 0
        kinds, unpack, end = self._kinds, HEADER.unpack_from, len(buf)
        try:
            while end - pos >= 5:  # HEADER.size
                size, kind = unpack(buf, pos)
                if size < 1 or size > MAX_PACKET:
                    raise WireError(f"packet length {size} (1..{MAX_PACKET})")
                k = kinds.get(kind)
                if k is None:
                    raise WireError(f"unknown packet kind {kind:#04x}")
                if end - pos < 4 + size:
                    break
                body = bytes(buf[pos + 5:pos + 4 + size])
                pos += 4 + size
                yield k, body
        finally:
            del buf[:pos]


class Message(NamedTuple):
    timestamp: float
    can_id: int
    flags: int
    dlc: int
    data: bytes


def frame_flags(*, extended: bool = False, remote: bool = False, error: bool = False,
                fd: bool = False, brs: bool = False, esi: bool = False, rx: bool = False) -> int:
    """A frame's flags byte."""
    return ((FLAG_EXT if extended else 0) | (FLAG_RTR if remote else 0)
            | (FLAG_ERR if error else 0) | (FLAG_FD if fd else 0) | (FLAG_BRS if brs else 0)
            | (FLAG_ESI if esi else 0) | (FLAG_RX if rx else 0))


def pack_message(timestamp: float, can_id: int, flags: int, dlc: int, data: bytes) -> bytes:
    """A frame's packet body (SEND and MESSAGE packets)."""
    return MESSAGE.pack(timestamp, can_id, flags, dlc) + data


def message_packet(timestamp: float, can_id: int, flags: int, dlc: int, data: bytes) -> bytes:
    """A whole MESSAGE packet (a frame delivered), packed once for all its receivers."""
    body = MESSAGE.pack(timestamp, can_id, flags, dlc) + data
    return HEADER.pack(len(body) + 1, Kind.MESSAGE) + body


def packet_message(pkt: bytes) -> Message:
    """The frame of a whole MESSAGE packet (as :func:`message_packet` made it)."""
    return unpack_message(pkt[HEADER.size:])


def unpack_message(body: bytes) -> Message:
    """A frame's packet body, checked: an identifier that fits, known flags, a DLC and
    data a CAN (FD) frame can have."""
    if len(body) < MESSAGE.size:
        raise WireError(f"frame packet of {len(body)} bytes (at least {MESSAGE.size})")
    ts, can_id, flags, dlc = MESSAGE.unpack_from(body)
    data = body[MESSAGE.size:]
    if flags & ~_FLAGS:
        raise WireError(f"frame flags {flags:#x}: unknown bits")
    if not math.isfinite(ts):
        raise WireError(f"frame timestamp {ts}")
    if can_id >= _CAN_ID[bool(flags & FLAG_EXT)]:
        raise WireError(f"arbitration id {can_id:#x} does not fit its format")
    fd = bool(flags & FLAG_FD)
    # an FD frame's DLC is its length, as python-can has it (up to 64)
    if dlc > (64 if fd else 15) or len(data) > (64 if fd else 8):
        raise WireError(f"frame of dlc {dlc} with {len(data)} data bytes")
    return Message(ts, can_id, flags, dlc, data)


def _reject_constant(name: str) -> Any:
    raise WireError(f"JSON constant {name} is not a number of this protocol")


def parse_json(body: bytes) -> Any:
    """A JSON body: UTF-8, no NaN or Infinity, nested at most 32 deep (what a check of
    it may print, ``repr``, recurses too)."""
    try:
        return parse_json_text(body.decode("utf-8"), "packet", parse_constant=_reject_constant)
    except TextLimitError as exc:
        raise WireError(f"JSON {exc.reason}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"not JSON: {exc}") from None


def _object(body: bytes, what: str) -> dict[str, Any]:
    obj = parse_json(body)
    if not isinstance(obj, dict):
        raise WireError(f"{what}: a JSON object expected, not {type(obj).__name__}")
    return obj


def _flag(obj: dict[str, Any], key: str, default: bool | None = False) -> bool | None:
    v = obj.get(key, default)
    if v is None and default is None:
        return None
    if not isinstance(v, bool):
        raise WireError(f"{key}: true or false, not {v!r:.40}")
    return v


def _int(obj: dict[str, Any], key: str, lo: int, hi: int) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer() and lo <= v <= hi:
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise WireError(f"{key}: an integer in {lo}..{hi}, not {v!r:.40}")
    return v


def _str(obj: dict[str, Any], key: str, limit: int = 256) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or len(v) > limit:
        raise WireError(f"{key}: a string of at most {limit} characters")
    return v


@dataclass(frozen=True)
class Hello:
    """A node's settings as it attaches."""

    name: str = ""
    fd: bool = False
    listen_only: bool = False
    auto_recovery: bool = True
    fifo: bool = False
    receive_own_messages: bool = False
    receive_error_frames: bool = False
    bitrate: int | None = None
    data_bitrate: int | None = None
    pacing: str | None = None
    #: realtime: the node holds each frame until its end (``t0`` of the welcome plus its
    #: bus time), so the daemon hands frames over as soon as their outcome is settled
    hold: bool = False
    #: afap: a frame handed to the node while it waits for traffic holds bus time until
    #: it calls again (False: a node that never answers in bus time, e.g. a logger)
    lockstep: bool = True


def pack_hello(hello: Hello) -> bytes:
    return pack_json(Kind.HELLO, asdict(hello))


def parse_hello(body: bytes) -> Hello:
    obj = _object(body, "hello")
    pacing = _str(obj, "pacing")
    if pacing not in (None, "realtime", "afap"):
        raise WireError(f"pacing: realtime or afap, not {pacing!r:.40}")
    return Hello(name=_str(obj, "name", 64) or "",
                 fd=bool(_flag(obj, "fd")), listen_only=bool(_flag(obj, "listen_only")),
                 auto_recovery=bool(_flag(obj, "auto_recovery", True)),
                 fifo=bool(_flag(obj, "fifo")),
                 receive_own_messages=bool(_flag(obj, "receive_own_messages")),
                 receive_error_frames=bool(_flag(obj, "receive_error_frames")),
                 bitrate=_int(obj, "bitrate", 1, 100_000_000),
                 data_bitrate=_int(obj, "data_bitrate", 1, 100_000_000), pacing=pacing,
                 hold=bool(_flag(obj, "hold")),
                 lockstep=bool(_flag(obj, "lockstep", True)))


#: The calls a node makes, and what each takes besides ``id`` and ``op``.
CALLS = frozenset({"bus_time", "stats", "endpoints", "state", "filters", "own", "flush",
                   "set_state", "inject", "recover"})


def pack_call(cid: int, op: str, **args: Any) -> bytes:
    return pack_json(Kind.CALL, {"id": cid, "op": op, **args})


@dataclass(frozen=True)
class Call:
    id: int
    op: str
    args: dict[str, Any]


def _filters(v: Any) -> list[dict[str, Any]]:
    if not isinstance(v, list) or len(v) > 1024:
        raise WireError("filters: a list of at most 1024 filters")
    out = []
    for f in v:
        if not isinstance(f, dict):
            raise WireError("filters: each one an object with can_id and can_mask")
        can_id = _int(f, "can_id", 0, (1 << 29) - 1)
        can_mask = _int(f, "can_mask", 0, (1 << 29) - 1)
        if can_id is None or can_mask is None:
            raise WireError("filters: each one has can_id and can_mask")
        out.append({"can_id": can_id, "can_mask": can_mask,
                    "extended": _flag(f, "extended", None)})
    return out


def parse_call(body: bytes) -> Call:
    obj = _object(body, "call")
    cid = _int(obj, "id", 0, (1 << 53) - 1)
    op = obj.get("op")
    if cid is None or not isinstance(op, str) or op not in CALLS:
        raise WireError(f"call: an id and one of {', '.join(sorted(CALLS))} expected")
    args: dict[str, Any] = {}
    if op == "filters":
        args["filters"] = _filters(obj.get("filters") or [])
    elif op == "own":
        args["flag"] = bool(_flag(obj, "flag"))
    elif op == "set_state":
        args["listen_only"] = bool(_flag(obj, "listen_only"))
    elif op == "inject":
        ber = obj.get("bit_error_rate")
        if ber is not None and (isinstance(ber, bool) or not isinstance(ber, int | float)
                                or not 0.0 <= ber <= 1.0):
            raise WireError(f"bit_error_rate: a number in 0..1, not {ber!r:.40}")
        seed = obj.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | str)
                                 or (isinstance(seed, str) and len(seed) > 256)):
            raise WireError("seed: an integer or a short string")
        args = {"bit_error_rate": None if ber is None else float(ber),
                "stuck_dominant": _flag(obj, "stuck_dominant", None),
                "disconnected": _flag(obj, "disconnected", None), "seed": seed}
    return Call(cid, op, args)


def parse_wait(body: bytes) -> float:
    """A WAIT's horizon in seconds of bus time: 0 up to :data:`MAX_HORIZON`, or inf."""
    if len(body) != 8:
        raise WireError(f"wait packet of {len(body)} bytes (8)")
    (t,) = WAIT.unpack(body)
    if not (t == math.inf or 0.0 <= t <= MAX_HORIZON):
        raise WireError(f"wait horizon {t} (0..{MAX_HORIZON:g} s, or inf)")
    return float(t)


def parse_done(body: bytes) -> int:
    if len(body) != 4:
        raise WireError(f"done packet of {len(body)} bytes (4)")
    return int(DONE.unpack(body)[0])
