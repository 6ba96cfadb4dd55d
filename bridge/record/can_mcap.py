"""CAN traffic in MCAP (and live views): frames, bus load per ID, error-state changes.

Channels (documented in docs/MCAP.md):

- ``/from_can_bus`` / ``/to_can_bus``: every frame received / sent, as ROS 2
  ``can_msgs/msg/Frame`` in CDR (the message and topic names of ros2_socketcan),
  ``header.frame_id`` the channel name. Nothing the bus carried is lost:
  ID, flags, DLC and the 8 data bytes, time to the nanosecond.
- ``/fwbridge/can/load`` (JSON): once per second of bus time, the load
  (exact frame bits, stuffing included, as ``fwbridge can busload``) and
  frames/s per ID.
- ``/fwbridge/can/state`` (JSON): a node's fault-confinement state change
  (error-active / error-passive / bus-off, TEC, REC), where the bus reports it.
- with ``extend`` (the CLI's recordings): ``/joint_states`` and the like, from
  the layer that knows ROS 2 (:mod:`fwbridge.bridge.record.can_joint_states`).

Files are compact by default (no message or chunk indexes: under half the
bytes; ``index=True`` for a file Foxglove seeks at any size; docs/MCAP.md).

:class:`McapCanWriter` is a python-can ``MessageWriter`` for ``.mcap``, so
``open_writer``, ``can.Logger`` (hence ``python -m can.logger -f bus.mcap``) and
the simulator's capture tap write MCAP; :class:`McapCanReader` and
:func:`read_mcap_messages` read the frames back as ``can.Message``
(``can.LogReader``, ``can.player``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import can
from can.io.generic import MessageReader, MessageWriter

from fwbridge.bridge.record.channel_streams import ChannelSpec, Streams
from fwbridge.bridge.record.mcap_reader import Declared, read_mcap
from fwbridge.bridge.record.mcap_sink import McapError, McapSink
from fwbridge.can_bus.bits import Frame, frame_length
from fwbridge.protocols.errors import CaptureError

__all__ = ["FRAME_SCHEMA", "FRAME_TYPE", "LOAD", "RX_TOPIC", "STATE", "TX_TOPIC", "CanRecorder",
           "McapCanReader", "McapCanWriter", "decode_frame", "encode_frame", "read_mcap_messages"]

FRAME_TYPE = "can_msgs/msg/Frame"
RX_TOPIC, TX_TOPIC = "/from_can_bus", "/to_can_bus"
_SEP = "=" * 80
#: The ros2msg schema of a CAN frame with its dependencies, as rosbag2 and Foxglove expect.
FRAME_SCHEMA = (
    "std_msgs/Header header\nuint32 id\nbool is_rtr\nbool is_extended\nbool is_error\n"
    "uint8 dlc\nuint8[8] data\n"
    f"{_SEP}\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
    f"{_SEP}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
)
FRAMES = {
    True: ChannelSpec(RX_TOPIC, FRAME_TYPE, "ros2msg", FRAME_SCHEMA, "cdr"),
    False: ChannelSpec(TX_TOPIC, FRAME_TYPE, "ros2msg", FRAME_SCHEMA, "cdr"),
}
# Foxglove's JSON-schema parser takes one type per field and an object only with its
# properties: no maps (the IDs are rows), no nulls (an unknown bit rate leaves out the
# rate and the loads).
LOAD = ChannelSpec("/fwbridge/can/load", "fwbridge.CanLoad", "jsonschema", json.dumps({
    "type": "object", "title": "CAN bus load over one window",
    "properties": {
        "window_s": {"type": "number"},
        "bitrate": {"type": "integer", "description": "bit/s (absent: not known)"},
        "frames": {"type": "integer"}, "bits": {"type": "integer"},
        "load": {"type": "number", "description": "% of the bit rate (absent: rate unknown)"},
        "ids": {"type": "array", "description": "per ID, by ID (standard IDs first)",
                "items": {"type": "object", "properties": {
                    "id": {"type": "string", "description": "hex, 3 digits (8: extended)"},
                    "frames": {"type": "integer"}, "fps": {"type": "number"},
                    "bits": {"type": "integer"},
                    "load": {"type": "number", "description": "% of the bit rate"}}}},
    }}), "json")
STATE = ChannelSpec("/fwbridge/can/state", "fwbridge.CanState", "jsonschema", json.dumps({
    "type": "object", "title": "A node's fault-confinement state changed",
    "properties": {"node": {"type": "string"}, "old": {"type": "string"},
                   "new": {"type": "string"}, "tec": {"type": "integer"},
                   "rec": {"type": "integer"}}}), "json")

_HEAD = b"\x00\x01\x00\x00"  # CDR, little endian

_STAMP = struct.Struct("<iI")  # decoding
_MAX_NS = (2**31 - 1) * 1_000_000_000 + 999_999_999
_BODY = struct.Struct("<IBBBB8s")
_BODY_IN = struct.Struct("<I???B8s")


def _frame_id_bytes(frame_id: str) -> bytes:
    raw = frame_id.encode() + b"\0"
    out = struct.pack("<I", len(raw)) + raw
    return out + b"\0" * (-(8 + len(out)) % 4)  # the uint32 id aligns to 4


def _packer(frame_id: str, _cache: dict[str, Any] = {}) -> tuple[Any, bytes]:  # noqa: B006
    """One ``struct`` call per frame: ``pack(sec, nsec, tail, id, rtr, ext, err, dlc, data)``,
    the CDR header bound, ``tail`` the constant frame_id bytes (cached per name)."""
    got = _cache.get(frame_id)
    if got is None:
        if len(_cache) > 64:  # bounded: a few channel names in practice
            _cache.clear()
        tail = _frame_id_bytes(frame_id)
        fmt = struct.Struct(f"<4siI{len(tail)}sI???B8s")
        got = _cache[frame_id] = (functools.partial(fmt.pack, _HEAD), tail)
    return got


def encode_frame(msg: can.Message, frame_id: str = "") -> bytes:
    """``msg`` as a CDR ``can_msgs/msg/Frame`` (checked byte for byte against rosbags)."""
    ns = round(msg.timestamp * 1e9)
    if not 0 <= ns <= _MAX_NS:  # builtin_interfaces/Time: int32 seconds, 1970 to 2038
        ns = min(max(ns, 0), _MAX_NS)
    sec, nsec = divmod(ns, 1_000_000_000)
    rtr = msg.is_remote_frame
    pack, tail = _packer(frame_id)
    out: bytes = pack(sec, nsec, tail, msg.arbitration_id, rtr, msg.is_extended_id,
                      msg.is_error_frame, msg.dlc, b"" if rtr else bytes(msg.data))
    return out


def decode_frame(data: bytes, is_rx: bool = True) -> can.Message:
    """A python-can message from a CDR ``can_msgs/msg/Frame``."""
    if len(data) < 16 or data[:2] != b"\x00\x01":
        raise CaptureError(f"not a little-endian CDR can_msgs/msg/Frame: {data[:16].hex(' ')}")
    try:
        sec, nsec = _STAMP.unpack_from(data, 4)
        (n,) = struct.unpack_from("<I", data, 12)
        name = data[16:16 + n - 1].decode(errors="replace")
        off = 4 + 12 + n
        off += -(off - 4) % 4
        can_id, rtr, ext, err, dlc, payload = _BODY_IN.unpack_from(data, off)
    except struct.error:
        raise CaptureError(f"can_msgs/msg/Frame cut short: {bytes(data).hex(' ')}") from None
    return can.Message(timestamp=sec + nsec / 1e9, arbitration_id=can_id, is_extended_id=ext,
                       is_remote_frame=rtr, is_error_frame=err, dlc=dlc,
                       data=b"" if rtr else payload[:min(dlc, 8)], channel=name or None,
                       is_rx=is_rx)


#: Distinct frames counted in a load window before they are folded into bits per ID.
_DISTINCT = 4096
#: Frames a batching recorder holds at most, and the message time after which it records them.
BATCH_MAX, BATCH_SPAN = 1024, 0.1
#: A file recorder's batch: a few ms of a saturated bus.
BATCH = 64


class CanRecorder:
    """Turns CAN frames (and state changes) into the channels of a :class:`Streams`.

    ``extend``: factories of more per-frame channels from a higher floor (the
    ROS 2 ``joint_states`` of :mod:`fwbridge.bridge.record.can_joint_states`), each
    called with the streams and then given every data frame (``on_message``).

    ``batch``: frames are recorded ``batch`` at a time (and at least every
    ``BATCH_SPAN`` seconds of message time, at a state change and at
    :meth:`finish`): a frame's call is one list append, the work runs in one
    loop. 1 (the default) records each frame as it comes (a live view).

    The load's exact bits are worked out per distinct frame, not per frame:
    a window counts each (ID, kind, DLC, data) once with how often it came
    (at most ``_DISTINCT`` of them, then folded), so repeated frames (status
    and feedback frames mostly repeat) cost one dict update each.
    """

    def __init__(self, streams: Streams, *, channel: str = "can0", bitrate: int | None = None,
                 window: float = 1.0, extend: Sequence[Callable[[Streams], Any]] = (),
                 batch: int = 1) -> None:
        if not 1 <= batch <= BATCH_MAX:
            raise CaptureError(f"batch {batch}: must be 1..{BATCH_MAX} frames")
        self.streams = streams
        self.channel_name = channel
        self.bitrate = bitrate
        self.window = window
        self.batch = batch
        keys, self._log_many = streams.batch_logger([streams.channel(FRAMES[True]),
                                                     streams.channel(FRAMES[False])])
        self._keys = {True: keys[0], False: keys[1]}  # is_rx -> the frames' channel
        self._load = streams.channel(LOAD)
        self._state = streams.channel(STATE)
        self.extensions = [make(streams) for make in extend]
        self._packs: dict[Any, Any] = {}
        self._pending: list[can.Message] = []
        self._lock = threading.Lock()
        self._due = -math.inf  # record the pending frames when a frame's time reaches it
        self._end = -math.inf  # the open window's end; -inf: none yet (the first frame)
        self._seen: dict[tuple[int, bool, bool, int, bytes], int] = {}  # frame -> count
        self._frames: dict[tuple[int, bool], int] = {}
        self._bits: dict[tuple[int, bool], int] = {}
        self.frames = 0

    def _pack_for(self, channel: Any) -> Any:
        if len(self._packs) > 64:
            self._packs.clear()
        pack = self._packs[channel] = _packer(
            self.channel_name if channel is None else str(channel))
        return pack

    @property
    def pending(self) -> int:
        """Frames received and not yet recorded (fewer than ``batch``)."""
        return len(self._pending)

    def on_message(self, msg: can.Message) -> None:
        pending = self._pending
        pending.append(msg)
        if len(pending) >= self.batch or msg.timestamp >= self._due:
            self.drain()

    def drain(self) -> None:
        """Record the pending frames (in order)."""
        with self._lock:  # against a stop or a state change from another thread
            self._record_pending()

    def _record_pending(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        # encode_frame inlined (a hot path: 8,000 frames/s at 1 Mbit/s); tested equal to it
        packs, keys, seen, extensions = self._packs, self._keys, self._seen, self.extensions
        out: list[tuple[Any, int, bytes]] = []
        put = out.append
        for msg in batch:
            pack = packs.get(msg.channel)
            if pack is None:
                pack = self._pack_for(msg.channel)
            ts = msg.timestamp
            ns = round(ts * 1e9)
            stamp = ns if 0 <= ns <= _MAX_NS else min(max(ns, 0), _MAX_NS)
            rtr = msg.is_remote_frame
            data = b"" if rtr else bytes(msg.data)
            can_id, ext, dlc, error = (msg.arbitration_id, msg.is_extended_id, msg.dlc,
                                       msg.is_error_frame)
            put((keys[msg.is_rx], ns, pack[0](stamp // 1_000_000_000, stamp % 1_000_000_000,
                                             pack[1], can_id, rtr, ext, error, dlc, data)))
            if error:
                continue
            if ts >= self._end or extensions:  # they log too: the frames before them first
                self._log_many(out)
                out = []
                put = out.append
                if ts >= self._end:
                    self._roll(ts)
                for extension in extensions:
                    extension.on_message(msg)
            key = (can_id, ext, rtr, dlc, data)
            n = seen.get(key)
            if n is not None:
                seen[key] = n + 1
            else:
                seen[key] = 1
                if len(seen) >= _DISTINCT:
                    self._fold()
        if out:
            self._log_many(out)
        self.frames += len(batch)
        self._due = batch[-1].timestamp + BATCH_SPAN

    def _roll(self, ts: float) -> None:
        """Log the windows that ended by ``ts`` (the first frame: open the first window)."""
        window = self.window
        if self._end != -math.inf:
            self._emit()
            if ts < self._end + 10 * window:
                while ts >= self._end:
                    self._emit()
                return
        self._end = ts + window  # the first window, or a jump in time: no run of empty windows

    def _fold(self) -> None:
        """The distinct frames counted so far as frames and bits per ID."""
        frames, total = self._frames, self._bits
        for (can_id, ext, rtr, dlc, data), n in self._seen.items():
            key = (can_id, ext)
            bits = n * frame_length(Frame(can_id, ext, rtr, dlc, data))
            if key in frames:
                frames[key] += n
                total[key] += bits
            else:
                frames[key] = n
                total[key] = bits
        self._seen.clear()

    def on_state(self, node: str, old: str, new: str, tec: int, rec: int, ts: float) -> None:
        body = {"node": node, "old": old, "new": new, "tec": tec, "rec": rec}
        with self._lock:
            self._record_pending()  # the frames before it first
            self.streams.log(self._state, json.dumps(body).encode(), round(ts * 1e9))

    def _emit(self) -> None:
        """Log the window ending at ``_end``; the next window ends one window later."""
        self._fold()
        window, rate = self.window, self.bitrate
        total = sum(self._bits.values())
        ids: list[dict[str, Any]] = []
        for (i, ext), n in sorted(self._frames.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            bits = self._bits[(i, ext)]
            row: dict[str, Any] = {"id": f"{i:08X}" if ext else f"{i:03X}", "frames": n,
                                   "fps": n / window, "bits": bits}
            if rate:
                row["load"] = 100.0 * bits / (rate * window)
            ids.append(row)
        body: dict[str, Any] = {"window_s": window, "frames": sum(self._frames.values()),
                                "bits": total, "ids": ids}
        if rate:
            body["bitrate"] = rate
            body["load"] = 100.0 * total / (rate * window)
        self.streams.log(self._load, json.dumps(body).encode(), round(self._end * 1e9))
        self._frames.clear()
        self._bits.clear()
        self._end += window

    def finish(self) -> None:
        """The pending frames, the last (partial) load window."""
        with self._lock:
            self._record_pending()
            if (self._frames or self._seen) and self._end != -math.inf:
                self._emit()


class McapCanWriter(MessageWriter):
    """python-can writer for ``.mcap``: frames, load per ID and state changes (see module).

    ``live``: also serve them to a live view (a Foxglove sink); ``file`` None
    (or "") with a ``live`` sink: the live view alone. ``index``: message and
    chunk indexes (seekable by time in Foxglove, any size) instead of the
    compact layout (a third of the bytes; Foxglove opens it unindexed, up to
    1 GiB: about 3 hours of a saturated 1 Mbit/s bus). See docs/MCAP.md.
    """

    def __init__(self, file: str | os.PathLike[str], bitrate: int | None = None,
                 channel: str = "can0", compression: str = "zstd",
                 extend: Sequence[Callable[[Streams], Any]] = (), live: Any = None,
                 index: bool = False, **kwargs: Any) -> None:
        self.file = file
        sinks: list[Any] = []
        if file:
            sinks.append(McapSink(file, compression=compression, index=index,
                                  metadata={"source": "fwbridge CAN capture"}))
        if live is not None:
            sinks.append(live)
        self.streams = Streams(sinks)
        # frames in batches, unless a live view shows them as they come
        self.recorder = CanRecorder(self.streams, channel=channel, bitrate=bitrate, extend=extend,
                                    batch=1 if live is not None else BATCH)

    def on_message_received(self, msg: can.Message) -> None:
        self.recorder.on_message(msg)

    def on_state_changed(self, node: str, old: str, new: str, tec: int, rec: int,
                         ts: float) -> None:
        self.recorder.on_state(node, old, new, tec, rec, ts)

    def file_size(self) -> int:
        return os.path.getsize(self.file) if self.file else 0

    def stop(self) -> None:
        """Finalise the file (idempotent)."""
        if not self.streams._closed:
            self.recorder.finish()
        self.streams.close()


class McapCanReader(MessageReader):
    """python-can reader for ``.mcap``: the frames of ``/from_can_bus`` and ``/to_can_bus``."""

    def __init__(self, file: str | os.PathLike[str], **kwargs: Any) -> None:
        self.file = file

    def __iter__(self) -> Iterator[can.Message]:
        yield from read_mcap_messages(self.file)

    def stop(self) -> None:
        pass


def read_mcap_messages(path: str | os.PathLike[str]) -> Iterator[can.Message]:
    """The CAN frames of an MCAP file (both directions), in time order."""
    declared: Declared = {}
    frames = 0
    for rec in read_mcap(path, (RX_TOPIC, TX_TOPIC), channels=declared):
        try:
            msg = decode_frame(rec.data, is_rx=rec.topic == RX_TOPIC)
        except (ValueError, struct.error, IndexError, EOFError) as exc:
            raise McapError(f"{path}: frame {frames + 1} of {rec.topic} does not decode: "
                            f"{exc}") from None
        frames += 1
        yield msg
    if not frames and declared and not declared.keys() & {RX_TOPIC, TX_TOPIC}:
        serial = any("/fwbridge/serial/" in t for t in declared)
        raise McapError(f"{path}: wrong kind of capture: "
                        + ("a serial capture (MCAP), not a CAN capture"
                           if serial else f"no CAN frames (topics: {', '.join(sorted(declared))})"))
