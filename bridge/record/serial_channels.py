"""The channels of a serial recording: raw bytes, counters and the bridge's ROS 2 topics.

What :class:`~fwbridge.bridge.record.serial_mcap.SerialRecorder` writes and
:func:`~fwbridge.bridge.record.serial_captures.read_capture` reads back:
the raw channels (``/fwbridge/serial/rx`` and ``/fwbridge/serial/tx``, each
read or write as a CDR ``std_msgs/msg/UInt8MultiArray``), the counters'
JSON channel and the ROS 2 channels of :mod:`fwbridge.bridge.rosmsg.topics`
(:func:`ros_spec`), with the codec of the raw messages.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from fwbridge.bridge.record.channel_streams import ChannelSpec
from fwbridge.bridge.record.serial_pcapng import RX, TX
from fwbridge.protocols.engine.receiver_counters import Sum8ReceiverStats, counter_names
from fwbridge.protocols.errors import CaptureError

__all__ = ["COUNTERS", "RAW", "RAW_DIRECTIONS", "RAW_SCHEMA", "RAW_TYPE", "decode_raw",
           "encode_raw", "ros_spec", "ros_topics"]

RAW_TYPE = "std_msgs/msg/UInt8MultiArray"
_SEP = "=" * 80
#: ros2msg schema of the raw channels (a standard type: ``ros2 bag play`` replays it).
RAW_SCHEMA = (
    "std_msgs/MultiArrayLayout layout\nuint8[] data\n"
    f"{_SEP}\nMSG: std_msgs/MultiArrayLayout\nstd_msgs/MultiArrayDimension[] dim\n"
    "uint32 data_offset\n"
    f"{_SEP}\nMSG: std_msgs/MultiArrayDimension\nstring label\nuint32 size\nuint32 stride\n"
)
RAW = {
    RX: ChannelSpec("/fwbridge/serial/rx", RAW_TYPE, "ros2msg", RAW_SCHEMA, "cdr"),
    TX: ChannelSpec("/fwbridge/serial/tx", RAW_TYPE, "ros2msg", RAW_SCHEMA, "cdr"),
}
#: Topic -> direction (``"rx"``, ``"tx"``) of the raw channels.
RAW_DIRECTIONS = {spec.topic: d for d, spec in RAW.items()}


def _counts(names: list[str], description: str) -> dict[str, Any]:
    """An object of integer counters. Foxglove's JSON-schema parser needs ``properties``
    on every object and one type per field; a counter not listed still shows (in the
    raw message), it is only not offered for plots."""
    return {"type": "object", "description": description,
            "properties": {name: {"type": "integer"} for name in names}}


_RECEIVER = list(counter_names(Sum8ReceiverStats))
#: The bridge node's own counters (``BaseCore.stats``), before its receiver's.
_NODE = ["commands", "odometry", "skipped_nonfinite", "watchdog_trips", "reconnects"]
COUNTERS = ChannelSpec("/fwbridge/counters", "fwbridge.Counters", "jsonschema", json.dumps({
    "type": "object", "title": "Receiver and node counters (totals so far)",
    "properties": {"rx": _counts(_RECEIVER, "receiver of the device's frames"),
                   "tx": _counts(_RECEIVER, "receiver of the host's frames"),
                   "node": _counts(_NODE + _RECEIVER, "the bridge node's counters")},
}), "json")
_RAW_HEAD = b"\x00\x01\x00\x00" + struct.pack("<II", 0, 0)  # CDR LE; no dims, offset 0


def encode_raw(data: bytes) -> bytes:
    """``data`` as a CDR ``std_msgs/msg/UInt8MultiArray`` (checked against rosbags)."""
    return b"".join((_RAW_HEAD, struct.pack("<I", len(data)), data))


def decode_raw(cdr: bytes) -> bytes:
    """The bytes of a CDR ``std_msgs/msg/UInt8MultiArray`` with an empty layout."""
    if cdr[:2] != b"\x00\x01" or len(cdr) < 16:
        raise CaptureError(f"not a little-endian CDR UInt8MultiArray: {bytes(cdr[:16]).hex(' ')}")
    ndim, _offset, n = struct.unpack_from("<III", cdr, 4)
    if ndim:  # written by another tool: walk the dimensions (label, size, stride)
        pos = 8
        for _ in range(ndim):
            pos += -(pos) % 4
            (length,) = struct.unpack_from("<I", cdr, 4 + pos)
            pos += 4 + length
            pos += -(pos) % 4
            pos += 8
        (n,) = struct.unpack_from("<I", cdr, 8 + pos)
        start = 12 + pos
    else:
        start = 16
    if start + n > len(cdr):
        raise CaptureError(f"UInt8MultiArray says {n} bytes, has {len(cdr) - start}")
    return bytes(cdr[start:start + n])


def ros_topics() -> Any:
    """The ROS 2 message mapping, imported when first asked for (a recording without
    ROS 2 channels starts without it)."""
    from fwbridge.bridge.rosmsg import topics

    return topics



def ros_spec(key: str, namespace: str = "/") -> ChannelSpec:
    """The MCAP channel of one of the bridge's ROS 2 topics (name, type, schema).

    Names are fully qualified, as ``ros2 bag record`` writes them: the
    bridge's relative ``odom`` in ``namespace`` (default the root: ``/odom``).
    """
    from fwbridge.bridge.rosmsg import cdr

    spec = ros_topics().TOPICS[key]
    name = spec.name if spec.name.startswith("/") else f"{namespace.rstrip('/')}/{spec.name}"
    return ChannelSpec(name, spec.msgtype, "ros2msg", cdr.message_definition(spec.msgtype),
                       "cdr")
