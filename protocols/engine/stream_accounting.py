"""Counters of a fixed-size receiver's stream: what the frames it accepted at these
offsets mean for the bytes between and around them.

Shared by the odometry/command receiver and the receivers built from a
description: given the accepted offsets of one scan (a list or a numpy array,
in stream order), where the bytes already covered by frames end, whether
bytes were skipped since the last frame, and how far the scan decided, it
returns the new cover, the gap flag and the discarded, resync and overlap
counts. Pure: no receiver state, no I/O.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # an array comes only from a numpy scan: numpy is loaded by then
    import numpy as np

__all__ = ["WORK", "Accounting", "Work", "account"]


class Work:
    """Checksum work, in bytes read (spans checked directly, buffers read by prefix
    checks, windows judged): a deterministic measure the linearity tests hold to a
    multiple of the input, whatever the stream."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps = 0


#: The receivers' checksum work, summed over every receiver of the process.
WORK = Work()


class Accounting(NamedTuple):
    """What one scan adds: ``cover`` (end of the bytes in frames), ``gap`` (bytes were
    skipped since the last frame) and the counts to add to the receiver's counters."""

    cover: int
    gap: bool
    discarded: int
    resyncs: int
    overlapping: int


def account(accepted: list[int] | np.ndarray[Any, Any], cover: int, gap: bool, keep: int,
            size: int) -> Accounting:
    """The counters for frames of ``size`` bytes accepted at ``accepted`` (offsets in the
    scanned buffer), bytes before ``cover`` already in a frame, the scan decided up to
    ``keep``. A numpy array is accounted without a per-frame loop."""
    cur0 = cur = max(cover, 0)
    discarded = resyncs = overlapping = 0
    np: Any = sys.modules.get("numpy")
    if np is not None and isinstance(accepted, np.ndarray):
        acc = accepted
        n = len(acc)
        step = acc[1:] - acc[:-1]  # np.diff, without its Python-level checks
        first = int(acc[0]) if n else 0
        last = int(acc[-1]) if n else 0
        if n and first >= cur0 and (n == 1 or int(step.min()) >= size):
            # No frame overlaps another (the common case, noisy or not): each
            # gap between frames is one resync, and every byte not in a frame
            # up to the last frame's end was discarded. Back to back (clean
            # data), the frames span exactly n sizes: no gap to count.
            gaps = 0 if last - first == size * (n - 1) else int(np.count_nonzero(step > size))
            resyncs = gaps + (1 if gap or first > cur0 else 0)
            gap = False
            cur = last + size
            discarded = cur - cur0 - size * n
        elif n:
            # cover[k]: end of the frames before frame k (the loop's ``cur``).
            ends = np.maximum.accumulate(acc + size)
            covers = np.empty_like(acc)
            covers[0] = cur0
            np.maximum(ends[:-1], cur0, out=covers[1:])
            lead = acc - covers
            overlapping = int(np.count_nonzero(lead < 0))
            ahead = lead > 0
            discarded = int(lead[ahead].sum())
            resyncs = int(np.count_nonzero(ahead))
            if gap:
                at = int(np.argmax(lead >= 0)) if (lead >= 0).any() else -1
                if at >= 0:
                    gap = False
                    if lead[at] == 0:
                        resyncs += 1
            cur = max(cur0, int(ends[-1]))
    else:
        for p in accepted:
            if p < cur:
                overlapping += 1
            elif p > cur or gap:
                discarded += p - cur
                resyncs += 1
                gap = False
            cur = max(cur, p + size)
    if keep > cur:
        discarded += keep - cur
        gap = True
    return Accounting(cur, gap, discarded, resyncs, overlapping)
