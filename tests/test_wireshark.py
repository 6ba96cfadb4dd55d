"""The generated Lua dissector in tshark: same field values as ``fwbridge decode --json``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.record.serial_pcapng import RX, TX, CaptureWriter
from fwbridge.cli_verbs.frames import FrameTap
from fwbridge.protocols import action_frame
from fwbridge.protocols.described import Described
from fwbridge.protocols.descriptions.loader import load
from tests.conftest import FIXTURES
from tests.helpers import run_cli

pytestmark = [
    pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning"),
    pytest.mark.skipif(shutil.which("tshark") is None,
                       reason="tshark is not installed (.ci/run installs it with apt-get)"),
]

IMU = FIXTURES / "frames" / "imu.toml"


def record(path: Path, d: Described, frames: list[bytes], read: int,
           direction: str = RX) -> None:
    """What ``fwbridge record -p`` writes: raw reads of ``read`` bytes, accepted frames whole."""
    stream = b"\x5a\x00" + b"\x00".join(frames)
    rx, tap = d.receiver(), FrameTap(d.desc)
    with CaptureWriter(path, frames=d.desc.name) as cap:
        for i in range(0, len(stream), read):
            chunk = stream[i:i + read]
            cap.write(direction, chunk)
            tap.feed(chunk)
            for item in rx.feed(chunk):
                frame = tap.frame(item.offset)
                assert frame is not None
                cap.write_frame(direction, frame)


def tshark(lua: Path, capture: Path, *args: str) -> list[list[str]]:
    proc = subprocess.run(["tshark", "-X", f"lua_script:{lua}", "-r", str(capture), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Lua: Error" not in proc.stderr, proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()]


def _lua(tmp_path: Path, *specs: str) -> Path:
    out = tmp_path / "fwbridge.lua"
    proc = run_cli("gen", "wireshark", *specs, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def _decode_json(spec: str, capture: Path) -> list[dict[str, Any]]:
    proc = run_cli("decode", "-p", spec, "--json", str(capture))
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def test_tshark_shows_the_fields_decode_shows_for_a_user_frame(tmp_path: Path) -> None:
    d = Described.of(load(IMU))
    frames = [d.codec.encode(d.codec.from_mapping(
        {"seq": k, "mode": k % 3, "ax": k / 10 - 0.3, "ay": -1.5, "gz": 0.002 * k,
         "temp": 20 + k / 2, "status": 70000 + k})) for k in range(12)]
    capture = tmp_path / "imu.pcapng"
    record(capture, d, frames, read=7)  # every frame split across reads
    lua = _lua(tmp_path, str(IMU), "odom", "action")
    names = ["seq", "mode", "ax", "ay", "az", "gz", "temp", "status"]
    rows = tshark(lua, capture, "-Y", "frame.interface_id == 1 && fwbridge.imu", "-T", "fields",
                  *[a for n in names for a in ("-e", f"fwbridge.imu.{n}")],
                  "-e", "fwbridge.imu.checksum.status")
    want = _decode_json(str(IMU), capture)
    assert len(rows) == len(want) == 12
    labels = dict(d.desc.field("mode").enum)
    for row, ref in zip(rows, want):
        got = dict(zip(names, row))
        assert row[-1] == "good"
        assert labels[int(got.pop("mode"))] == ref["mode"]
        for name, text in got.items():
            assert float(text) == pytest.approx(ref[name], rel=1e-9, abs=1e-12), name


def test_enums_by_name_scaled_units_and_a_bad_checksum(tmp_path: Path) -> None:
    d = Described.of(load(IMU))
    good = d.codec.encode(d.codec.from_mapping({"seq": 1, "mode": 2, "ax": 0.5}))
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    capture = tmp_path / "bad.pcapng"
    with CaptureWriter(capture, frames="imu") as cap:
        cap.write(RX, good)
        cap.write_frame(RX, good)
        cap.write_frame(RX, bad)
    lua = _lua(tmp_path, str(IMU))
    proc = subprocess.run(["tshark", "-X", f"lua_script:{lua}", "-r", str(capture), "-V"],
                          capture_output=True, text=True, timeout=120)
    assert "mode: calibrate (2)" in proc.stdout
    assert "ax (m/s^2): 0.5 m/s^2" in proc.stdout and "ax raw: 50" in proc.stdout
    reads = tshark(lua, capture, "-Y", "frame.interface_id == 0", "-T", "fields",
                   "-e", "fwbridge.imu.seq", "-e", "fwbridge.imu.checksum.status")
    assert reads == [["1", "good"]]  # a whole frame in one read is dissected there too
    experts = tshark(lua, capture, "-Y", "fwbridge.imu.checksum.bad", "-T", "fields",
                     "-e", "frame.number", "-e", "_ws.expert.message")
    assert [r[0] for r in experts] == ["3"]
    assert experts[0][1].startswith("bad checksum: computed 0x")


def test_action_frames_both_directions_in_raw_reads_and_frames(tmp_path: Path) -> None:
    d = Described.from_spec("action")
    frames = [action_frame.encode(action_frame.ActionFrame(1, 0x04, 0x21, bytes(range(k))))
              for k in (0, 3, 40)]
    capture = tmp_path / "action.pcapng"
    record(capture, d, frames, read=5, direction=TX)
    lua = _lua(tmp_path, "action")
    rows = tshark(lua, capture, "-Y", "fwbridge.action", "-T", "fields", "-e",
                  "frame.interface_id", "-e", "frame.p2p_dir", "-e", "fwbridge.action.type",
                  "-e", "fwbridge.action.sub", "-e", "fwbridge.action.data",
                  "-e", "fwbridge.action.crc.status")
    assert [r[0] for r in rows] == ["1", "1", "1"]  # no 5-byte read holds a whole frame
    assert all(r[1] == "0" for r in rows)  # sent by the host
    want = _decode_json("action", capture)
    assert len(want) == 3
    for row, ref in zip(rows, want):
        assert (int(row[2]), int(row[3])) == (0x04, 0x21)
        assert row[4].replace(":", "") == ref["data"] and row[5] == "good"
    text = subprocess.run(["tshark", "-X", f"lua_script:{lua}", "-r", str(capture), "-V"],
                          capture_output=True, text=True, timeout=120).stdout
    assert "type: WRITE_PHONE (4)" in text and "sub: REALTIME_SERVO_CONTROL (33)" in text


def test_wireshark_install_writes_the_plugin(tmp_path: Path) -> None:
    proc = run_cli("wireshark", "install", str(IMU), "--dir", str(tmp_path / "plugins"))
    assert proc.returncode == 0, proc.stderr
    lua = (tmp_path / "plugins" / "fwbridge.lua").read_text()
    assert 'ProtoField.double("fwbridge.imu.ax"' in lua and '"fwbridge.odom.vx"' in lua
    proc = run_cli("wireshark", "install", "--dir", str(tmp_path / "p2"),
                   env={"HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p2" / "fwbridge.lua").exists()
