"""Data of the fish's system commands (PROTOCOLS.md 6, "fish commands").

Status (0x01), user configuration (0x33 write, 0x36 read), stored action
commands (0x37), firmware upgrade over the action link (0x35, IAP) and
error codes (0x41). The patent names these sub-commands and nothing more;
every layout here is a **choice**, little-endian like the rest.

Results follow :mod:`fwbridge.protocols.families.fish_payloads`: a status byte 0x00,
then the fields, so a result is never one byte long. Firmware images are
``b"FWFI"``, version u16 (major << 8 | minor), then the body: the version a
bank reports is read from its image.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from fwbridge.protocols.crc import crc16
from fwbridge.protocols.errors import FieldValueError, LengthError
from fwbridge.protocols.families.fish_actions import action_code, action_name

__all__ = [
    "COMMAND_RESULT_SUBS",
    "CONFIG_VERSION",
    "DEFAULT_CONFIG",
    "IMAGE_MAGIC",
    "MAX_IMAGE",
    "ActionsInfo",
    "ErrorCode",
    "ErrorCodes",
    "ErrorRecord",
    "FishMode",
    "IapOp",
    "IapResult",
    "IapStatus",
    "Scene",
    "SceneOp",
    "SceneSensor",
    "StatusInfo",
    "StoredAction",
    "UserConfig",
    "decode_command_result",
    "decode_iap",
    "iap_begin",
    "iap_chunk",
    "iap_op",
    "image_version",
    "make_image",
    "version_text",
]

NAME = "fish command"
IMAGE_MAGIC = b"FWFI"
MAX_IMAGE = 256 * 1024  # bytes: the simulated bank size
CONFIG_VERSION = 1
COMMAND_RESULT_SUBS = frozenset({0x01, 0x35, 0x36, 0x37, 0x41})


class FishMode(IntEnum):
    """What the main controller is doing (0x01 ``mode``)."""

    IDLE = 0  # 0x3A: every servo holds where it is, pump off
    FREE = 1  # 0x03 / 0x39: free swimming (scenes, avoidance, random actions)
    STILL = 2  # 0x02: every servo to 0° and held, the tank keeps its fill
    CAN_FLASH = 3  # 0x42: no servo commands; only flash commands answered


def version_text(version: int) -> str:
    return f"{version >> 8}.{version & 0xFF}"


# -- 0x01 status ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StatusInfo:
    """0x01, 16 bytes: mode (:class:`FishMode`), running (0 none, 1 user group, 2 free
    action), active firmware bank (0 A, 1 B), firmware version, boots since the flash
    was made, error records held, stored action groups, modules in CAN flash mode
    (bit k-1: module k), uptime since the last boot."""

    FORMAT = struct.Struct("<BBBHHBBBI")
    mode: int
    running: int
    bank: int
    version: int
    boots: int
    errors: int
    stored_groups: int
    flashing_modules: int
    uptime_ms: int

    def pack(self) -> bytes:
        return self.FORMAT.pack(self.mode, self.running, self.bank, self.version, self.boots,
                                self.errors, self.stored_groups, self.flashing_modules,
                                self.uptime_ms)

    def as_dict(self) -> dict[str, Any]:
        mode = FishMode(self.mode).name.lower() if self.mode in FishMode._value2member_map_ \
            else self.mode
        return {"mode": mode, "running": self.running, "bank": "AB"[self.bank & 1],
                "version": version_text(self.version), "boots": self.boots,
                "errors": self.errors, "stored_groups": self.stored_groups,
                "flashing_modules": [k + 1 for k in range(8) if self.flashing_modules >> k & 1],
                "uptime_ms": self.uptime_ms}


# -- 0x33 / 0x36 user configuration ------------------------------------------------------
class SceneSensor(IntEnum):
    """What a scene compares (units of its threshold)."""

    SONAR_LEFT_MM = 0
    SONAR_RIGHT_MM = 1
    DEPTH_CM = 2
    WATER_INGRESS = 3  # 0 / 1
    BATTERY_PCT = 4
    LIGHT_LEFT_LUX = 5  # the side light sensors
    LIGHT_RIGHT_LUX = 6
    LASER = 7  # the laser receiver lit (0..3), -1 none


class SceneOp(IntEnum):
    BELOW = 0  # value < threshold
    ABOVE = 1  # value > threshold
    EQUAL = 2  # value == threshold (the laser receiver lit)


_SCENE = struct.Struct("<BBiB")
_CONFIG_HEAD = struct.Struct("<BHHBB")
_OPS = {"<": SceneOp.BELOW, ">": SceneOp.ABOVE, "=": SceneOp.EQUAL}
_OP_TEXT = {v: k for k, v in _OPS.items()}


@dataclass(frozen=True, slots=True)
class Scene:
    """A scene for free action: when ``sensor op threshold`` holds, run ``action``
    (a free-action code of :func:`~fwbridge.protocols.families.fish_actions.action_code`)."""

    sensor: int
    op: int
    threshold: int
    action: int

    def matches(self, value: float) -> bool:
        if self.op == SceneOp.EQUAL:
            return value == self.threshold
        return value < self.threshold if self.op == SceneOp.BELOW else value > self.threshold


@dataclass(frozen=True, slots=True)
class UserConfig:
    """The user configuration (0x33 writes it, 0x36 reads it back, the flash keeps it).

    ``version u8 (1), free period u16 (ms between free-mode decisions), avoid
    distance u16 (mm: a sonar below it turns the fish away), stored-group
    probability u8 (% a drawn stored group is kept), scene count u8, then 7
    bytes per scene: sensor u8 (:class:`SceneSensor`), op u8 (0 below, 1 above, 2 equal),
    threshold int32, action u8``. Scenes are tried in order; the first that
    matches runs its action (the patent's scene mode, highest priority).
    """

    free_period_ms: int = 100
    avoid_mm: int = 600
    stored_probability_pct: int = 30
    scenes: tuple[Scene, ...] = field(default_factory=tuple)

    def pack(self) -> bytes:
        _check_range("free_period_ms", self.free_period_ms, 10, 0xFFFF)
        _check_range("avoid_mm", self.avoid_mm, 0, 0xFFFF)
        _check_range("stored_probability_pct", self.stored_probability_pct, 0, 100)
        if len(self.scenes) > 32:
            raise FieldValueError(NAME, "scenes", f"{len(self.scenes)} scenes; at most 32")
        out = [_CONFIG_HEAD.pack(CONFIG_VERSION, self.free_period_ms, self.avoid_mm,
                                 self.stored_probability_pct, len(self.scenes))]
        for k, s in enumerate(self.scenes):
            if s.sensor not in SceneSensor._value2member_map_:
                raise FieldValueError(NAME, f"scenes[{k}].sensor", f"unknown sensor {s.sensor}")
            if s.op not in SceneOp._value2member_map_:
                raise FieldValueError(NAME, f"scenes[{k}].op", f"unknown op {s.op}")
            _check_range(f"scenes[{k}].threshold", s.threshold, -(1 << 31), (1 << 31) - 1)
            _check_range(f"scenes[{k}].action", s.action, 0, 0xFE)
            out.append(_SCENE.pack(s.sensor, s.op, s.threshold, s.action))
        return b"".join(out)

    @classmethod
    def unpack(cls, data: bytes) -> UserConfig:
        if len(data) < _CONFIG_HEAD.size:
            raise LengthError(NAME, "user config", f"at least {_CONFIG_HEAD.size} bytes, got "
                              f"{len(data)}", data)
        version, period, avoid, prob, n = _CONFIG_HEAD.unpack_from(data)
        if version != CONFIG_VERSION:
            raise FieldValueError(NAME, "user config version", f"{version}, expected "
                                  f"{CONFIG_VERSION}", data[:1])
        if len(data) != _CONFIG_HEAD.size + n * _SCENE.size:
            raise LengthError(NAME, "user config", f"{n} scenes need "
                              f"{_CONFIG_HEAD.size + n * _SCENE.size} bytes, got {len(data)}",
                              data)
        scenes = tuple(Scene(*_SCENE.unpack_from(data, _CONFIG_HEAD.size + k * _SCENE.size))
                       for k in range(n))
        cfg = cls(period, avoid, prob, scenes)
        cfg.pack()  # the same range checks as writing
        return cfg

    def as_dict(self) -> dict[str, Any]:
        return {"free_period_ms": self.free_period_ms, "avoid_mm": self.avoid_mm,
                "stored_probability_pct": self.stored_probability_pct,
                "scenes": [{"sensor": SceneSensor(s.sensor).name.lower(),
                            "op": _OP_TEXT[SceneOp(s.op)],
                            "threshold": s.threshold, "action": action_name(s.action)}
                           for s in self.scenes]}

    @classmethod
    def from_dict(cls, d: Any) -> UserConfig:
        """From :meth:`as_dict`'s shape (e.g. a JSON file); FieldValueError names the field."""
        if not isinstance(d, dict):
            raise FieldValueError(NAME, "user config", "expected an object")
        unknown = set(d) - {"free_period_ms", "avoid_mm", "stored_probability_pct", "scenes"}
        if unknown:
            raise FieldValueError(NAME, "user config", f"unknown keys {sorted(unknown)}")
        scenes = []
        for k, s in enumerate(d.get("scenes", [])):
            where = f"scenes[{k}]"
            if not isinstance(s, dict) or set(s) != {"sensor", "op", "threshold", "action"}:
                raise FieldValueError(NAME, where, "expected sensor, op, threshold, action")
            try:
                sensor = SceneSensor[str(s["sensor"]).upper().replace("-", "_")]
            except KeyError:
                raise FieldValueError(NAME, f"{where}.sensor", f"{s['sensor']!r}: one of "
                                      f"{', '.join(x.name.lower() for x in SceneSensor)}") from None
            if s["op"] not in _OPS:
                raise FieldValueError(NAME, f"{where}.op", f"{s['op']!r}: '<', '>' or '='")
            action = action_code(str(s["action"]))
            if action == 0xFF:
                raise FieldValueError(NAME, f"{where}.action", f"unknown action {s['action']!r}")
            scenes.append(Scene(int(sensor), int(_OPS[s["op"]]), _int(s["threshold"],
                                                                      f"{where}.threshold"),
                                action))
        cfg = cls(_int(d.get("free_period_ms", 100), "free_period_ms"),
                  _int(d.get("avoid_mm", 600), "avoid_mm"),
                  _int(d.get("stored_probability_pct", 30), "stored_probability_pct"),
                  tuple(scenes))
        cfg.pack()
        return cfg


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldValueError(NAME, name, f"not an integer: {value!r}")
    return value


def _check_range(name: str, value: int, lo: int, hi: int) -> None:
    if not isinstance(value, int) or not lo <= value <= hi:
        raise FieldValueError(NAME, name, f"{value!r} is out of range {lo}..{hi}")


#: The scenes the fish had built in: water ingress or low battery -> surface, deeper
#: than 2 m -> ascend (action codes 7 surface, 5 ascend).
DEFAULT_CONFIG = UserConfig(scenes=(
    Scene(SceneSensor.WATER_INGRESS, SceneOp.ABOVE, 0, 7),
    Scene(SceneSensor.DEPTH_CM, SceneOp.ABOVE, 200, 5),
    Scene(SceneSensor.BATTERY_PCT, SceneOp.BELOW, 15, 7),
))


# -- 0x37 action commands -------------------------------------------------------------------
_SLOT = struct.Struct("<BH")


@dataclass(frozen=True, slots=True)
class ActionsInfo:
    """0x37 without data: kind 0, count u8, then per stored group: steps u8, bytes u16."""

    groups: tuple[tuple[int, int], ...]  # (steps, bytes) per slot

    def pack(self) -> bytes:
        return bytes((0, len(self.groups))) + b"".join(_SLOT.pack(min(s, 255), n)
                                                       for s, n in self.groups)

    def as_dict(self) -> dict[str, Any]:
        return {"groups": [{"slot": k, "steps": s, "bytes": n}
                           for k, (s, n) in enumerate(self.groups)]}


@dataclass(frozen=True, slots=True)
class StoredAction:
    """0x37 with a slot u8 as data: kind 1, slot u8, then the group's payload (3.4)."""

    slot: int
    payload: bytes

    def pack(self) -> bytes:
        return bytes((1, self.slot)) + self.payload

    def as_dict(self) -> dict[str, Any]:
        return {"slot": self.slot, "payload": self.payload.hex()}


# -- 0x41 error codes -------------------------------------------------------------------------
class ErrorCode(IntEnum):
    SERVO_SILENT = 1  # no CAN feedback for the silence timeout
    SERVO_FAULT = 2  # a module reports fault flags
    WATER_INGRESS = 3
    IAP_REJECTED = 4  # an upgrade was refused (module: the IapStatus)
    FLASH_WRITE = 5  # the flash file could not be written


_ERR = struct.Struct("<BBI")


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    code: int
    module: int  # module ID (0: the main controller) or detail
    time_ms: int  # uptime when it happened


@dataclass(frozen=True, slots=True)
class ErrorCodes:
    """0x41 (read types): count u8, then 6 bytes per record, oldest first: code u8
    (:class:`ErrorCode`), module u8, uptime ms u32. The newest 16 are kept."""

    records: tuple[ErrorRecord, ...]

    def pack(self) -> bytes:
        return bytes((len(self.records),)) + b"".join(
            _ERR.pack(r.code, r.module, r.time_ms & 0xFFFFFFFF) for r in self.records)

    def as_dict(self) -> dict[str, Any]:
        return {"errors": [{"code": ErrorCode(r.code).name.lower()
                            if r.code in ErrorCode._value2member_map_ else r.code,
                            "module": r.module, "time_ms": r.time_ms} for r in self.records]}


# -- 0x35 IAP -------------------------------------------------------------------------------------
class IapOp(IntEnum):
    BEGIN = 1  # total u32, chunk count u16, chunk size u16, image CRC-32 u32
    CHUNK = 2  # index u16, CRC-16 u16 (of the payload), payload
    END = 3  # verify the whole image, write the other bank, switch, reboot
    ABORT = 4  # drop the upgrade in progress
    RESET = 5  # reboot now (also leaves CAN flash mode)


class IapStatus(IntEnum):
    OK = 0
    BAD_CHUNK_CRC = 1
    MISSING_CHUNK = 2  # a chunk index past the next expected one, or END with chunks missing
    WRONG_TOTAL = 3  # more bytes or chunks than BEGIN declared, or fewer at END
    IMAGE_CRC = 4  # the whole image's CRC-32 differs from BEGIN's
    NOT_STARTED = 5  # CHUNK or END without BEGIN (e.g. after a power loss)
    BAD_IMAGE = 6  # no FWFI header, or larger than a bank
    BAD_REQUEST = 7  # malformed IAP data


_BEGIN = struct.Struct("<BIHHI")
_CHUNK = struct.Struct("<BHH")
_IAP_RESULT = struct.Struct("<BBHHB")


def iap_op(op: IapOp) -> bytes:
    return bytes((op,))


def iap_begin(image: bytes, chunk_size: int) -> bytes:
    chunks = -(-len(image) // chunk_size)
    return _BEGIN.pack(IapOp.BEGIN, len(image), chunks, chunk_size, zlib.crc32(image))


def iap_chunk(index: int, payload: bytes) -> bytes:
    return _CHUNK.pack(IapOp.CHUNK, index, crc16(payload)) + payload


def decode_iap(data: bytes) -> tuple[IapOp, tuple[int, ...], bytes]:
    """(op, fields, payload) of 0x35 data; FieldValueError/LengthError when malformed."""
    if not data or data[0] not in IapOp._value2member_map_:
        raise FieldValueError(NAME, "iap op", "unknown or missing IAP operation", data[:1])
    op = IapOp(data[0])
    if op == IapOp.BEGIN:
        if len(data) != _BEGIN.size:
            raise LengthError(NAME, "iap begin", f"{_BEGIN.size} bytes, got {len(data)}", data)
        return op, _BEGIN.unpack(data)[1:], b""
    if op == IapOp.CHUNK:
        if len(data) <= _CHUNK.size:
            raise LengthError(NAME, "iap chunk", f"more than {_CHUNK.size} bytes, got "
                              f"{len(data)}", data)
        return op, _CHUNK.unpack_from(data)[1:], bytes(data[_CHUNK.size:])
    if len(data) != 1:
        raise LengthError(NAME, f"iap {op.name.lower()}", f"1 byte, got {len(data)}", data)
    return op, (), b""


@dataclass(frozen=True, slots=True)
class IapResult:
    """0x35 result, 7 bytes: status u8 (:class:`IapStatus`), op u8, next chunk expected
    u16, firmware version u16 of the active bank, active bank u8."""

    status: int
    op: int
    next_chunk: int
    version: int
    bank: int

    def pack(self) -> bytes:
        return _IAP_RESULT.pack(self.status, self.op, self.next_chunk, self.version, self.bank)

    @property
    def ok(self) -> bool:
        return self.status == IapStatus.OK

    def as_dict(self) -> dict[str, Any]:
        st = IapStatus(self.status).name.lower() if self.status in IapStatus._value2member_map_ \
            else self.status
        return {"status": st, "op": self.op, "next_chunk": self.next_chunk,
                "version": version_text(self.version), "bank": "AB"[self.bank & 1]}


def make_image(version: int, body: bytes) -> bytes:
    """A firmware image: magic, version, body."""
    return IMAGE_MAGIC + struct.pack("<H", version) + body


def image_version(image: bytes) -> int | None:
    """The version of a well-formed image, None otherwise."""
    if len(image) < 6 or image[:4] != IMAGE_MAGIC or len(image) > MAX_IMAGE:
        return None
    version: int = struct.unpack_from("<H", image, 4)[0]
    return version


CommandResult = StatusInfo | UserConfig | ActionsInfo | StoredAction | ErrorCodes | IapResult


def _need(body: bytes, size: int, what: str) -> None:
    if len(body) != size:
        raise LengthError(NAME, what, f"expected {size} bytes, got {len(body)}", body)


def decode_command_result(sub: int, body: bytes) -> CommandResult:
    """The fields of a system command's result (after its status byte)."""
    if sub == 0x01:
        _need(body, StatusInfo.FORMAT.size, "status")
        return StatusInfo(*StatusInfo.FORMAT.unpack(body))
    if sub == 0x36:
        return UserConfig.unpack(body)
    if sub == 0x35:
        _need(body, _IAP_RESULT.size, "iap result")
        return IapResult(*_IAP_RESULT.unpack(body))
    if sub == 0x37:
        if body[:1] == b"\x00" and len(body) >= 2:
            n = body[1]
            _need(body, 2 + n * _SLOT.size, "actions")
            return ActionsInfo(tuple(_SLOT.unpack_from(body, 2 + k * _SLOT.size)
                                     for k in range(n)))
        if body[:1] == b"\x01" and len(body) >= 2:
            return StoredAction(body[1], bytes(body[2:]))
        raise FieldValueError(NAME, "actions kind", "expected 0 (list) or 1 (one group)",
                              body[:1])
    if sub == 0x41:
        n = body[0]
        _need(body, 1 + n * _ERR.size, "error codes")
        return ErrorCodes(tuple(ErrorRecord(*_ERR.unpack_from(body, 1 + k * _ERR.size))
                                for k in range(n)))
    raise FieldValueError(NAME, "sub", f"0x{sub:02x} has no command result")
