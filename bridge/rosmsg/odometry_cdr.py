"""One robot's ``nav_msgs/Odometry`` and ``tf2_msgs/TFMessage`` as CDR: the one encoder.

:func:`odometry_encoder` is what every user of the odometry's two messages calls (the
ROS 2 base node publishing them, the MCAP recorder and the live view writing them), so
each carries the same bytes for the same record. It is a specialisation of
:func:`~fwbridge.bridge.rosmsg.topics.odometry_message` and
:func:`~fwbridge.bridge.rosmsg.topics.transform_message` followed by
:func:`~fwbridge.bridge.rosmsg.cdr.serialize`: for one pair of frame ids, every byte of
the two messages but the stamp, the pose and the twist is the same, so the CDR is laid
out once and each odometry record only packs its numbers into a copy. Building a
message of rosbags' classes and serialising it costs about 30 times more, for each
robot at its odometry rate: a fleet feels it.

The layout follows CDR's rules (little endian, each primitive aligned to its size
from the start of the data, after the 4-byte encapsulation header); the template is
checked against the generic path when it is made, and :func:`templates` gives None
when they differ (:func:`odometry_encoder` then encodes through the generic path).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Protocol

from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.rosmsg import cdr, topics

__all__ = ["OdometryEncoder", "OdometryTemplates", "RosbagsOdometry", "odometry_encoder",
           "templates"]

_HEADER = b"\x00\x01\x00\x00"  # CDR little endian, no options
_STAMP = struct.Struct("<iI")
_SEVEN = struct.Struct("<7d")  # position (x, y, z), orientation (x, y, z, w)
_SIX = struct.Struct("<6d")  # linear (x, y, z), angular (x, y, z)
_COUNT = struct.Struct("<I")


def _align(buf: bytearray, size: int) -> None:
    """Pad ``buf`` so its data (after the encapsulation header) is aligned to ``size``."""
    buf.extend(bytes(-(len(buf) - 4) % size))


def _string(buf: bytearray, text: str) -> None:
    raw = text.encode("utf-8") + b"\x00"
    _align(buf, 4)
    buf.extend(_COUNT.pack(len(raw)))
    buf.extend(raw)


class OdometryEncoder(Protocol):
    """The odometry's two messages of one robot (its frame ids), as CDR bytes."""

    def odometry(self, odom: Odometry, stamp: float) -> bytes:
        """nav_msgs/Odometry of ``odom`` at ``stamp`` (s since the epoch)."""
        ...

    def transform(self, odom: Odometry, stamp: float) -> bytes:
        """tf2_msgs/TFMessage of the one transform of ``odom`` at ``stamp``."""
        ...


@dataclass(frozen=True)
class OdometryTemplates:
    """The two messages of one robot's odometry, as CDR bytes from a record."""

    odom: bytes
    tf: bytes
    odom_pose: int  # offset of the pose's seven doubles in ``odom``
    odom_twist: int  # offset of the twist's six doubles
    tf_stamp: int  # offset of the transform's stamp in ``tf``
    tf_pose: int  # offset of its seven doubles

    def odometry(self, odom: Odometry, stamp: float) -> bytes:
        """nav_msgs/Odometry of ``odom`` at ``stamp`` (s since the epoch)."""
        out = bytearray(self.odom)
        sec, nsec = topics.time_parts(stamp)
        _STAMP.pack_into(out, 4, sec, nsec)
        qx, qy, qz, qw = odom.orientation
        _SEVEN.pack_into(out, self.odom_pose, odom.x, odom.y, 0.0, qx, qy, qz, qw)
        _SIX.pack_into(out, self.odom_twist, odom.vx, odom.vy, 0.0, 0.0, 0.0, odom.wz)
        return bytes(out)

    def transform(self, odom: Odometry, stamp: float) -> bytes:
        """tf2_msgs/TFMessage of the one transform of ``odom`` at ``stamp``."""
        out = bytearray(self.tf)
        sec, nsec = topics.time_parts(stamp)
        _STAMP.pack_into(out, self.tf_stamp, sec, nsec)
        qx, qy, qz, qw = odom.orientation
        _SEVEN.pack_into(out, self.tf_pose, odom.x, odom.y, 0.0, qx, qy, qz, qw)
        return bytes(out)


def _stamped_frames(buf: bytearray, frame_id: str, child_frame_id: str) -> int:
    """A header (a zero stamp, ``frame_id``) and ``child_frame_id``, padded for the
    doubles after them, as both messages begin; the stamp's offset."""
    at = len(buf)
    buf.extend(_STAMP.pack(0, 0))
    _string(buf, frame_id)
    _string(buf, child_frame_id)
    _align(buf, 8)
    return at


def _layout(frame_id: str, child_frame_id: str) -> OdometryTemplates:
    pose_cov, twist_cov = (struct.pack("<36d", *c) for c in topics.covariances())
    odom = bytearray(_HEADER)
    _stamped_frames(odom, frame_id, child_frame_id)
    odom_pose = len(odom)
    odom.extend(bytes(_SEVEN.size))
    odom.extend(pose_cov)
    odom_twist = len(odom)
    odom.extend(bytes(_SIX.size))
    odom.extend(twist_cov)
    tf = bytearray(_HEADER)
    tf.extend(_COUNT.pack(1))
    tf_stamp = _stamped_frames(tf, frame_id, child_frame_id)
    tf_pose = len(tf)
    tf.extend(bytes(_SEVEN.size))
    return OdometryTemplates(bytes(odom), bytes(tf), odom_pose, odom_twist, tf_stamp, tf_pose)


#: A record whose every number differs, to check a template against the generic path.
_PROBE = Odometry(seq=1, stamp=0.0, dt=0.02, x=1.25, y=-2.5, yaw=0.5,
                  orientation=(0.0, 0.0, math.sin(0.25), math.cos(0.25)),
                  vx=0.375, vy=-0.125, wz=0.0625)
_PROBE_STAMP = 1_700_000_000.123456789


def templates(frame_id: str, child_frame_id: str,
              distro: str = "jazzy") -> OdometryTemplates | None:
    """The templates of one robot's frame ids, or None when they do not give the bytes
    the generic path gives (the caller keeps the generic path)."""
    t = _layout(frame_id, child_frame_id)
    generic = RosbagsOdometry(frame_id, child_frame_id, distro)
    if (t.odometry(_PROBE, _PROBE_STAMP) != generic.odometry(_PROBE, _PROBE_STAMP)
            or t.transform(_PROBE, _PROBE_STAMP) != generic.transform(_PROBE, _PROBE_STAMP)):
        return None
    return t


@dataclass(frozen=True)
class RosbagsOdometry:
    """The messages built of rosbags' classes and serialised by rosbags (the reference
    the templates are checked against; used when a template does not match it)."""

    frame_id: str
    child_frame_id: str
    distro: str

    def odometry(self, odom: Odometry, stamp: float) -> bytes:
        msg = topics.odometry_message(odom, stamp=stamp, frame_id=self.frame_id,
                                      child_frame_id=self.child_frame_id, distro=self.distro)
        return cdr.serialize(msg, "nav_msgs/msg/Odometry", self.distro)

    def transform(self, odom: Odometry, stamp: float) -> bytes:
        msg = topics.transform_message(odom, stamp=stamp, frame_id=self.frame_id,
                                       child_frame_id=self.child_frame_id, distro=self.distro)
        return cdr.serialize(msg, "tf2_msgs/msg/TFMessage", self.distro)


def odometry_encoder(frame_id: str = "odom", child_frame_id: str = "base_link",
                     distro: str = "jazzy") -> OdometryEncoder:
    """The encoder of one robot's odometry messages: its template (:func:`templates`),
    or the generic path when the template does not give the generic path's bytes."""
    fast = templates(frame_id, child_frame_id, distro)
    return fast if fast is not None else RosbagsOdometry(frame_id, child_frame_id, distro)
