"""CRC-16 presets for the action frame: the 16-bit CRCs of the one checksum table.

A link chooses its CRC by name (``crc-ccitt-false`` by default, PROTOCOLS.md
3). The table, its name matching (case, dashes and a leading ``crc`` do not
matter; crcmod's identifiers such as ``CrcCcittFalse`` work too) and the
functions are :mod:`fwbridge.protocols.checksums`', the ones descriptions
name; this module offers only the 16-bit CRCs (the frame's CRC field has two
bytes), with the same function objects. They come from ``crcmod.mkCrcFun``,
which runs crcmod's C extension when it is built (see
:data:`USING_C_EXTENSION`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from fwbridge.protocols.checksums import Algorithm, algorithm, algorithm_names
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
    """One predefined CRC-16: its parameters and its function."""

    name: str
    poly: int  # with the x^16 term, as crcmod writes it (0x11021)
    reverse: bool
    init: int
    xor_out: int
    check: int  # CRC of b"123456789", as crcmod's table gives it
    func: CrcFunc

    @classmethod
    def of(cls, algo: Algorithm) -> CrcPreset:
        """The preset of a 16-bit CRC of the checksum table (the same function)."""
        return cls(algo.name, algo.poly | 1 << 16, algo.reverse, algo.init, algo.xor_out,
                   algo.check, algo.func)


def preset_names() -> tuple[str, ...]:
    """The names of every selectable CRC-16, in crcmod's order."""
    return algorithm_names(width=16, kind="crc")


def preset(name: str = DEFAULT_CRC) -> CrcPreset:
    """The CRC-16 preset called ``name``; :class:`ConfigError` lists the choices."""
    if not isinstance(name, str):
        raise ConfigError(f"CRC name must be a string, got {name!r}")
    return _preset(name)


@cache
def _preset(name: str) -> CrcPreset:
    try:
        algo: Algorithm | None = algorithm(name)
    except ConfigError:
        algo = None
    if algo is None or algo.kind != "crc" or algo.width != 16:
        raise ConfigError(
            f"unknown CRC-16 preset {name!r}; choose one of: {', '.join(preset_names())}"
        )
    return CrcPreset.of(algo)


def crc_function(name: str = DEFAULT_CRC) -> CrcFunc:
    """``data -> int`` for the preset called ``name`` (accepts bytes, bytearray, memoryview)."""
    return preset(name).func


def crc16(data: bytes | bytearray | memoryview, name: str = DEFAULT_CRC) -> int:
    """The CRC-16 of ``data`` with the preset called ``name``."""
    return preset(name).func(data)
