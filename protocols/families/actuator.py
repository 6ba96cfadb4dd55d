"""The 8-byte actuator struct, the data field of the CAN frames (PROTOCOLS.md 4, seed 004).

| byte | field | type |
|---|---|---|
| 0 | angle | int8, degrees |
| 1 | speed | uint8, the action groups' speed unit |
| 2 | current | uint8, units of 100 mA |
| 3 | module_id | uint8; the CAN priority (lower = higher priority) |
| 4 | command | uint8, a sub-command of table 3.2 (0x21, 0x38, 0x12, ...) |
| 5 | fault | uint8 flags (:class:`Fault`) |
| 6 | reserved_a | uint8 |
| 7 | reserved_b | uint8 |

The patent's summary orders bytes 3..5 "priority, fault, command"; its
per-module descriptions (servo, servo motor, stepper) say "ID, command,
fault". This follows the per-module descriptions, as PROTOCOLS.md does.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from enum import IntFlag
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from construct import ConstructError

from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.engine.codec import schema_of
from fwbridge.protocols.engine.kernels.sum8 import fast_constructor
from fwbridge.protocols.engine.records import LabelType, record_type
from fwbridge.protocols.errors import FieldValueError, LengthError

__all__ = ["DESCRIPTION", "FIELDS", "SCHEMA", "SIZE", "ActuatorStruct", "Fault", "decode",
           "decode_with_schema", "encode", "encode_with_schema", "fine_position",
           "with_fine_position"]

NAME = "actuator"


class Fault(IntFlag):
    """Fault byte (data6). Every bit is named, so any byte decodes and re-encodes exactly."""

    NONE = 0
    OVER_CURRENT = 0x01
    OVER_TEMPERATURE = 0x02
    WATER_INGRESS = 0x04  # the humidity sensor inside the servo
    HALL_SENSOR = 0x08
    ANGLE_SENSOR = 0x10
    STALL_TIMEOUT = 0x20
    CAN_ERROR = 0x40
    RESERVED = 0x80


class ActuatorProperties:
    """What an actuator record has besides its fields."""

    __slots__ = ()
    current: int

    @property
    def current_ma(self) -> int:
        """The current in milliamperes."""
        return self.current * 100


DESCRIPTION = builtin("actuator")  # protocols/frames/actuator.toml
FIELDS = DESCRIPTION.field_names  # wire order
_LABELS: dict[str, LabelType] = {"command": SubCommand, "fault": Fault}

if TYPE_CHECKING:
    # For the type checker only: the class below is made from the description at run time
    # (tests/test_record_types.py holds this declaration to the description's fields).
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class ActuatorStruct(ActuatorProperties):
        """One actuator message: targets or feedback of one module."""

        angle: int = 0
        speed: int = 0
        current: int = 0
        module_id: int = 0
        command: SubCommand | int = 0
        fault: Fault = Fault.NONE
        reserved_a: int = 0
        reserved_b: int = 0
else:
    ActuatorStruct = record_type(
        DESCRIPTION, "ActuatorStruct", base=ActuatorProperties, enums=_LABELS,
        defaults={**dict.fromkeys(FIELDS, 0), "fault": Fault.NONE}, module=__name__,
        doc="One actuator message: targets or feedback of one module.")

# The struct layout, ranges and decoded forms, all from the description's fields.
_SPECS = tuple(DESCRIPTION.field(n) for n in FIELDS)
_STRUCT = struct.Struct(("<" if DESCRIPTION.byte_order == "little" else ">")
                        + "".join(f.info.code for f in _SPECS))
SIZE = _STRUCT.size  # 8
_RANGES = tuple((f.info.lo, f.info.hi) for f in _SPECS)
# per labelled field, raw value -> decoded one: the flag; the enum member, or the int
_DECODED = tuple(
    None if f.name not in _LABELS else {
        v: _LABELS[f.name](v) if f.flags else _LABELS[f.name]._value2member_map_.get(v, v)
        for v in range(f.info.lo, f.info.hi + 1)}
    for f in _SPECS)
_MAKE = fast_constructor(ActuatorStruct, FIELDS)  # decoded values are already normalised
_VALUES = attrgetter(*FIELDS)

SCHEMA = schema_of(DESCRIPTION)  # the description's, as its generic codec has it


def _values(value: ActuatorStruct) -> tuple[int, ...]:
    vals = _VALUES(value)
    for field, v, (lo, hi) in zip(FIELDS, vals, _RANGES):
        if not isinstance(v, int) or isinstance(v, bool):
            raise FieldValueError(NAME, field, f"not an int: {v!r}")
        if not lo <= v <= hi:
            raise FieldValueError(NAME, field, f"{v} is out of range {lo}..{hi}")
    return tuple(int(v) for v in vals)


def encode(value: ActuatorStruct) -> bytes:
    """The 8 bytes of ``value``."""
    return _STRUCT.pack(*_values(value))


def encode_with_schema(value: ActuatorStruct) -> bytes:
    """Same bytes as :func:`encode`, built by the construct schema."""
    vals: dict[str, Any] = dict(zip(FIELDS, _values(value)))
    for f in _SPECS:
        if f.flags:
            vals[f.name] = {label: bool(vals[f.name] & bit) for bit, label in f.flags}
    try:
        return bytes(SCHEMA.build(vals))
    except ConstructError as exc:  # pragma: no cover - values are checked above
        raise FieldValueError(NAME, "struct", str(exc)) from None


def _check(raw: bytes) -> None:
    if len(raw) != SIZE:
        raise LengthError(NAME, "struct", f"expected {SIZE} bytes, got {len(raw)}", raw)


def decode(data: bytes | bytearray | memoryview) -> ActuatorStruct:
    """Decode exactly 8 bytes; an unknown command stays an int, never an error."""
    raw = bytes(data)
    _check(raw)
    return _MAKE(*[v if t is None else t[v] for v, t in zip(_STRUCT.unpack(raw), _DECODED)])


def decode_with_schema(data: bytes | bytearray | memoryview) -> ActuatorStruct:
    """Decode with the construct schema; same result and errors as :func:`decode`."""
    raw = bytes(data)
    _check(raw)
    p: Any = SCHEMA.parse(raw)
    vals: list[Any] = []  # raw ints: the constructor stores the decoded forms
    for f in _SPECS:
        v = p[f.name]
        vals.append(sum(bit for bit, label in f.flags if v[label]) if f.flags else int(v))
    return ActuatorStruct(*vals)


# -- fine position in the reserved bytes (PROTOCOLS.md 6) ----------------------
#: Counts per unit of the fine position: 0.01 degree for revolute joints,
#: 0.1 mm for prismatic ones (the SCARA slide).
FINE_PER_DEGREE = 100
FINE_PER_MM = 10


def fine_position(value: ActuatorStruct) -> int:
    """The int16 fine position carried little-endian in ``reserved_a``/``reserved_b``."""
    raw = value.reserved_a | value.reserved_b << 8
    return raw - 0x10000 if raw & 0x8000 else raw


def with_fine_position(value: ActuatorStruct, counts: int) -> ActuatorStruct:
    """``value`` with ``counts`` (int16) in the reserved bytes; other fields unchanged."""
    if not -0x8000 <= counts <= 0x7FFF:
        raise FieldValueError(NAME, "reserved_a/reserved_b",
                              f"fine position {counts} is out of the int16 range")
    raw = counts & 0xFFFF
    return replace(value, reserved_a=raw & 0xFF, reserved_b=raw >> 8)
