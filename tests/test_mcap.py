"""MCAP recordings, rosbag2 export, the live Foxglove view and plots, through the CLI."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcap")
rosbags = pytest.importorskip("rosbags")

import can  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mcap.reader import make_reader  # noqa: E402

from fwbridge.bridge.link.transports import PtyPair  # noqa: E402
from fwbridge.bridge.record.can_mcap import (  # noqa: E402
    FRAME_SCHEMA,
    FRAME_TYPE,
    decode_frame,
    encode_frame,
)
from fwbridge.bridge.record.mcap_reader import read_mcap  # noqa: E402
from fwbridge.bridge.record.serial_captures import read_capture  # noqa: E402
from fwbridge.bridge.record.serial_channels import RAW_SCHEMA, RAW_TYPE, decode_raw, encode_raw  # noqa: E402
from fwbridge.bridge.rosmsg import cdr  # noqa: E402
from fwbridge.protocols import odom_frame  # noqa: E402
from fwbridge.protocols.odom_frame import OdomFrame  # noqa: E402
from tests.helpers import can_frame_store as store  # noqa: E402
from tests.helpers import (  # noqa: E402
    reaped,
    run_verb,
    spawn_verb,
    unread,
    wait_for_line,
    wait_until,
    waiting_for_input,
)

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")


def summary_of(path: Path) -> object:
    with open(path, "rb") as f:
        return make_reader(f).get_summary()


LAYOUTS = Path(__file__).resolve().parent.parent / "docs" / "foxglove"


def layout_paths(name: str) -> list[str]:
    """Every message path the shipped Foxglove layout plots or shows."""
    config = json.loads((LAYOUTS / name).read_text())["configById"]
    out = []
    for panel in config.values():
        out += [p["value"] for p in panel.get("paths", [])]
        out += [panel[k] for k in ("topicPath", "topicToRender") if k in panel]
    return out


def check_layout(name: str, path: Path) -> None:
    """The layout's paths resolve in the recording: topics there, fields in their messages."""
    schemas = {}
    summary = summary_of(path)
    for ch in summary.channels.values():  # type: ignore[attr-defined]
        schemas[ch.topic] = summary.schemas[ch.schema_id]  # type: ignore[attr-defined]
    for full in layout_paths(name):
        topic, _, fields = full.partition(".")
        assert topic in schemas, f"{name}: {topic} is not in {path.name}"
        if not fields:
            continue
        last = [r for r in read_mcap(path, [topic])][-1]
        if schemas[topic].encoding == "jsonschema":
            value: object = json.loads(last.data)
        else:
            value = cdr.deserialize(last.data, schemas[topic].name)
        for part in fields.replace("]", "").split("."):
            key, _, index = part.partition("[")
            value = value[key] if isinstance(value, dict) else getattr(value, key)
            if index.startswith(":{"):  # Foxglove's filter: the row whose field is the value
                field, _, want = index[2:].rstrip("}").partition("==")
                rows = [row for row in value if str(row[field]) == want.strip('"')]  # type: ignore[attr-defined]
                assert rows, f"{name}: no row {index} in {full}"
                value = rows[0]
            elif index:
                value = value[int(index)]  # type: ignore[index]
        assert isinstance(value, (int, float, str)) or hasattr(value, "real"), full


def sim_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'use_sim = true\n[link]\nurl = "{tmp_path / "tty"}"\n'
                   '[sim]\nurl = "sim://mecanum"\n[watchdog]\ncmd_timeout = 5.0\n')
    return cfg


# -- the schemas: byte for byte against rosbags ----------------------------------------
def test_schemas_are_rosbags_own_definitions() -> None:
    ts = store()
    assert ts.generate_msgdef(FRAME_TYPE, ros_version=2)[0] == FRAME_SCHEMA  # type: ignore[attr-defined]
    assert cdr.message_definition(RAW_TYPE) == RAW_SCHEMA


@given(can_id=st.integers(0, 0x1FFFFFFF), ext=st.booleans(), rtr=st.booleans(),
       data=st.binary(max_size=8), ts=st.floats(0, 2**31 - 1), channel=st.text(max_size=12))
def test_can_frame_cdr_is_rosbags_cdr(can_id: int, ext: bool, rtr: bool, data: bytes, ts: float,
                                      channel: str) -> None:
    can_id = can_id if ext else can_id & 0x7FF
    msg = can.Message(timestamp=ts, arbitration_id=can_id, is_extended_id=ext,
                      is_remote_frame=rtr, data=b"" if rtr else data, dlc=len(data))
    encoded = encode_frame(msg, channel)
    got = store().deserialize_cdr(encoded, FRAME_TYPE)  # type: ignore[attr-defined]
    assert (got.id, got.is_extended, got.is_rtr, got.dlc) == (can_id, ext, rtr, len(data))
    assert bytes(got.data) == (b"" if rtr else data).ljust(8, b"\0")
    assert got.header.frame_id == channel
    assert bytes(store().serialize_cdr(got, FRAME_TYPE)) == encoded  # type: ignore[attr-defined]
    back = decode_frame(encoded)
    assert back.arbitration_id == can_id and bytes(back.data) == (b"" if rtr else data)


@given(st.lists(st.tuples(st.integers(0, 0x7FF), st.binary(max_size=8), st.booleans(),
                          st.floats(0, 2**31 - 1)), max_size=20))
def test_recorder_writes_encode_frame_bytes(frames: list[tuple[int, bytes, bool, float]]) -> None:
    from fwbridge.bridge.record.can_mcap import CanRecorder
    from fwbridge.bridge.record.channel_streams import Streams

    got: list[bytes] = []

    class Sink:
        def add_channel(self, spec: object) -> object:
            return spec

        def log(self, handle: object, data: bytes, t: int) -> None:
            if getattr(handle, "schema_name", "") == FRAME_TYPE:
                got.append(data)

        def close(self) -> None:
            pass

    rec = CanRecorder(Streams([Sink()]), channel="can7")
    msgs = [can.Message(timestamp=t, arbitration_id=i, data=b"" if rtr else d, dlc=len(d),
                        is_remote_frame=rtr, is_extended_id=False, channel=None if k % 2 else "x")
            for k, (i, d, rtr, t) in enumerate(frames)]
    for m in msgs:
        rec.on_message(m)
    assert got == [encode_frame(m, "can7" if m.channel is None else "x") for m in msgs]


@given(st.binary(max_size=300))
def test_raw_cdr_is_rosbags_cdr(data: bytes) -> None:
    encoded = encode_raw(data)
    msg = cdr.deserialize(encoded, RAW_TYPE)
    assert bytes(msg.data) == data
    assert cdr.serialize(msg, RAW_TYPE) == encoded
    assert decode_raw(encoded) == data


# -- recording verbs ---------------------------------------------------------------------
def test_bridge_record_mcap_holds_ros2_messages_decode_agrees(tmp_path: Path) -> None:
    out = tmp_path / "run.mcap"
    proc = spawn_verb("bridge", str(sim_config(tmp_path)), "--duration", "2.5", "--cmd-stdin",
                      "--record", str(out), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    _, err = proc.communicate(b"0.3 0.1 0.5\n", timeout=60)
    assert proc.returncode == 0, err
    summary = summary_of(out)
    assert summary is not None and summary.chunk_indexes
    assert {c.compression for c in summary.chunk_indexes} == {"zstd"}
    by_topic: dict[str, list[object]] = {}
    for rec in read_mcap(out):
        by_topic.setdefault(rec.topic, []).append(rec)
    assert {"/odom", "/tf", "/cmd_vel", "/diagnostics", "/fwbridge/serial/rx",
            "/fwbridge/serial/tx", "/fwbridge/counters"} <= by_topic.keys()
    types = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
    assert types["/odom"] == "nav_msgs/msg/Odometry" and types["/tf"] == "tf2_msgs/msg/TFMessage"
    assert types["/cmd_vel"] == "geometry_msgs/msg/Twist"
    ts = store()
    twists = [ts.deserialize_cdr(r.data, "geometry_msgs/msg/Twist")  # type: ignore[attr-defined]
              for r in by_topic["/cmd_vel"]]
    odoms = [ts.deserialize_cdr(r.data, "nav_msgs/msg/Odometry")  # type: ignore[attr-defined]
             for r in by_topic["/odom"]]
    cmds = run_verb("decode", "-p", "cmd", str(out), "--direction", "tx", "--json")
    odos = run_verb("decode", "-p", "odom", str(out), "--direction", "rx", "--json")
    assert cmds.returncode == 0 and odos.returncode == 0, cmds.stderr + odos.stderr
    cmd_rows = [json.loads(line) for line in cmds.stdout.decode().splitlines()]
    odo_rows = [json.loads(line) for line in odos.stdout.decode().splitlines()]
    # decode --json prints float32 fields as their shortest decimal: compare as float32
    f32 = np.float32
    assert [(f32(t.linear.x), f32(t.linear.y), f32(t.angular.z)) for t in twists] == [
        (f32(r["vx"]), f32(r["vy"]), f32(r["wz"])) for r in cmd_rows]
    assert any(r["vx"] == pytest.approx(0.3) for r in cmd_rows)
    # the node's odometry records: one per frame, twist = the frame's velocities
    assert [(f32(o.twist.twist.linear.x), f32(o.twist.twist.linear.y),
             f32(o.twist.twist.angular.z)) for o in odoms] == [
        (f32(r["vx"]), f32(r["vy"]), f32(r["wz"])) for r in odo_rows][:len(odoms)]
    assert len(odoms) >= len(odo_rows) - 1
    last = odoms[-1]
    assert last.header.frame_id == "odom" and last.child_frame_id == "base_link"
    assert last.pose.pose.position.x > 0.1
    yaw = 2 * math.atan2(last.pose.pose.orientation.z, last.pose.pose.orientation.w)
    assert yaw == pytest.approx(math.radians(odo_rows[-1]["yaw_deg"]), abs=1e-6)
    check_layout("base.json", out)


def _dropped(err: bytes) -> int:
    """The odometry records the bridge skipped for a late subscriber (its summary line)."""
    found = re.search(rb"odometry_dropped=(\d+)", err)
    assert found is not None, err
    return int(found[1])


def test_record_and_sniff_to_mcap_then_replay(tmp_path: Path) -> None:
    frames = [odom_frame.encode(OdomFrame(0.1 * i, 0.0, 0.2, 10.0 * i)) for i in range(1, 9)]
    rec, sniffed = tmp_path / "rec.mcap", tmp_path / "sniff.mcap"
    with PtyPair() as a, PtyPair() as b:
        recorder = spawn_verb("record", a.path, str(rec), stderr=subprocess.PIPE)
        sniffer = spawn_verb("sniff", b.path, "-p", "odom", "--record", str(sniffed), "--json",
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with reaped(recorder), reaped(sniffer):
            wait_for_line(recorder, "^recording ")  # both verbs have opened their ports
            wait_for_line(sniffer, "^sniffing ")
            for frame in frames:
                a.write(frame)
                b.write(frame)
                time.sleep(0.05)  # pacing: one frame per read, as a device sends them
            # Every frame read and handled before the stop: the sniffer has printed
            # them all, the recorder has left none unread and waits for more.
            sout = b"".join(wait_for_line(sniffer, "", stream="stdout").encode() + b"\n"
                            for _ in frames)
            wait_until(lambda: unread(a) == 0 and waiting_for_input(recorder.pid),
                       what="the recorder reading every frame")
            for p in (recorder, sniffer):
                p.send_signal(signal.SIGTERM)  # finalised like Ctrl-C
            _, rerr = recorder.communicate(timeout=20)
            rest, serr = sniffer.communicate(timeout=20)
            sout += rest
    # stopped by SIGTERM: exit 128 + 15, after the same clean-up as Ctrl-C
    assert recorder.returncode == 143 and b"recorded" in rerr, rerr
    assert sniffer.returncode == 143, serr
    for path in (rec, sniffed):
        assert summary_of(path) is not None  # SIGTERM still wrote the summary
        assert b"".join(p.data for p in read_capture(path)) == b"".join(frames)
        odoms = [cdr.deserialize(r.data, "nav_msgs/msg/Odometry")
                 for r in read_mcap(path, ["/odom"])]
        assert [round(o.twist.twist.linear.x, 5) for o in odoms] == [
            round(0.1 * i, 5) for i in range(1, 9)]
    assert len(sout.decode().splitlines()) == 8
    with PtyPair() as dst:
        got = bytearray()
        proc = spawn_verb("replay", str(rec), dst.path, "--speed", "4", stderr=subprocess.PIPE)
        end = time.monotonic() + 15
        while len(got) < sum(map(len, frames)) and time.monotonic() < end:
            if select.select([dst.master_fd], [], [], 0.2)[0]:
                got += os.read(dst.master_fd, 4096)
        proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert bytes(got) == b"".join(frames)


def test_can_sim_and_record_to_mcap_decode_agrees(tmp_path: Path) -> None:
    out = tmp_path / "bus.mcap"
    chan = f"mcap{os.getpid()}"
    r = run_verb("can", "-c", chan, "sim", "3", "--duration", "1.5", "--pacing", "afap",
                 "--capture", str(out), "--fault", "2:stuck@0.5", "--fault", "2:clear@0.8")
    assert r.returncode == 0, r.stderr
    summary = summary_of(out)
    # the compact layout: chunks, a summary, no indexes (see docs/MCAP.md)
    assert summary is not None and summary.statistics.chunk_count > 1
    assert not summary.chunk_indexes
    ts = store()
    frames = [ts.deserialize_cdr(rec.data, FRAME_TYPE)  # type: ignore[attr-defined]
              for rec in read_mcap(out, ["/from_can_bus"])]
    dec = run_verb("can", "decode", str(out), "--json", "--absolute")
    assert dec.returncode == 0, dec.stderr
    rows = [json.loads(line) for line in dec.stdout.decode().splitlines()]
    structs = [f for f in frames if 0x100 <= f.id <= 0x2FF and f.dlc == 8]
    assert len(structs) == len(rows) > 100
    for f, row in zip(structs, rows):
        assert f.id & 0xFF == row["module"]
        assert int.from_bytes(bytes(f.data[:1]), "little", signed=True) == row["angle"]
        assert f.header.stamp.sec + f.header.stamp.nanosec / 1e9 == pytest.approx(row["t"])
    names = {rec.topic for rec in read_mcap(out)}
    assert {"/fwbridge/can/load", "/fwbridge/can/state", "/joint_states", "/diagnostics"} <= names
    states = [json.loads(rec.data) for rec in read_mcap(out, ["/fwbridge/can/state"])]
    assert any(s["node"] == "module2" and s["new"] == "BUS_OFF" for s in states)
    joints = [cdr.deserialize(rec.data, "sensor_msgs/msg/JointState")
              for rec in read_mcap(out, ["/joint_states"])]
    assert joints[-1].name == ["module1", "module2", "module3"]
    check_layout("can.json", out)
    # can record: the same writer through open_writer
    rec = tmp_path / "rec.mcap"
    r = run_verb("can", "-c", chan + "r", "--modules", "2", "--bus-kwarg",
                 "pacing=afap", "record", str(rec), "--count", "200")
    assert r.returncode == 0, r.stderr
    assert len(list(read_mcap(rec, ["/from_can_bus"]))) == 200


def test_sigkill_leaves_a_file_readable_to_its_last_chunk(tmp_path: Path) -> None:
    out = tmp_path / "cut.mcap"
    proc = spawn_verb("can", "-c", f"kill{os.getpid()}", "sim", "3", "--capture", str(out),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # a chunk closes every second of bus time: the first ones are in the file
    wait_until(lambda: out.exists() and out.stat().st_size >= 6000, 30, "the first chunks")
    time.sleep(1.2)  # not a readiness wait: the bus runs on, the kill lands in a later chunk
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    with open(out, "rb") as f:
        try:
            summary = make_reader(f).get_summary()
        except Exception:  # the footer the reader seeks is not there
            summary = None
        assert summary is None  # no summary was written
        f.seek(-8, 2)
        assert f.read(8) != b"\x89MCAP0\r\n"  # no closing magic: the file was cut
    why: list[str] = []
    frames = [r for r in read_mcap(out, ["/from_can_bus"], on_error=why.append)]
    assert len(frames) > 100
    msgs = [decode_frame(r.data) for r in frames]
    assert all(b.timestamp >= a.timestamp for a, b in itertools.pairwise(msgs))
    assert why and "cut at byte" in why[0]
    dec = run_verb("can", "decode", str(out), "--json", "--absolute")  # whole frames, a notice
    assert dec.returncode == 2 and len(dec.stdout.splitlines()) > 100
    assert dec.stderr.decode().splitlines()[-1].startswith(f"error: {out}: cut at byte")


# -- conversion ------------------------------------------------------------------------------
def test_convert_to_rosbag2_and_mcap(tmp_path: Path) -> None:
    from rosbags.rosbag2 import Reader

    run_mcap = tmp_path / "run.mcap"
    proc = spawn_verb("bridge", str(sim_config(tmp_path)), "--duration", "1.2", "--cmd-stdin",
                      "--record", str(run_mcap), stdin=subprocess.PIPE,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = proc.communicate(b"0.2 0 0\n", timeout=60)
    assert proc.returncode == 0, err
    bag = tmp_path / "bag"
    r = run_verb("convert", str(run_mcap), str(bag), "--to", "rosbag2")
    assert r.returncode == 0, r.stderr
    with Reader(bag) as reader:
        conns = {c.topic: c for c in reader.connections}
        assert conns["/odom"].msgtype == "nav_msgs/msg/Odometry"
        assert {"/tf", "/cmd_vel", "/diagnostics", "/fwbridge/serial/rx"} <= conns.keys()
        odoms = [cdr.deserialize(raw, "nav_msgs/msg/Odometry")
                 for _, _, raw in reader.messages([conns["/odom"]])]
    expected = [cdr.deserialize(rec.data, "nav_msgs/msg/Odometry")
                for rec in read_mcap(run_mcap, ["/odom"])]
    assert [o.pose.pose.position.x for o in odoms] == [o.pose.pose.position.x for o in expected]
    again = run_verb("convert", str(run_mcap), str(bag), "--to", "rosbag2")
    assert again.returncode == 2 and b"exists already" in again.stderr
    # a pcapng capture and a CAN log become MCAP
    pcap = tmp_path / "run.pcapng"
    from fwbridge.bridge.record.serial_pcapng import CaptureWriter

    with CaptureWriter(pcap) as w:
        for p in read_capture(run_mcap):
            w.write(p.direction, p.data, p.ts_ns)
    conv = tmp_path / "conv.mcap"
    assert run_verb("convert", str(pcap), str(conv)).returncode == 0
    assert b"".join(p.data for p in read_capture(conv)) == b"".join(
        p.data for p in read_capture(run_mcap))
    assert len(list(read_mcap(conv, ["/odom"]))) == len(expected) + _dropped(err)
    log = tmp_path / "bus.log"
    chan = f"conv{os.getpid()}"
    assert run_verb("can", "-c", chan, "--modules", "2", "--bus-kwarg", "pacing=afap",
                    "record", str(log), "--count", "50").returncode == 0
    assert run_verb("convert", str(log), str(tmp_path / "bus.mcap")).returncode == 0
    assert len(list(read_mcap(tmp_path / "bus.mcap", ["/from_can_bus"]))) == 50


# -- the live view ----------------------------------------------------------------------------
CLIENT = r"""
import asyncio, json, struct, sys
import websockets
from fwbridge.bridge.rosmsg import cdr

async def main(url, want):
    async with websockets.connect(url, subprotocols=["foxglove.sdk.v1",
                                                      "foxglove.websocket.v1"]) as ws:
        channels, got = {}, []
        while len(got) < want:
            m = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(m, str):
                j = json.loads(m)
                if j["op"] == "advertise":
                    for c in j["channels"]:
                        channels[c["topic"]] = c
                    if "/odom" in channels:
                        await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                            {"id": 1, "channelId": channels["/odom"]["id"]}]}))
            elif m[0] == 1:  # message data: opcode, subscription id, log time, payload
                sub, t = struct.unpack_from("<IQ", m, 1)
                odom = cdr.deserialize(m[13:], "nav_msgs/msg/Odometry")
                got.append({"sub": sub, "t": t, "x": odom.pose.pose.position.x,
                            "vx": odom.twist.twist.linear.x, "frame": odom.header.frame_id})
        print(json.dumps({"channel": channels["/odom"], "messages": got}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} give them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                addr, hexport = parts[1].rsplit(":", 1)
                if int(hexport, 16) == port and parts[3] == "0A":
                    found.append(addr)
    return found


def test_foxglove_live_view_of_sim_and_bridge(tmp_path: Path) -> None:
    pytest.importorskip("foxglove")
    pytest.importorskip("websockets")
    sim_mcap = tmp_path / "sim.mcap"
    sim = spawn_verb("sim", "mecanum", "--json", "--record", str(sim_mcap),
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert sim.stdout is not None
        ready = json.loads(sim.stdout.readline())
        cfg = tmp_path / "robot.toml"
        cfg.write_text(f'[link]\nurl = "{ready["port"]}"\n[watchdog]\ncmd_timeout = 30\n')
        port = free_port()
        bridge = spawn_verb("bridge", str(cfg), "--cmd-stdin", "--foxglove", "--foxglove-port",
                            str(port), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
        try:
            assert bridge.stdin is not None
            bridge.stdin.write(b"0.25 0 0\n")
            bridge.stdin.flush()
            addrs = wait_until(lambda: listening(port), 20, f"a listener on port {port}")
            assert addrs and all(a == "0100007F" for a in addrs), addrs  # 127.0.0.1 only
            client = subprocess.run([sys.executable, "-c", CLIENT, f"ws://127.0.0.1:{port}", "20"],
                                    capture_output=True, timeout=60, env={
                                        **os.environ, "PYTHONPATH": str(Path.cwd())})
            assert client.returncode == 0, client.stderr.decode()
            got = json.loads(client.stdout)
            assert got["channel"]["schemaName"] == "nav_msgs/msg/Odometry"
            assert got["channel"]["encoding"] == "cdr"
            assert got["channel"]["schemaEncoding"] == "ros2msg"
            msgs = got["messages"]
            assert len(msgs) == 20 and all(m["sub"] == 1 and m["frame"] == "odom" for m in msgs)
            assert msgs[-1]["vx"] > 0.1  # the base moves as commanded
            assert abs(msgs[-1]["t"] / 1e9 - time.time()) < 60
        finally:
            bridge.send_signal(signal.SIGINT)
            bridge.communicate(timeout=20)
        assert bridge.returncode == 130
        assert not listening(port)  # the server went with the bridge
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=20)
    # fwbridge sim --record: the link as the host saw it, finalised on SIGTERM
    assert summary_of(sim_mcap) is not None
    twists = [cdr.deserialize(r.data, "geometry_msgs/msg/Twist")
              for r in read_mcap(sim_mcap, ["/cmd_vel"])]
    assert any(t.linear.x == pytest.approx(0.25) for t in twists)
    assert len(list(read_mcap(sim_mcap, ["/odom"]))) > 20


# -- plots ------------------------------------------------------------------------------------
def test_plot_draws_the_path_in_the_capture(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.image

    from fwbridge.cli_verbs.plot import plot_capture

    run_mcap = tmp_path / "run.mcap"
    proc = spawn_verb("bridge", str(sim_config(tmp_path)), "--duration", "2.5", "--cmd-stdin",
                      "--record", str(run_mcap), stdin=subprocess.PIPE,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = proc.communicate(b"0.3 0.2 0.8\n", timeout=60)
    assert proc.returncode == 0, err
    png = tmp_path / "run.png"
    r = run_verb("plot", str(run_mcap), "-o", str(png))
    assert r.returncode == 0, r.stderr
    assert png.stat().st_size > 20_000
    image = matplotlib.image.imread(str(png))
    assert image.shape[:2] == (900, 1200)
    geo = plot_capture(run_mcap, tmp_path / "again.png")
    odoms = [cdr.deserialize(rec.data, "nav_msgs/msg/Odometry")
             for rec in read_mcap(run_mcap, ["/odom"])]
    (x0, y0, x1, y1), (xa, xb), (ya, yb) = geo["bbox"], geo["xlim"], geo["ylim"]
    height = geo["size"][1]
    hits = 0
    points = odoms[5::10]
    for o in points:
        px = x0 + (o.pose.pose.position.x - xa) / (xb - xa) * (x1 - x0)
        py = y0 + (o.pose.pose.position.y - ya) / (yb - ya) * (y1 - y0)
        r_, c_ = round(height - py), round(px)
        patch = image[r_ - 2:r_ + 3, c_ - 2:c_ + 3, :3]
        blue = (patch[..., 2] > 0.8) & (patch[..., 0] < 0.3) & (patch[..., 1] < 0.3)
        hits += bool(blue.any())
    assert hits == len(points) and len(points) >= 5
    # a point off the path is not blue: the check can fail
    px, py = x0 + 0.98 * (x1 - x0), y0 + 0.02 * (y1 - y0)
    assert not (image[int(height - py), int(px), 2] > 0.8 and image[int(height - py),
                                                                   int(px), 0] < 0.3)
    can_png = tmp_path / "bus.png"
    bus = tmp_path / "bus.log"
    assert run_verb("can", "-c", f"plot{os.getpid()}", "--modules", "2",
                    "--bus-kwarg", "pacing=afap", "record", str(bus),
                    "--count", "300").returncode == 0
    r = run_verb("plot", str(bus), "-o", str(can_png), "--bitrate", "500000")
    assert r.returncode == 0, r.stderr
    assert can_png.stat().st_size > 20_000


FLEET_CLIENT = r"""
import asyncio, json, struct, sys
import websockets
from fwbridge.bridge.rosmsg import cdr

async def main(url):
    async with websockets.connect(url, subprotocols=["foxglove.sdk.v1"]) as ws:
        ids, seen = {}, {}
        while len(seen) < 2:
            m = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(m, str):
                j = json.loads(m)
                if j["op"] == "advertise":
                    subs = []
                    for c in j["channels"]:
                        if c["topic"].endswith("/odom"):
                            ids[len(ids) + 1] = c["topic"]
                            subs.append({"id": len(ids), "channelId": c["id"]})
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
            elif m[0] == 1:
                sub = struct.unpack_from("<I", m, 1)[0]
                odom = cdr.deserialize(m[13:], "nav_msgs/msg/Odometry")
                seen[ids[sub]] = odom.header.frame_id
        print(json.dumps(seen))

asyncio.run(main(sys.argv[1]))
"""


def test_fleet_live_view_keeps_the_robots_apart() -> None:
    pytest.importorskip("foxglove")
    pytest.importorskip("zenoh")
    port = free_port()
    fleet = spawn_verb("fleet", "2", "--foxglove", "--foxglove-port", str(port), "--connect",
                       "tcp/127.0.0.1:9", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: listening(port), 30, f"a listener on port {port}")
        assert listening(port) and all(a == "0100007F" for a in listening(port))
        client = subprocess.run([sys.executable, "-c", FLEET_CLIENT, f"ws://127.0.0.1:{port}"],
                                capture_output=True, timeout=60,
                                env={**os.environ, "PYTHONPATH": str(Path.cwd())})
        assert client.returncode == 0, client.stderr.decode()
        # each robot in its own TF frames, as on ROS 2
        assert json.loads(client.stdout) == {"/robot1/odom": "robot1/odom",
                                             "/robot2/odom": "robot2/odom"}
    finally:
        fleet.send_signal(signal.SIGTERM)
        _, err = fleet.communicate(timeout=30)
    assert fleet.returncode == 143, err
