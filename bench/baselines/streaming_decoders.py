"""Baselines: what a user writes instead of the library, for the 19-byte odometry frame.

Each keeps the same stream state a streaming decoder needs (the unresolved
tail) and returns, per chunk, the frames as plain tuples ``(offset, vx, vy,
wz, yaw_deg)`` (the numpy one: a pair of arrays per chunk). None backtracks
inside an accepted frame as the library does: simpler, and so a fair
upper bound on what a hand-written loop costs.

- :class:`NaivePerByte`: a per-byte state machine (wait AA, wait 55, collect).
- :class:`PyStreaming`: ``bytes.find`` + ``unpack_from``, with a fast path that
  verifies a run of back-to-back frames at once (headers by slicing).
- :class:`NumpyStreaming`: header search, checksums and floats in numpy per chunk.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

HDR = b"\xaa\x55"
SIZE = 19
_BODY = struct.Struct("<4f")
_FRAME = struct.Struct("<2x4fx")


class NaivePerByte:
    """The textbook loop: one state transition per byte."""

    def __init__(self) -> None:
        self.state = 0
        self.body = bytearray()
        self.pos = 0
        self.start = 0

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        state, body, pos, start = self.state, self.body, self.pos, self.start
        unpack = _BODY.unpack
        for b in data:
            if state == 0:
                if b == 0xAA:
                    state, start = 1, pos
            elif state == 1:
                state = 2 if b == 0x55 else (1 if b == 0xAA else 0)
                if b == 0xAA:
                    start = pos
                body.clear()
            elif len(body) < 16:
                body.append(b)
            else:
                if sum(body) & 0xFF == b:
                    out.append((start, *unpack(body)))
                state = 0
            pos += 1
        self.state, self.pos, self.start = state, pos, start
        return out


class PyStreaming:
    """``find`` + ``unpack_from``; runs of aligned frames verified and unpacked in one go."""

    def __init__(self) -> None:
        self.buf = b""
        self.base = 0

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        buf = self.buf + data if self.buf else data
        n, base, out = len(buf), self.base, []
        find, unpack = buf.find, _BODY.unpack_from
        pos = 0
        while True:
            i = find(HDR, pos)
            if i < 0:
                keep = n - 1 if n > pos and buf[-1] == 0xAA else n
                break
            k = (n - i) // SIZE
            if not k:
                keep = i
                break
            blk = buf[i : i + SIZE * k]
            if k > 1 and blk[::SIZE] == b"\xaa" * k and blk[1::SIZE] == b"\x55" * k and all(
                    sum(blk[j + 2 : j + 18]) & 0xFF == blk[j + 18]
                    for j in range(0, len(blk), SIZE)):
                out.extend([(o, *t) for o, t in zip(range(base + i, base + i + SIZE * k, SIZE),
                                                    _FRAME.iter_unpack(blk))])
                pos = i + SIZE * k
            elif sum(buf[i + 2 : i + 18]) & 0xFF == buf[i + 18]:
                out.append((base + i, *unpack(buf, i + 2)))
                pos = i + SIZE
            else:
                pos = i + 1
        self.buf = buf[keep:]
        self.base = base + keep
        return out


class NumpyStreaming:
    """Every ``AA 55`` a candidate, checked and decoded over the chunk at once."""

    def __init__(self) -> None:
        self.buf = b""
        self.base = 0
        self._cols = np.arange(2, SIZE)

    def feed(self, data: bytes) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        buf = self.buf + data if self.buf else data
        n = len(buf)
        a = np.frombuffer(buf, np.uint8)
        first = np.flatnonzero(a[:-1] == 0xAA)
        hits = first[a[first + 1] == 0x55]
        done = hits[hits <= n - SIZE]
        rows = a[done[:, None] + self._cols]
        ok = (rows[:, :16].sum(axis=1, dtype=np.uint32) & 0xFF) == rows[:, 16]
        vals = np.ascontiguousarray(rows[ok, :16]).view("<f4")
        offs = done[ok] + self.base
        keep = int(hits[len(done)]) if len(done) < len(hits) else (
            n - 1 if n and a[-1] == 0xAA else n)
        self.buf = buf[keep:]
        self.base += keep
        return offs, vals
