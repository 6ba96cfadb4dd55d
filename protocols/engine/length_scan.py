"""The numpy scan of the length-directed receivers (:mod:`length_receiver`,
:mod:`action_receiver`) for large buffers.

The per-candidate loop reads each candidate's length field, trailer and
check in turn; a flood of false headers with plausible length fields makes
that a checksum over a whole frame per header (O(n * frame)). Here every
candidate of the buffer is judged at once: header search, length field,
trailer and check vectorised, the check by prefix values
(:mod:`window_checks`, kept between the receiver's calls in a
:mod:`stream_prefix`) when reading each
span would cost more than a few bytes per input byte. What stays
sequential is only what depends on the frames accepted (a frame is
skipped whole, so candidates inside it are data): a walk over the
accepted candidates and the first one still short of bytes, a Python step
per frame. Rejections are then counted for the
candidates outside every accepted frame, before the scan stopped: the
same counters and frames as the loop, which the tests hold it to.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.engine.stream_prefix import StreamPrefix
from fwbridge.protocols.engine.window_checks import window_checks

__all__ = ["Walk", "check_matches", "gather_int", "header_hits", "header_hits_of", "walk"]

#: Checksum bytes a scan may read directly per byte scanned before it checks by prefixes.
DIRECT_BUDGET = 2


def _starts(a: np.ndarray[Any, Any], h: bytes) -> np.ndarray[Any, Any]:
    """Whether ``h`` starts at each position of ``a`` where it fits."""
    hl, n = len(h), len(a)
    heads: np.ndarray[Any, Any] = a[: n - hl + 1] == h[0]
    for k in range(1, hl):
        heads &= a[k: n - hl + 1 + k] == h[k]
    return heads


def header_hits(a: np.ndarray[Any, Any], headers: list[bytes]) -> np.ndarray[Any, Any]:
    """Positions where one of ``headers`` (all of one length) starts, in order."""
    return header_hits_of(a, headers[0], headers[1:])[0]


def header_hits_of(a: np.ndarray[Any, Any], header: bytes, alts: Any = ()) -> tuple[
        np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
    """Positions where ``header`` or one of ``alts`` (as long) starts, in order, and which
    of them are ``header``'s (None without ``alts``: all of them)."""
    if len(a) < len(header):
        none = np.zeros(0, dtype=np.intp)
        return none, (np.zeros(0, dtype=bool) if alts else None)
    mine = _starts(a, header)
    if not alts:
        return np.flatnonzero(mine), None
    found = mine.copy()
    for h in alts:
        found |= _starts(a, h)
    hits = np.flatnonzero(found)
    return hits, mine[hits]


def gather_int(a: np.ndarray[Any, Any], at: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> (
        np.ndarray[Any, Any]):
    """The integer of type ``dtype`` at each position ``at`` (positions past the end read
    as 0; callers mask them), as int64."""
    size = dtype.itemsize
    n = len(a)
    if n < size:
        return np.zeros(len(at), dtype=np.int64)
    a = np.ascontiguousarray(a)
    last = n - size
    past = len(at) and int(at.max()) > last
    # the integer at every byte position, overlapping (a view, unaligned): one gather
    ints = np.ndarray((last + 1,), dtype, a, 0, (1,))
    got = ints[np.minimum(at, last) if past else at]
    out: np.ndarray[Any, Any] = got.astype(np.int64)
    if past:
        out[at > last] = 0
    return out


def check_matches(a: np.ndarray[Any, Any], algo: Algorithm | None, starts: Any, ends: Any,
                  size: int, order: str, held: StreamPrefix | None = None,
                  base: int = 0) -> np.ndarray[Any, Any]:
    """Whether the check over ``a[starts:ends]`` equals the ``size``-byte field at each
    end: read directly while the spans are few, by prefix values beyond (``held``: the
    receiver's, kept between calls; ``a`` is then the stream from offset ``base``)."""
    k = len(starts)
    if algo is None or not k:
        return np.ones(k, dtype=bool)
    spans = ends - starts
    total = int(spans.sum())
    if held is not None and total > DIRECT_BUDGET * len(a) + 64:
        return held.matches(a, base, starts, ends, size, order)
    field = gather_int(a, ends, np.dtype(("<" if order == "little" else ">") + f"u{size}")
                       ) if size in (1, 2, 4, 8) else _field_int(a, ends, size, order)
    if total <= DIRECT_BUDGET * len(a) + 64:
        WORK.steps += total
        raw = a.tobytes()
        func = algo.func
        got = [func(raw[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]
        direct: np.ndarray[Any, Any] = np.array(got, dtype=np.uint64) == field.astype(np.uint64)
        return direct
    values = window_checks(algo).values(a, starts, ends)
    by_prefix: np.ndarray[Any, Any] = values == field.astype(np.uint64)
    return by_prefix


def _field_int(a: np.ndarray[Any, Any], at: np.ndarray[Any, Any], size: int,
               order: str) -> np.ndarray[Any, Any]:
    """A ``size``-byte unsigned field (3 bytes: CRC-24) at each position."""
    rows = a[at[:, None] + np.arange(size)].astype(np.uint64)
    shifts = np.array([8 * (j if order == "little" else size - 1 - j) for j in range(size)],
                      dtype=np.uint64)
    out: np.ndarray[Any, Any] = np.bitwise_or.reduce(rows << shifts, axis=1)
    return out


@dataclass(slots=True)
class Walk:
    """The frames a scan accepts and where it stops.

    ``accepted``: indexes into the candidates, in order, ``starts`` and ``stops`` their
    frames' spans (arrays); ``stop``: the index of the
    candidate that holds the scan (short of bytes), or None; ``visited``: the
    candidates the per-candidate loop would have judged (outside every accepted
    frame, before the stop); ``pos``: where the loop's search would go on.
    """

    accepted: list[int]
    starts: np.ndarray[Any, Any]
    stops: np.ndarray[Any, Any]
    stop: int | None
    visited: np.ndarray[Any, Any]
    pos: int


def walk(hits: np.ndarray[Any, Any], ends: np.ndarray[Any, Any], good: np.ndarray[Any, Any],
         short: np.ndarray[Any, Any] | None) -> Walk:
    """Accept ``good`` candidates in order, each skipping the candidates inside it; stop at
    the first ``short`` one outside them (None: the end of the stream, none stops)."""
    goods = np.flatnonzero(good)
    g_at, g_end, g_idx = hits[goods].tolist(), ends[goods].tolist(), goods.tolist()
    shorts = np.flatnonzero(short) if short is not None else goods[:0]
    # (a flood of them) the walk ends before the furthest good end: no short candidate
    # after the first one past it can stop it
    if len(shorts) > 64:
        last = int(ends[goods].max()) if len(goods) else 0
        shorts = shorts[:int(np.searchsorted(shorts, np.searchsorted(hits, last))) + 1]
    s_at = hits[shorts].tolist()
    accepted: list[int] = []
    stop: int | None = None
    pos = k = j = 0
    while True:
        k = bisect_left(g_at, pos, k)
        j = bisect_left(s_at, pos, j)  # the next short candidate outside the frames so far
        if j < len(s_at) and (k == len(g_at) or s_at[j] < g_at[k]):
            stop = int(shorts[j])
            break
        if k == len(g_at):
            break
        accepted.append(g_idx[k])
        pos = g_end[k]
    limit = int(hits[stop]) if stop is not None else None
    starts = hits[accepted]
    stops = ends[accepted]
    if accepted:
        owner = np.searchsorted(starts, hits, side="right") - 1
        covered = (owner >= 0) & (hits < stops[np.maximum(owner, 0)])
        visited = ~covered
    else:
        visited = np.ones(len(hits), dtype=bool)
    if limit is not None:
        visited &= hits < limit
    if stop is None and len(hits) and visited[-1]:
        pos = max(pos, int(hits[-1]) + 1)
    return Walk(accepted, starts, stops, stop, visited, pos)
