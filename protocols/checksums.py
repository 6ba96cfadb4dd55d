"""Checksums a frame description can name: ``sum8``, ``xor8`` and every crcmod CRC.

This is the one checksum table: :mod:`fwbridge.protocols.crc` offers its
CRC-16s as the action frame's presets (the same functions); descriptions
may use any width crcmod knows (8, 16, 24, 32, 64 bits). Names
are matched the way crcmod matches them (case, dashes and a leading ``crc``
do not matter), and the common spelling with the width, ``crc-16-modbus``,
finds crcmod's ``modbus`` too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, reduce
from operator import xor
from typing import Any

from fwbridge.protocols.errors import ConfigError

__all__ = ["Algorithm", "algorithm", "algorithm_names", "sum8", "xor8"]

Func = Callable[[bytes | bytearray | memoryview], int]


def sum8(data: bytes | bytearray | memoryview) -> int:
    """Sum of the bytes modulo 256 (the seed firmware's ``checkout``)."""
    return sum(data) & 0xFF


def xor8(data: bytes | bytearray | memoryview) -> int:
    """XOR of the bytes."""
    return reduce(xor, data, 0)


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One checksum: its canonical name, width in bits, CRC parameters and function.

    ``kind`` is ``"sum8"``, ``"xor8"`` or ``"crc"``; the CRC fields are 0 for
    the other two. ``check`` is the value over ``b"123456789"``.
    """

    name: str
    kind: str
    width: int
    poly: int
    reverse: bool
    init: int
    xor_out: int
    check: int
    func: Func

    @property
    def size(self) -> int:
        """Bytes the check takes on the wire."""
        return self.width // 8


def _simplify(name: str) -> str:
    key = name.lower().replace("-", "").replace(" ", "").replace("_", "")
    return key[3:] if key.startswith("crc") else key


def _table() -> list[dict[str, Any]]:
    import crcmod.predefined  # on first CRC: sum-8 frames (the CLI's start) need none

    # crcmod has no public listing of its table; this attribute holds it in 1.7.
    table: list[dict[str, Any]] = getattr(crcmod.predefined, "_crc_definitions", [])
    return table


def algorithm_names(*, width: int | None = None, kind: str | None = None) -> tuple[str, ...]:
    """Every name a description may give, canonical spellings only, in the table's order.

    ``width`` (bits) and ``kind`` (``"sum8"``, ``"xor8"``, ``"crc"``) keep only
    those algorithms (``width=16, kind="crc"``: the action frame's presets).
    """
    rows = [("sum8", "sum8", 8), ("xor8", "xor8", 8),
            *((d["name"], "crc", d["poly"].bit_length() - 1) for d in _table())]
    return tuple(n for n, k, w in rows
                 if (width is None or w == width) and (kind is None or k == kind))


@cache
def algorithm(name: str) -> Algorithm:
    """The checksum called ``name``; :class:`ConfigError` when there is none.

    Every spelling of one algorithm gives the same object (one function per
    checksum, whoever asks).
    """
    key = _simplify(name)
    if key in ("sum8", "xor8"):
        return _algorithm(key)
    found = None
    for d in _table():
        names = (_simplify(d["name"]), d["identifier"].lower())
        if key in names:
            found = d
            break
    if found is None:  # "crc-16-modbus" -> "modbus", "crc-32-bzip2" -> "32bzip2" stays
        for d in _table():
            width = str(d["poly"].bit_length() - 1)
            if key.startswith(width) and _simplify(d["name"]) == key[len(width):]:
                found = d
                break
    if found is None:
        raise ConfigError(f"unknown checksum algorithm {name!r}; choose sum8, xor8 or one "
                          f"of crcmod's: {', '.join(algorithm_names()[2:])}")
    return _algorithm(found["name"])


@cache
def _algorithm(canonical: str) -> Algorithm:
    if canonical in ("sum8", "xor8"):
        func = sum8 if canonical == "sum8" else xor8
        return Algorithm(canonical, canonical, 8, 0, False, 0, 0, func(b"123456789"), func)
    found = next(d for d in _table() if d["name"] == canonical)
    width = found["poly"].bit_length() - 1
    import crcmod

    fn: Func = crcmod.mkCrcFun(found["poly"], initCrc=found["init"], rev=found["reverse"],
                               xorOut=found["xor_out"])
    return Algorithm(found["name"], "crc", width, found["poly"] & ((1 << width) - 1),
                     bool(found["reverse"]), found["init"], found["xor_out"], found["check"], fn)
