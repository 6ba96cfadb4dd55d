"""Action frame codec and CRC presets: layout, worked example, schema vs fast path, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.crc import DEFAULT_CRC, crc16, crc_function, preset, preset_names
from fwbridge.protocols.errors import (
    ChecksumError,
    ConfigError,
    FieldValueError,
    FrameError,
    HeaderError,
    LengthError,
    TrailerError,
)
from fwbridge.protocols.hextext import parse_hex
from tests.conftest import FIXTURES

EXAMPLE = parse_hex((FIXTURES / "patent_example.hex").read_text())

frames = st.builds(
    ActionFrame,
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.binary(max_size=300),
)


def ccitt_false(data: bytes) -> int:
    """Bit-by-bit CRC-16/CCITT-FALSE, written from the definition (not crcmod)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = (crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


# -- CRC presets --------------------------------------------------------------
def test_default_is_ccitt_false_with_its_check_value() -> None:
    assert DEFAULT_CRC == "crc-ccitt-false"
    p = preset()
    assert (p.poly, p.reverse, p.init, p.xor_out) == (0x11021, False, 0xFFFF, 0)
    assert crc16(b"123456789") == 0x29B1 == ccitt_false(b"123456789")


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_is_16_bit_and_meets_its_check_value(name: str) -> None:
    p = preset(name)
    assert 0x10000 <= p.poly < 0x20000
    assert crc_function(name)(b"123456789") == p.check
    # the C extension takes memoryview slices, which the receiver passes
    assert crc_function(name)(memoryview(b"x123456789")[1:]) == p.check


def test_names_are_looked_up_like_crcmod() -> None:
    assert preset("CRC-CCITT-FALSE").name == preset("CrcCcittFalse").name == "crc-ccitt-false"
    assert preset("XModem").name == "xmodem"


@pytest.mark.parametrize("bad", ["crc-99", "crc-32", "", 16])
def test_unknown_or_wrong_width_preset_lists_the_choices(bad: object) -> None:
    with pytest.raises(ConfigError) as exc:
        preset(bad)  # type: ignore[arg-type]
    if isinstance(bad, str):
        assert "crc-ccitt-false" in str(exc.value) and "xmodem" in str(exc.value)


# -- layout -------------------------------------------------------------------
def test_byte_layout_and_little_endian_length_and_crc() -> None:
    frame = ActionFrame(7, InstructionType.WRITE_PC, SubCommand.TEST_ACTION_GROUP, b"\x01\x02\x03")
    raw = af.encode(frame)
    assert raw[:2] == b"\xfe\xef" and raw[-2:] == b"\xfd\xdf"
    assert raw[2:7] == bytes([0x07, 0x06, 0x03, 0x00, 0x32])
    assert raw[7:10] == b"\x01\x02\x03"
    crc = ccitt_false(raw[2:10])  # machine code through the last data byte
    assert raw[10:12] == crc.to_bytes(2, "little")
    assert len(raw) == af.OVERHEAD + 3


def test_empty_data_and_maximum_length() -> None:
    for data in (b"", bytes(af.MAX_LENGTH)):
        frame = ActionFrame(1, 2, 3, data)
        assert af.decode(af.encode(frame)) == frame
    with pytest.raises(FieldValueError, match="data"):
        af.encode(ActionFrame(1, 2, 3, bytes(af.MAX_LENGTH + 1)))


def test_worked_example_decodes_relaxed_only() -> None:
    assert len(EXAMPLE) == 80
    frame = af.decode(EXAMPLE, relaxed=True)
    assert frame.machine == 0
    assert frame.type == 0x06 and frame.type is InstructionType.WRITE_PC
    assert frame.length == 69
    assert frame.sub == 0x32 and frame.sub is SubCommand.TEST_ACTION_GROUP
    assert af.decode_with_schema(EXAMPLE, relaxed=True) == frame
    with pytest.raises(HeaderError) as exc:
        af.decode(EXAMPLE)
    assert "fe ff" in str(exc.value)
    fixed = af.HEADER + EXAMPLE[2:]
    with pytest.raises(ChecksumError) as cexc:
        af.decode(fixed)
    assert "0x409a" in str(cexc.value)  # the example's check bytes 9A 40, little-endian


def test_worked_example_check_matches_no_preset() -> None:
    """PROTOCOLS.md 3.4: the example's check is no standard CRC-16 of any span."""
    check = EXAMPLE[-4:-2]
    for name in preset_names():
        f = crc_function(name)
        for a in range(0, 8):
            for b in range(a + 1, len(EXAMPLE) - 3):
                value = f(EXAMPLE[a:b])
                assert check not in (value.to_bytes(2, "little"), value.to_bytes(2, "big"))


def test_duplicate_0x41_is_an_alias() -> None:
    assert SubCommand.DEVICE_CAN_FLASH is SubCommand.ROBOT_ERROR_CODE
    assert "DEVICE_CAN_FLASH" in SubCommand.__members__
    frame = af.decode(af.encode(ActionFrame(0, 6, 0x41)))
    assert frame.sub is SubCommand.ROBOT_ERROR_CODE


def test_reply_types_are_request_plus_0x10() -> None:
    for req in range(0x01, 0x08):
        assert InstructionType(req + 0x10)


def test_unknown_enum_values_decode_to_plain_ints() -> None:
    frame = af.decode(af.encode(ActionFrame(9, 0x99, 0xEE, b"z")))
    assert type(frame.type) is int and frame.type == 0x99
    assert type(frame.sub) is int and frame.sub == 0xEE
    assert af.decode_with_schema(af.encode(frame)) == frame


def test_frames_normalise_what_users_pass() -> None:
    a = ActionFrame(0, 6, 0x32, bytearray(b"ab"))
    b = ActionFrame(0, InstructionType.WRITE_PC, SubCommand.TEST_ACTION_GROUP, b"ab")
    assert a == b and hash(a) == hash(b) and type(a.data) is bytes
    assert a.type is InstructionType.WRITE_PC


# -- schema vs fast path ---------------------------------------------------------
@given(frames, st.sampled_from(preset_names()))
@settings(max_examples=200, deadline=None)
def test_round_trip_and_schema_agree(frame: ActionFrame, crc: str) -> None:
    raw = af.encode(frame, crc=crc)
    assert af.encode_with_schema(frame, crc=crc) == raw
    assert af.decode(raw, crc=crc) == frame
    assert af.decode_with_schema(raw, crc=crc) == frame
    assert af.decode(raw, crc=crc, relaxed=True) == frame


def _outcome(fn, raw: bytes, **kw):  # type: ignore[no-untyped-def]
    try:
        return fn(raw, **kw)
    except FrameError as exc:
        return (type(exc), str(exc))


@given(frames, st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
       st.integers(-3, 3), st.booleans())
@settings(max_examples=200, deadline=None)
def test_damaged_frames_give_the_same_error_both_ways(  # type: ignore[no-untyped-def]
    frame, edits, cut, relaxed
) -> None:
    raw = bytearray(af.encode(frame))
    for pos, value in edits:
        raw[pos % len(raw)] = value
    data = bytes(raw[: len(raw) + cut] if cut < 0 else raw + bytes(cut))
    fast = _outcome(af.decode, data, relaxed=relaxed)
    assert fast == _outcome(af.decode_with_schema, data, relaxed=relaxed)


# -- errors ---------------------------------------------------------------------
GOOD = af.encode(ActionFrame(1, 6, 0x32, b"\x10\x20"))


@pytest.mark.parametrize(
    ("data", "error", "field"),
    [
        (GOOD[:10], LengthError, "frame"),
        (b"\xfe\xee" + GOOD[2:], HeaderError, "header"),
        (GOOD[:-2] + b"\xfd\xde", TrailerError, "trailer"),
        (GOOD[:7] + b"\x11" + GOOD[8:], ChecksumError, "crc"),
        (GOOD + b"\x00", LengthError, "length"),
        (GOOD[:4] + b"\x03\x00" + GOOD[6:], LengthError, "length"),
    ],
)
def test_errors_name_field_and_bytes(data: bytes, error: type[FrameError], field: str) -> None:
    for fn in (af.decode, af.decode_with_schema):
        with pytest.raises(error) as exc:
            fn(data)
        assert exc.value.field == field and exc.value.frame == "action"
        assert exc.value.data == data
        assert data[:4].hex(" ") in str(exc.value)


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (ActionFrame(256, 6, 0x32), "machine"),
        (ActionFrame(-1, 6, 0x32), "machine"),
        (ActionFrame(0, 0x100, 0x32), "type"),
        (ActionFrame(0, 6, "x"), "sub"),  # type: ignore[arg-type]
        (ActionFrame(0, 6, 0x32, "text"), "data"),  # type: ignore[arg-type]
        (ActionFrame(True, 6, 0x32), "machine"),  # type: ignore[arg-type]
    ],
)
def test_encode_refuses_bad_fields(frame: ActionFrame, field: str) -> None:
    for fn in (af.encode, af.encode_with_schema):
        with pytest.raises(FieldValueError) as exc:
            fn(frame)
        assert exc.value.field == field


def test_encode_with_unknown_crc_lists_choices() -> None:
    with pytest.raises(ConfigError, match="xmodem"):
        af.encode(ActionFrame(0, 6, 0x32), crc="nope")
