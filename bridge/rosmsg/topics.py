"""The one mapping between the bridge's records and ROS 2 messages (no network).

Everything that turns a node's records into ROS 2 messages, or a ROS 2
message into a node request, lives here, so the Zenoh participant
(:mod:`fwbridge.bridge.ros2`) and any recorder (MCAP) publish the same
bytes under the same names and types. Messages are the typed classes of the
``rosbags`` typestore; CDR is rosbags' own, but for the odometry's two messages,
whose one encoder (:mod:`~fwbridge.bridge.rosmsg.odometry_cdr`) lays them out from a
template checked against rosbags' bytes.

How to use it::

    from fwbridge.bridge.rosmsg import topics

    spec = topics.TOPICS["odom"]                  # name "odom", nav_msgs/msg/Odometry, QoS
    msg = topics.odometry_message(record, stamp=topics.wall_stamp(record.stamp))
    data = topics.serialize(msg, spec.msgtype)    # CDR bytes, as on the wire
    schema = topics.message_definition(spec.msgtype)  # MCAP "ros2msg" schema text
    topics.type_hash(spec.msgtype, "jazzy")       # "RIHS01_…" ("TypeHashNotSupported": humble)
    vx, vy, wz = topics.velocity_request(topics.deserialize(data, "geometry_msgs/msg/Twist"))

Requires the ``ros2`` extra (``rosbags``); it is imported on first use, so
importing this module costs nothing. Stamps are ROS time: seconds since the
epoch (:func:`wall_stamp` converts the node's monotonic record stamps).

Covariance of ``odom`` (the seed leaves it unset, i.e. zero, which
estimators read as "exact"): diagonal, row-major 6x6 over
(x, y, z, roll, pitch, yaw). x, y and the IMU's yaw get a small variance
(:data:`POSE_VARIANCE`); z, roll and pitch, which a planar base does not
measure, get :data:`UNMEASURED` (1e6), the convention robot_localization and
Nav2 read as "ignore this dimension". Twist likewise with
:data:`TWIST_VARIANCE` for vx, vy, wz.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR, velocity_error
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.protocols.errors import Error

__all__ = [
    "DISTROS",
    "MAX_ANGULAR",
    "MAX_LINEAR",
    "POSE_VARIANCE",
    "TOPICS",
    "TWIST_VARIANCE",
    "UNMEASURED",
    "MessageError",
    "Qos",
    "TopicSpec",
    "covariances",
    "dds_type_name",
    "deserialize",
    "diagnostic_status",
    "diagnostics_message",
    "full_topic_name",
    "joint_state_message",
    "message_definition",
    "message_from_dict",
    "message_to_dict",
    "module_health_statuses",
    "node_status",
    "odometry_message",
    "ros_time",
    "ros_type_name",
    "serialize",
    "time_parts",
    "transform_message",
    "type_hash",
    "typestore",
    "velocity_request",
    "wall_stamp",
]

#: ROS 2 distributions the messages and type hashes are taken from.
DISTROS = ("jazzy", "humble")
#: Bytes after a CDR message always taken as padding (the largest alignment).
_TRAILING = 8

#: Variance of the measured pose dimensions (x, y in m², yaw in rad²).
POSE_VARIANCE = 1e-3
#: Variance of the measured velocities (vx, vy in (m/s)², wz in (rad/s)²).
TWIST_VARIANCE = 1e-3
#: Variance of the dimensions a planar base does not measure (z, roll, pitch).
UNMEASURED = 1e6


class MessageError(Error, ValueError):
    """A ROS 2 message that cannot be used: names the type, the field and the value."""


#: rmw's limit on a fully qualified topic name (RMW_TOPIC_MAX_NAME_LENGTH).
MAX_TOPIC_NAME = 247


def full_topic_name(name: str) -> str:
    """``name`` as a fully qualified ROS 2 topic name ('/' first, added if missing), by
    rmw's rules (rmw_validate_full_topic_name): tokens of letters, digits and '_' joined
    by single '/', none starting with a digit, no '/' at the end. A name that breaks them
    (a space, '*', '//', ...) is :class:`MessageError`, before it reaches Zenoh as a key."""
    full = name if name.startswith("/") else "/" + name
    bad = next((c for c in full if not (c.isascii() and (c.isalnum() or c in "_/"))), None)
    if bad is not None:
        why = f"{bad!r} is not allowed (letters, digits, '_' and '/' only)"
    elif full == "/" or full.endswith("/"):
        why = "it must not end with '/'"
    elif "//" in full:
        why = "it must not hold '//'"
    elif any(token[:1].isdigit() for token in full.split("/")):
        why = "a part of it must not start with a digit"
    elif len(full) > MAX_TOPIC_NAME:
        why = f"it is longer than {MAX_TOPIC_NAME} characters"
    else:
        return full
    raise MessageError(f"topic {name!r} is not a valid ROS 2 topic name: {why}")


@dataclass(frozen=True)
class Qos:
    """A ROS 2 QoS profile (the values of rmw/types.h enums)."""

    reliability: str = "reliable"  # or "best_effort"
    durability: str = "volatile"  # or "transient_local"
    history: str = "keep_last"  # or "keep_all"
    depth: int = 10


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the bridge: its default name (relative names take the node's
    namespace), its ROS type, who publishes it, and its QoS (rclcpp's defaults for it)."""

    key: str
    name: str
    msgtype: str
    direction: str  # "out": the bridge publishes; "in": it subscribes
    qos: Qos = Qos()


#: The bridge's topics by key; names are overridable per robot (``[ros2.topics]``).
TOPICS: dict[str, TopicSpec] = {
    "odom": TopicSpec("odom", "odom", "nav_msgs/msg/Odometry", "out"),
    # tf2_ros::TransformBroadcaster's QoS: depth 100
    "tf": TopicSpec("tf", "/tf", "tf2_msgs/msg/TFMessage", "out", Qos(depth=100)),
    "cmd_vel": TopicSpec("cmd_vel", "cmd_vel", "geometry_msgs/msg/Twist", "in"),
    "joint_states": TopicSpec("joint_states", "joint_states", "sensor_msgs/msg/JointState", "out"),
    "diagnostics": TopicSpec("diagnostics", "/diagnostics",
                             "diagnostic_msgs/msg/DiagnosticArray", "out"),
    # robot_state_publisher's: latched, the last one only; only with a URDF
    "robot_description": TopicSpec("robot_description", "robot_description",
                                   "std_msgs/msg/String", "out",
                                   Qos(durability="transient_local", depth=1)),
}


# -- the typestore ------------------------------------------------------------------
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


def _cls(msgtype: str, distro: str = "jazzy") -> Any:
    try:
        return typestore(distro).types[msgtype]
    except KeyError:
        raise MessageError(f"unknown message type {msgtype!r} (pkg/msg/Name)") from None


def type_hash(msgtype: str, distro: str = "jazzy") -> str:
    """The type hash rmw_zenoh puts in keys: ``RIHS01_<sha256 hex>``; Humble has none."""
    if distro == "humble":
        return "TypeHashNotSupported"
    _cls(msgtype, distro)
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
    _cls(msgtype, distro)
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
    _cls(msgtype, distro)
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


# -- time ----------------------------------------------------------------------------
def wall_stamp(monotonic_stamp: float) -> float:
    """A node record's monotonic stamp as ROS time (seconds since the epoch)."""
    return time.time() - (time.monotonic() - monotonic_stamp)


def time_parts(stamp: float) -> tuple[int, int]:
    """(sec, nanosec) of builtin_interfaces/Time for ``stamp`` seconds since the epoch
    (nanoseconds rounded, never a whole second)."""
    sec = math.floor(stamp)
    return int(sec), min(round((stamp - sec) * 1e9), 999_999_999)


def ros_time(stamp: float, distro: str = "jazzy") -> Any:
    """builtin_interfaces/Time of ``stamp`` seconds since the epoch."""
    sec, nanosec = time_parts(stamp)
    return _cls("builtin_interfaces/msg/Time", distro)(sec=sec, nanosec=nanosec)


def _header(stamp: float, frame_id: str, distro: str) -> Any:
    return _cls("std_msgs/msg/Header", distro)(stamp=ros_time(stamp, distro), frame_id=frame_id)


# -- records -> messages ----------------------------------------------------------------
def _covariance(variances: Sequence[float]) -> Any:
    import numpy as np

    cov = np.zeros(36, dtype=np.float64)
    cov[::7] = variances
    return cov


@functools.lru_cache(maxsize=4)
def covariances() -> tuple[Any, Any]:
    """The pose and twist covariances of every odometry message (read-only arrays)."""
    pose = _covariance([POSE_VARIANCE, POSE_VARIANCE, UNMEASURED, UNMEASURED, UNMEASURED,
                        POSE_VARIANCE])
    twist = _covariance([TWIST_VARIANCE, TWIST_VARIANCE, UNMEASURED, UNMEASURED, UNMEASURED,
                         TWIST_VARIANCE])
    pose.flags.writeable = twist.flags.writeable = False
    return pose, twist


def odometry_message(odom: Odometry, *, stamp: float, frame_id: str = "odom",
                     child_frame_id: str = "base_link", distro: str = "jazzy") -> Any:
    """nav_msgs/Odometry exactly as seed 002 fills it: pose (x, y, quaternion of the
    firmware's yaw) in ``frame_id``, body velocities in ``child_frame_id``."""
    t = typestore(distro).types
    qx, qy, qz, qw = odom.orientation
    pose_cov, twist_cov = covariances()
    vec = t["geometry_msgs/msg/Vector3"]
    return t["nav_msgs/msg/Odometry"](
        header=_header(stamp, frame_id, distro),
        child_frame_id=child_frame_id,
        pose=t["geometry_msgs/msg/PoseWithCovariance"](
            pose=t["geometry_msgs/msg/Pose"](
                position=t["geometry_msgs/msg/Point"](x=odom.x, y=odom.y, z=0.0),
                orientation=t["geometry_msgs/msg/Quaternion"](x=qx, y=qy, z=qz, w=qw)),
            covariance=pose_cov),
        twist=t["geometry_msgs/msg/TwistWithCovariance"](
            twist=t["geometry_msgs/msg/Twist"](linear=vec(x=odom.vx, y=odom.vy, z=0.0),
                                               angular=vec(x=0.0, y=0.0, z=odom.wz)),
            covariance=twist_cov),
    )


def transform_message(odom: Odometry, *, stamp: float, frame_id: str = "odom",
                      child_frame_id: str = "base_link", distro: str = "jazzy") -> Any:
    """tf2_msgs/TFMessage with the one transform ``frame_id -> child_frame_id`` (seed 002)."""
    t = typestore(distro).types
    qx, qy, qz, qw = odom.orientation
    tf = t["geometry_msgs/msg/TransformStamped"](
        header=_header(stamp, frame_id, distro),
        child_frame_id=child_frame_id,
        transform=t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=odom.x, y=odom.y, z=0.0),
            rotation=t["geometry_msgs/msg/Quaternion"](x=qx, y=qy, z=qz, w=qw)))
    return t["tf2_msgs/msg/TFMessage"](transforms=[tf])


def joint_state_message(positions: Mapping[str, float], *, stamp: float,
                        velocities: Mapping[str, float] | None = None,
                        efforts: Mapping[str, float] | None = None,
                        distro: str = "jazzy") -> Any:
    """sensor_msgs/JointState of the joints in ``positions`` (rad or m, by joint type);
    velocities and efforts are left empty unless given for every joint."""
    import numpy as np

    names = list(positions)

    def column(values: Mapping[str, float] | None) -> Any:
        if values is None or any(n not in values for n in names):
            return np.zeros(0, dtype=np.float64)
        return np.array([values[n] for n in names], dtype=np.float64)

    return _cls("sensor_msgs/msg/JointState", distro)(
        header=_header(stamp, "", distro), name=names,
        position=np.array([positions[n] for n in names], dtype=np.float64),
        velocity=column(velocities), effort=column(efforts))


#: diagnostic_msgs/DiagnosticStatus levels.
LEVELS = {"ok": 0, "warn": 1, "error": 2, "stale": 3}


def diagnostic_status(name: str, level: str, message: str, values: Mapping[str, object],
                      *, hardware_id: str = "", distro: str = "jazzy") -> Any:
    """One diagnostic_msgs/DiagnosticStatus; ``level`` is ok, warn, error or stale."""
    t = typestore(distro).types
    kv = t["diagnostic_msgs/msg/KeyValue"]
    return t["diagnostic_msgs/msg/DiagnosticStatus"](
        level=LEVELS[level], name=name, message=message, hardware_id=hardware_id,
        values=[kv(key=str(k), value=str(v)) for k, v in values.items()])


def diagnostics_message(statuses: Iterable[Any], *, stamp: float, distro: str = "jazzy") -> Any:
    """diagnostic_msgs/DiagnosticArray of ``statuses``."""
    return _cls("diagnostic_msgs/msg/DiagnosticArray", distro)(
        header=_header(stamp, "", distro), status=list(statuses))


def node_status(name: str, stats: Mapping[str, int], *, connected: bool,
                holding: bool = False, hardware_id: str = "", distro: str = "jazzy") -> Any:
    """The base node's health: ``stats`` (receiver counters, watchdog trips,
    reconnects…) as key-values; error while the link is down, warn while the
    watchdog ``holding`` the base at zero or frames fail their checksum, else ok."""
    if not connected:
        level, message = "error", "link down, reconnecting"
    elif holding:
        level, message = "warn", "no velocity request: watchdog holds zero velocity"
    elif stats.get("checksum_errors", 0):
        level, message = "warn", f"{stats['checksum_errors']} checksum errors so far"
    else:
        level, message = "ok", "link up"
    values: dict[str, object] = dict(stats)
    values["link"] = "up" if connected else "down"
    return diagnostic_status(name, level, message, values, hardware_id=hardware_id,
                             distro=distro)


def module_health_statuses(rows: Iterable[Mapping[str, Any]], *, prefix: str = "can module",
                           distro: str = "jazzy") -> list[Any]:
    """One status per CAN module from ``MainController.report()`` rows (ok, degraded ->
    warn, silent -> error, unknown -> stale)."""
    level_of = {"ok": "ok", "degraded": "warn", "silent": "error", "unknown": "stale"}
    out = []
    for row in rows:
        status = str(row.get("status", "unknown"))
        module = row.get("module")
        values = {k: ("" if v is None else v) for k, v in row.items()}
        out.append(diagnostic_status(f"{prefix} {module}", level_of.get(status, "stale"), status,
                                     values, hardware_id=f"can:{module}", distro=distro))
    return out


# -- messages -> requests -----------------------------------------------------------------
def velocity_request(twist: Any, *, max_linear: float = MAX_LINEAR,
                     max_angular: float = MAX_ANGULAR) -> tuple[float, float, float]:
    """(vx, vy, wz) of a geometry_msgs/Twist for the node's ``request``.

    Refused (:class:`MessageError`): a NaN or infinite component, or one
    beyond ``max_linear`` / ``max_angular``. linear.z and angular.x/y are not
    a planar base's to follow and are ignored.
    """
    try:
        values = {"linear.x": float(twist.linear.x), "linear.y": float(twist.linear.y),
                  "angular.z": float(twist.angular.z)}
    except (AttributeError, TypeError, ValueError):
        raise MessageError("cmd_vel: not a geometry_msgs/Twist") from None
    for name, value in values.items():
        why = velocity_error(name, value, max_angular if name.startswith("angular")
                             else max_linear)
        if why is not None:
            raise MessageError(f"cmd_vel: {why}")
    return values["linear.x"], values["linear.y"], values["angular.z"]


# -- generic conversion (echo, pub) ----------------------------------------------------------
def message_to_dict(msg: Any) -> Any:
    """A message as plain data (dicts, lists, numbers, strings) for YAML and JSON: its
    fields only, not its constants (DiagnosticStatus's ``OK``…)."""
    if dataclasses.is_dataclass(msg) and not isinstance(msg, type):
        return {f.name: message_to_dict(getattr(msg, f.name)) for f in dataclasses.fields(msg)
                if not _is_constant(f)}
    if hasattr(msg, "tolist"):  # numpy arrays and scalars
        return msg.tolist()
    if isinstance(msg, (list, tuple)):
        return [message_to_dict(v) for v in msg]
    return msg


def _is_constant(f: dataclasses.Field[Any]) -> bool:
    """A message constant (or ``__msgtype__``): rosbags declares them ``ClassVar`` in
    string annotations, which ``dataclasses`` does not recognise, so they come out as fields."""
    return f.name.startswith("__") or (isinstance(f.type, str) and f.type.startswith(
        ("ClassVar", "typing.ClassVar")))


_INTS = {"bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32",
         "int64", "uint64"}
#: The range of each integer type of ROS 2 messages.
_INT_RANGE = {"byte": (0, 255), "char": (0, 255), "int8": (-128, 127), "uint8": (0, 255),
              "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
              "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1)}
_FLOAT32_MAX = 3.4028234663852886e38
_NUMPY = {"float32": "float32", "float64": "float64", "int8": "int8", "uint8": "uint8",
          "byte": "uint8", "char": "uint8", "int16": "int16", "uint16": "uint16",
          "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
          "bool": "bool"}


def message_from_dict(msgtype: str, data: Mapping[str, Any] | None,
                      distro: str = "jazzy") -> Any:
    """A message of ``msgtype`` from plain data (as ``ros2 topic pub`` takes YAML):
    missing fields take their zero value; unknown fields and wrong types are
    :class:`MessageError` naming the field."""
    return _build(msgtype, data or {}, msgtype, distro)


def _build(msgtype: str, data: Any, path: str, distro: str) -> Any:
    store = typestore(distro)
    cls = _cls(msgtype, distro)
    if not isinstance(data, Mapping):
        raise MessageError(f"{path}: expected a mapping of fields, got {data!r}")
    _consts, fields = store.fielddefs[msgtype]
    known = {name for name, _ in fields}
    extra = sorted(set(data) - known)
    if extra:
        names = ", ".join(sorted(known))
        raise MessageError(f"{path}: unknown field {extra[0]!r} (fields: {names})")
    kwargs = {name: _value(desc, data.get(name), f"{path}.{name}", distro)
              for name, desc in fields}
    return cls(**kwargs)


def _value(desc: tuple[Any, Any], value: Any, path: str, distro: str) -> Any:
    import numpy as np

    kind, rest = int(desc[0]), desc[1]
    if kind == 1:  # base type
        return _base(rest[0], value, path)
    if kind == 2:  # another message
        return _build(rest, {} if value is None else value, path, distro)
    (inner_kind, inner), size = rest
    items = [] if value is None else value
    if not isinstance(items, (list, tuple)):
        raise MessageError(f"{path}: expected a list, got {value!r}")
    if kind == 3 and value is None:
        items = [None] * size
    if kind == 3 and len(items) != size:
        raise MessageError(f"{path}: expected {size} items, got {len(items)}")
    if int(inner_kind) == 1 and inner[0] in _NUMPY:
        return np.array([_base(inner[0], v, path) for v in items], dtype=_NUMPY[inner[0]])
    return [_value((inner_kind, inner), v, f"{path}[{i}]", distro) for i, v in enumerate(items)]


def _base(typename: str, value: Any, path: str) -> Any:
    if typename in ("string", "wstring"):
        if value is None:
            return ""
        if not isinstance(value, str):
            raise MessageError(f"{path}: expected a string, got {value!r}")
        return value
    if value is None:
        return False if typename == "bool" else 0 if typename in _INTS else 0.0
    if typename == "bool":
        if not isinstance(value, bool):
            raise MessageError(f"{path}: expected true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MessageError(f"{path}: expected a number, got {value!r}")
    if typename in _INTS:
        if isinstance(value, float) and not value.is_integer():
            raise MessageError(f"{path}: expected an integer, got {value!r}")
        lo, hi = _INT_RANGE[typename]
        if not lo <= value <= hi:
            raise MessageError(f"{path}: {value!r} is out of range for {typename} "
                               f"({lo} to {hi})")
        return int(value)
    number = float(value)
    if typename == "float32" and math.isfinite(number) and abs(number) > _FLOAT32_MAX:
        raise MessageError(f"{path}: {value!r} is out of range for float32 "
                           f"(at most {_FLOAT32_MAX:.7g} in magnitude)")
    return number
