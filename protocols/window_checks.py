"""The check of many windows of one buffer at once, in time linear in the buffer.

A receiver judges every header position as a candidate. Checking each
candidate's span directly costs the span: a flood of false headers (a
header every 2 bytes) against a 4 KiB frame is 2 000 checksum bytes per
input byte. Here every check is a difference of two prefix values, so the
whole buffer is read once and each window then costs O(1) (O(log length)
for windows of different lengths):

- sum-8: prefix sums modulo 256, ``S[e] - S[s]``;
- XOR-8: prefix XORs, ``X[e] ^ X[s]``;
- CRC: a CRC is affine over GF(2). With ``M`` the register's step on a zero
  byte and ``R[p]`` the zero-initialised register after the buffer's first
  ``p`` bytes, the zero-initialised register of ``buf[s:e]`` is
  ``R[e] ^ M**(e - s) (R[s])``, and the CRC is that XOR the CRC of
  ``e - s`` zero bytes (init and final XOR, a constant per length). ``R`` is
  computed a block of :data:`BLOCK` bytes at a time: per-position tables and
  a running XOR inside each block, a doubling scan across blocks; a linear
  map on the register is applied as one table gather per register byte.

:data:`~fwbridge.protocols.stream_accounting.WORK` counts what the checks
read (buffer bytes plus windows, and the bytes a receiver's direct checks
take): the tests hold it to a multiple of the input, whatever the stream.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.fixed_checks import crc_position_tables
from fwbridge.protocols.stream_accounting import WORK

__all__ = ["BLOCK", "WindowChecks", "window_checks"]

#: Bytes per block of the prefix registers (a power of 2).
BLOCK = 128
_SHIFT = BLOCK.bit_length() - 1


_U64 = np.uint64


def _dtype(width: int) -> np.dtype[Any]:
    """The register's numpy type (little-endian: byte j of a value is its j-th byte)."""
    return np.dtype("<u2" if width <= 16 else "<u4" if width <= 32 else "<u8")


class _Linear:
    """A linear map on a ``width``-bit register: one 256-entry table per register byte."""

    def __init__(self, columns: list[int], width: int) -> None:
        self.columns = columns  # the image of each bit
        self.width = width
        nb = width // 8
        self.dtype = _dtype(width)
        v = np.arange(256, dtype=_U64)
        tab = np.zeros((nb, 256), dtype=_U64)
        for j in range(nb):
            for b in range(8):
                tab[j] ^= np.where((v >> _U64(b)) & _U64(1), _U64(columns[8 * j + b]), _U64(0))
        self.table = tab.astype(self.dtype)

    def __call__(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        x = np.ascontiguousarray(x, dtype=self.dtype)
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

    def then(self, other: _Linear) -> _Linear:
        """``other`` after ``self``."""
        return _Linear([other.apply_int(c) for c in self.columns], self.width)

    def inverse(self) -> _Linear:
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
        return _Linear([sum(((inv[i] >> j) & 1) << i for i in range(w)) for j in range(w)], w)


class WindowChecks:
    """The check values of windows ``[s, e)`` of one buffer (see the module's text)."""

    def __init__(self, algo: Algorithm) -> None:
        self.algo = algo
        self.kind = algo.kind
        if self.kind != "crc":
            return
        w = algo.width
        self.nb = w // 8
        mask = (1 << w) - 1
        table, _ = crc_position_tables(algo, 1)  # the one-byte table: step(0, v)
        t1 = [int(x) for x in table[:256]]

        def zero_step(r: int) -> int:
            if algo.reverse:
                return (r >> 8) ^ t1[r & 0xFF]
            return ((r << 8) ^ t1[(r >> (w - 8)) & 0xFF]) & mask

        m = _Linear([zero_step(1 << b) for b in range(w)], w)
        self.pow2 = [m]  # M ** (2 ** k)
        self.powers: dict[int, _Linear] = {}
        ptab, _ = crc_position_tables(algo, BLOCK)
        self.dt = _dtype(w)
        self.ptab = ptab.astype(self.dt)
        self.pos = np.arange(BLOCK, dtype=np.uint16) << 8
        self.mblock = self.power(BLOCK)
        inv = m.inverse()
        # M ** -d for d = 1..BLOCK, as one flat table: [d][register byte][value]
        tabs = np.zeros((BLOCK + 1, self.nb, 256), self.dt)
        tabs[1] = inv.table
        for d in range(2, BLOCK + 1):  # M ** -d maps each entry of M ** -(d - 1) once more
            tabs[d] = inv(tabs[d - 1].reshape(-1)).reshape(self.nb, 256)
        self.inv_tab = tabs.reshape(-1)
        self.inv_rows = (BLOCK - np.arange(BLOCK, dtype=np.intp)) * (self.nb << 8)
        # The affine part: crc(zeros(L)) = xor_out ^ M**L (start), start the register's
        # state before any byte.
        self.start = algo.func(b"") ^ algo.xor_out

    def power(self, n: int) -> _Linear:
        """``M ** n`` (cached)."""
        got = self.powers.get(n)
        if got is None:
            out: _Linear | None = None
            k = 0
            while n >> k:
                while k >= len(self.pow2):
                    self.pow2.append(self.pow2[-1].then(self.pow2[-1]))
                if n >> k & 1:
                    out = self.pow2[k] if out is None else out.then(self.pow2[k])
                k += 1
            got = out if out is not None else _Linear([1 << b for b in range(self.algo.width)],
                                                      self.algo.width)
            self.powers[n] = got
        return got

    def _registers(self, a: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[
            Any, Any]:
        """``R[p]`` for each ``p`` in ``at`` (0 <= p <= len(a))."""
        n = len(a)
        nblk = n // BLOCK + 1
        padded = np.zeros(nblk * BLOCK, dtype=np.uint16)
        padded[:n] = a
        # y[q, u]: the first u bytes of block q, as a term of the register after the block
        # (blocks are rows: the gather and the running XOR read memory in order)
        y = np.zeros((nblk, BLOCK + 1), dtype=self.dt)
        np.bitwise_xor.accumulate(self.ptab[padded.reshape(nblk, BLOCK) | self.pos], axis=1,
                                  out=y[:, 1:])
        # R at each block's end: x[q] = M**B x[q-1] ^ y[q, B], by a doubling scan
        ends = y[:, -1].copy()
        d = 1
        while d < nblk:
            ends[d:] ^= self.power(BLOCK * d)(ends[:-d])
            d *= 2
        starts = np.zeros(nblk, dtype=self.dt)
        starts[1:] = ends[:-1]
        # R[qB + u] = M**-(B - u) (M**B R[qB] ^ y[q, u])
        if 2 * len(at) > n:
            # as many positions as bytes (a flood): every R by whole blocks, no index maths
            x = y[:, :BLOCK] ^ self.mblock(starts)[:, None]
            base = self.inv_rows
        else:
            q = at >> _SHIFT
            u = at & (BLOCK - 1)
            x = self.mblock(starts)[q]
            x ^= y.reshape(-1)[q * (BLOCK + 1) + u]
            base = (BLOCK - u) * (self.nb << 8)
        xb = x.view(np.uint8).reshape(*x.shape, x.itemsize)  # byte j of each register
        inv = self.inv_tab
        out: np.ndarray[Any, Any] = inv[base + xb[..., 0]]
        for j in range(1, self.nb):
            base = base + 256
            out ^= inv[base + xb[..., j]]
        if out.ndim == 2:
            picked: np.ndarray[Any, Any] = out.reshape(-1)[at]
            return picked
        return out

    def values(self, buf: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
               ends: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The check value (uint64) of each window ``buf[starts[k]:ends[k]]``."""
        WORK.steps += len(buf) + len(starts)
        starts = np.asarray(starts, dtype=np.intp)
        ends = np.asarray(ends, dtype=np.intp)
        if not len(starts):
            return np.zeros(0, dtype=_U64)
        if self.kind == "sum8":
            s = np.zeros(len(buf) + 1, dtype=np.uint8)
            np.cumsum(buf, dtype=np.uint8, out=s[1:])  # wraps at 256, as sum-8 does
            sums: np.ndarray[Any, Any] = (s[ends] - s[starts]).astype(_U64)
            return sums
        if self.kind == "xor8":
            x = np.zeros(len(buf) + 1, dtype=np.uint8)
            np.bitwise_xor.accumulate(buf, out=x[1:])
            xors: np.ndarray[Any, Any] = (x[ends] ^ x[starts]).astype(_U64)
            return xors
        regs = self._registers(buf, np.concatenate([starts, ends]))
        rs, re = regs[:len(starts)], regs[len(starts):]
        lengths = ends - starts
        first = int(lengths[0])
        dt = self.dt.type
        if (lengths == first).all():  # one length: one map, one constant
            got = re ^ self.power(first)(rs)
            got ^= dt(self.algo.func(bytes(first)))
            same: np.ndarray[Any, Any] = got.astype(_U64)
            return same
        # M**L of each window by its length's bits, on the register and on the start
        x = rs ^ dt(self.start)
        top = int(lengths.max()).bit_length()
        self.power(1 << max(top - 1, 0))  # the squares up to the longest window
        for k, mp in enumerate(self.pow2[:top]):
            sel = np.flatnonzero((lengths >> k) & 1)
            if len(sel):
                x[sel] = mp(x[sel])
        x ^= re
        x ^= dt(self.algo.xor_out)
        each: np.ndarray[Any, Any] = x.astype(_U64)
        return each


@cache
def window_checks(algo: Algorithm) -> WindowChecks:
    """The :class:`WindowChecks` of ``algo`` (one per algorithm: its tables take a moment)."""
    return WindowChecks(algo)
