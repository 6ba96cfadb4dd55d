"""The mapping between node records and ROS 2 messages (fwbridge.bridge.rosmsg)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from hypothesis import given
from hypothesis import strategies as st

from fwbridge.bridge.node.odometry import OdometryIntegrator, quaternion_from_yaw
from fwbridge.bridge.rosmsg import cdr, diagnostics, plain_data, topics
from fwbridge.protocols.odom_frame import OdomFrame


def _record(yaw_deg: float = 90.0):
    integ = OdometryIntegrator()
    integ.update(OdomFrame(0.5, 0.0, 0.1, yaw_deg), 0.0)
    rec = integ.update(OdomFrame(0.5, 0.0, 0.1, yaw_deg), 0.5)
    assert rec is not None
    return rec


def test_import_is_light() -> None:
    code = ("import sys; from fwbridge.bridge.rosmsg import cdr, diagnostics, plain_data, "
            "topics; print('rosbags' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_odometry_as_seed_002() -> None:
    rec = _record(90.0)
    msg = topics.odometry_message(rec, stamp=1700000000.25)
    back = cdr.deserialize(cdr.serialize(msg, "nav_msgs/msg/Odometry"),
                              "nav_msgs/msg/Odometry")
    assert back.header.frame_id == "odom" and back.child_frame_id == "base_link"
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == (1700000000, 250_000_000)
    # body vx along a yaw of 90°: the pose moves along +y (the seed's rotation)
    assert back.pose.pose.position.x == pytest.approx(0.0, abs=1e-12)
    assert back.pose.pose.position.y == pytest.approx(0.25)
    q = back.pose.pose.orientation
    assert (q.x, q.y, q.z, q.w) == pytest.approx(quaternion_from_yaw(math.pi / 2))
    assert back.twist.twist.linear.x == pytest.approx(0.5)
    assert back.twist.twist.angular.z == pytest.approx(0.1)
    cov = back.pose.covariance.reshape(6, 6)
    assert cov[0, 0] == topics.POSE_VARIANCE and cov[2, 2] == topics.UNMEASURED
    assert cov[5, 5] == topics.POSE_VARIANCE and cov[0, 1] == 0.0


def test_transform_matches_odometry() -> None:
    rec = _record(30.0)
    tf = cdr.deserialize(cdr.serialize(topics.transform_message(rec, stamp=5.0),
                                             "tf2_msgs/msg/TFMessage"), "tf2_msgs/msg/TFMessage")
    (t,) = tf.transforms
    assert (t.header.frame_id, t.child_frame_id) == ("odom", "base_link")
    assert (t.transform.translation.x, t.transform.translation.y) == pytest.approx((rec.x, rec.y))
    assert t.transform.rotation.z == pytest.approx(rec.orientation[2])


def test_joint_states_and_diagnostics() -> None:
    js = topics.joint_state_message({"j1": 0.5, "j2": -0.1}, stamp=1.0,
                                    velocities={"j1": 1.0})  # incomplete: left empty
    back = cdr.deserialize(cdr.serialize(js, "sensor_msgs/msg/JointState"),
                              "sensor_msgs/msg/JointState")
    assert back.name == ["j1", "j2"] and list(back.position) == [0.5, -0.1]
    assert len(back.velocity) == 0
    rows = [{"module": 3, "status": "silent", "age": None, "frames": 0}]
    arr = diagnostics.diagnostics_message(
        [diagnostics.node_status("base", {"frames": 7, "checksum_errors": 0}, connected=False),
         *diagnostics.module_health_statuses(rows)], stamp=2.0)
    back = cdr.deserialize(cdr.serialize(arr, "diagnostic_msgs/msg/DiagnosticArray"),
                              "diagnostic_msgs/msg/DiagnosticArray")
    base, module = back.status
    assert base.level == 2 and {kv.key: kv.value for kv in base.values}["frames"] == "7"
    assert module.level == 2 and module.hardware_id == "can:3"


def test_names_and_hashes() -> None:
    assert cdr.dds_type_name("nav_msgs/msg/Odometry") == "nav_msgs::msg::dds_::Odometry_"
    assert cdr.ros_type_name("nav_msgs::msg::dds_::Odometry_") == "nav_msgs/msg/Odometry"
    h = cdr.type_hash("geometry_msgs/msg/Twist", "jazzy")
    assert h.startswith("RIHS01_") and len(h) == 7 + 64
    assert cdr.type_hash("geometry_msgs/msg/Twist", "humble") == "TypeHashNotSupported"
    for spec in topics.TOPICS.values():
        text = cdr.message_definition(spec.msgtype)
        assert (text and "MSG:" in text) or spec.msgtype in (
            "geometry_msgs/msg/Twist", "std_msgs/msg/String")  # String: no nested type
        assert text


@pytest.mark.parametrize("bad", [b"", b"\x00\x01\x00\x00\x01", b"\xff\xff\x00\x00" + bytes(48)])
def test_malformed_cdr_is_a_message_error(bad: bytes) -> None:
    with pytest.raises(cdr.MessageError, match="Twist"):
        cdr.deserialize(bad, "geometry_msgs/msg/Twist")


@pytest.mark.parametrize(("field", "value"), [("x", math.nan), ("x", math.inf), ("y", 1e30),
                                              ("z", -100.0)])
def test_bad_velocities_refused(field: str, value: float) -> None:
    part = "angular" if field == "z" else "linear"
    twist = plain_data.message_from_dict("geometry_msgs/msg/Twist", {part: {field: value}})
    with pytest.raises(cdr.MessageError, match=f"{part}.{field}"):
        topics.velocity_request(twist)


@given(st.floats(-10, 10), st.floats(-10, 10), st.floats(-20, 20))
def test_twist_round_trip(vx: float, vy: float, wz: float) -> None:
    twist = plain_data.message_from_dict("geometry_msgs/msg/Twist",
                                     {"linear": {"x": vx, "y": vy}, "angular": {"z": wz}})
    data = cdr.serialize(twist, "geometry_msgs/msg/Twist")
    assert topics.velocity_request(cdr.deserialize(data, "geometry_msgs/msg/Twist")) == (
        vx, vy, wz)


def test_from_dict_names_the_field() -> None:
    with pytest.raises(cdr.MessageError, match=r"Twist\.linear: unknown field 'w'"):
        plain_data.message_from_dict("geometry_msgs/msg/Twist", {"linear": {"w": 1}})
    with pytest.raises(cdr.MessageError, match=r"linear\.x: expected a number"):
        plain_data.message_from_dict("geometry_msgs/msg/Twist", {"linear": {"x": "fast"}})
    d = plain_data.message_to_dict(plain_data.message_from_dict("std_msgs/msg/String",
                                                                {"data": "hi"}))
    assert d == {"data": "hi"}


@pytest.mark.parametrize("distro", cdr.DISTROS)
def test_to_dict_gives_fields_not_constants(distro: str) -> None:
    """DiagnosticStatus declares OK/WARN/ERROR/STALE: constants of the type, not fields."""
    msg = diagnostics.diagnostics_message(
        [diagnostics.diagnostic_status("base", "warn", "slow", {"k": 1}, distro=distro)],
        stamp=2.5, distro=distro)
    d = plain_data.message_to_dict(msg)
    assert d["status"] == [{"level": 1, "name": "base", "message": "slow", "hardware_id": "",
                            "values": [{"key": "k", "value": "1"}]}]
    assert set(d) == {"header", "status"}
