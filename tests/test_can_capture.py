"""Captures: pcapng (link type 227) and python-can's log formats, candump notation."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import can
import pcapng
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.bridge.record.can_logs import (
    candump_line,
    decode_actuators,
    format_frame,
    open_writer,
    parse_frame,
    read_messages,
)
from fwbridge.bridge.record.can_pcapng import LINKTYPE_CAN_SOCKETCAN, PcapngWriter, encode_packet
from fwbridge.can_bus.ids import ActuatorMessage, Direction, to_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import ActuatorModule
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault


def sample() -> list[can.Message]:
    t0 = 1_790_000_000.0
    msgs = [can.Message(timestamp=t0 + i * 0.000123, arbitration_id=0x200 + i,
                        is_extended_id=False, data=bytes(range(i % 9)), channel="sim0")
            for i in range(12)]
    msgs += [
        can.Message(timestamp=t0 + 1, arbitration_id=0x1F334455, is_extended_id=True,
                    data=b"\x11\x22", channel="sim0", is_rx=False),
        can.Message(timestamp=t0 + 2, arbitration_id=0x123, is_extended_id=False,
                    is_remote_frame=True, dlc=4, channel="can1"),
        can.Message(timestamp=0.25, arbitration_id=0x7FF, is_extended_id=False,
                    data=b"\xff" * 8, channel="can1"),
    ]
    return msgs


def same(a: can.Message, b: can.Message, *, channel: bool = True, rx: bool = True) -> bool:
    return (a.arbitration_id == b.arbitration_id and a.is_extended_id == b.is_extended_id
            and a.is_remote_frame == b.is_remote_frame and a.dlc == b.dlc
            and bytes(a.data) == bytes(b.data) and abs(a.timestamp - b.timestamp) < 1e-9
            and (not channel or a.channel == b.channel) and (not rx or a.is_rx == b.is_rx))


def test_pcapng_reads_back_identical(tmp_path: Path) -> None:
    path = tmp_path / "c.pcapng"
    msgs = sample()
    with PcapngWriter(path) as w:
        for m in msgs:
            w.on_message_received(m)
    back = list(read_messages(path))
    assert len(back) == len(msgs) and all(same(a, b) for a, b in zip(msgs, back))


def test_pcapng_is_valid_for_an_independent_reader(tmp_path: Path) -> None:
    path = tmp_path / "c.pcapng"
    msgs = sample()
    with PcapngWriter(path) as w:
        for m in msgs:
            w.on_message_received(m)
    with path.open("rb") as fh:
        blocks = list(pcapng.FileScanner(fh))
    idbs = [b for b in blocks if isinstance(b, pcapng.blocks.InterfaceDescription)]
    epbs = [b for b in blocks if isinstance(b, pcapng.blocks.EnhancedPacket)]
    assert [b.link_type for b in idbs] == [LINKTYPE_CAN_SOCKETCAN] * 2  # sim0, can1
    assert [bytes(b.packet_data) for b in epbs] == [encode_packet(m) for m in msgs]
    # SocketCAN layout: big-endian ID with flags, length, 3 bytes, 8 data bytes
    can_id, length = struct.unpack_from(">IB", epbs[12].packet_data)
    assert can_id == 0x80000000 | 0x1F334455 and length == 2
    assert struct.unpack_from(">I", epbs[13].packet_data)[0] == 0x40000123  # RTR flag


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_wireshark_dissects_it_as_can(tmp_path: Path) -> None:
    path = tmp_path / "c.pcapng"
    with PcapngWriter(path) as w:
        for m in sample():
            w.on_message_received(m)
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "can.id",
                          "-e", "can.flags.xtd", "-e", "can.flags.rtr", "-e", "can.len"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [line.split("\t") for line in out.strip().splitlines()]
    assert rows[0] == ["512", "0", "0", "0"]
    assert rows[12][:3] == [str(0x1F334455), "1", "0"]
    assert rows[13][:3] == [str(0x123), "0", "1"]


def test_classic_pcap_is_read(tmp_path: Path) -> None:
    msg = can.Message(arbitration_id=0x321, is_extended_id=False, data=b"\x01\x02")
    packet = encode_packet(msg)
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_CAN_SOCKETCAN)
    data += struct.pack("<IIII", 1700000000, 250000, len(packet), len(packet)) + packet
    path = tmp_path / "c.pcap"
    path.write_bytes(data)
    (back,) = read_messages(path)
    assert back.arbitration_id == 0x321 and bytes(back.data) == b"\x01\x02"
    assert back.timestamp == pytest.approx(1700000000.25)


@pytest.mark.parametrize("suffix", [".log", ".asc", ".blf", ".pcapng"])
def test_python_can_formats_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"c{suffix}"
    msgs = [m for m in sample() if m.timestamp > 1e9]  # one time base per file
    writer = open_writer(path)
    for m in msgs:
        writer.on_message_received(m)
    writer.stop()
    back = list(read_messages(path))
    assert len(back) == len(msgs)
    if suffix == ".asc":  # python-can reads .asc times relative to the first frame
        for m in back:
            m.timestamp += msgs[0].timestamp
    for a, b in zip(msgs, back):
        assert (a.arbitration_id, a.is_extended_id, a.is_remote_frame) == (
            b.arbitration_id, b.is_extended_id, b.is_remote_frame)
        assert bytes(a.data) == bytes(b.data)
        assert b.timestamp == pytest.approx(a.timestamp, abs=2e-6)  # .log/.asc: microseconds
        if suffix == ".pcapng" or not a.is_remote_frame:
            assert a.dlc == b.dlc  # python-can's .log writer drops a remote frame's DLC


def test_candump_log_round_trip_of_a_simulated_run(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    tap = FwBridgeBus("cap-run", pacing="afap", capture=str(path), epoch=0.0)
    mods = [ActuatorModule(FwBridgeBus("cap-run"), k) for k in (1, 2)]
    master = FwBridgeBus("cap-run")
    master.send(to_message(ActuatorStruct(angle=-5, module_id=2,
                                          command=SubCommand.SET_SERVO_POSITION),
                           Direction.COMMAND))
    t = 0.0
    while t < 0.1:
        t += 0.005
        tap.advance_to(t)
        for m in mods:
            m.step(t)
    for bus in (master, *(m.bus for m in mods), tap):
        bus.shutdown()
    lines = path.read_text().splitlines()
    assert lines[0].startswith("(0.000") and " cap-run 102#FB00000238000000 " in lines[0]
    items = list(decode_actuators(path))
    assert all(isinstance(i, ActuatorMessage) for i in items)
    fb = [i for i in items if isinstance(i, ActuatorMessage) and i.direction is Direction.FEEDBACK]
    assert {i.module for i in fb} == {1, 2} and len(fb) >= 8
    assert items[0] == ActuatorMessage(Direction.COMMAND, 2, ActuatorStruct(
        angle=-5, module_id=2, command=SubCommand.SET_SERVO_POSITION), items[0].timestamp)


def test_decode_reports_malformed_actuator_frames() -> None:
    msgs = [can.Message(arbitration_id=0x205, is_extended_id=False, data=b"\x01"),
            can.Message(arbitration_id=0x050, is_extended_id=False, data=b"\x01"),
            to_message(ActuatorStruct(module_id=5, fault=Fault.CAN_ERROR), Direction.FEEDBACK)]
    out = list(decode_actuators(msgs))
    assert isinstance(out[0], tuple) and "8 bytes" in str(out[0][1])
    assert isinstance(out[1], ActuatorMessage) and out[1].struct.fault is Fault.CAN_ERROR


@pytest.mark.parametrize(("text", "expect"), [
    ("123#DEADBEEF", (0x123, False, False, 4, "deadbeef")),
    ("1F334455#11.22", (0x1F334455, True, False, 2, "1122")),
    ("123#R", (0x123, False, True, 0, "")),
    ("123#R4", (0x123, False, True, 4, "")),
    ("00000123#", (0x123, True, False, 0, "")),
])
def test_candump_notation(text: str, expect: tuple[int, bool, bool, int, str]) -> None:
    m = parse_frame(text)
    assert (m.arbitration_id, m.is_extended_id, m.is_remote_frame, m.dlc,
            bytes(m.data).hex()) == expect
    assert parse_frame(format_frame(m)).equals(m, timestamp_delta=None)


@pytest.mark.parametrize("bad", ["123", "12#00", "800#00", "123#123", "123#" + "00" * 9,
                                 "123#R9", "xyz#00"])
def test_candump_notation_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match=r"ID|expected|bytes|range"):
        parse_frame(bad)


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.integers(0, 0x1FFFFFFF), st.binary(max_size=8))
def test_format_parse_round_trip(ext: bool, can_id: int, data: bytes) -> None:
    msg = can.Message(arbitration_id=can_id if ext else can_id & 0x7FF, is_extended_id=ext,
                      data=data, timestamp=12.5, channel="vcan0")
    assert parse_frame(format_frame(msg)).equals(msg, timestamp_delta=None, check_channel=False)
    assert candump_line(msg).startswith("(12.500000) vcan0 ")


def test_python_can_finds_the_pcapng_plugins_by_entry_point(tmp_path: Path) -> None:
    # can.Logger / can.LogReader pick .pcapng through the can.io entry points,
    # which name fwbridge.bridge.record.can_pcapng: the installed package's one name.
    from fwbridge.bridge.record.can_pcapng import PcapngReader

    path = tmp_path / "ep.pcapng"
    logger = can.Logger(path)
    assert isinstance(logger, PcapngWriter)
    msg = can.Message(timestamp=1700000000.5, arbitration_id=0x123, is_extended_id=False,
                      data=b"\x01\x02\x03")
    logger.on_message_received(msg)
    logger.stop()
    reader = can.LogReader(path)
    assert isinstance(reader, PcapngReader)
    (back,) = list(reader)
    assert (back.arbitration_id, bytes(back.data)) == (0x123, b"\x01\x02\x03")
    assert back.timestamp == pytest.approx(1700000000.5)
