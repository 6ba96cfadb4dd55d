"""Baseline: the hand-specialised odometry receiver, frozen as it was before descriptions.

Feed it any chunking of a byte stream; it returns the same frames, each with
the stream offset of its header. After a rejected candidate it rescans from
the byte after the false header (backtracking), so no frame intact on the
wire is lost to a false ``AA 55`` in noise or in a payload, or to ``AA AA 55``
(the two ways the seed's ``GetOneByte`` loses frames).

Between calls it keeps only the unresolved tail: a partial candidate or a
lone trailing ``AA``, always shorter than one frame, so memory is bounded by
one frame plus one chunk.

Two scanners give the same result: a ``bytes.find`` loop for small inputs
and a numpy pass for large ones (header search, sum-8 via a prefix sum and
float decoding vectorised over the chunk). The tests hold them to the
construct schema byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from fwbridge.protocols.counters import Counters
from fwbridge.protocols.engine.kernels.sum8 import HEADER, Sum8Codec, fast_constructor

T = TypeVar("T")

_AA = HEADER[0]
_55 = HEADER[1]


class Received(NamedTuple):
    """A decoded frame and the stream offset of its first header byte.

    A named tuple rather than a dataclass: receivers make one per frame, and
    tuple construction is a third of the cost.
    """

    offset: int
    frame: Any


@dataclass(slots=True)
class ReceiverStats(Counters):
    """Counters a receiver keeps; every byte fed is in a frame or discarded."""

    frames: int = 0
    bytes: int = 0
    checksum_errors: int = 0
    discarded: int = 0
    resyncs: int = 0
    nonfinite: int = 0
    overlapping: int = 0


@dataclass(slots=True)
class _Scan:
    """What a scanner found in one buffer (positions relative to it)."""

    accepted: np.ndarray[Any, Any] | list[int]
    values: np.ndarray[Any, Any] | None  # decoded fields (float32), when vectorised
    errors: int  # rejected candidates outside every accepted frame
    keep: int  # first byte to hold back for the next call
    nonfinite: int = 0


def _scan_python(buf: bytes, size: int, covered: int) -> _Scan:
    """``bytes.find`` scan; ``covered``: bytes before it lie in an accepted frame."""
    n = len(buf)
    accepted: list[int] = []
    errors = 0
    pos = 0
    find = buf.find
    last = size - 1
    while True:
        i = find(HEADER, pos)
        if i < 0:
            keep = n - 1 if n - 1 >= pos and buf[n - 1] == _AA else n
            return _Scan(accepted, None, errors, keep)
        if i + size > n:
            return _Scan(accepted, None, errors, i)
        if sum(buf[i + 2 : i + last]) & 0xFF == buf[i + last]:
            accepted.append(i)
            covered = i + size
        elif i >= covered:
            errors += 1
        pos = i + 1  # every header position is a candidate, inside frames too


def _scan_numpy(buf: bytes, size: int, nfields: int, covered: int) -> _Scan:
    """Vectorised scan with the same result as :func:`_scan_python`."""
    n = len(buf)
    a = np.frombuffer(buf, dtype=np.uint8)
    # AA first, over the whole buffer; then 55 only after those (a few per frame).
    firsts = np.flatnonzero(a[:-1] == _AA)
    hits = firsts[a[firsts + 1] == _55]
    ncomplete = int(np.searchsorted(hits, n - size, side="right"))
    complete = hits[:ncomplete]
    # One gather of every complete candidate's body and checksum byte: cheaper
    # than a prefix sum over the whole buffer, and the floats come with it.
    body = a[complete[:, None] + np.arange(2, size)]
    ok = (body[:, :-1].sum(axis=1, dtype=np.uint32) & 0xFF) == body[:, -1]
    acc = complete[ok]
    invalid = complete[~ok]
    errors = 0
    if len(invalid):
        # A rejected candidate inside an accepted frame is that frame's payload.
        j = np.searchsorted(acc, invalid) - 1
        ends = np.where(j >= 0, acc[np.maximum(j, 0)] + size if len(acc) else 0, 0)
        errors = int(np.count_nonzero((invalid >= ends) & (invalid >= covered)))
    if ncomplete < len(hits):
        keep = int(hits[ncomplete])
    elif a[n - 1] == _AA:
        keep = n - 1
    else:
        keep = n
    values = np.ascontiguousarray(body[ok, : 4 * nfields]).view("<f4")
    finite = np.isfinite(values)
    nonfinite = 0 if finite.all() else int(len(acc) - np.count_nonzero(finite.all(axis=1)))
    return _Scan(acc, values, errors, keep, nonfinite)


class Sum8Receiver(Generic[T]):
    """Byte stream in, :class:`Received` frames out, for one sum-8 frame family.

    Every header position is a candidate, including those inside a frame
    just accepted: so a false header in noise whose checksum happens to
    match (1 in 256) cannot swallow the real frame that overlaps it. Such
    overlapping frames are all reported and counted in ``stats.overlapping``;
    a rejected candidate inside an accepted frame is payload, not an error.
    """

    #: Inputs at least this long use the numpy scanner; below it the fixed
    #: set-up cost of numpy is larger than a ``bytes.find`` loop.
    vector_threshold = 512

    def __init__(self, codec: Sum8Codec[T]) -> None:
        self.codec = codec
        self._make_received = fast_constructor(codec.cls, codec.fields, Received)
        self.stats = ReceiverStats()
        self._buf = b""
        self._base = 0  # stream offset of self._buf[0]
        self._covered = 0  # stream offset where the last accepted frame ends
        self._gap = False  # bytes were discarded since the last frame

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (always less than one frame)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Received]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data:
            return []
        base = self._base
        buf, scan = self._resolve(bytes(data), len(self._buf) + len(data) >= self.vector_threshold)
        make = self.codec.make
        if scan.values is not None:
            # map keeps the per-frame loop in C but for one generated constructor.
            offsets = (np.asarray(scan.accepted) + base).tolist()
            return list(map(self._make_received, offsets, *scan.values.T.tolist()))
        new = tuple.__new__  # Received's own __new__ is a Python call; skip it
        unpack = self.codec.struct.unpack_from
        out = [new(Received, (base + p, make(*unpack(buf, p + 2)))) for p in scan.accepted]
        self.stats.nonfinite += sum(1 for r in out if r.frame.nonfinite)
        return out

    def _resolve(self, data: bytes, vector: bool) -> tuple[bytes, _Scan]:
        """Scan held-back bytes + ``data``; update counters and the held-back tail."""
        stats = self.stats
        stats.bytes += len(data)
        buf = self._buf + data if self._buf else data
        size = self.codec.size
        covered = self._covered - self._base
        if vector and len(buf) >= 2:
            scan = _scan_numpy(buf, size, len(self.codec.fields), covered)
            stats.nonfinite += scan.nonfinite
        else:
            scan = _scan_python(buf, size, covered)
        self._account(scan, covered, size)
        stats.frames += len(scan.accepted)
        stats.checksum_errors += scan.errors
        self._buf = buf[scan.keep :]
        self._base += scan.keep
        return buf, scan

    def _account(self, scan: _Scan, covered: int, size: int) -> None:
        """Discarded bytes, resyncs and overlaps for the region this call resolved."""
        if isinstance(scan.accepted, np.ndarray):
            self._account_numpy(scan.accepted, scan.keep, covered, size)
            return
        cur = max(covered, 0)  # bytes of this buffer before cur are in a frame
        gap = self._gap
        discarded = resyncs = overlapping = 0
        for p in scan.accepted:
            if p < cur:
                overlapping += 1
            elif p > cur or gap:
                discarded += p - cur
                resyncs += 1
                gap = False
            cur = max(cur, p + size)
        if scan.keep > cur:
            discarded += scan.keep - cur
            gap = True
        self._gap = gap
        self._covered = max(self._covered, self._base + cur)
        st = self.stats
        st.discarded += discarded
        st.resyncs += resyncs
        st.overlapping += overlapping

    def _account_numpy(self, acc: np.ndarray[Any, Any], keep: int, covered: int, size: int) -> None:
        """:meth:`_account` for the numpy scanner, without a per-frame loop."""
        cur0 = max(covered, 0)
        gap = self._gap
        discarded = resyncs = overlapping = 0
        cur = cur0
        n = len(acc)
        step = np.diff(acc) if n > 1 else acc[:0]
        first = int(acc[0]) if n else 0
        if n and first >= cur0 and (n == 1 or int(step.min()) >= size):
            # No frame overlaps another (the common case, noisy or not): each
            # gap between frames is one resync, and every byte not in a frame
            # up to the last frame's end was discarded.
            resyncs = int(np.count_nonzero(step > size)) + (1 if gap or first > cur0 else 0)
            gap = False
            cur = int(acc[-1]) + size
            discarded = cur - cur0 - size * n
        elif n:
            # cover[k]: end of the frames before frame k (the loop's ``cur``).
            ends = np.maximum.accumulate(acc + size)
            cover = np.empty_like(acc)
            cover[0] = cur0
            np.maximum(ends[:-1], cur0, out=cover[1:])
            lead = acc - cover
            overlapping = int(np.count_nonzero(lead < 0))
            ahead = lead > 0
            discarded = int(lead[ahead].sum())
            resyncs = int(np.count_nonzero(ahead))
            if gap:
                first = int(np.argmax(lead >= 0)) if (lead >= 0).any() else -1
                if first >= 0:
                    gap = False
                    if lead[first] == 0:
                        resyncs += 1
            cur = max(cur0, int(ends[-1]))
        if keep > cur:
            discarded += keep - cur
            gap = True
        self._gap = gap
        self._covered = max(self._covered, self._base + cur)
        st = self.stats
        st.discarded += discarded
        st.resyncs += resyncs
        st.overlapping += overlapping

    def finish(self) -> list[Received]:
        """End of stream: count the held-back tail as discarded.

        Returns the frames only the end of the stream could decide: always
        none for fixed-length frames (the tail is shorter than a frame), but
        receivers share this signature so callers treat them alike.
        """
        tail = len(self._buf)
        uncovered = max(0, self._base + tail - max(self._covered, self._base))
        self.stats.discarded += uncovered
        if uncovered:
            self._gap = True
        self._base += tail
        self._buf = b""
        return []


@dataclass(frozen=True)
class Columns:
    """Offline decode result: one numpy array per field, plus the offsets."""

    offset: np.ndarray[Any, Any]
    fields: dict[str, np.ndarray[Any, Any]]
    stats: ReceiverStats

    def __len__(self) -> int:
        return len(self.offset)


def decode_columns(codec: Sum8Codec[Any], data: bytes | bytearray | memoryview) -> Columns:
    """Decode a whole capture at once into columns (no per-frame objects).

    Same frames, offsets and counters as feeding :class:`Sum8Receiver` the
    whole buffer and calling ``finish()``; made for offline analysis.
    """
    rx: Sum8Receiver[Any] = Sum8Receiver(codec)
    _, scan = rx._resolve(bytes(data), vector=True)
    rx.finish()
    offsets = np.asarray(scan.accepted, dtype=np.int64)
    values = scan.values
    if values is None:
        values = np.zeros((0, len(codec.fields)), dtype=np.float32)
    fields = {name: values[:, k] for k, name in enumerate(codec.fields)}
    return Columns(offsets, fields, rx.stats)
