"""The CRC of many windows of one buffer at once, by prefix registers.

A CRC is affine over GF(2). With ``M`` the register's step on a zero byte
and ``R[p]`` the zero-initialised register after the buffer's first ``p``
bytes, the zero-initialised register of ``buf[s:e]`` is
``R[e] ^ M**(e - s) (R[s])``, and the CRC is that XOR the CRC of ``e - s``
zero bytes (init and final XOR, a constant per length). ``R`` is computed a
block of :data:`BLOCK` bytes at a time: per-position tables and a running
XOR inside each block, a chain (a doubling scan for many blocks) across
blocks; a linear map on the register (:mod:`~fwbridge.protocols.engine.crc_maps`)
is applied as one table gather per register byte.

A receiver's checks (:meth:`CrcWindows.matches`,
:class:`~fwbridge.protocols.engine.stream_prefix.StreamPrefix`) keep each register
carried to the end of its block (``M**(B - u) R``, blocks aligned on the
stream offset) rather than mapping every byte's register back, and compare
per window: when the check field is in the register's own byte order,
window and field together leave a constant, so a window costs two reads and
one map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.engine.crc_maps import LinearMap, register_dtype
from fwbridge.protocols.engine.fixed_checks import crc_position_tables
from fwbridge.protocols.engine.stream_accounting import WORK

__all__ = ["BLOCK", "CrcWindows"]

#: Bytes per block of the prefix registers (a power of 2).
BLOCK = 128
_SHIFT = BLOCK.bit_length() - 1
#: Blocks up to which the registers at the blocks' starts are chained in Python.
SERIAL_BLOCKS = 256

_U64 = np.uint64


class CrcWindows:
    """The CRCs of windows ``[s, e)`` of one buffer (see the module's text)."""

    def __init__(self, algo: Algorithm) -> None:
        self.algo = algo
        w = algo.width
        self.nb = w // 8
        mask = (1 << w) - 1
        table, _ = crc_position_tables(algo, 1)  # the one-byte table: step(0, v)
        t1 = [int(x) for x in table[:256]]

        def zero_step(r: int) -> int:
            if algo.reverse:
                return (r >> 8) ^ t1[r & 0xFF]
            return ((r << 8) ^ t1[(r >> (w - 8)) & 0xFF]) & mask

        m = LinearMap([zero_step(1 << b) for b in range(w)], w)
        self.pow2 = [m]  # M ** (2 ** k)
        self.powers: dict[int, LinearMap] = {}
        ptab, _ = crc_position_tables(algo, BLOCK)
        self.dt = register_dtype(w)
        self.ptab = ptab.astype(self.dt)
        self.pos = np.arange(BLOCK, dtype=np.intp) << 8
        self.mblock = self.power(BLOCK)
        self.mblock_lists = [[int(v) for v in t] for t in self.mblock.table]
        inv = m.inverse()
        # M ** -d for d = 1..BLOCK, as one flat table: [d][register byte][value]
        tabs = np.zeros((BLOCK + 1, self.nb, 256), self.dt)
        tabs[1] = inv.table
        for d in range(2, BLOCK + 1):  # M ** -d maps each entry of M ** -(d - 1) once more
            tabs[d] = inv(tabs[d - 1].reshape(-1)).reshape(self.nb, 256)
        self.inv_tab = tabs.reshape(-1)
        # M ** d for d = 0..BLOCK, the same way round
        fwd = np.zeros((BLOCK + 1, self.nb, 256), self.dt)
        fwd[0] = LinearMap([1 << b for b in range(w)], w).table
        for d in range(1, BLOCK + 1):
            fwd[d] = m(fwd[d - 1].reshape(-1)).reshape(self.nb, 256)
        self.fwd_tab = fwd.reshape(-1)
        self.inv_rows = (BLOCK - np.arange(BLOCK, dtype=np.intp)) * (self.nb << 8)
        # The affine part: crc(zeros(L)) = xor_out ^ M**L (start), start the register's
        # state before any byte.
        self.start = algo.func(b"") ^ algo.xor_out
        # the initial register carried to the block's end from each offset u
        self.start_at = self._carried(self.start)
        self._zeros: dict[int, int] = {}
        self._own: dict[tuple[str, int], bool] = {}
        self._wide: list[LinearMap] = []  # maps with 16-bit tables, oldest first
        self._res: dict[tuple[int, int, str], np.ndarray[Any, Any]] = {}

    def zeros_crc(self, n: int) -> int:
        """``crc(bytes(n))`` (a few lengths cached: a flood's windows share one)."""
        got = self._zeros.get(n)
        if got is None:
            if len(self._zeros) >= 64:
                self._zeros.clear()
            got = self._zeros[n] = self.algo.func(bytes(n))
        return got

    def _carried(self, value: int) -> np.ndarray[Any, Any]:
        """``M ** (BLOCK - u) value`` for each ``u`` in the block."""
        rows = (BLOCK - np.arange(BLOCK, dtype=np.intp)) * (self.nb << 8)
        out = np.zeros(BLOCK, dtype=self.dt)
        for j in range(self.nb):
            out ^= self.fwd_tab[rows + (j << 8) + (value >> 8 * j & 0xFF)]
        return out

    def power(self, n: int) -> LinearMap:
        """``M ** n`` (cached)."""
        got = self.powers.get(n)
        if got is None:
            out: LinearMap | None = None
            k = 0
            while n >> k:
                while k >= len(self.pow2):
                    self.pow2.append(self.pow2[-1].then(self.pow2[-1]))
                if n >> k & 1:
                    out = self.pow2[k] if out is None else out.then(self.pow2[k])
                k += 1
            got = out if out is not None else LinearMap([1 << b for b in range(self.algo.width)],
                                                      self.algo.width)
            self.powers[n] = got
        return got

    def _blocks(self, a: np.ndarray[Any, Any], x0: int, lead: int = 0) -> tuple[
            np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``y[q, u]``, the first ``u`` bytes of block ``q`` as a term of the register after
        the block, and the register at each block's start, from ``x0`` at the first block's
        start; ``a`` starts ``lead`` bytes into that block (zero bytes before it change no
        zero-initialised register)."""
        n = lead + len(a)
        nblk = n // BLOCK + 1
        padded = np.zeros(nblk * BLOCK, dtype=np.intp)  # the gather's own index type
        padded[lead:n] = a
        index = padded.reshape(nblk, BLOCK)
        index |= self.pos
        # blocks are rows: the gather and the running XOR read memory in order; y[q, u]
        # for u < BLOCK (contiguous), the whole block's term apart
        y = np.empty((nblk, BLOCK), dtype=self.dt)
        y[:, 0] = 0
        np.bitwise_xor.accumulate(self.ptab[index[:, :-1]], axis=1, out=y[:, 1:])
        total = y[:, -1] ^ self.ptab[index[:, -1]]
        # R at each block's end: x[q] = M**B x[q-1] ^ total[q]
        starts = np.empty(nblk, dtype=self.dt)
        if nblk <= SERIAL_BLOCKS:
            # a chunk's few blocks: one register step a block in Python (four table
            # lookups) costs less than the doubling scan's numpy calls
            t = self.mblock_lists
            x = x0
            regs = [x]
            if len(t) == 4:
                t0, t1, t2, t3 = t
                for v in total[:-1].tolist():
                    x = t0[x & 0xFF] ^ t1[x >> 8 & 0xFF] ^ t2[x >> 16 & 0xFF] ^ t3[x >> 24] ^ v
                    regs.append(x)
            else:
                for v in total[:-1].tolist():
                    r = v
                    for j, tj in enumerate(t):
                        r ^= tj[x >> 8 * j & 0xFF]
                    x = r
                    regs.append(x)
            starts[:] = regs
            return y, starts
        ends = total
        if x0:
            ends[0] ^= self.dt.type(self.mblock.apply_int(x0))
        d = 1
        while d < nblk:
            ends[d:] ^= self.power(BLOCK * d)(ends[:-d])
            d *= 2
        starts[0] = x0
        starts[1:] = ends[:-1]
        return y, starts

    def prefix(self, a: np.ndarray[Any, Any], x0: int = 0, lead: int = 0) -> np.ndarray[
            Any, Any]:
        """The prefix value at every position of ``a`` (``len(a) + 1`` of them),
        ``V[p] = M**(B - p % B) R[p]`` (the register carried to its block's end: no map
        back per byte), ``a`` starting ``lead`` bytes into a block whose starting register
        is ``x0``."""
        n = len(a)
        WORK.steps += n
        v, starts = self._blocks(a, x0, lead)
        v ^= self.mblock(starts)[:, None]
        out: np.ndarray[Any, Any] = v.reshape(-1)[lead:lead + n + 1]
        return out

    def carry(self, last: int) -> int:
        """``x0`` for :meth:`prefix` of the bytes after a prefix value ``last`` at a block
        boundary's distance: the register at that block's start."""
        tab, row = self.inv_tab, BLOCK * (self.nb << 8)  # M ** -B
        out = 0
        for j in range(self.nb):
            out ^= int(tab[row + (j << 8) + (last >> 8 * j & 0xFF)])
        return out

    def matches(self, p: np.ndarray[Any, Any], at: int, a: np.ndarray[Any, Any],
                starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any], size: int,
                order: str) -> np.ndarray[Any, Any]:
        """Whether the CRC of each window ``a[starts:ends]`` equals the ``size``-byte
        field (``order``) right after it, from the prefix values ``p`` of :meth:`prefix`
        of ``a`` (``p[0]`` at stream offset ``at``).

        With ``u`` a position's offset in its block and ``D`` the blocks from
        a window's start to its end, ``crc == field`` is
        ``V[e] ^ M**(B D) (V[s] ^ S[u_s]) == M**(B - u_e) (field ^ xor_out)``: ``S[u]``
        the initial register carried to the block's end. Windows of one length ``L``
        whose field is in the register's own byte order (a reflected CRC's little-endian
        field, a plain one's big-endian) are checked with the field as message bytes:
        the register over window and field is then a constant ``K`` when they match,
        ``V[e + size] ^ M**(B D') V[s] == M**(B - u) K``, no map of the field.
        """
        WORK.steps += len(starts)
        starts = np.asarray(starts, dtype=np.intp)
        ends = np.asarray(ends, dtype=np.intp)
        if not len(starts):
            return np.zeros(0, dtype=bool)
        lengths = ends - starts
        first = int(lengths[0])
        one = int(lengths.max()) == first == int(lengths.min())
        own = one and self.own_order(order, size)
        if own:
            ends = ends + size
        lead = at % BLOCK
        s_abs = starts + lead
        e_abs = ends + lead
        ue = e_abs & (BLOCK - 1)
        d = (e_abs >> _SHIFT) - (s_abs >> _SHIFT)
        x = p[starts] if one else p[starts] ^ self.start_at[s_abs & (BLOCK - 1)]
        d0 = int(d.min())
        x = self._widened(self.power(BLOCK * d0), len(x))(x)
        rest = d - d0
        top = int(rest.max()).bit_length()
        for k in range(top):
            sel = np.flatnonzero((rest >> k) & 1)
            if len(sel):
                x[sel] = self.power(BLOCK << k)(x[sel])
        x ^= p[ends]
        if own:
            same: np.ndarray[Any, Any] = x == self._residues(first, size, order)[ue]
            return same
        code = ("<" if order == "little" else ">") + f"u{size}"
        if size in (1, 2, 4, 8):  # the field at every byte position, overlapping: one gather
            field = np.ndarray((len(a) - size + 1,), np.dtype(code), np.ascontiguousarray(a),
                               0, (1,))[ends]
        else:
            rows = a[ends[:, None] + np.arange(size)].astype(np.uint64)
            shifts = np.array([8 * (j if order == "little" else size - 1 - j)
                               for j in range(size)], dtype=np.uint64)
            field = np.bitwise_or.reduce(rows << shifts, axis=1)
        if one:  # the initial register and final XOR: crc(zeros(L)), one constant
            want_of = field.astype(self.dt) ^ self.dt.type(self.zeros_crc(first))
        else:
            want_of = field.astype(self.dt) ^ self.dt.type(self.algo.xor_out)
        # M**(B - u_e) (field ^ constant): one gather per register byte, forward tables
        fb = want_of.view(np.uint8).reshape(len(field), -1)
        row = (BLOCK - ue) * (self.nb << 8)
        tab = self.fwd_tab
        want = tab[row + fb[:, 0]]
        for j in range(1, self.nb):
            row = row + 256
            want ^= tab[row + fb[:, j]]
        same = x == want
        return same

    def _widened(self, m: LinearMap, count: int) -> LinearMap:
        """``m``, with 16-bit tables when applied to many windows (the last few such maps
        keep them: a flood uses one or two)."""
        if m.wide is None and count >= 1024 and m.width in (16, 32):
            m.widen()
            self._wide.append(m)
            if len(self._wide) > 4:
                self._wide.pop(0).wide = None
        return m

    def own_order(self, order: str, size: int) -> bool:
        """Whether a ``size``-byte field in ``order`` fed through the register as message
        bytes is ``M**size`` of its value (it then cancels the register it equals)."""
        key = (order, size)
        got = self._own.get(key)
        if got is None:
            w = self.algo.width
            m = self.power(size)
            zero = self.zeros_crc(size)
            got = size * 8 == w and all(
                self.algo.func((1 << b).to_bytes(size, order)) ^ zero  # type: ignore[arg-type]
                == m.apply_int(1 << b) for b in range(w))
            self._own[key] = got
        return got

    def _residues(self, length: int, size: int, order: str) -> np.ndarray[Any, Any]:
        """``M**(B - u) K`` for each block offset ``u``: ``K`` the zero-initialised register
        over a ``length``-byte window and its matching ``size``-byte field."""
        key = (length, size, order)
        got = self._res.get(key)
        if got is None:
            c = self.zeros_crc(length)
            k = (self.algo.func(bytes(length) + c.to_bytes(size, order))  # type: ignore[arg-type]
                 ^ self.zeros_crc(length + size))
            if len(self._res) >= 64:
                self._res.clear()
            got = self._res[key] = self._carried(k)
        return got

    def _registers(self, a: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[
            Any, Any]:
        """``R[p]`` for each ``p`` in ``at`` (0 <= p <= len(a))."""
        n = len(a)
        y, starts = self._blocks(a, 0)
        # R[qB + u] = M**-(B - u) (M**B R[qB] ^ y[q, u])
        if 2 * len(at) > n:
            # as many positions as bytes (a flood): every R by whole blocks, no index maths
            x = y ^ self.mblock(starts)[:, None]
            base = self.inv_rows
        else:
            q = at >> _SHIFT
            u = at & (BLOCK - 1)
            x = self.mblock(starts)[q]
            x ^= y.reshape(-1)[at]
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
        """The CRC (uint64) of each window ``buf[starts[k]:ends[k]]``."""
        WORK.steps += len(buf) + len(starts)
        starts = np.asarray(starts, dtype=np.intp)
        ends = np.asarray(ends, dtype=np.intp)
        if not len(starts):
            return np.zeros(0, dtype=_U64)
        regs = self._registers(buf, np.concatenate([starts, ends]))
        return self._crc_windows(regs[:len(starts)], regs[len(starts):], ends - starts)

    def _crc_windows(self, rs: np.ndarray[Any, Any], re: np.ndarray[Any, Any],
                     lengths: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The CRC of each window from the registers at its start and end."""
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

