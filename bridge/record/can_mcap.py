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
  the layer that knows ROS 2 (:mod:`fwbridge.bridge.record.serial_mcap`).

:class:`McapCanWriter` is a python-can ``MessageWriter`` for ``.mcap``, so
``open_writer``, ``can.Logger`` (hence ``python -m can.logger -f bus.mcap``) and
the simulator's capture tap write MCAP; :class:`McapCanReader` and
:func:`read_mcap_messages` read the frames back as ``can.Message``
(``can.LogReader``, ``can.player``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import can
from can.io.generic import MessageReader, MessageWriter

from fwbridge.bridge.record.mcap_io import ChannelSpec, McapError, McapSink, Streams, read_mcap
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
LOAD = ChannelSpec("/fwbridge/can/load", "fwbridge.CanLoad", "jsonschema", json.dumps({
    "type": "object", "title": "CAN bus load over one window",
    "properties": {
        "window_s": {"type": "number"}, "bitrate": {"type": ["integer", "null"]},
        "frames": {"type": "integer"}, "bits": {"type": "integer"},
        "load": {"type": ["number", "null"], "description": "% of the bit rate"},
        "ids": {"type": "object", "description": "per ID (key 'id_201'): frames, fps, load",
                "additionalProperties": {"type": "object"}},
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


def _packer(frame_id: str, _cache: dict[str, Any] = {}) -> Any:  # noqa: B006 - the cache
    """One ``struct`` call per frame: the header and the frame_id are constants."""
    pack = _cache.get(frame_id)
    if pack is None:
        if len(_cache) > 64:  # bounded: a few channel names in practice
            _cache.clear()
        tail = _frame_id_bytes(frame_id)
        fmt = struct.Struct(f"<4siI{len(tail)}sI???B8s")
        head = _HEAD

        def pack(sec: int, nsec: int, can_id: int, rtr: bool, ext: bool, err: bool, dlc: int,
                 data: bytes) -> bytes:
            return fmt.pack(head, sec, nsec, tail, can_id, rtr, ext, err, dlc, data)

        _cache[frame_id] = pack
    return pack


def encode_frame(msg: can.Message, frame_id: str = "") -> bytes:
    """``msg`` as a CDR ``can_msgs/msg/Frame`` (checked byte for byte against rosbags)."""
    ns = round(msg.timestamp * 1e9)
    if not 0 <= ns <= _MAX_NS:  # builtin_interfaces/Time: int32 seconds, 1970 to 2038
        ns = min(max(ns, 0), _MAX_NS)
    sec, nsec = divmod(ns, 1_000_000_000)
    rtr = msg.is_remote_frame
    out: bytes = _packer(frame_id)(sec, nsec, msg.arbitration_id, rtr, msg.is_extended_id,
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


class CanRecorder:
    """Turns CAN frames (and state changes) into the channels of a :class:`Streams`.

    ``extend``: factories of more per-frame channels from a higher floor (the
    ROS 2 ``joint_states`` of :mod:`fwbridge.bridge.record.serial_mcap`), each
    called with the streams and then given every data frame (``on_message``).
    """

    def __init__(self, streams: Streams, *, channel: str = "can0", bitrate: int | None = None,
                 window: float = 1.0, extend: Sequence[Callable[[Streams], Any]] = ()) -> None:
        self.streams = streams
        self.channel_name = channel
        self.bitrate = bitrate
        self.window = window
        self._log = {rx: streams.writer(streams.channel(spec)) for rx, spec in FRAMES.items()}
        self._load = streams.channel(LOAD)
        self._state = streams.channel(STATE)
        self.extensions = [make(streams) for make in extend]
        self._packs: dict[Any, Any] = {}
        self._end: float | None = None
        self._frames: dict[tuple[int, bool], int] = {}
        self._bits: dict[tuple[int, bool], int] = {}
        self.frames = 0

    def on_message(self, msg: can.Message) -> None:
        # encode_frame inlined (a hot path: 8,000 frames/s at 1 Mbit/s); tested equal to it
        channel = msg.channel
        pack = self._packs.get(channel)
        if pack is None:
            if len(self._packs) > 64:
                self._packs.clear()
            pack = self._packs[channel] = _packer(
                self.channel_name if channel is None else str(channel))
        ts = msg.timestamp
        ns = round(ts * 1e9)
        stamp = ns if 0 <= ns <= _MAX_NS else min(max(ns, 0), _MAX_NS)
        can_id, ext, rtr, dlc = msg.arbitration_id, msg.is_extended_id, msg.is_remote_frame, msg.dlc
        data = b"" if rtr else bytes(msg.data)
        error = msg.is_error_frame
        self._log[msg.is_rx](pack(stamp // 1_000_000_000, stamp % 1_000_000_000, can_id, rtr, ext,
                                  error, dlc, data), ns)
        self.frames += 1
        if error:
            return
        end = self._end
        if end is None:
            end = self._end = ts + self.window
        if ts >= end:
            end = self._emit()
            if ts >= end + 10 * self.window:  # a jump in time: no run of empty windows
                end = self._end = ts + self.window
            while ts >= end:
                end = self._emit()
        for extension in self.extensions:
            extension.on_message(msg)
        key = (can_id, ext)
        bits = frame_length(Frame(can_id, ext, rtr, dlc, data))
        frames, total = self._frames, self._bits
        if key in frames:
            frames[key] += 1
            total[key] += bits
        else:
            frames[key] = 1
            total[key] = bits

    def on_state(self, node: str, old: str, new: str, tec: int, rec: int, ts: float) -> None:
        body = {"node": node, "old": old, "new": new, "tec": tec, "rec": rec}
        self.streams.log(self._state, json.dumps(body).encode(), round(ts * 1e9))

    def _emit(self) -> float:
        """Log the window ending at ``_end``; return the next window's end."""
        assert self._end is not None
        window, rate = self.window, self.bitrate
        total = sum(self._bits.values())
        ids = {}
        for (i, ext), n in sorted(self._frames.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            bits = self._bits[(i, ext)]
            ids[f"id_{i:08X}" if ext else f"id_{i:03X}"] = {
                "frames": n, "fps": n / window, "bits": bits,
                "load": None if not rate else 100.0 * bits / (rate * window)}
        body = {"window_s": window, "bitrate": rate, "frames": sum(self._frames.values()),
                "bits": total, "load": None if not rate else 100.0 * total / (rate * window),
                "ids": ids}
        self.streams.log(self._load, json.dumps(body).encode(), round(self._end * 1e9))
        self._frames.clear()
        self._bits.clear()
        self._end += window
        return self._end

    def finish(self) -> None:
        """The last (partial) load window."""
        if self._frames and self._end is not None:
            self._emit()


class McapCanWriter(MessageWriter):
    """python-can writer for ``.mcap``: frames, load per ID and state changes (see module).

    ``live``: also serve them to a live view (a Foxglove sink); ``file`` None
    (or "") with a ``live`` sink: the live view alone.
    """

    def __init__(self, file: str | os.PathLike[str], bitrate: int | None = None,
                 channel: str = "can0", compression: str = "zstd",
                 extend: Sequence[Callable[[Streams], Any]] = (), live: Any = None,
                 **kwargs: Any) -> None:
        self.file = file
        sinks: list[Any] = []
        if file:
            sinks.append(McapSink(file, compression=compression,
                                  metadata={"source": "fwbridge CAN capture"}))
        if live is not None:
            sinks.append(live)
        self.streams = Streams(sinks)
        self.recorder = CanRecorder(self.streams, channel=channel, bitrate=bitrate, extend=extend)

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
    declared: set[str] = set()
    frames = 0
    for rec in read_mcap(path, (RX_TOPIC, TX_TOPIC), channels=declared):
        try:
            msg = decode_frame(rec.data, is_rx=rec.topic == RX_TOPIC)
        except (ValueError, struct.error, IndexError, EOFError) as exc:
            raise McapError(f"{path}: frame {frames + 1} of {rec.topic} does not decode: "
                            f"{exc}") from None
        frames += 1
        yield msg
    if not frames and declared and not declared & {RX_TOPIC, TX_TOPIC}:
        serial = any("/fwbridge/serial/" in t for t in declared)
        raise McapError(f"{path}: wrong kind of capture: "
                        + ("a serial capture (MCAP), not a CAN capture"
                           if serial else f"no CAN frames (topics: {', '.join(sorted(declared))})"))
