"""Odometry integration exactly as seed 002's ROS node does it.

The firmware reports body-frame velocities and its IMU yaw in degrees. Per
frame: ``th = yaw * D2R``; ``dt`` is the host time since the previous frame;
``x += (vx cos th - vy sin th) dt``, ``y += (vx sin th + vy cos th) dt``; the
orientation is the quaternion of ``th`` about z. The firmware's yaw is used
as is, never integrated from ``wz``.

Two choices the seed leaves open, made here: the first frame (after start or
after the link came back) only sets the time reference (dt = 0), since the
seed's "time since node start" would integrate a jump over the outage; and a
frame with NaN/inf fields is skipped (counted), so one bad frame cannot
poison the pose forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from fwbridge.bridge.node.config import Calibration
from fwbridge.protocols.engine.kernels.sum8 import fast_constructor
from fwbridge.protocols.odom_frame import OdomFrame

__all__ = ["Odometry", "OdometryIntegrator", "quaternion_from_yaw"]


def quaternion_from_yaw(yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation by ``yaw`` radians about z (tf's createQuaternionMsgFromYaw)."""
    half = 0.5 * yaw
    return (0.0, 0.0, math.sin(half), math.cos(half))


@dataclass(frozen=True, slots=True)
class Odometry:
    """One nav_msgs/Odometry: pose in ``odom``, twist in ``base_link``, host timestamps."""

    seq: int
    stamp: float  # host clock when the frame arrived, s
    dt: float  # integration interval, s
    x: float
    y: float
    yaw: float  # rad, from the firmware
    orientation: tuple[float, float, float, float]  # quaternion x, y, z, w
    vx: float
    vy: float
    wz: float

    frame_id: ClassVar[str] = "odom"
    child_frame_id: ClassVar[str] = "base_link"

    def as_dict(self) -> dict[str, Any]:
        """The record as nested JSON-ready fields, named like nav_msgs/Odometry."""
        qx, qy, qz, qw = self.orientation
        return {
            "seq": self.seq,
            "stamp": self.stamp,
            "dt": self.dt,
            "frame_id": self.frame_id,
            "child_frame_id": self.child_frame_id,
            "pose": {
                "position": {"x": self.x, "y": self.y, "z": 0.0},
                "orientation": {"x": qx, "y": qy, "z": qz, "w": qw},
                "yaw": self.yaw,
            },
            "twist": {"linear": {"x": self.vx, "y": self.vy, "z": 0.0},
                      "angular": {"x": 0.0, "y": 0.0, "z": self.wz}},
        }


# One record per frame at 200 Hz: skip the frozen dataclass's per-field __setattr__.
_make = fast_constructor(Odometry, [f.name for f in fields(Odometry)])


class OdometryIntegrator:
    """Odometry frames + arrival times in, :class:`Odometry` records out (sans-I/O)."""

    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration or Calibration()
        self.x = 0.0
        self.y = 0.0
        self.seq = 0
        self.skipped = 0  # frames with NaN/inf fields
        self._last: float | None = None

    def restart_clock(self) -> None:
        """The next frame sets the time reference again (after an outage)."""
        self._last = None

    def reset(self) -> None:
        """Back to the origin, as at start."""
        self.x = self.y = 0.0
        self._last = None

    def update(self, frame: OdomFrame, now: float) -> Odometry | None:
        """Integrate one frame that arrived at ``now``; None if it is not finite."""
        cal = self.calibration
        vx = frame.vx * cal.vx_scale
        vy = frame.vy * cal.vy_scale
        wz = frame.wz * cal.wz_scale
        th = math.radians(frame.yaw_deg + cal.yaw_offset_deg)
        if not math.isfinite(vx + vy + wz + th):  # one test: inf/nan anywhere poisons the sum
            self.skipped += 1
            return None
        last = self._last
        dt = 0.0 if last is None or now < last else now - last
        self._last = now
        c, s = math.cos(th), math.sin(th)
        self.x += (vx * c - vy * s) * dt
        self.y += (vx * s + vy * c) * dt
        self.seq += 1
        half = 0.5 * th
        orientation = (0.0, 0.0, math.sin(half), math.cos(half))
        return _make(self.seq, now, dt, self.x, self.y, th, orientation, vx, vy, wz)
