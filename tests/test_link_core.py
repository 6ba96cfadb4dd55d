"""The link core with any descriptions: frames in by description, frames out on schedules
with watchdogs; the base is one configuration of it (tests/test_bridge_core.py holds that)."""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.base_core import MAX_HELD_FRAMES, BaseNodeCore
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import load_config
from fwbridge.bridge.node.link_core import LinkCore, Outbound
from fwbridge.bridge.node.sinks import JsonLinesSink, SinkBase, frame_fields
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.descriptions.loader import loads
from fwbridge.protocols.engine import codec_for
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.odom_frame import OdomFrame

IMU = codec_for(loads("""
[frame]
name = "imu"
header = "A5 5A"
byte_order = "little"

[[field]]
name = "ax"
type = "f32"
unit = "m/s^2"

[[field]]
name = "gz"
type = "i16"
scale = 0.01
unit = "rad/s"

[[field]]
name = "temp"
type = "u8"

[checksum]
algorithm = "crc-16-ccitt-false"
span = "payload"
""", "imu.toml"))

LIGHTS = codec_for(loads("""
[frame]
name = "lights"
header = "C3 3C"

[[field]]
name = "level"
type = "u8"

[checksum]
algorithm = "sum8"
span = "payload"
""", "lights.toml"))


def _imu(ax: float, gz: float, temp: int) -> bytes:
    return IMU.encode(IMU.make(ax, round(gz * 100), temp))


def _core(now: float = 0.0) -> LinkCore:
    return LinkCore(
        [odom_frame.CODEC, IMU],
        [Outbound(cmd_frame.CODEC, 50.0, cmd_frame.ZERO, timeout=0.5, what="velocity request",
                  safe_name="zero velocity"),
         Outbound(LIGHTS, 10.0, LIGHTS.make(0), timeout=None, what="lights request")],
        now=now)


def test_two_families_on_one_stream_each_get_their_frames() -> None:
    core = _core()
    stream = (b"\x00\x01" + odom_frame.encode(OdomFrame(0.5, 0, 0, 0)) + _imu(9.81, 0.25, 31)
              + b"noise" + odom_frame.encode(OdomFrame(0.25, 0, 0, 0)))
    got = core.receive_frames(stream, now=1.0)
    assert [name for name, _ in got] == ["odom", "odom", "imu"]
    assert [item.frame.vx for name, item in got if name == "odom"] == [0.5, 0.25]
    imu = next(item.frame for name, item in got if name == "imu")
    assert (imu.ax, imu.gz, imu.temp) == (pytest.approx(9.81), pytest.approx(0.25), 31)
    assert core.receivers["imu"].stats.frames == 1 and core.bytes_in == len(stream)


@settings(max_examples=60)
@given(st.lists(st.sampled_from(["odom", "imu", "noise"]), max_size=12), st.data())
def test_any_chunking_gives_each_description_the_same_frames(parts: list[str],
                                                            data: st.DataObject) -> None:
    pieces = {"odom": odom_frame.encode(OdomFrame(0.5, -0.25, 1.0, 90.0)),
              "imu": _imu(-1.5, 0.5, 7), "noise": b"\xa5\x5a\xaa\x55\x01"}
    stream = b"".join(pieces[p] for p in parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    whole, split = _core(), _core()
    want = [(n, item.offset) for n, item in whole.receive_frames(stream, 0.0)]
    got: list[tuple[str, int]] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)]):
        got += [(n, item.offset) for n, item in split.receive_frames(stream[a:b], 0.0)]
    for name in ("odom", "imu"):
        assert [o for n, o in got if n == name] == [o for n, o in want if n == name]
    assert sum(n == "imu" for n, _ in got) == parts.count("imu")


def test_each_outbound_frame_goes_at_its_rate() -> None:
    core = _core()
    sent: dict[str, int] = {"cmd": 0, "lights": 0}
    t = 0.0
    while t < 1.0:
        t = core.next_deadline
        frames = core.tick(t)
        while frames:
            name = "cmd" if frames[:2] == cmd_frame.HEADER else "lights"
            size = cmd_frame.CODEC.desc.size if name == "cmd" else LIGHTS.desc.size
            sent[name] += 1
            frames = frames[size:]
    assert sent == {"cmd": 51, "lights": 11}  # at 0, then every period up to 1 s


def test_the_watchdog_sends_the_safe_value_and_says_when_requests_resume() -> None:
    core = _core()
    core.set_request("cmd", cmd_frame.CmdFrame(0.3, 0.0, 0.5), now=0.0)
    assert cmd_frame.decode(core.frame_of("cmd", 0.4)).vx == pytest.approx(0.3)
    assert cmd_frame.decode(core.frame_of("cmd", 0.6)) == cmd_frame.ZERO
    events = core.drain_events()
    assert [e.kind for e in events] == ["watchdog"]
    assert "sending zero velocity" in events[0].message
    core.set_request("cmd", cmd_frame.CmdFrame(0.1, 0.0, 0.0), now=0.7)
    assert [e.message for e in core.drain_events()] == ["velocity requests resumed"]
    core.set_request("lights", LIGHTS.make(200), now=0.0)
    assert LIGHTS.decode(core.frame_of("lights", 100.0)).level == 200  # no watchdog: kept
    assert core.link_stats()["watchdog_trips"] == 1


def test_a_restored_link_gets_every_safe_value_first() -> None:
    core = _core()
    core.set_request("cmd", cmd_frame.CmdFrame(0.3, 0.0, 0.0), now=0.0)
    core.set_request("lights", LIGHTS.make(9), now=0.0)
    core.link_lost(1.0, "unplugged")
    first = core.link_restored(2.0)
    assert first == cmd_frame.encode(cmd_frame.ZERO) + LIGHTS.encode(LIGHTS.make(0))
    assert [e.kind for e in core.drain_events()] == ["link-lost", "link-restored"]
    assert core.next_deadline == pytest.approx(2.0 + 1 / 50)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_request_that_is_not_finite_is_refused_and_changes_nothing(bad: float) -> None:
    core = _core()
    core.set_request("cmd", cmd_frame.CmdFrame(0.2, 0.0, 0.0), now=0.0)
    with pytest.raises(ConfigError, match=r"velocity request is not finite: wz"):
        core.set_request("cmd", cmd_frame.CmdFrame(0.0, 0.0, bad), now=0.1)
    assert core.target_of("cmd", 0.2) == cmd_frame.CmdFrame(0.2, 0.0, 0.0)
    with pytest.raises(ConfigError, match="cannot be sent"):
        core.set_request("lights", LIGHTS.make(300), now=0.1)


def test_a_description_flowing_twice_the_same_way_is_refused() -> None:
    with pytest.raises(ConfigError, match="flows in twice"):
        LinkCore([IMU, IMU], [])
    cmd = Outbound(cmd_frame.CODEC, 10.0, cmd_frame.ZERO)
    with pytest.raises(ConfigError, match="flows out twice"):
        LinkCore([], [cmd, cmd])
    with pytest.raises(ConfigError, match="rate_hz must be positive"):
        LinkCore([], [Outbound(cmd_frame.CODEC, 0.0, cmd_frame.ZERO)])


def test_the_base_is_the_link_core_with_odometry_in_and_commands_out() -> None:
    base = BaseNodeCore(rate_hz=50.0, cmd_timeout=0.5, now=0.0)
    link = _core()
    assert isinstance(base, LinkCore)
    assert set(base.receivers) == {"odom"} and set(base.outbound) == {"cmd"}
    for core in (base, link):  # the same commands, the same watchdog, the same bytes
        core.set_request("cmd", cmd_frame.CmdFrame(0.3, 0.0, 0.5), now=0.0)
    for t in (0.0, 0.2, 0.49, 0.5, 0.9):
        assert base.frame(t) == link.frame_of("cmd", t)
    assert [e.message for e in base.drain_events()] == [
        e.message for e in link.drain_events()]


IMU_TOML = """
[frame]
name = "imu"
header = "A5 5A"
byte_order = "little"

[[field]]
name = "ax"
type = "f32"
unit = "m/s^2"

[[field]]
name = "gz"
type = "i16"
scale = 0.01
unit = "rad/s"

[[field]]
name = "temp"
type = "u8"

[checksum]
algorithm = "crc-16-ccitt-false"
span = "payload"
"""


def _robot(tmp_path: Path, frames_in: str) -> Path:
    (tmp_path / "devices").mkdir(exist_ok=True)
    (tmp_path / "devices" / "imu.toml").write_text(IMU_TOML)
    robot = tmp_path / "robot.toml"
    robot.write_text(f'[link]\nurl = "loop://"\nframes_in = {frames_in}\n')
    return robot


def test_a_robot_file_names_more_descriptions_in_beside_its_file(tmp_path: Path) -> None:
    cfg = load_config(_robot(tmp_path, '["devices/imu.toml", "action"]'))
    assert cfg.frames_in == (str(tmp_path / "devices" / "imu.toml"), "action")
    core = BaseNodeCore.from_config(cfg, 0.0)
    assert set(core.receivers) == {"odom", "imu", "action"}
    odom = core.receive(odom_frame.encode(OdomFrame(0.5, 0, 0, 0)) + _imu(2.0, -0.5, 40), 1.0)
    assert [o.vx for o in odom] == [0.5]
    assert [(n, f.temp) for n, f in core.drain_frames()] == [("imu", 40)]
    assert core.drain_frames() == [] and core.stats()["frames_in"] == 1


@pytest.mark.parametrize(("value", "error"), [
    ('["devices/none.toml"]', "none.toml"),
    ('["odom"]', "'odom' flows in twice"),
    ('["devices/imu.toml", "devices/./imu.toml"]', "'imu' flows in twice"),
    ('"devices/imu.toml"', "must be a list"),
    ('[""]', "must be a list"),
    (str([f"x{k}.toml" for k in range(17)]).replace("'", '"'), "at most 16"),
])
def test_a_bad_frames_in_is_one_error_naming_the_key_or_file(tmp_path: Path, value: str,
                                                           error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_config(_robot(tmp_path, value))


def test_frames_in_past_the_bound_are_dropped_and_counted() -> None:
    core = BaseNodeCore(frames_in=[IMU])
    burst = _imu(1.0, 0.0, 1) * (MAX_HELD_FRAMES + 10)
    core.receive(burst, 0.0)
    assert len(core.drain_frames()) == MAX_HELD_FRAMES
    assert core.stats()["frames_dropped"] == 10


class _Frames(SinkBase):
    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        with self.cond:
            self.got.append((name, frame_fields(frame)))
            self.cond.notify_all()


def test_a_node_on_a_pty_hands_its_sinks_the_other_descriptions_frames(pair: PtyPair,
                                                                      tmp_path: Path) -> None:
    robot = _robot(tmp_path, '["devices/imu.toml"]')
    robot.write_text(robot.read_text().replace('"loop://"', f'"{pair.path}"'))
    sink, lines = _Frames(), _Lines()
    node = BaseNode(load_config(robot), sinks=[sink, JsonLinesSink(lines)], on_event=None)
    with node:
        pair.write(b"\x00" + _imu(9.5, 0.25, 30) + odom_frame.encode(OdomFrame(0.1, 0, 0, 0))
                   + _imu(-9.5, -0.25, 31))
        with sink.cond:
            assert sink.cond.wait_for(lambda: len(sink.got) >= 2, timeout=10)
    assert [(n, f["temp"]) for n, f in sink.got] == [("imu", 30), ("imu", 31)]
    assert sink.got[0][1]["gz"] == pytest.approx(0.25)
    framed = [obj for obj in lines.objects if obj.get("frame") == "imu"]
    assert [obj["temp"] for obj in framed] == [30, 31] and all("wall" in o for o in framed)


class _Lines:
    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []

    def add(self, obj: dict[str, Any], now: float) -> None:
        self.objects.append(obj)

    def add_line(self, line: str, now: float) -> None:
        self.objects.append(json.loads(line))


def test_the_safe_frames_are_every_outbound_safe_value_and_the_base_s_zero() -> None:
    assert _core().safe_frames() == (cmd_frame.encode(cmd_frame.ZERO)
                                     + LIGHTS.encode(LIGHTS.make(0)))
    assert BaseNodeCore().safe_frames() == cmd_frame.encode(cmd_frame.ZERO)
