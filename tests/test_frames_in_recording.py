"""The other descriptions on a base's link, recorded: a channel each in MCAP (read back by
the mcap library), JSON under a schema made from the description."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcap")

from mcap.reader import make_reader

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import load_config
from fwbridge.bridge.node.sinks import SinkBase
from fwbridge.bridge.record.frame_channels import frame_message, frame_spec
from fwbridge.bridge.record.serial_mcap import open_capture
from fwbridge.protocols.descriptions.loader import load
from fwbridge.protocols.engine import codec_for
from fwbridge.protocols.odom_frame import OdomFrame
from fwbridge.protocols.odom_frame import encode as encode_odom
from tests.conftest import FIXTURES

IMU_FILE = FIXTURES / "frames" / "imu.toml"


def test_the_schema_says_each_fields_type_unit_and_labels() -> None:
    spec = frame_spec(load(IMU_FILE), namespace="/robot1")
    assert spec.topic == "/robot1/fwbridge/frames/imu"
    assert (spec.schema_encoding, spec.message_encoding) == ("jsonschema", "json")
    props = json.loads(spec.schema)["properties"]
    assert list(props) == ["seq", "mode", "ax", "ay", "az", "gz", "temp", "status"]
    assert props["seq"] == {"type": "integer"}
    assert props["ax"] == {"type": "number", "description": "unit: m/s^2"}
    assert props["mode"]["type"] == "integer"
    assert "0 idle, 1 run, 2 calibrate" in props["mode"]["description"]


def test_a_value_json_cannot_hold_is_left_out_of_its_message() -> None:
    desc = load(IMU_FILE)
    codec = codec_for(desc)
    frame = codec.decode(codec.encode(codec.make(1, 1, 981, 0, 0, 0, 250, 7)))
    assert json.loads(frame_message(frame, desc)) == {
        "seq": 1, "mode": 1, "ax": 9.81, "ay": 0.0, "az": 0.0, "gz": 0.0, "temp": 45.0,
        "status": 7}

    class Odd:  # a frame whose float is not finite
        seq, mode, ax, ay, az, gz, temp, status = 1, 0, math.nan, math.inf, 0.0, 0.0, 20.0, 0

    assert "ax" not in json.loads(frame_message(Odd(), desc))


class _Seen(SinkBase):
    def __init__(self) -> None:
        self.frames = 0
        self.cond = threading.Condition()

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        with self.cond:
            self.frames += 1
            self.cond.notify_all()


def test_a_bridge_recording_has_a_channel_per_description(pair: PtyPair, tmp_path: Path) -> None:
    (tmp_path / "imu.toml").write_text(IMU_FILE.read_text())
    robot = tmp_path / "robot.toml"
    robot.write_text(f'[link]\nurl = "{pair.path}"\nframes_in = ["imu.toml"]\n')
    cfg = load_config(robot)
    imu = codec_for(tmp_path / "imu.toml")
    out = tmp_path / "run.mcap"
    capture = open_capture(out, port=cfg.link_url, decode=False,
                           descriptions=[imu.desc])
    seen = _Seen()
    node = BaseNode(cfg, sinks=[capture, seen], on_event=None)
    with node:
        pair.write(imu.encode(imu.make(1, 0, 100, 0, 0, 0, 0, 0))
                   + encode_odom(OdomFrame(0.1, 0.0, 0.0, 0.0))
                   + imu.encode(imu.make(2, 1, -100, 0, 0, 0, 0, 3)))
        with seen.cond:
            assert seen.cond.wait_for(lambda: seen.frames >= 2, timeout=10)
    with out.open("rb") as f:
        reader = make_reader(f)
        got = [(ch.topic, sc.name, sc.encoding, json.loads(msg.data))
               for sc, ch, msg in reader.iter_messages(topics=["/fwbridge/frames/imu"])]
    assert [(t, n, e) for t, n, e, _ in got] == [
        ("/fwbridge/frames/imu", "fwbridge.frames.imu", "jsonschema")] * 2
    assert [(m["seq"], m["ax"], m["status"]) for *_, m in got] == [(1, 1.0, 0), (2, -1.0, 3)]
