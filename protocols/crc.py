"""CRC-16 presets for the action frame, from crcmod's predefined table.

A link chooses its CRC by name (``crc-ccitt-false`` by default, PROTOCOLS.md
3). Names are looked up the way crcmod does it (case, dashes and a leading
``crc`` do not matter; crcmod's identifiers such as ``CrcCcittFalse`` work
too), but only 16-bit definitions are offered: the frame's CRC field has two
bytes. The functions come from ``crcmod.mkCrcFun``, which runs crcmod's C
extension when it is built (see :data:`USING_C_EXTENSION`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import crcmod
import crcmod.predefined

from fwbridge.protocols.errors import ConfigError

__all__ = [
    "DEFAULT_CRC",
    "USING_C_EXTENSION",
    "CrcFunc",
    "CrcPreset",
    "crc16",
    "crc_function",
    "preset",
    "preset_names",
]

DEFAULT_CRC = "crc-ccitt-false"

CrcFunc = Callable[[bytes | bytearray | memoryview], int]

try:  # crcmod keeps this flag in its inner module
    from crcmod.crcmod import _usingExtension as USING_C_EXTENSION
except ImportError:  # pragma: no cover - layout of another crcmod release
    USING_C_EXTENSION = False


@dataclass(frozen=True, slots=True)
class CrcPreset:
    """One crcmod predefined CRC-16: its parameters and its function."""

    name: str
    poly: int
    reverse: bool
    init: int
    xor_out: int
    check: int  # CRC of b"123456789", as crcmod's table gives it
    func: CrcFunc


def _simplify(name: str) -> str:
    # Same normalisation as crcmod.predefined, so every spelling crcmod takes works.
    key = name.lower().replace("-", "").replace(" ", "")
    return key[3:] if key.startswith("crc") else key


def _definitions() -> list[dict[str, Any]]:
    # crcmod has no public listing of its table; this attribute holds it in 1.7.
    table: list[dict[str, Any]] = getattr(crcmod.predefined, "_crc_definitions", [])
    return [d for d in table if 1 << 16 <= d["poly"] < 1 << 17]


_BY_KEY: dict[str, dict[str, Any]] = {}
for _d in _definitions():
    _BY_KEY[_simplify(_d["name"])] = _d
    _BY_KEY[_d["identifier"]] = _d


def preset_names() -> tuple[str, ...]:
    """The names of every selectable CRC-16, in crcmod's order."""
    return tuple(d["name"] for d in _definitions())


def preset(name: str = DEFAULT_CRC) -> CrcPreset:
    """The CRC-16 preset called ``name``; :class:`ConfigError` lists the choices."""
    if not isinstance(name, str):
        raise ConfigError(f"CRC name must be a string, got {name!r}")
    return _preset(name)


@cache
def _preset(name: str) -> CrcPreset:
    d = _BY_KEY.get(_simplify(name)) or _BY_KEY.get(name)
    if d is None:
        raise ConfigError(
            f"unknown CRC-16 preset {name!r}; choose one of: {', '.join(preset_names())}"
        )
    func: CrcFunc = crcmod.mkCrcFun(d["poly"], initCrc=d["init"], rev=d["reverse"],
                                    xorOut=d["xor_out"])
    return CrcPreset(d["name"], d["poly"], bool(d["reverse"]), d["init"], d["xor_out"],
                     d["check"], func)


def crc_function(name: str = DEFAULT_CRC) -> CrcFunc:
    """``data -> int`` for the preset called ``name`` (accepts bytes, bytearray, memoryview)."""
    return preset(name).func


def crc16(data: bytes | bytearray | memoryview, name: str = DEFAULT_CRC) -> int:
    """The CRC-16 of ``data`` with the preset called ``name``."""
    return preset(name).func(data)
