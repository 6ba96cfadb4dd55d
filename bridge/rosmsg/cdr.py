"""ROS 2 message types and CDR: the rosbags typestore, type names and hashes, both ways.

Any message type of a distro's typestore, not only the bridge's topics
(:mod:`~fwbridge.bridge.rosmsg.topics` names those)::

    from fwbridge.bridge.rosmsg import cdr

    data = cdr.serialize(msg, "nav_msgs/msg/Odometry")     # CDR bytes, as on the wire
    msg = cdr.deserialize(data, "geometry_msgs/msg/Twist")  # MessageError if not one
    cdr.message_definition("nav_msgs/msg/Odometry")        # MCAP "ros2msg" schema text
    cdr.type_hash("nav_msgs/msg/Odometry", "jazzy")        # "RIHS01_…"

Requires the ``ros2`` extra (``rosbags``); it is imported on first use, so
importing this module costs nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from fwbridge.protocols.errors import Error

__all__ = ["DISTROS", "MessageError", "dds_type_name", "deserialize", "message_class",
           "message_definition", "ros_type_name", "serialize", "type_hash", "typestore"]

#: ROS 2 distributions the messages and type hashes are taken from.
DISTROS = ("jazzy", "humble")
#: Bytes after a CDR message always taken as padding (the largest alignment).
_TRAILING = 8


class MessageError(Error, ValueError):
    """A ROS 2 message that cannot be used: names the type, the field and the value."""


@functools.cache
def typestore(distro: str = "jazzy") -> Any:
    """The rosbags typestore of ``distro`` (imported on first use: numpy, rosbags)."""
    if distro not in DISTROS:
        raise MessageError(f"unknown ROS 2 distro {distro!r} (known: {', '.join(DISTROS)})")
    try:
        from rosbags.typesys import Stores, get_typestore
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise MessageError("ROS 2 messages need rosbags: pip install 'fwbridge[ros2]'") from None
    return get_typestore(Stores.ROS2_JAZZY if distro == "jazzy" else Stores.ROS2_HUMBLE)


def message_class(msgtype: str, distro: str = "jazzy") -> Any:
    """The rosbags class of ``msgtype`` (``pkg/msg/Name``); :class:`MessageError` if unknown."""
    try:
        return typestore(distro).types[msgtype]
    except KeyError:
        raise MessageError(f"unknown message type {msgtype!r} (pkg/msg/Name)") from None


def type_hash(msgtype: str, distro: str = "jazzy") -> str:
    """The type hash rmw_zenoh puts in keys: ``RIHS01_<sha256 hex>``; Humble has none."""
    if distro == "humble":
        return "TypeHashNotSupported"
    message_class(msgtype, distro)
    return str(typestore(distro).hash_rihs01(msgtype))


def dds_type_name(msgtype: str) -> str:
    """``nav_msgs/msg/Odometry`` -> ``nav_msgs::msg::dds_::Odometry_`` (the DDS name)."""
    pkg, kind, name = _split(msgtype)
    return f"{pkg}::{kind}::dds_::{name}_"


def ros_type_name(dds_name: str) -> str:
    """The inverse of :func:`dds_type_name`."""
    parts = dds_name.split("::")
    if len(parts) != 4 or parts[2] != "dds_" or not parts[3].endswith("_"):
        raise MessageError(f"not a DDS type name: {dds_name!r}")
    return f"{parts[0]}/{parts[1]}/{parts[3][:-1]}"


def _split(msgtype: str) -> tuple[str, str, str]:
    parts = msgtype.split("/")
    if len(parts) != 3 or not all(parts):
        raise MessageError(f"message type must be pkg/msg/Name, got {msgtype!r}")
    return parts[0], parts[1], parts[2]


def message_definition(msgtype: str, distro: str = "jazzy") -> str:
    """The ``.msg`` text with its dependencies (MCAP's ``ros2msg`` schema encoding)."""
    message_class(msgtype, distro)
    text, _md5 = typestore(distro).generate_msgdef(msgtype, ros_version=2)
    return str(text)


def serialize(msg: Any, msgtype: str, distro: str = "jazzy") -> bytes:
    """CDR (little endian, with its 4-byte encapsulation header), as ROS 2 sends it."""
    return bytes(typestore(distro).serialize_cdr(msg, msgtype))


def deserialize(data: bytes | bytearray | memoryview, msgtype: str,
                distro: str = "jazzy") -> Any:
    """A message from CDR bytes; :class:`MessageError` when they are not one.

    Bytes after the message are ignored, as Fast CDR ignores them, up to as many as the
    message holds (8 at least): rclpy's ``serialize_message`` hands
    back the buffer rmw_fastrtps sized by its estimate, the message then padding bytes
    nobody zeroed (``tests/fixtures/rclpy_golden.json``). More than that is not padding."""
    message_class(msgtype, distro)
    raw = bytes(data)
    if len(raw) < 4 or raw[0] != 0 or raw[1] not in (0, 1):
        raise MessageError(f"{msgtype}: not CDR (header {raw[:4].hex(' ') or 'empty'})")
    store = typestore(distro)
    try:
        msgdef = store.get_msgdef(msgtype)
        read = msgdef.deserialize_cdr_le if raw[1] else msgdef.deserialize_cdr_be
        msg, end = read(raw[4:], 0, msgdef.cls, store)
    except Exception as exc:  # rosbags raises struct, index and unicode errors alike
        raise MessageError(f"{msgtype}: malformed CDR ({len(raw)} bytes): {exc}") from None
    extra = len(raw) - 4 - end
    if extra < 0:
        raise MessageError(f"{msgtype}: malformed CDR ({len(raw)} bytes): it ends inside "
                           "the message")
    if extra > max(end, _TRAILING):
        raise MessageError(f"{msgtype}: malformed CDR ({len(raw)} bytes): {extra} bytes "
                           f"after the message's {end + 4}, more than padding")
    return msg
