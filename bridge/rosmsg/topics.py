"""The bridge's topics and the messages of its records (no network).

The names, types and QoS of the bridge's topics (:data:`TOPICS`), and what
turns a node's records into their messages or a message into a node request,
so the Zenoh participant (:mod:`fwbridge.bridge.ros2`) and any recorder (MCAP)
publish the same messages under the same names and types. Messages are the
typed classes of the ``rosbags`` typestore, encoded by
:mod:`~fwbridge.bridge.rosmsg.cdr`, but for the odometry's two messages, whose
one encoder (:mod:`~fwbridge.bridge.rosmsg.odometry_cdr`) lays them out from a
template checked against rosbags' bytes; the health statuses on ``/diagnostics``
are :mod:`~fwbridge.bridge.rosmsg.diagnostics`'.

How to use it::

    from fwbridge.bridge.rosmsg import cdr, topics

    spec = topics.TOPICS["odom"]                  # name "odom", nav_msgs/msg/Odometry, QoS
    msg = topics.odometry_message(record, stamp=topics.wall_stamp(record.stamp))
    data = cdr.serialize(msg, spec.msgtype)       # CDR bytes, as on the wire
    vx, vy, wz = topics.velocity_request(cdr.deserialize(data, "geometry_msgs/msg/Twist"))

Requires the ``ros2`` extra (``rosbags``) for messages; it is imported on first
use, so importing this module costs nothing. Stamps are ROS time: seconds since
the epoch (:func:`wall_stamp` converts the node's monotonic record stamps).

Covariance of ``odom`` (the seed leaves it unset, i.e. zero, which
estimators read as "exact"): diagonal, row-major 6x6 over
(x, y, z, roll, pitch, yaw). x, y and the IMU's yaw get a small variance
(:data:`POSE_VARIANCE`); z, roll and pitch, which a planar base does not
measure, get :data:`UNMEASURED` (1e6), the convention robot_localization and
Nav2 read as "ignore this dimension". Twist likewise with
:data:`TWIST_VARIANCE` for vx, vy, wz.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR, velocity_error
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.rosmsg.cdr import MessageError, message_class, typestore

__all__ = [
    "MAX_ANGULAR",
    "MAX_LINEAR",
    "MAX_TOPIC_NAME",
    "POSE_VARIANCE",
    "TOPICS",
    "TWIST_VARIANCE",
    "UNMEASURED",
    "Qos",
    "TopicSpec",
    "covariances",
    "full_topic_name",
    "header",
    "joint_state_message",
    "odometry_message",
    "ros_time",
    "time_parts",
    "transform_message",
    "velocity_request",
    "wall_stamp",
]

#: Variance of the measured pose dimensions (x, y in m², yaw in rad²).
POSE_VARIANCE = 1e-3
#: Variance of the measured velocities (vx, vy in (m/s)², wz in (rad/s)²).
TWIST_VARIANCE = 1e-3
#: Variance of the dimensions a planar base does not measure (z, roll, pitch).
UNMEASURED = 1e6

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
    return message_class("builtin_interfaces/msg/Time", distro)(sec=sec, nanosec=nanosec)


def header(stamp: float, frame_id: str, distro: str = "jazzy") -> Any:
    """std_msgs/Header of ``stamp`` seconds since the epoch in ``frame_id``."""
    return message_class("std_msgs/msg/Header", distro)(stamp=ros_time(stamp, distro),
                                                        frame_id=frame_id)


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
        header=header(stamp, frame_id, distro),
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
        header=header(stamp, frame_id, distro),
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

    return message_class("sensor_msgs/msg/JointState", distro)(
        header=header(stamp, "", distro), name=names,
        position=np.array([positions[n] for n in names], dtype=np.float64),
        velocity=column(velocities), effort=column(efforts))


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
