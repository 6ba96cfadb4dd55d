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
from dataclasses import dataclass
from enum import IntFlag
from typing import Any

from construct import ConstructError

from fwbridge.protocols.action_frame import SubCommand, as_sub_command
from fwbridge.protocols.builtin_frames import builtin
from fwbridge.protocols.errors import FieldValueError, LengthError
from fwbridge.protocols.frame_codec import schema_of

__all__ = ["DESCRIPTION", "SCHEMA", "SIZE", "ActuatorStruct", "Fault", "decode",
           "decode_with_schema", "encode", "encode_with_schema", "fine_position",
           "with_fine_position"]

NAME = "actuator"
SIZE = 8


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


@dataclass(frozen=True, slots=True)
class ActuatorStruct:
    """One actuator message: targets or feedback of one module."""

    angle: int = 0
    speed: int = 0
    current: int = 0
    module_id: int = 0
    command: SubCommand | int = 0
    fault: Fault = Fault.NONE
    reserved_a: int = 0
    reserved_b: int = 0

    def __post_init__(self) -> None:
        # Users pass plain ints; store the enum forms so equal structs compare equal.
        if isinstance(self.command, int) and not isinstance(self.command, bool):
            object.__setattr__(self, "command", as_sub_command(self.command))
        if type(self.fault) is int and 0 <= self.fault <= 0xFF:
            object.__setattr__(self, "fault", Fault(self.fault))

    @property
    def current_ma(self) -> int:
        """The current in milliamperes."""
        return self.current * 100


DESCRIPTION = builtin("actuator")  # protocols/frames/actuator.toml
_FIELDS = DESCRIPTION.field_names
_STRUCT = struct.Struct("<bBBBBBBB")

SCHEMA = schema_of(DESCRIPTION)  # the description's, as its generic codec has it


def _values(value: ActuatorStruct) -> tuple[int, ...]:
    vals = tuple(getattr(value, f) for f in _FIELDS)
    for field, v in zip(_FIELDS, vals):
        if not isinstance(v, int) or isinstance(v, bool):
            raise FieldValueError(NAME, field, f"not an int: {v!r}")
        lo, hi = (-128, 127) if field == "angle" else (0, 255)
        if not lo <= v <= hi:
            raise FieldValueError(NAME, field, f"{v} is out of range {lo}..{hi}")
    return tuple(int(v) for v in vals)


def encode(value: ActuatorStruct) -> bytes:
    """The 8 bytes of ``value``."""
    return _STRUCT.pack(*_values(value))


def encode_with_schema(value: ActuatorStruct) -> bytes:
    """Same bytes as :func:`encode`, built by the construct schema."""
    vals = dict(zip(_FIELDS, _values(value)))
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
    a, s, c, m, cmd, fault, ra, rb = _STRUCT.unpack(raw)
    return ActuatorStruct(a, s, c, m, as_sub_command(cmd), Fault(fault), ra, rb)


def decode_with_schema(data: bytes | bytearray | memoryview) -> ActuatorStruct:
    """Decode with the construct schema; same result and errors as :func:`decode`."""
    raw = bytes(data)
    _check(raw)
    p: Any = SCHEMA.parse(raw)
    fault = Fault.NONE
    for flag in Fault:
        if flag and p.fault[flag.name]:
            fault |= flag
    return ActuatorStruct(p.angle, p.speed, p.current, p.module_id, as_sub_command(int(p.command)),
                          fault, p.reserved_a, p.reserved_b)


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
    return ActuatorStruct(value.angle, value.speed, value.current, value.module_id,
                          value.command, value.fault, raw & 0xFF, raw >> 8)
