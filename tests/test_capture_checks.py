"""Captures are read carefully, through the real CLI: corrupt and truncated files are
reported with their offset and a non-zero exit, a capture of the wrong kind is refused
with the kind found, and a two-direction capture is decoded on the side that carries
the frames."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import can
import pytest

from fwbridge.bridge.record.can_pcapng import PcapngWriter
from fwbridge.bridge.record.serial_pcapng import CaptureWriter
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import run_cli

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

ODOM = [odom_frame.encode(OdomFrame(0.1 * k, 0.0, 0.2, float(k))) for k in range(10)]
CMD = [cmd_frame.encode(CmdFrame(0.3, -0.1 * k, 0.5)) for k in range(10)]


def one_error(res: object, *needles: str) -> str:
    stderr = res.stderr.decode()  # type: ignore[attr-defined]
    assert res.returncode == 2, stderr  # type: ignore[attr-defined]
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), stderr
    assert not re.search(r"\b[A-Z]\w*(Error|Exception)\b|Traceback", stderr), stderr
    for needle in needles:
        assert needle in line, line
    return line


def serial_capture(path: Path, both: bool = False) -> list[int]:
    """Odometry packets (rx), with the commands (tx) between them when ``both``; the
    offsets of the blocks."""
    with CaptureWriter(path, port="ttyUSB0") as cap:
        for k, odom in enumerate(ODOM):
            if both:
                cap.write("tx", CMD[k], ts_ns=10_000_000 * k)
            cap.write("rx", odom, ts_ns=10_000_000 * k + 5_000_000)
    raw = path.read_bytes()
    offsets, pos = [], 0
    while pos < len(raw):
        offsets.append(pos)
        pos += struct.unpack_from("<I", raw, pos + 4)[0]
    return offsets


def decode_json(*args: str) -> tuple[list[dict[str, object]], str]:
    res = run_cli("decode", "--json", *args)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.decode().splitlines()], res.stderr.decode()


def test_corrupt_block_length_is_reported_with_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "odom.pcapng"
    offsets = serial_capture(path)
    raw = bytearray(path.read_bytes())
    at = offsets[4]  # an Enhanced Packet Block in the middle
    raw[at + 4:at + 8] = struct.pack("<I", 0x7FFFFFF0)
    path.write_bytes(bytes(raw))
    one_error(run_cli("decode", "-p", "odom", str(path)), f"offset {at}")
    raw[at + 4:at + 8] = struct.pack("<I", 30)  # not a multiple of 4
    path.write_bytes(bytes(raw))
    one_error(run_cli("decode", "-p", "odom", str(path)), f"offset {at}", "bad block length")


def test_truncated_capture_gives_its_frames_then_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcapng"
    offsets = serial_capture(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:offsets[-1] + 10])  # the recorder died inside the last packet
    res = run_cli("decode", "-p", "odom", "--json", str(path))
    one_error(res, "truncated", f"offset {offsets[-1]}")
    rows = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert [r["yaw_deg"] for r in rows] == [float(k) for k in range(9)]  # all whole frames


def test_packet_on_an_undeclared_interface_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "iface.pcapng"
    offsets = serial_capture(path)
    raw = bytearray(path.read_bytes())
    at = offsets[3]
    raw[at + 8:at + 12] = struct.pack("<I", 99)  # EPB interface id
    path.write_bytes(bytes(raw))
    one_error(run_cli("decode", "-p", "odom", str(path)), "interface 99", f"offset {at}")
    replay = run_cli("replay", str(path), "loop://")
    one_error(replay, "interface 99")


def _can_messages() -> list[can.Message]:
    return [can.Message(arbitration_id=0x101, data=bytes(8), timestamp=1.0 + k / 100)
            for k in range(5)]


def test_a_can_capture_is_refused_by_serial_decode(tmp_path: Path) -> None:
    pcap = tmp_path / "bus.pcapng"
    with PcapngWriter(pcap) as writer:
        for msg in _can_messages():
            writer.on_message_received(msg)
    one_error(run_cli("decode", "-p", "odom", str(pcap)), "CAN capture", "can decode")
    one_error(run_cli("decode", "-p", "cmd", "--format", "pcapng", str(pcap)), "CAN capture")
    log = tmp_path / "bus.log"
    log.write_text("(1700000000.000000) sim0 101#0000000000000000\n" * 3)
    one_error(run_cli("decode", "-p", "odom", str(log)), "CAN capture (candump log)")


def test_a_serial_capture_is_refused_by_can_decode(tmp_path: Path) -> None:
    path = tmp_path / "serial.pcapng"
    serial_capture(path)
    one_error(run_cli("can", "decode", str(path)), "link type 147", "serial capture")
    one_error(run_cli("decode", "-p", "actuator", str(path)), "link type 147")


def test_truncated_can_capture_is_an_error_with_its_offset(tmp_path: Path) -> None:
    pcap = tmp_path / "bus.pcapng"
    with PcapngWriter(pcap) as writer:
        for msg in _can_messages():
            writer.on_message_received(msg)
    raw = pcap.read_bytes()
    pcap.write_bytes(raw[:-7])
    one_error(run_cli("can", "decode", str(pcap)), "truncated", "offset")


def test_two_direction_capture_decodes_the_side_that_carries_the_frames(tmp_path: Path) -> None:
    path = tmp_path / "bridge.pcapng"
    serial_capture(path, both=True)  # what `bridge --record` writes
    odom, err = decode_json("-p", "odom", str(path))
    assert [r["yaw_deg"] for r in odom] == [float(k) for k in range(10)]
    assert "checksum_errors=0" in err and "discarded=0" in err and "rx (firmware -> host)" in err
    cmd, err = decode_json("-p", "cmd", str(path))
    assert [r["vy"] for r in cmd] == pytest.approx([-0.1 * k for k in range(10)])
    assert "checksum_errors=0" in err and "tx (host -> firmware)" in err
    none, _ = decode_json("-p", "odom", "--direction", "tx", str(path))  # as asked
    assert none == []


def test_one_direction_capture_is_decoded_whole(tmp_path: Path) -> None:
    path = tmp_path / "record.pcapng"
    serial_capture(path)  # what `record PORT` writes: rx only
    cmd_side, err = decode_json("-p", "odom", str(path))
    assert len(cmd_side) == 10 and "holds both directions" not in err
