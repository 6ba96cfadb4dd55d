"""A receiver's prefix values, kept between its calls by stream offset.

A receiver scans its held-back bytes again with each chunk (a candidate
waiting for its frame's bytes holds them); computing the prefix values of
the whole buffer each time reads every byte once per call it stays held.
Kept by stream offset (a CRC's blocks aligned on it), the values of bytes
already seen are reused and only the new bytes are read: prefix values
depend on nothing but the stream, and a receiver's buffer is always the
stream from some offset on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.engine.crc_windows import BLOCK
from fwbridge.protocols.engine.window_checks import window_checks

__all__ = ["StreamPrefix"]


class StreamPrefix:
    """The prefix values of a receiver's stream, kept between its calls (see the
    module's text)."""

    __slots__ = ("_at", "_p", "checks")

    def __init__(self, algo: Algorithm) -> None:
        self.checks = window_checks(algo)
        self._p: np.ndarray[Any, Any] | None = None
        self._at = 0  # the stream offset of _p[0]

    def matches(self, a: np.ndarray[Any, Any], base: int, starts: np.ndarray[Any, Any],
                ends: np.ndarray[Any, Any], size: int, order: str) -> np.ndarray[Any, Any]:
        """Whether the check over each window ``a[starts:ends]`` equals the ``size``-byte
        field in ``order`` right after it; ``a`` is the stream from offset ``base``."""
        return self.checks.matches(self.prefix(a, base), base, a, starts, ends, size, order)

    def prefix(self, a: np.ndarray[Any, Any], base: int) -> np.ndarray[Any, Any]:
        """The prefix values of ``a`` (the stream from ``base`` on), computed for the bytes
        not seen before only."""
        p = self._p
        if p is None or not self._at <= base < self._at + len(p):
            p = self.checks.prefix(a, 0, base % BLOCK)
        else:
            p = p[base - self._at:]  # a view: the older bytes go with the next concatenation
            have = len(p) - 1
            if have < len(a):
                more = self.checks.prefix(a[have:], self.checks.carry(int(p[-1])),
                                          (base + have) % BLOCK)
                p = np.concatenate([p, more[1:]])
        self._p, self._at = p, base
        return p

    def drop_before(self, offset: int) -> None:
        """Forget the values before stream offset ``offset`` (the receiver has let those
        bytes go): what is kept stays within a few times the receiver's held bytes."""
        p = self._p
        if p is None or offset <= self._at:
            return
        k = offset - self._at
        if k >= len(p):
            self._p = None
            return
        # a view while it holds most of its array; a copy (amortised: a quarter of the
        # values computed at most) once the array would be mostly dead bytes
        self._p = p[k:] if 4 * (len(p) - k) >= len(p) else p[k:].copy()
        self._at = offset
