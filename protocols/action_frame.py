"""Action frame, user side <-> main controller (PROTOCOLS.md 3, seed 004).

``FE EF | machine u8 | type u8 | length u16 | sub u8 | data[N] | crc u16 | FD DF``,
11 + N bytes in all.

Choices (PROTOCOLS.md marks them):

- ``length`` is N, the number of sub-command data bytes, as the patent's
  worked example shows (its prose says otherwise; the example wins).
- Both ``length`` and ``crc`` are little-endian, low byte first, like every
  number in PROTOCOLS.md that does not say otherwise. The example's length
  ``45 00`` = 69 confirms it for the length; the CRC field follows the same
  rule (CCITT CRCs are often sent high byte first elsewhere; not here).
- The CRC covers bytes 2 .. 6+N (machine code through the last data byte):
  CRC-16/CCITT-FALSE by default, any crcmod predefined CRC-16 by name
  (:mod:`protocols.crc`).

The description, ``protocols/frames/action.toml``, is the source of truth:
the construct schema (:func:`schema`) is built from it, and :func:`encode`
and :func:`decode` are a ``struct`` fast path the tests compare with it byte
for byte (:func:`encode_with_schema`, :func:`decode_with_schema`). Unknown
instruction types and sub-commands decode to plain ints, never an error.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from construct import ConstructError, Struct

from fwbridge.protocols.crc import DEFAULT_CRC, crc_function
from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.schema import build_schema
from fwbridge.protocols.engine.codec import schema_of
from fwbridge.protocols.engine.kernels.sum8 import fast_constructor
from fwbridge.protocols.engine.records import record_type
from fwbridge.protocols.errors import (
    ChecksumError,
    FieldValueError,
    HeaderError,
    LengthError,
    TrailerError,
)

__all__ = [
    "DESCRIPTION",
    "FIELDS",
    "HEADER",
    "MAX_LENGTH",
    "OVERHEAD",
    "RELAXED_HEADERS",
    "SCHEMA",
    "SUB_OF",
    "TRAILER",
    "TYPE_OF",
    "ActionFrame",
    "InstructionType",
    "SubCommand",
    "as_instruction_type",
    "as_sub_command",
    "check",
    "decode",
    "decode_with_schema",
    "encode",
    "encode_with_schema",
    "make_unchecked",
    "schema",
]

NAME = "action"
DESCRIPTION = builtin("action")  # protocols/frames/action.toml
HEADER = DESCRIPTION.header  # FE EF
TRAILER = DESCRIPTION.trailer  # FD DF
#: Header, machine, type, length, sub-command, CRC and trailer: 11 + N bytes a frame.
OVERHEAD = 11
#: The largest N the 16-bit length field can carry.
MAX_LENGTH = 0xFFFF
#: Headers accepted in relaxed mode: ``FE EF`` and the description's alternative headers
#: (the worked example's ``FE FF``).
RELAXED_HEADERS: tuple[bytes, ...] = (HEADER, *DESCRIPTION.alt_headers)


class InstructionType(IntEnum):
    """Patent table 2. The reply to a request of type T (0x01..0x07) has type T + 0x10."""

    READ_PHONE = 0x01  # user side 1 (phone/pad)
    READ_SIMULATOR = 0x02  # user side 2 (motion simulator)
    READ_PC = 0x03  # user side 3 (PC configuration software)
    WRITE_PHONE = 0x04
    WRITE_SIMULATOR = 0x05
    WRITE_PC = 0x06
    CONTROL_PHONE = 0x07
    READ_RESULT_PHONE = 0x11  # terminal -> user side 1/2/3: result of a read
    READ_RESULT_SIMULATOR = 0x12
    READ_RESULT_PC = 0x13
    WRITE_RESULT_PHONE = 0x14  # terminal -> user side 1/2/3: result of a write
    WRITE_RESULT_SIMULATOR = 0x15
    WRITE_RESULT_PC = 0x16
    CONTROL_RESULT_1 = 0x17  # terminal -> user side 1: control results 1/2/3
    CONTROL_RESULT_2 = 0x18
    CONTROL_RESULT_3 = 0x19


class SubCommand(IntEnum):
    """Patent table 3.

    The patent lists 0x41 twice ("robot error code" and "device enters CAN
    flash mode"). Both names are kept: ``DEVICE_CAN_FLASH`` is an alias of
    ``ROBOT_ERROR_CODE`` (same member), so 0x41 decodes as ``ROBOT_ERROR_CODE``
    and which meaning applies is up to the instruction type and context.
    """

    STATUS_UPDATE = 0x01
    STAND_STILL = 0x02
    FREE_SWIMMING = 0x03
    QUERY_ROBOT_INFO = 0x11
    QUERY_SERVO_INFO = 0x12
    QUERY_BUOYANCY_INFO = 0x13
    QUERY_CAN_ERROR_RATE = 0x14
    REALTIME_SERVO_CONTROL = 0x21
    WRITE_ACTION_GROUP = 0x31
    TEST_ACTION_GROUP = 0x32
    WRITE_USER_CONFIG = 0x33
    ERASE_COMMAND_FLASH = 0x34
    IAP_UPGRADE = 0x35
    READ_USER_CONFIG = 0x36
    READ_ACTIONS = 0x37
    SET_SERVO_POSITION = 0x38
    ENTER_FREE_MODE = 0x39
    ENTER_IDLE = 0x3A
    ROBOT_ERROR_CODE = 0x41
    DEVICE_CAN_FLASH = 0x41  # the patent's duplicate 0x41: an alias, see the class docstring
    MAIN_CAN_FLASH = 0x42


# Byte -> enum member or the plain int: one index per decoded frame instead
# of a try/except around the enum call.
TYPE_OF: tuple[InstructionType | int, ...] = tuple(
    InstructionType(v) if v in InstructionType._value2member_map_ else v for v in range(256)
)
SUB_OF: tuple[SubCommand | int, ...] = tuple(
    SubCommand(v) if v in SubCommand._value2member_map_ else v for v in range(256)
)


def as_instruction_type(value: int) -> InstructionType | int:
    """The :class:`InstructionType` member for ``value``, or ``value`` when unknown."""
    return TYPE_OF[value] if 0 <= value <= 0xFF else value


def as_sub_command(value: int) -> SubCommand | int:
    """The :class:`SubCommand` member for ``value``, or ``value`` when unknown."""
    return SUB_OF[value] if 0 <= value <= 0xFF else value


#: The record's fields, in wire order (the length field is derived from ``data``).
FIELDS: tuple[str, ...] = tuple(n for n in DESCRIPTION.field_names
                                if DESCRIPTION.length is None or n != DESCRIPTION.length.field)

if TYPE_CHECKING:
    # For the type checker only: the class below is made from the description at run time
    # (tests/test_record_types.py holds this declaration to the description's fields).
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class ActionFrame:
        """One action frame: machine code, instruction type, sub-command, data.

        The length field is not stored: it is ``len(data)``. Known types and
        sub-commands become enum members; any other int stays an int.
        """

        machine: int
        type: InstructionType | int
        sub: SubCommand | int
        data: bytes = b""

        @property
        def length(self) -> int:
            """The length field: number of data bytes."""
            return len(self.data)
else:
    ActionFrame = record_type(
        DESCRIPTION, "ActionFrame", defaults={"data": b""},
        enums={"type": InstructionType, "sub": SubCommand}, module=__name__,
        doc="""One action frame: machine code, instruction type, sub-command, data.

    The length field is not stored: it is ``len(data)``. Known types and
    sub-commands become enum members; any other int stays an int.
    """)


#: ActionFrame from already checked fields, without the dataclass __init__ (receivers' hot path).
make_unchecked = fast_constructor(ActionFrame, FIELDS)
_HEAD = struct.Struct("<2sBBHB")  # header, machine, type, length, sub-command
_VALUES = attrgetter(*FIELDS)  # machine, type, sub, data: the layout fits_action() holds


# -- schema -----------------------------------------------------------------
@cache
def schema(crc: str = DEFAULT_CRC, relaxed: bool = False) -> Struct:
    """The construct schema for the CRC preset ``crc``.

    ``relaxed``: any two header bytes and no CRC check (the CRC field is read
    as a plain uint16), for the patent's worked example and similar captures.
    """
    crc_function(crc)  # the frame's CRC field has two bytes: CRC-16 presets only
    # Built from protocols/frames/action.toml, the same description as user frames; with
    # the description's own CRC, the very schema its generic codec uses.
    assert DESCRIPTION.checksum is not None
    if crc == DESCRIPTION.checksum.algorithm and not relaxed:
        default: Struct = schema_of(DESCRIPTION)
        return default
    return build_schema(DESCRIPTION, algorithm_name=crc, relaxed=relaxed)


SCHEMA = schema()


# -- encoding ---------------------------------------------------------------
def _checked(frame: ActionFrame) -> tuple[int, int, int, bytes]:
    values = _VALUES(frame)
    for field, value in zip(FIELDS[:3], values):
        if not isinstance(value, int) or isinstance(value, bool):
            raise FieldValueError(NAME, field, f"not an int: {value!r}")
        if not 0 <= value <= 0xFF:
            raise FieldValueError(NAME, field, f"{value} does not fit in one byte (0..255)")
    machine, itype, sub, data = values
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FieldValueError(NAME, FIELDS[3], f"not bytes: {type(data).__name__}")
    if len(data) > MAX_LENGTH:
        raise FieldValueError(NAME, FIELDS[3], f"{len(data)} bytes; the length field holds "
                              f"at most {MAX_LENGTH}")
    return int(machine), int(itype), int(sub), bytes(data)


def encode(frame: ActionFrame, *, crc: str = DEFAULT_CRC) -> bytes:
    """The frame's bytes, its CRC computed with the preset ``crc``."""
    machine, itype, sub, data = _checked(frame)
    head = _HEAD.pack(HEADER, machine, itype, len(data), sub)
    value = crc_function(crc)(head[2:] + data)
    return b"".join((head, data, value.to_bytes(2, "little"), TRAILER))


def encode_with_schema(frame: ActionFrame, *, crc: str = DEFAULT_CRC) -> bytes:
    """Same bytes as :func:`encode`, built by the construct schema."""
    machine, itype, sub, data = _checked(frame)
    body = dict(zip(FIELDS, (machine, itype, sub, data)))
    try:
        return bytes(schema(crc).build({"body": {"value": body}}))
    except ConstructError as exc:  # pragma: no cover - values are checked above
        raise FieldValueError(NAME, "body", str(exc)) from None


# -- decoding ---------------------------------------------------------------
def check(
    data: bytes | bytearray | memoryview, *, crc: str = DEFAULT_CRC, relaxed: bool = False
) -> None:
    """Raise the error naming what is wrong with ``data``, if anything.

    Checked in this order: size, header, length field against the size,
    trailer, CRC (the CRC last: it is only meaningful over a well-framed span).
    """
    raw = bytes(data)
    if len(raw) < OVERHEAD:
        raise LengthError(NAME, "frame", f"at least {OVERHEAD} bytes, got {len(raw)}", raw)
    headers = RELAXED_HEADERS if relaxed else (HEADER,)
    if raw[:2] not in headers:
        want = " or ".join(h.hex(" ") for h in headers)
        raise HeaderError(NAME, "header", f"expected {want}, got {raw[:2].hex(' ')}", raw)
    n = raw[4] | raw[5] << 8
    if OVERHEAD + n != len(raw):
        raise LengthError(
            NAME, "length", f"field says {n} data bytes, so {OVERHEAD + n} bytes in all; "
            f"got {len(raw)}", raw,
        )
    if raw[-2:] != TRAILER:
        raise TrailerError(
            NAME, "trailer", f"expected {TRAILER.hex(' ')}, got {raw[-2:].hex(' ')}", raw
        )
    if not relaxed:
        want_crc = crc_function(crc)(raw[2:-4])
        got_crc = raw[-4] | raw[-3] << 8
        if want_crc != got_crc:
            raise ChecksumError(
                NAME, "crc", f"{crc} computes 0x{want_crc:04x}, frame says 0x{got_crc:04x}", raw
            )


def decode(
    data: bytes | bytearray | memoryview, *, crc: str = DEFAULT_CRC, relaxed: bool = False
) -> ActionFrame:
    """Decode exactly one frame; raises a ``FrameError`` subclass on bad input.

    ``relaxed`` accepts the headers of :data:`RELAXED_HEADERS` and skips the
    CRC check; it exists for the patent's worked example and similar captures.
    """
    raw = bytes(data)
    check(raw, crc=crc, relaxed=relaxed)
    return make_unchecked(raw[2], TYPE_OF[raw[3]], SUB_OF[raw[6]], raw[7:-4])


def decode_with_schema(
    data: bytes | bytearray | memoryview, *, crc: str = DEFAULT_CRC, relaxed: bool = False
) -> ActionFrame:
    """Decode with the construct schema; same result and errors as :func:`decode`."""
    raw = bytes(data)
    if len(raw) < OVERHEAD:
        check(raw, crc=crc, relaxed=relaxed)  # raises LengthError
    try:
        parsed: Any = schema(crc, relaxed).parse(raw)
    except ConstructError:
        # construct says *that* something failed; check() says what, in the
        # same words and order as decode().
        check(raw, crc=crc, relaxed=relaxed)
        raise
    bad_header = relaxed and parsed.header not in RELAXED_HEADERS
    if bad_header or parsed.body.length + OVERHEAD != len(raw):
        check(raw, crc=crc, relaxed=relaxed)  # raises HeaderError or LengthError
    machine, itype, sub, data = (parsed.body.value[n] for n in FIELDS)
    return ActionFrame(machine, int(itype), int(sub), bytes(data))
