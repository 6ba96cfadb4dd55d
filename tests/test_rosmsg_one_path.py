"""One encoder per ROS 2 message: the MCAP recorder writes the bytes the ROS 2 sink publishes.

The odometry's two messages (``odom``, ``/tf``) of one record, taken from a real Zenoh
session as the base node in ROS 2 publishes them and from the MCAP file the serial
recorder wrote, are the same bytes, and rosbags' own serialisation of the messages
(the independent check) gives them too.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")
pytest.importorskip("mcap", reason="the mcap extra is not installed")

from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry, quaternion_from_yaw
from fwbridge.bridge.record.channel_streams import Streams
from fwbridge.bridge.record.mcap_reader import read_mcap
from fwbridge.bridge.record.mcap_sink import McapSink
from fwbridge.bridge.record.serial_mcap import SerialRecorder
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import parse_ros2
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.rosmsg import cdr, topics

#: Stamps whose nanoseconds a double holds exactly (the recorder takes ns, the ROS 2 sink s).
STAMPS = [1_700_000_000.5, 1_700_000_003.0, 1_700_000_004.5]


def _records() -> list[Odometry]:
    return [Odometry(seq=i, stamp=s, dt=0.02, x=0.5 * i - 1.0, y=-0.25 * i, yaw=0.3 * i,
                     orientation=quaternion_from_yaw(0.3 * i), vx=0.1 + i, vy=-0.2, wz=0.05 * i)
            for i, s in enumerate(STAMPS)]


def _rosbags(odom: Odometry, prefix: str) -> tuple[bytes, bytes]:
    names = {"frame_id": f"{prefix}odom", "child_frame_id": f"{prefix}base_link"}
    return (cdr.serialize(topics.odometry_message(odom, stamp=odom.stamp, **names),
                             "nav_msgs/msg/Odometry"),
            cdr.serialize(topics.transform_message(odom, stamp=odom.stamp, **names),
                             "tf2_msgs/msg/TFMessage"))


def _published(records: list[Odometry], prefix: str,
               monkeypatch: pytest.MonkeyPatch) -> dict[str, list[bytes]]:
    """The bytes the ROS 2 sink puts on Zenoh for ``records``, by message type."""
    monkeypatch.setattr(topics, "wall_stamp", lambda stamp: stamp)  # the records' stamps
    got: dict[str, list[bytes]] = {"Odometry_": [], "TFMessage_": []}
    lock = threading.Lock()

    def on_sample(sample: Any) -> None:
        key = str(sample.key_expr)
        for kind, seen in got.items():
            if f"::{kind}/" in key:
                with lock:
                    seen.append(sample.payload.to_bytes())

    settings = parse_ros2({"namespace": "/one_path", "frame_prefix": prefix.rstrip("/")})
    node = BaseNode(RobotConfig(sim_url="sim://mecanum", use_sim=True, source="<test>"))
    with Participant(connect=(), mode="peer") as p:
        sub = p.session.declare_subscriber("**", on_sample)
        bridge = Ros2Base(node, settings, participant=p, say=lambda _t: None)
        bridge.start()
        try:
            for odom in records:
                bridge.on_odometry(odom)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                with lock:
                    if all(len(seen) >= len(records) for seen in got.values()):
                        break
                time.sleep(0.01)  # polling: the subscriber's thread, with a deadline
        finally:
            bridge.stop()
            sub.undeclare()
    return got


def _recorded(records: list[Odometry], prefix: str, path: Path) -> dict[str, list[bytes]]:
    """The bytes of the MCAP recorder's ``/odom`` and ``/tf`` for ``records``."""
    streams = Streams([McapSink(path)])
    rec = SerialRecorder(streams, raw=False, frame_prefix=prefix,
                         wall_ns=lambda stamp: round(stamp * 1e9))
    for odom in records:
        rec.on_odometry(odom)
    streams.close()
    got: dict[str, list[bytes]] = {"/odom": [], "/tf": []}
    for msg in read_mcap(path, set(got)):
        got[msg.topic].append(bytes(msg.data))
    return got


@pytest.mark.parametrize("prefix", ["", "site_a/r9/"])
def test_mcap_odometry_and_tf_are_the_bytes_ros2_publishes_and_rosbags_serialises(
        prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records()
    recorded = _recorded(records, prefix, tmp_path / "odom.mcap")
    published = _published(records, prefix, monkeypatch)
    reference = [_rosbags(odom, prefix) for odom in records]
    assert published["Odometry_"] == recorded["/odom"] == [r[0] for r in reference]
    assert published["TFMessage_"] == recorded["/tf"] == [r[1] for r in reference]


def test_the_recorder_encodes_odometry_without_rosbags_per_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's odometry goes through the ROS 2 sink's template encoder, not a
    per-record rosbags message: with rosbags' serialiser gone after the recorder is made,
    every record is still written, the same bytes as before."""
    records = _records()
    before = _recorded(records, "", tmp_path / "before.mcap")
    streams = Streams([McapSink(tmp_path / "after.mcap")])
    rec = SerialRecorder(streams, raw=False, wall_ns=lambda stamp: round(stamp * 1e9))

    def no_rosbags(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a record went through rosbags' serialiser")

    monkeypatch.setattr(cdr, "serialize", no_rosbags)
    monkeypatch.setattr(topics, "odometry_message", no_rosbags)
    monkeypatch.setattr(topics, "transform_message", no_rosbags)
    for odom in records:
        rec.on_odometry(odom)
    monkeypatch.undo()
    streams.close()
    after: dict[str, list[bytes]] = {"/odom": [], "/tf": []}
    for msg in read_mcap(tmp_path / "after.mcap", set(after)):
        after[msg.topic].append(bytes(msg.data))
    assert after == before
    assert len(after["/odom"]) == len(after["/tf"]) == len(records)


@pytest.mark.parametrize("old", ["fwbridge.bridge.node.topics",
                                 "fwbridge.bridge.node.odometry_cdr"])
def test_the_mapping_left_the_node_without_an_alias(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_a_template_that_differs_from_rosbags_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder checks its template against rosbags' bytes when made: where rosbags'
    message differs (here an odometry message of another layout), the encoder stays on
    rosbags' path and gives rosbags' bytes."""
    from fwbridge.bridge.rosmsg import cdr, odometry_cdr, topics

    built = topics.odometry_message

    def other(odom: Odometry, **kwargs: Any) -> Any:
        msg = built(odom, **kwargs)
        msg.child_frame_id += "_other"
        return msg

    odom = _records()[1]
    assert isinstance(odometry_cdr.odometry_encoder(), odometry_cdr.OdometryTemplates)
    monkeypatch.setattr(topics, "odometry_message", other)
    encoder = odometry_cdr.odometry_encoder()
    assert isinstance(encoder, odometry_cdr.RosbagsOdometry)
    assert encoder.odometry(odom, odom.stamp) == cdr.serialize(
        other(odom, stamp=odom.stamp), "nav_msgs/msg/Odometry")
    assert encoder.transform(odom, odom.stamp) == _rosbags(odom, "")[1]
