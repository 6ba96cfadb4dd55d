"""Golden vectors shared by the host and firmware_ref: both sides, the same bytes."""

from __future__ import annotations

import json
import struct

import pytest

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.crc import preset, preset_names
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.families import actuator
from tests.conftest import FIXTURES
from tests.fwref import Firmware
from tests.fwref import firmware as firmware  # the session fixture

SUM8 = json.loads((FIXTURES / "sum8_golden.json").read_text())
ACTION = json.loads((FIXTURES / "action_golden.json").read_text())
ACTUATOR = json.loads((FIXTURES / "actuator_golden.json").read_text())
NOISY = FIXTURES / "odom_noisy.bin"
NOISY_EXPECTED = json.loads((FIXTURES / "odom_noisy.json").read_text())


def bits(values: list[float]) -> tuple[int, ...]:
    return struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values))


@pytest.mark.parametrize("entry", SUM8["odom"], ids=lambda e: e["hex"][4:12])
def test_odom_golden_both_sides(firmware: Firmware, entry: dict) -> None:
    raw = bytes.fromhex(entry["hex"])
    f = entry["fields"]
    vals = [f["vx"], f["vy"], f["wz"], f["yaw_deg"]]
    assert odom_frame.encode(odom_frame.OdomFrame(*vals)) == raw
    assert firmware.odom_encode(bits(vals)) == raw
    assert firmware.sum8_decode(raw, 19) == (0, bits(vals))


@pytest.mark.parametrize("entry", SUM8["cmd"], ids=lambda e: e["hex"][4:12])
def test_cmd_golden_both_sides(firmware: Firmware, entry: dict) -> None:
    raw = bytes.fromhex(entry["hex"])
    f = entry["fields"]
    vals = [f["vx"], f["vy"], f["wz"]]
    assert cmd_frame.encode(cmd_frame.CmdFrame(*vals)) == raw
    assert firmware.cmd_encode(bits(vals)) == raw
    assert firmware.sum8_decode(raw, 15) == (0, bits(vals))
    # Damaged copies are refused the same way: checksum, header, length.
    assert firmware.sum8_decode(raw[:-1] + bytes([raw[-1] ^ 1]), 15)[0] == -3
    assert firmware.sum8_decode(b"\xaa\x56" + raw[2:], 15)[0] == -2
    assert firmware.sum8_decode(raw[:-1], 15)[0] == -1


@pytest.mark.parametrize("bytewise", [False, True])
def test_noisy_capture_same_frames_and_counters(firmware: Firmware, bytewise: bool) -> None:
    data = NOISY.read_bytes()
    rx = firmware.sum8_receiver(19)
    got = rx.feed(data, bytewise=bytewise)
    rx.finish()
    want = NOISY_EXPECTED["frames"]
    assert [off for off, _ in got] == [w["offset"] for w in want]
    assert [b for _, b in got] == [bits([w["vx"], w["vy"], w["wz"], w["yaw_deg"]]) for w in want]
    assert rx.stats == NOISY_EXPECTED["stats"]
    # And the host's receiver still agrees with the recorded capture.
    py = Sum8Receiver(odom_frame.CODEC)
    assert [r.offset for r in py.feed(data)] == [w["offset"] for w in want]
    py.finish()
    assert py.stats.as_dict() == rx.stats


def test_crc_presets_same_on_both_sides(firmware: Firmware) -> None:
    assert sorted(firmware.crc_presets()) == sorted(preset_names())
    for name in preset_names():
        p = preset(name)
        assert firmware.crc16(name, b"123456789") == p.check == p.func(b"123456789"), name
    for name, check in ACTION["check_123456789"].items():
        assert firmware.crc16(name, b"123456789") == check
    assert firmware.crc16("crc-32", b"x") == -1


@pytest.mark.parametrize("entry", ACTION["frames"], ids=lambda e: e["hex"][:20])
def test_action_golden_both_sides(firmware: Firmware, entry: dict) -> None:
    raw = bytes.fromhex(entry["hex"])
    f = entry["fields"]
    data = bytes.fromhex(f["data"])
    crc = entry["crc"]
    frame = action_frame.ActionFrame(f["machine"], f["type"], f["sub"], data)
    assert action_frame.encode(frame, crc=crc) == raw
    assert action_frame.decode(raw, crc=crc) == frame
    assert firmware.action_encode(f["machine"], f["type"], f["sub"], data, crc=crc) == raw
    assert firmware.action_check(raw, crc=crc) == 0
    rx = firmware.action_receiver(crc=crc, answer=False)
    (got,) = rx.feed(raw)
    assert (got.machine, got.type, got.sub, got.data, got.offset) == (
        f["machine"], f["type"], f["sub"], data, 0)
    # One changed CRC bit: both sides refuse it.
    bad = bytearray(raw)
    bad[-4] ^= 0x01
    assert firmware.action_check(bytes(bad), crc=crc) == -5
    with pytest.raises(Exception, match="crc"):
        action_frame.decode(bytes(bad), crc=crc)


def test_worked_example_relaxed_only(firmware: Firmware) -> None:
    (entry,) = ACTION["relaxed"]
    raw = bytes.fromhex(entry["hex"])
    for relaxed in (False, True):
        c = firmware.action_receiver(relaxed=relaxed, answer=False)
        events = c.feed(raw) + c.finish()
        py = ActionReceiver(relaxed=relaxed)
        frames = py.feed(raw) + py.finish()
        assert c.stats == py.stats.as_dict()
        assert len(events) == len(frames) == (1 if relaxed else 0)
        if relaxed:
            assert events[0].data == bytes.fromhex(entry["fields"]["data"])
            assert events[0].defects == 3  # header and CRC
            assert frames[0].defects == ("header", "crc")


@pytest.mark.parametrize("entry", ACTUATOR["structs"], ids=lambda e: e["hex"])
def test_actuator_golden_both_sides(firmware: Firmware, entry: dict) -> None:
    raw = bytes.fromhex(entry["hex"])
    f = entry["fields"]
    fields = tuple(f[k] for k in ("angle", "speed", "current", "module_id", "command", "fault",
                                  "reserved_a", "reserved_b"))
    value = actuator.ActuatorStruct(*fields)
    assert actuator.encode(value) == raw
    assert actuator.decode(raw) == value
    assert firmware.actuator_pack(fields) == raw
    assert firmware.actuator_unpack(raw) == fields
