"""Hex text <-> bytes for captures pasted from terminals, logs and datasheets.

Accepts ``aa55cd``, ``AA 55 CD``, ``0xAA, 0x55``, ``aa:55``, line breaks and
``#`` comments. Pure functions; errors are :class:`HexTextError` naming the
line and the offending text.
"""

from __future__ import annotations

import re

from fwbridge.protocols.errors import Error

__all__ = ["HexTextError", "looks_like_hex", "parse_hex", "to_hex"]

_SEPARATORS = re.compile(r"[\s,:;\-]+")
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")


class HexTextError(Error, ValueError):
    """Text that is not valid hex: says where and what."""


def parse_hex(text: str, first_line: int = 1) -> bytes:
    """Bytes from hex text; raises :class:`HexTextError` on bad input.

    Lines are independent, so a long text can be parsed a block of whole
    lines at a time; ``first_line`` numbers the block's lines in errors.
    """
    out = bytearray()
    for lineno, line in enumerate(text.splitlines(), first_line):
        line = line.split("#", 1)[0]
        for token in _SEPARATORS.split(line):
            if not token:
                continue
            if token[:2] in ("0x", "0X"):
                token = token[2:]
            bad = next((c for c in token if c not in _HEXDIGITS), None)
            if bad is not None:
                raise HexTextError(f"line {lineno}: {bad!r} is not a hex digit in {token[:20]!r}")
            if len(token) % 2:
                raise HexTextError(
                    f"line {lineno}: odd number of hex digits in {token[:20]!r} "
                    f"({len(token)} digits)"
                )
            out += bytes.fromhex(token)
    return bytes(out)


def looks_like_hex(data: bytes) -> bool:
    """True when ``data`` is plausibly hex text rather than a raw binary capture."""
    if not data:
        return False
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return False
    stripped = "".join(line.split("#", 1)[0] for line in text.splitlines())
    stripped = _SEPARATORS.sub("", stripped.replace("0x", "").replace("0X", ""))
    return bool(stripped) and all(c in _HEXDIGITS for c in stripped)


def to_hex(data: bytes, sep: str = " ") -> str:
    """Lower-case hex with a separator (``aa 55 cd``)."""
    return data.hex(sep) if sep else data.hex()
