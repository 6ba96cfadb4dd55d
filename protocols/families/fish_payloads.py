"""The robot fish's servo table and the data of its action frames (PROTOCOLS.md 6, "fish").

Servo module IDs (CAN priority: lowest first). The worked example (PROTOCOLS.md
3.4) drives servo 1 at speed 80 over ±60°, 2 at 60 over ±50°, 3 at 30 over
±20°, and its prose gives those to the tail, body and head servos. The
patent mounts the direction servo at the front (the head) and one power
servo each in the middle and at the tail. So:

====  ===========  ==========================================
 ID   role         where
====  ===========  ==========================================
 1    power        tail (propulsion wins arbitration first)
 2    power        body (middle)
 3    direction    head
 4    fin          front left
 5    fin          front right
 6    fin          rear left
 7    fin          rear right
====  ===========  ==========================================

Request data (host -> fish):

- 0x21 real-time servo control, 0x38 set absolute position: ``k x (id u8,
  speed u8, angle int16 degrees)``, the servo entries of an action group;
- 0x31/0x32: an action group (:mod:`protocols.action_group`);
- 0x12: optional module IDs to report (none: all seven);
- 0x11, 0x13, 0x14, 0x39, 0x3A: no data (extra bytes are ignored).

Query results (fish -> host) are action frames of type T + 0x10 with the
request's machine code and sub-command, sent right after the one-byte
answer. Their data is a status byte (0x00) followed by the fields below
(little-endian), so a result is never one byte long and never mistaken for
an answer:

- 0x11 robot info, 24 bytes: :class:`RobotInfo`;
- 0x12 servo info: count u8, then 8 bytes per servo: :class:`ServoInfo`;
- 0x13 buoyancy module info, 14 bytes: :class:`BuoyancyInfo`;
- 0x14 CAN error rate: 17 bytes, then 8 per CAN node: :class:`CanErrorInfo`.
"""

from __future__ import annotations

import struct
from dataclasses import asdict, astuple, dataclass
from enum import IntEnum
from typing import Any, ClassVar

from fwbridge.protocols.action_frame import ActionFrame, SubCommand
from fwbridge.protocols.errors import FieldValueError, LengthError
from fwbridge.protocols.families.action_group import ServoEntry
from fwbridge.protocols.families.arq import ANSWER_OFFSET, REQUEST_TYPES
from fwbridge.protocols.families.fish_actions import (  # re-exported: this module's names too
    FREE_ACTIONS,
    STORED_ACTION_BASE,
    action_code,
    action_name,
)
from fwbridge.protocols.families.fish_commands import (
    COMMAND_RESULT_SUBS,
    CommandResult,
    decode_command_result,
)

__all__ = [
    "DECISION_SOURCES",
    "FISH_SERVOS",
    "FREE_ACTIONS",
    "QUERY_SUBS",
    "RESULT_SUBS",
    "STORED_ACTION_BASE",
    "BuoyancyInfo",
    "CanErrorInfo",
    "CanNodeInfo",
    "Health",
    "Result",
    "RobotInfo",
    "Role",
    "ServoInfo",
    "ServoSpec",
    "action_code",
    "action_name",
    "decode_module_ids",
    "decode_result",
    "decode_servo_targets",
    "encode_result",
    "encode_servo_targets",
    "is_result_to",
    "result_frame",
]

NAME = "fish"


class Role(IntEnum):
    DIRECTION = 0
    POWER = 1
    FIN = 2


class Health(IntEnum):
    """The main controller's view of a module (:class:`can_bus.sim.nodes.Status`)."""

    UNKNOWN = 0
    OK = 1
    DEGRADED = 2
    SILENT = 3


@dataclass(frozen=True, slots=True)
class ServoSpec:
    module_id: int
    role: Role
    name: str


FISH_SERVOS: tuple[ServoSpec, ...] = (
    ServoSpec(1, Role.POWER, "tail"),
    ServoSpec(2, Role.POWER, "body"),
    ServoSpec(3, Role.DIRECTION, "head"),
    ServoSpec(4, Role.FIN, "fin-front-left"),
    ServoSpec(5, Role.FIN, "fin-front-right"),
    ServoSpec(6, Role.FIN, "fin-rear-left"),
    ServoSpec(7, Role.FIN, "fin-rear-right"),
)

#: Decision sources of :class:`RobotInfo` (index = code).
DECISION_SOURCES = ("none", "scene", "avoid", "random", "idle")
QUERY_SUBS = frozenset({SubCommand.QUERY_ROBOT_INFO, SubCommand.QUERY_SERVO_INFO,
                        SubCommand.QUERY_BUOYANCY_INFO, SubCommand.QUERY_CAN_ERROR_RATE})
#: Sub-commands whose result frame has a layout :func:`decode_result` knows
#: (the queries, and the system commands of :mod:`fwbridge.protocols.families.fish_commands`).
RESULT_SUBS = QUERY_SUBS | COMMAND_RESULT_SUBS


# -- request data -----------------------------------------------------------------
_ENTRY = struct.Struct("<BBh")


def encode_servo_targets(entries: tuple[ServoEntry, ...] | list[ServoEntry]) -> bytes:
    """Data of 0x21/0x38: ``id u8, speed u8, angle int16`` per servo."""
    try:
        return b"".join(_ENTRY.pack(e.servo_id, e.speed, e.angle) for e in entries)
    except struct.error as exc:
        raise FieldValueError(NAME, "servo entry", str(exc)) from None


def decode_servo_targets(data: bytes) -> tuple[ServoEntry, ...]:
    """Entries of a 0x21/0x38 frame; LengthError unless 4 x k bytes, k >= 1."""
    if not data or len(data) % _ENTRY.size:
        raise LengthError(NAME, "servo targets", f"4 bytes per servo, got {len(data)}", data)
    return tuple(ServoEntry(*_ENTRY.unpack_from(data, k)) for k in range(0, len(data), 4))


def decode_module_ids(data: bytes) -> tuple[int, ...]:
    """Module IDs a 0x12 query asks for (empty: all)."""
    return tuple(data)


# -- results -----------------------------------------------------------------------
class _Packed:
    """A fixed-size record: ``FORMAT`` packs the dataclass fields in order."""

    FORMAT: ClassVar[struct.Struct]

    def pack(self) -> bytes:
        values: tuple[Any, ...] = astuple(self)  # type: ignore[call-overload]
        return self.FORMAT.pack(*values)

    @classmethod
    def unpack(cls, data: bytes, offset: int = 0) -> Any:
        return cls(*cls.FORMAT.unpack_from(data, offset))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        return out


@dataclass(frozen=True, slots=True)
class RobotInfo(_Packed):
    """0x11. ``mode`` 0 idle, 1 free; ``running`` 0 nothing, 1 a user action group,
    2 a free-mode action; sonar 0xFFFF = no echo within range; decision codes:
    :data:`DECISION_SOURCES`, :func:`action_name`."""

    FORMAT: ClassVar[struct.Struct] = struct.Struct("<BBBBIhHHHBBHHH")
    mode: int
    running: int
    servos: int
    stored_groups: int
    uptime_ms: int
    heading_cdeg: int  # gyro heading, 0.01°, (-180, 180]
    depth_cm: int
    sonar_left_mm: int
    sonar_right_mm: int
    decision_source: int
    decision_action: int
    frames: int  # action frames received (all machine codes)
    duplicates: int
    naks: int

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["decision_source"] = DECISION_SOURCES[self.decision_source] if (
            self.decision_source < len(DECISION_SOURCES)) else self.decision_source
        out["decision_action"] = action_name(self.decision_action)
        return out


@dataclass(frozen=True, slots=True)
class ServoInfo(_Packed):
    """0x12, one servo: health :class:`Health`, angle from its last feedback, commanded target."""

    FORMAT: ClassVar[struct.Struct] = struct.Struct("<BBBbbBBB")
    module_id: int
    role: int
    health: int
    angle: int  # degrees
    target: int  # degrees
    speed: int  # feedback speed, percent of the module's top rate
    current: int  # 100 mA
    fault: int  # actuator fault flags (PROTOCOLS.md 4)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["role"] = Role(self.role).name.lower() if self.role in Role._value2member_map_ else (
            self.role)
        out["health"] = Health(self.health).name.lower() if (
            self.health in Health._value2member_map_) else self.health
        return out


@dataclass(frozen=True, slots=True)
class BuoyancyInfo(_Packed):
    """0x13: ballast tank fill, pump (-1 draining, 0 off, 1 filling), depth from the
    water-pressure sensor, absolute pressure, flow-meter totals."""

    FORMAT: ClassVar[struct.Struct] = struct.Struct("<BbHHII")
    fill_pct: int
    pump: int
    depth_cm: int
    pressure_hpa: int
    water_in_ml: int
    water_out_ml: int


@dataclass(frozen=True, slots=True)
class CanNodeInfo(_Packed):
    """One CAN node: module ID (0 main controller, 0xFF another node), state
    (0 error-active, 1 error-passive, 2 bus-off), TEC, REC, bus-off count."""

    FORMAT: ClassVar[struct.Struct] = struct.Struct("<BBHHH")
    module_id: int
    state: int
    tec: int
    rec: int
    bus_offs: int

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = ("error-active", "error-passive", "bus-off")[self.state] if (
            self.state < 3) else self.state
        return out


_CAN_HEAD = struct.Struct("<IIIIB")


@dataclass(frozen=True, slots=True)
class CanErrorInfo:
    """0x14: bus time (ms), frames, error frames, error rate (ppm of all attempts), nodes."""

    bus_ms: int
    frames: int
    error_frames: int
    error_ppm: int
    nodes: tuple[CanNodeInfo, ...]

    def pack(self) -> bytes:
        head = _CAN_HEAD.pack(self.bus_ms, self.frames, self.error_frames, self.error_ppm,
                              len(self.nodes))
        return head + b"".join(n.pack() for n in self.nodes)

    def node(self, module_id: int) -> CanNodeInfo | None:
        return next((n for n in self.nodes if n.module_id == module_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {"bus_ms": self.bus_ms, "frames": self.frames, "error_frames": self.error_frames,
                "error_ppm": self.error_ppm, "nodes": [n.as_dict() for n in self.nodes]}


Result = RobotInfo | tuple[ServoInfo, ...] | BuoyancyInfo | CanErrorInfo | CommandResult


def encode_result(result: Result) -> bytes:
    """The data of a query result: status 0x00, then the fields."""
    if isinstance(result, tuple):  # servo info
        if len(result) > 0xFF:
            raise FieldValueError(NAME, "servos", f"{len(result)} entries do not fit a count byte")
        body = bytes((len(result),)) + b"".join(s.pack() for s in result)
    else:
        body = result.pack()
    return b"\x00" + body


def _need(data: bytes, size: int, field: str) -> None:
    if len(data) != size:
        raise LengthError(NAME, field, f"expected {size} bytes, got {len(data)}", data)


def decode_result(sub: int, data: bytes) -> Result:
    """The fields of a query result's data (status byte included); FrameError if malformed."""
    if len(data) < 2:
        raise LengthError(NAME, "result", f"a status byte and fields, got {len(data)} bytes", data)
    if data[0] != 0:
        raise FieldValueError(NAME, "status", f"result status 0x{data[0]:02x}", data)
    body = bytes(data[1:])
    if sub == SubCommand.QUERY_ROBOT_INFO:
        _need(body, RobotInfo.FORMAT.size, "robot info")
        info: RobotInfo = RobotInfo.unpack(body)
        return info
    if sub == SubCommand.QUERY_SERVO_INFO:
        n = body[0]
        _need(body, 1 + n * ServoInfo.FORMAT.size, "servo info")
        return tuple(ServoInfo.unpack(body, 1 + k * ServoInfo.FORMAT.size) for k in range(n))
    if sub == SubCommand.QUERY_BUOYANCY_INFO:
        _need(body, BuoyancyInfo.FORMAT.size, "buoyancy info")
        buoy: BuoyancyInfo = BuoyancyInfo.unpack(body)
        return buoy
    if sub == SubCommand.QUERY_CAN_ERROR_RATE:
        if len(body) < _CAN_HEAD.size:
            _need(body, _CAN_HEAD.size, "CAN error rate")
        ms, frames, errors, ppm, n = _CAN_HEAD.unpack_from(body)
        size = CanNodeInfo.FORMAT.size
        _need(body, _CAN_HEAD.size + n * size, "CAN error rate")
        nodes = tuple(CanNodeInfo.unpack(body, _CAN_HEAD.size + k * size) for k in range(n))
        return CanErrorInfo(ms, frames, errors, ppm, nodes)
    if sub in COMMAND_RESULT_SUBS:
        return decode_command_result(sub, body)
    raise FieldValueError(NAME, "sub", f"0x{sub:02x} is not a query with a result")


def result_frame(request: ActionFrame, data: bytes) -> ActionFrame:
    """The result frame answering ``request`` (type T + 0x10) with ``data``."""
    return ActionFrame(request.machine, int(request.type) + ANSWER_OFFSET, request.sub, data)


def is_result_to(frame: ActionFrame, request: ActionFrame) -> bool:
    """True for a query result (not the one-byte answer) to ``request``."""
    return (int(request.type) in REQUEST_TYPES
            and int(frame.type) == int(request.type) + ANSWER_OFFSET
            and frame.machine == request.machine and frame.sub == request.sub
            and len(frame.data) >= 2)
