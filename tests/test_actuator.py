"""The 8-byte actuator struct: layout, flags, schema vs fast path, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.errors import FieldValueError, LengthError
from fwbridge.protocols.families import actuator
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault

structs = st.builds(
    ActuatorStruct,
    st.integers(-128, 127),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255).map(Fault),
    st.integers(0, 255),
    st.integers(0, 255),
)


def test_layout_follows_the_per_module_description() -> None:
    value = ActuatorStruct(angle=-20, speed=30, current=15, module_id=3,
                           command=SubCommand.REALTIME_SERVO_CONTROL,
                           fault=Fault.OVER_CURRENT | Fault.CAN_ERROR, reserved_a=0xA5,
                           reserved_b=0x5A)
    raw = actuator.encode(value)
    assert raw == bytes([0xEC, 30, 15, 3, 0x21, 0x41, 0xA5, 0x5A])
    assert actuator.decode(raw) == value
    assert value.current_ma == 1500
    assert actuator.SIZE == len(raw) == 8


def test_fault_bits() -> None:
    bits = [Fault.OVER_CURRENT, Fault.OVER_TEMPERATURE, Fault.WATER_INGRESS, Fault.HALL_SENSOR,
            Fault.ANGLE_SENSOR, Fault.STALL_TIMEOUT, Fault.CAN_ERROR, Fault.RESERVED]
    assert [int(b) for b in bits] == [1 << k for k in range(8)]
    decoded = actuator.decode(bytes([0, 0, 0, 0, 0, 0xFF, 0, 0]))
    assert decoded.fault == Fault(0xFF) and Fault.WATER_INGRESS in decoded.fault


def test_unknown_command_stays_an_int() -> None:
    value = actuator.decode(bytes([0, 0, 0, 0, 0x99, 0, 0, 0]))
    assert type(value.command) is int and value.command == 0x99
    known = actuator.decode(bytes([0, 0, 0, 0, 0x38, 0, 0, 0]))
    assert known.command is SubCommand.SET_SERVO_POSITION


def test_plain_ints_compare_equal_to_enum_forms() -> None:
    a = ActuatorStruct(1, 2, 3, 4, 0x21, 0x03)  # type: ignore[arg-type]
    b = ActuatorStruct(1, 2, 3, 4, SubCommand.REALTIME_SERVO_CONTROL,
                       Fault.OVER_CURRENT | Fault.OVER_TEMPERATURE)
    assert a == b and hash(a) == hash(b) and isinstance(a.fault, Fault)


@given(st.binary(min_size=8, max_size=8))
@settings(max_examples=200, deadline=None)
def test_any_eight_bytes_decode_and_re_encode_exactly(raw: bytes) -> None:
    value = actuator.decode(raw)
    assert actuator.decode_with_schema(raw) == value
    assert actuator.encode(value) == actuator.encode_with_schema(value) == raw


@given(structs)
@settings(max_examples=200, deadline=None)
def test_round_trip_and_schema_agree(value: ActuatorStruct) -> None:
    raw = actuator.encode(value)
    assert actuator.encode_with_schema(value) == raw
    assert actuator.decode(raw) == actuator.decode_with_schema(raw) == value


@pytest.mark.parametrize("size", [0, 7, 9])
def test_wrong_size(size: int) -> None:
    for fn in (actuator.decode, actuator.decode_with_schema):
        with pytest.raises(LengthError, match="8 bytes"):
            fn(bytes(size))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"angle": 128}, "angle"), ({"angle": -129}, "angle"), ({"speed": 256}, "speed"),
     ({"current": -1}, "current"), ({"module_id": 1.0}, "module_id"),
     ({"reserved_b": 300}, "reserved_b"), ({"command": 256}, "command")],
)
def test_out_of_range_fields(kwargs: dict[str, object], field: str) -> None:
    value = ActuatorStruct(**kwargs)  # type: ignore[arg-type]
    for fn in (actuator.encode, actuator.encode_with_schema):
        with pytest.raises(FieldValueError) as exc:
            fn(value)
        assert exc.value.field == field


@given(st.integers(-0x8000, 0x7FFF))
def test_fine_position_round_trip(counts: int) -> None:
    base = actuator.ActuatorStruct(angle=12, speed=3, module_id=2, command=0x38)
    s = actuator.with_fine_position(base, counts)
    assert actuator.fine_position(actuator.decode(actuator.encode(s))) == counts
    assert (s.angle, s.speed, s.module_id) == (12, 3, 2)


def test_fine_position_range() -> None:
    with pytest.raises(FieldValueError, match="int16"):
        actuator.with_fine_position(actuator.ActuatorStruct(), 40000)
