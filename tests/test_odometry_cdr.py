"""The odometry messages' template serialiser gives the generic path's bytes."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.bridge.node.odometry import Odometry, quaternion_from_yaw
from fwbridge.bridge.rosmsg import cdr, topics
from fwbridge.bridge.rosmsg.odometry_cdr import templates

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
frame_ids = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(frame=frame_ids, child=frame_ids, x=finite, y=finite, yaw=st.floats(-10, 10),
       vx=finite, vy=finite, wz=finite,
       stamp=st.floats(0, 2**31 - 1, allow_nan=False), distro=st.sampled_from(["jazzy", "humble"]))
def test_template_bytes_equal_the_generic_path(frame: str, child: str, x: float, y: float,
                                               yaw: float, vx: float, vy: float, wz: float,
                                               stamp: float, distro: str) -> None:
    t = templates(frame, child, distro)
    assert t is not None
    odom = Odometry(seq=7, stamp=0.0, dt=0.02, x=x, y=y, yaw=yaw,
                    orientation=quaternion_from_yaw(yaw), vx=vx, vy=vy, wz=wz)
    names = {"frame_id": frame, "child_frame_id": child}
    assert t.odometry(odom, stamp) == cdr.serialize(
        topics.odometry_message(odom, stamp=stamp, distro=distro, **names),
        "nav_msgs/msg/Odometry", distro)
    assert t.transform(odom, stamp) == cdr.serialize(
        topics.transform_message(odom, stamp=stamp, distro=distro, **names),
        "tf2_msgs/msg/TFMessage", distro)


def test_the_template_reads_back_as_the_message() -> None:
    t = templates("robot3/odom", "robot3/base_link")
    assert t is not None
    odom = Odometry(seq=1, stamp=0.0, dt=0.02, x=1.5, y=-0.25, yaw=math.pi / 3,
                    orientation=quaternion_from_yaw(math.pi / 3), vx=0.2, vy=0.0, wz=-0.5)
    msg = cdr.deserialize(t.odometry(odom, 1_700_000_000.5), "nav_msgs/msg/Odometry")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_700_000_000, 500_000_000)
    assert msg.header.frame_id == "robot3/odom" and msg.child_frame_id == "robot3/base_link"
    assert (msg.pose.pose.position.x, msg.twist.twist.angular.z) == (1.5, -0.5)
    assert msg.pose.covariance[0] == topics.POSE_VARIANCE
