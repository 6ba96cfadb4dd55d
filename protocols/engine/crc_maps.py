"""Linear maps on a CRC register over GF(2), applied to many registers at once.

A CRC register's step on a zero byte is linear (``M``); the window checks
(:mod:`~fwbridge.protocols.engine.crc_windows`) apply its powers and inverse to
every candidate's register. A map is held as the image of each bit and
applied as one table gather per register byte (or per 16 bits, for the maps
a flood applies to every candidate).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LinearMap", "register_dtype"]

_U64 = np.uint64


def register_dtype(width: int) -> np.dtype[Any]:
    """The register's numpy type (little-endian: byte j of a value is its j-th byte)."""
    return np.dtype("<u2" if width <= 16 else "<u4" if width <= 32 else "<u8")


class LinearMap:
    """A linear map on a ``width``-bit register: one 256-entry table per register byte."""

    def __init__(self, columns: list[int], width: int) -> None:
        self.columns = columns  # the image of each bit
        self.width = width
        nb = width // 8
        self.dtype = register_dtype(width)
        v = np.arange(256, dtype=_U64)
        tab = np.zeros((nb, 256), dtype=_U64)
        for j in range(nb):
            for b in range(8):
                tab[j] ^= np.where((v >> _U64(b)) & _U64(1), _U64(columns[8 * j + b]), _U64(0))
        self.table = tab.astype(self.dtype)
        self.wide: list[np.ndarray[Any, Any]] | None = None

    def widen(self) -> None:
        """One 65536-entry table per 16 bits of a 16- or 32-bit register (half the
        gathers, 128 or 512 KiB): for the maps a flood applies to every candidate."""
        if self.wide is None and self.width in (16, 32):
            v = np.arange(1 << 16)
            tab = self.table
            self.wide = [tab[j][v & 0xFF] ^ tab[j + 1][v >> 8] for j in range(0, len(tab), 2)]

    def __call__(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        x = np.ascontiguousarray(x, dtype=self.dtype)
        wide = self.wide
        if wide is not None:
            h = x.view(np.uint16).reshape(len(x), len(wide))
            got: np.ndarray[Any, Any] = wide[0][h[:, 0]]
            for j in range(1, len(wide)):
                got ^= wide[j][h[:, j]]
            return got
        # each register byte read through a uint8 view: no shift, mask or index cast
        b = x.view(np.uint8).reshape(len(x), x.itemsize)
        tab = self.table
        out: np.ndarray[Any, Any] = tab[0][b[:, 0]]
        for j in range(1, len(tab)):
            out ^= tab[j][b[:, j]]
        return out

    def apply_int(self, x: int) -> int:
        out = 0
        for b, col in enumerate(self.columns):
            if x >> b & 1:
                out ^= col
        return out

    def then(self, other: LinearMap) -> LinearMap:
        """``other`` after ``self``."""
        return LinearMap([other.apply_int(c) for c in self.columns], self.width)

    def inverse(self) -> LinearMap:
        """Gauss-Jordan over GF(2); a CRC's zero step is invertible (its polynomial has
        the constant term)."""
        w = self.width
        # rows of [A | I] with A[i][j] = bit i of column j
        rows = [sum(((self.columns[j] >> i) & 1) << j for j in range(w)) | (1 << (w + i))
                for i in range(w)]
        for col in range(w):
            piv = next(r for r in range(col, w) if rows[r] >> col & 1)
            rows[col], rows[piv] = rows[piv], rows[col]
            for r in range(w):
                if r != col and rows[r] >> col & 1:
                    rows[r] ^= rows[col]
        inv = [row >> w for row in rows]  # inv[i] bit j: row i of the inverse
        return LinearMap([sum(((inv[i] >> j) & 1) << i for i in range(w)) for j in range(w)], w)
