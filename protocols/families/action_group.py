"""Action-group payload: the data of sub-commands 0x31/0x32 (PROTOCOLS.md 3.4).

Read off the patent's worked example, the only specimen there is (the
timing fields below are a **choice** that reads the example consistently)::

    header_raw   16 bytes        meaning unknown
    step         repeated:
      prefix_raw     2 bytes     meaning unknown (03 00 in the example)
      step_length    uint16      bytes in this step, its 12-byte header included
      params_raw     8 bytes     meaning unknown (40 0d 07 00 00 00 ... )
      servos         (step_length - 12) / 4 entries:
                     servo_id u8, speed u8, angle int16 (degrees)
    trailer_raw  0..11 bytes     meaning unknown (00 00 00 da f3)

Timing (the patent: action type, timeout, repeat count, each step's sync
bit), read from bytes kept raw, so a payload still re-encodes byte-exact:

- ``header_raw[0]`` action type: 0 single (run ``repeat`` times), 1
  continuous (repeat until another command); others run as single.
- ``header_raw[10:12]`` u16 the number of steps (2 in the example; not
  enforced), ``header_raw[12:14]`` u16 the repeat count (2 in the example:
  two strokes; 0 = once).
- ``prefix_raw[1]`` the step's sync byte: consecutive steps with the same
  non-zero sync byte start at the same moment, and the next step waits for
  all of them; 0 (the example) = the step runs alone.
- ``params_raw[2:4]`` u16 the step timeout in ms (0x0D40 = 3392 in the
  example; 0 = the player's default), ``params_raw[4]`` the wait mask: bit
  k-1 set = servo k must reach its target before the step is done (0x07 =
  servos 1-3 in the example; 0 = every servo of the step).

**Choice**: steps follow the group header while at least 12 bytes remain;
fewer than 12 left over are the trailer. A step whose length field is not
12 + 4k or runs past the data is an error, not a trailer, so a corrupt
payload is reported instead of being half-read. Bytes whose meaning is
unknown are kept as named raw fields, so :func:`encode` gives back the very
bytes :func:`decode` read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from construct import (
    Array,
    Bytes,
    Check,
    ConstructError,
    GreedyBytes,
    GreedyRange,
    Int8ul,
    Int16sl,
    Int16ul,
    Rebuild,
    Struct,
    len_,
    this,
)

from fwbridge.protocols.action_frame import ActionFrame, SubCommand
from fwbridge.protocols.errors import FieldValueError, LengthError

__all__ = [
    "ACTION_GROUP_SUBS",
    "GROUP_HEADER_SIZE",
    "SCHEMA",
    "STEP_HEADER_SIZE",
    "ActionGroup",
    "ServoEntry",
    "Step",
    "decode",
    "decode_with_schema",
    "encode",
    "encode_with_schema",
    "from_frame",
]

NAME = "action group"
ACTION_GROUP_SUBS = frozenset({SubCommand.WRITE_ACTION_GROUP, SubCommand.TEST_ACTION_GROUP})
GROUP_HEADER_SIZE = 16
STEP_HEADER_SIZE = 12
SERVO_SIZE = 4
_SERVO = struct.Struct("<BBh")
_STEP_HEAD = struct.Struct("<2sH8s")


@dataclass(frozen=True, slots=True)
class ServoEntry:
    """One servo's target in a step: id, speed (action-group units), angle in degrees."""

    servo_id: int
    speed: int
    angle: int


@dataclass(frozen=True, slots=True)
class Step:
    """One step of an action group: its servo targets and the header bytes not understood."""

    servos: tuple[ServoEntry, ...]
    prefix_raw: bytes = b"\x00\x00"
    params_raw: bytes = bytes(8)

    @property
    def step_length(self) -> int:
        """The step's length field: 12 header bytes + 4 per servo."""
        return STEP_HEADER_SIZE + SERVO_SIZE * len(self.servos)

    @property
    def sync(self) -> int:
        """Sync byte: steps in a row with the same non-zero value start together."""
        return self.prefix_raw[1] if len(self.prefix_raw) > 1 else 0

    @property
    def timeout_ms(self) -> int:
        """The step's timeout in ms (0: the player's default)."""
        return int.from_bytes(self.params_raw[2:4], "little") if len(self.params_raw) >= 4 else 0

    @property
    def wait_mask(self) -> int:
        """Bit k-1: servo k must reach its target (0: every servo of the step)."""
        return self.params_raw[4] if len(self.params_raw) > 4 else 0

    @staticmethod
    def timed(servos: tuple[ServoEntry, ...], *, sync: int = 0, timeout_ms: int = 0,
              wait_mask: int = 0) -> Step:
        """A step with its timing fields set (the other raw bytes zero)."""
        if not (0 <= sync <= 0xFF and 0 <= timeout_ms <= 0xFFFF and 0 <= wait_mask <= 0xFF):
            raise FieldValueError(NAME, "step timing", f"sync {sync}, timeout_ms {timeout_ms}, "
                                  f"wait_mask {wait_mask} out of range")
        params = bytes(2) + timeout_ms.to_bytes(2, "little") + bytes((wait_mask,)) + bytes(3)
        return Step(servos, bytes((0, sync)), params)


@dataclass(frozen=True, slots=True)
class ActionGroup:
    """The decoded payload: steps, with the group's unknown leading and trailing bytes."""

    steps: tuple[Step, ...]
    header_raw: bytes = bytes(GROUP_HEADER_SIZE)
    trailer_raw: bytes = b""

    @property
    def action_type(self) -> int:
        """0 single (``repeat`` runs), 1 continuous (until another command)."""
        return self.header_raw[0] if self.header_raw else 0

    @property
    def repeat(self) -> int:
        """Runs of a single group (the header's repeat count; 0 reads as 1)."""
        value = int.from_bytes(self.header_raw[12:14], "little") if len(
            self.header_raw) >= 14 else 0
        return max(1, value)

    @staticmethod
    def timed(steps: tuple[Step, ...], *, action_type: int = 0, repeat: int = 1) -> ActionGroup:
        """A group with its action type, step count and repeat count set."""
        if not (0 <= action_type <= 0xFF and 0 <= repeat <= 0xFFFF):
            raise FieldValueError(NAME, "group timing", f"action_type {action_type}, repeat "
                                  f"{repeat} out of range")
        header = (bytes((action_type,)) + bytes(9) + min(len(steps), 0xFFFF).to_bytes(2, "little")
                  + repeat.to_bytes(2, "little") + bytes(2))
        return ActionGroup(steps, header)


_SERVO_SCHEMA = Struct("servo_id" / Int8ul, "speed" / Int8ul, "angle" / Int16sl)
_STEP_SCHEMA = Struct(
    "prefix_raw" / Bytes(2),
    "step_length" / Rebuild(Int16ul, STEP_HEADER_SIZE + SERVO_SIZE * len_(this.servos)),
    # A bad length ends the steps here; decode_with_schema then reports it.
    Check(lambda ctx: ctx.step_length >= STEP_HEADER_SIZE
          and (ctx.step_length - STEP_HEADER_SIZE) % SERVO_SIZE == 0),
    "params_raw" / Bytes(8),
    "servos" / Array((this.step_length - STEP_HEADER_SIZE) // SERVO_SIZE, _SERVO_SCHEMA),
)
SCHEMA = Struct(
    "header_raw" / Bytes(GROUP_HEADER_SIZE),
    "steps" / GreedyRange(_STEP_SCHEMA),
    "trailer_raw" / GreedyBytes,
)


# -- decoding ---------------------------------------------------------------
def decode(data: bytes | bytearray | memoryview) -> ActionGroup:
    """Decode an action-group payload; raises a ``FrameError`` subclass on bad input."""
    raw = bytes(data)
    if len(raw) < GROUP_HEADER_SIZE:
        raise LengthError(NAME, "header_raw", f"at least {GROUP_HEADER_SIZE} bytes, got "
                          f"{len(raw)}", raw)
    steps: list[Step] = []
    pos = GROUP_HEADER_SIZE
    while len(raw) - pos >= STEP_HEADER_SIZE:
        prefix, length, params = _STEP_HEAD.unpack_from(raw, pos)
        field = f"steps[{len(steps)}].step_length"
        if length < STEP_HEADER_SIZE or (length - STEP_HEADER_SIZE) % SERVO_SIZE:
            raise LengthError(NAME, field, f"{length} is not 12 + 4 x servos (at data offset "
                              f"{pos + 2})", raw[pos : pos + STEP_HEADER_SIZE])
        if pos + length > len(raw):
            raise LengthError(NAME, field, f"{length} bytes, only {len(raw) - pos} left "
                              f"(at data offset {pos + 2})", raw[pos:])
        servos = tuple(
            ServoEntry(*_SERVO.unpack_from(raw, k))
            for k in range(pos + STEP_HEADER_SIZE, pos + length, SERVO_SIZE)
        )
        steps.append(Step(servos, prefix, params))
        pos += length
    return ActionGroup(tuple(steps), raw[:GROUP_HEADER_SIZE], raw[pos:])


def decode_with_schema(data: bytes | bytearray | memoryview) -> ActionGroup:
    """Decode with the construct schema; same result and errors as :func:`decode`."""
    raw = bytes(data)
    try:
        p: Any = SCHEMA.parse(raw)
    except ConstructError:
        decode(raw)  # raises the error that names the field
        raise
    if len(p.trailer_raw) >= STEP_HEADER_SIZE:
        decode(raw)  # a step the schema stopped at: decode() names its length field
    steps = tuple(
        Step(tuple(ServoEntry(s.servo_id, s.speed, s.angle) for s in st.servos),
             bytes(st.prefix_raw), bytes(st.params_raw))
        for st in p.steps
    )
    return ActionGroup(steps, bytes(p.header_raw), bytes(p.trailer_raw))


def from_frame(frame: ActionFrame) -> ActionGroup:
    """The action group carried by a 0x31/0x32 frame."""
    if frame.sub not in ACTION_GROUP_SUBS:
        raise FieldValueError(NAME, "sub", f"0x{int(frame.sub):02x} carries no action group "
                              "(0x31 or 0x32)")
    return decode(frame.data)


# -- encoding ---------------------------------------------------------------
def _raw(value: Any, field: str, size: int | None = None, below: int | None = None) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise FieldValueError(NAME, field, f"not bytes: {type(value).__name__}")
    raw = bytes(value)
    if size is not None and len(raw) != size:
        raise FieldValueError(NAME, field, f"{size} bytes needed, got {len(raw)}", raw)
    if below is not None and len(raw) >= below:
        raise FieldValueError(NAME, field, f"{len(raw)} bytes; {below} or more would read back "
                              "as a step", raw)
    return raw


def _servo(entry: ServoEntry, field: str) -> bytes:
    for name, lo, hi in (("servo_id", 0, 255), ("speed", 0, 255), ("angle", -32768, 32767)):
        v = getattr(entry, name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise FieldValueError(NAME, f"{field}.{name}", f"not an int: {v!r}")
        if not lo <= v <= hi:
            raise FieldValueError(NAME, f"{field}.{name}", f"{v} is out of range {lo}..{hi}")
    return _SERVO.pack(entry.servo_id, entry.speed, entry.angle)


def encode(group: ActionGroup) -> bytes:
    """The payload bytes of ``group`` (byte-exact for anything :func:`decode` returned)."""
    parts = [_raw(group.header_raw, "header_raw", GROUP_HEADER_SIZE)]
    for k, step in enumerate(group.steps):
        if step.step_length > 0xFFFF:
            raise FieldValueError(NAME, f"steps[{k}].servos", f"{len(step.servos)} servos do "
                                  "not fit a 16-bit step length")
        parts.append(_STEP_HEAD.pack(_raw(step.prefix_raw, f"steps[{k}].prefix_raw", 2),
                                     step.step_length,
                                     _raw(step.params_raw, f"steps[{k}].params_raw", 8)))
        parts.extend(_servo(s, f"steps[{k}].servos[{j}]") for j, s in enumerate(step.servos))
    parts.append(_raw(group.trailer_raw, "trailer_raw", below=STEP_HEADER_SIZE))
    return b"".join(parts)


def encode_with_schema(group: ActionGroup) -> bytes:
    """Same bytes as :func:`encode`, built by the construct schema."""
    encode(group)  # the same checks and errors
    value = {
        "header_raw": group.header_raw,
        "steps": [
            {"prefix_raw": st.prefix_raw, "params_raw": st.params_raw,
             "servos": [{"servo_id": s.servo_id, "speed": s.speed, "angle": s.angle}
                        for s in st.servos]}
            for st in group.steps
        ],
        "trailer_raw": group.trailer_raw,
    }
    return bytes(SCHEMA.build(value))
