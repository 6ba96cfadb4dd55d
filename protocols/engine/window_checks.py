"""The check of many windows of one buffer at once, in time linear in the buffer.

A receiver judges every header position as a candidate. Checking each
candidate's span directly costs the span: a flood of false headers (a
header every 2 bytes) against a 4 KiB frame is 2 000 checksum bytes per
input byte. Here every check is a difference of two prefix values, so the
whole buffer is read once and each window then costs O(1) (O(log length)
for windows of different lengths):

- sum-8: prefix sums modulo 256, ``S[e] - S[s]`` (:class:`SumXorWindows`);
- XOR-8: prefix XORs, ``X[e] ^ X[s]`` (:class:`SumXorWindows`);
- CRC: prefix registers, a CRC being affine over GF(2)
  (:class:`~fwbridge.protocols.engine.crc_windows.CrcWindows`).

:func:`window_checks` gives an algorithm's checks; a receiver keeps their
prefix values between its calls in a
:class:`~fwbridge.protocols.engine.stream_prefix.StreamPrefix`.
:data:`~fwbridge.protocols.engine.stream_accounting.WORK` counts what the checks
read (buffer bytes plus windows, and the bytes a receiver's direct checks
take): the tests hold it to a multiple of the input, whatever the stream.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.engine.crc_windows import CrcWindows
from fwbridge.protocols.engine.stream_accounting import WORK

__all__ = ["SumXorWindows", "WindowChecks", "window_checks"]


class SumXorWindows:
    """The sum-8 or XOR-8 of windows ``[s, e)`` of one buffer, by prefix sums or XORs."""

    def __init__(self, algo: Algorithm) -> None:
        self.algo = algo
        self.sums = algo.kind == "sum8"

    def _prefix(self, a: np.ndarray[Any, Any], x0: int) -> np.ndarray[Any, Any]:
        p = np.empty(len(a) + 1, dtype=np.uint8)
        p[0] = x0
        if self.sums:
            np.cumsum(a, dtype=np.uint8, out=p[1:])  # wraps at 256, as sum-8 does
            if x0:
                p[1:] += np.uint8(x0)
        else:
            np.bitwise_xor.accumulate(a, out=p[1:])
            if x0:
                p[1:] ^= np.uint8(x0)
        return p

    def prefix(self, a: np.ndarray[Any, Any], x0: int = 0, lead: int = 0) -> np.ndarray[
            Any, Any]:
        """The sum or XOR modulo 256 from ``x0`` at every position of ``a`` (``len(a) + 1``
        of them); ``lead`` (a CRC's block offset) changes nothing here."""
        WORK.steps += len(a)
        return self._prefix(a, x0)

    def carry(self, last: int) -> int:
        """``x0`` for :meth:`prefix` of the bytes after a prefix value ``last``: itself."""
        return last

    def _window(self, p: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
                ends: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        got: np.ndarray[Any, Any] = (p[ends] - p[starts]) if self.sums else p[ends] ^ p[starts]
        return got

    def matches(self, p: np.ndarray[Any, Any], at: int, a: np.ndarray[Any, Any],
                starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any], size: int,
                order: str) -> np.ndarray[Any, Any]:
        """Whether the check of each window ``a[starts:ends]`` equals the byte right after
        it, from the prefix values ``p`` of :meth:`prefix` of ``a`` (``at``, ``size`` and
        ``order`` are a CRC's: a sum or XOR is one byte)."""
        WORK.steps += len(starts)
        starts = np.asarray(starts, dtype=np.intp)
        ends = np.asarray(ends, dtype=np.intp)
        if not len(starts):
            return np.zeros(0, dtype=bool)
        ok: np.ndarray[Any, Any] = self._window(p, starts, ends) == a[ends]
        return ok

    def values(self, buf: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
               ends: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The check value (uint64) of each window ``buf[starts[k]:ends[k]]``."""
        WORK.steps += len(buf) + len(starts)
        starts = np.asarray(starts, dtype=np.intp)
        ends = np.asarray(ends, dtype=np.intp)
        if not len(starts):
            return np.zeros(0, dtype=np.uint64)
        got: np.ndarray[Any, Any] = self._window(self._prefix(buf, 0), starts, ends).astype(
            np.uint64)
        return got


#: The checks of one algorithm's windows: both kinds answer the same calls.
WindowChecks = SumXorWindows | CrcWindows


@cache
def window_checks(algo: Algorithm) -> WindowChecks:
    """The window checks of ``algo`` (one per algorithm: a CRC's tables take a moment)."""
    return CrcWindows(algo) if algo.kind == "crc" else SumXorWindows(algo)
