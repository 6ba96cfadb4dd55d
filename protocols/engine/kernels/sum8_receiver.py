"""Sans-I/O receiver for the fixed-length sum-8 frames (odometry, command).

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
float decoding vectorised over the chunk; a flood of candidates against a
large frame has its sums from one prefix sum, so the scan stays linear).
This is the receiver
:func:`fwbridge.protocols.engine.receiver_for` picks for a sum-8 description;
the tests hold it to the generic receiver and the construct schema byte for byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache, partial
from math import isfinite
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fwbridge.protocols.engine.kernels.sum8 import HEADER, Sum8Codec
from fwbridge.protocols.engine.kernels.sum8_received import Sum8Received, received_class
from fwbridge.protocols.engine.receiver_counters import Sum8ReceiverStats
from fwbridge.protocols.engine.stream_accounting import WORK, account

__all__ = ["Columns", "Sum8Receiver", "decode_columns"]

if TYPE_CHECKING:
    import numpy as np
else:
    class _Numpy:
        """numpy, imported on first use: a link that only ever reads small chunks (a
        bridge at 200 Hz) never pays its ~0.1 s of import."""

        def __getattr__(self, name: str) -> Any:
            import numpy

            globals()["np"] = numpy  # from now on the module itself
            return getattr(numpy, name)

    np = _Numpy()

T = TypeVar("T")

_AA = HEADER[0]
_55 = HEADER[1]



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


@cache
def _columns_of(size: int) -> np.ndarray[Any, Any]:
    """Column indices of a candidate's body and checksum byte (after the header)."""
    return np.arange(2, size)


def _scan_numpy(buf: bytes, size: int, nfields: int, covered: int) -> _Scan:
    """Vectorised scan with the same result as :func:`_scan_python`.

    Its numpy calls are most of a 4 KiB chunk's time (``feed_columns``), so each
    counter is the fewest of them: the checksums by a uint8 sum (it wraps at 256,
    as sum-8 does), the errors outside frames from one running maximum, the
    non-finite screen by one float64 sum.
    """
    n = len(buf)
    a = np.frombuffer(buf, dtype=np.uint8)
    # Both header bytes compared over the whole buffer: two vector compares are cheaper
    # than gathering the byte after each AA.
    heads = a[:-1] == _AA
    heads &= a[1:] == _55
    hits = np.flatnonzero(heads)
    # Candidates too near the end to be whole: the last few heads (a frame's worth at most).
    ncomplete = len(hits) - int(np.count_nonzero(heads[max(0, n - size + 1):]))
    complete = hits[:ncomplete]
    if ncomplete * size > 4 * n:
        # A flood of candidates (a header every few bytes against a large frame): the sums
        # from one prefix sum, O(1) a candidate, and only the accepted rows gathered.
        WORK.steps += n + ncomplete
        prefix = np.zeros(n + 1, dtype=np.uint8)
        np.cumsum(a, dtype=np.uint8, out=prefix[1:])  # wraps at 256, as sum-8 does
        ok = prefix[complete + size - 1] - prefix[complete + 2] == a[complete + size - 1]
        accepted = a[complete[ok][:, None] + _columns_of(size)]
        body = None
    else:
        # One gather of every complete candidate's body and checksum byte: cheaper
        # than a prefix sum over the whole buffer, and the floats come with it.
        WORK.steps += ncomplete * size
        body = a[complete[:, None] + _columns_of(size)]
        ok = body[:, :-1].sum(axis=1, dtype=np.uint8) == body[:, -1]
    errors = 0
    if np.count_nonzero(ok) == ncomplete:  # the common case: no copy of the accepted rows
        acc = complete
        # Contiguous and aligned float32 rows: a slice's copy is cheaper than an index.
        values = (body if body is not None else accepted)[:, : 4 * nfields].copy().view("<f4")
    else:
        acc = complete[ok]
        # A rejected candidate inside an accepted frame is that frame's payload: the end
        # of the frames before each candidate is a running maximum that accepted ones
        # raise (past themselves, so they never count), from where earlier calls ended.
        cover = complete + size
        cover *= ok  # a rejected candidate raises nothing (0; from ``covered`` if past 0)
        if covered > 0:
            np.maximum(cover, covered, out=cover)
        np.maximum.accumulate(cover, out=cover)
        errors = int(np.count_nonzero(complete >= cover))
        values = (np.compress(ok, body[:, : 4 * nfields], axis=0) if body is not None
                  else accepted[:, : 4 * nfields].copy()).view("<f4")  # contiguous
    if ncomplete < len(hits):
        keep = int(hits[ncomplete])
    elif a[n - 1] == _AA:
        keep = n - 1
    else:
        keep = n
    nonfinite = 0
    # A float64 sum of float32 values cannot overflow: it is finite exactly when they are.
    # (inf - inf in the sum is NaN: numpy's warning for it is not the caller's business.)
    with np.errstate(invalid="ignore", over="ignore"):
        total = values.sum(dtype=np.float64)
    if not isfinite(total):
        nonfinite = int(len(acc) - np.count_nonzero(np.isfinite(values).all(axis=1)))
    return _Scan(acc, values, errors, keep, nonfinite)


class Sum8Receiver(Generic[T]):
    """Byte stream in, :class:`Sum8Received` frames out, for one sum-8 frame family.

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
        self.record = received_class(codec)
        self._new_record = partial(bytes.__new__, self.record)  # skips the type call
        body = codec.struct.size
        self._pack = struct.Struct(f"<q{body}s").pack  # offset, fields as on the wire
        self._rows = f"V{8 + body}"  # numpy: one record's bytes
        self._unpack_all = struct.Struct(f"<q{len(codec.fields)}f").iter_unpack
        self._dtype_spec = [("offset", "<i8"), *((f, "<f4") for f in codec.fields)]
        self.stats = Sum8ReceiverStats()
        self._buf = b""
        self._base = 0  # stream offset of self._buf[0]
        self._covered = 0  # stream offset where the last accepted frame ends
        self._gap = False  # bytes were discarded since the last frame

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (always less than one frame)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Sum8Received]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data:
            return []
        if len(self._buf) + len(data) < self.vector_threshold and self._few(data):
            return self._feed_small(bytes(data))
        base = self._base
        _, scan = self.resolve(bytes(data), True)
        if scan.values is None:  # fewer than 2 bytes: no frame
            return []
        # The records' bytes built in numpy, one bytes object each by tolist(), and
        # map keeps the per-frame loop in C: no Python call per frame.
        acc = np.asarray(scan.accepted, dtype=np.int64)
        rows = np.empty((len(acc), 8 + self.codec.struct.size), dtype=np.uint8)
        rows[:, :8] = (acc + base).view(np.uint8).reshape(-1, 8)
        rows[:, 8:] = scan.values.view(np.uint8)
        return list(map(self._new_record, rows.view(self._rows).ravel().tolist()))

    def _few(self, data: bytes | bytearray | memoryview) -> bool:
        """Whether the small loop's checks stay within a few bytes a byte: each header
        is a candidate whose sum reads the frame (a flood of them goes to the numpy
        scanner, which sums by prefixes past a budget)."""
        heads = self._buf.count(HEADER) + bytes(data).count(HEADER) + 1  # +1: across the cut
        width = self.codec.size - 3
        return heads * width <= 4 * (len(self._buf) + len(data)) + 8 * width

    def _feed_small(self, data: bytes) -> list[Sum8Received]:
        """:meth:`resolve` with :func:`_scan_python` and the accounting in one loop.

        Small chunks (a serial port's reads) are mostly per-call cost: this
        makes no scan or accounting objects. The property tests hold it to
        the generic receiver for any chunking.
        """
        st = self.stats
        st.bytes += len(data)
        buf = self._buf + data if self._buf else data
        base, n, size = self._base, len(buf), self.codec.size
        last = size - 1
        cov = self._covered - base  # candidates before it are payload, not errors
        cur = cov if cov > 0 else 0  # end of the bytes in frames (stream_accounting's cover)
        gap = self._gap
        errors = discarded = resyncs = overlapping = 0
        out: list[Sum8Received] = []
        new, cls = bytes.__new__, self.record  # the type call parses arguments
        pack, find, append = self._pack, buf.find, out.append
        pos = 0
        while True:
            i = find(HEADER, pos)
            if i < 0:
                keep = n - 1 if n - 1 >= pos and buf[n - 1] == _AA else n
                break
            if i + size > n:
                keep = i
                break
            if sum(buf[i + 2 : i + last]) & 0xFF == buf[i + last]:
                append(new(cls, pack(base + i, buf[i + 2 : i + last])))
                if i < cur:
                    overlapping += 1
                elif i > cur or gap:
                    discarded += i - cur
                    resyncs += 1
                    gap = False
                cov = cur = i + size  # candidates only move forward: this frame ends last
            elif i >= cov:
                errors += 1
            pos = i + 1  # every header position is a candidate, inside frames too
        if keep > cur:
            discarded += keep - cur
            gap = True
        self._gap = gap
        self._covered = max(self._covered, base + cur)
        st.discarded += discarded
        st.resyncs += resyncs
        st.overlapping += overlapping
        st.frames += len(out)
        st.checksum_errors += errors
        self._buf = buf[keep:]
        self._base = base + keep
        if out:
            blob = b"".join(out)
            # A float32 is NaN or infinite only if its high byte is 7F or FF: the
            # screen reads those bytes (and two of each offset: a rare false alarm).
            high = blob[3::4]
            if b"\x7f" in high or b"\xff" in high:
                # A sum of float32 values (and the offset) cannot overflow a double:
                # it is NaN or infinite exactly when one of them is.
                st.nonfinite += len(out) - sum(map(isfinite, map(sum, self._unpack_all(blob))))
        return out

    def feed_columns(self, data: bytes | bytearray | memoryview) -> Columns:
        """:meth:`feed` for high rates: the chunk's frames as numpy columns, no per-frame object.

        Same frames, offsets and counters as :meth:`feed` for any chunking;
        the columns' ``stats`` is this receiver's (live) counters.
        """
        if len(self._buf) + len(data) < max(self.vector_threshold, 2) and self._few(data):
            # A serial port's reads: numpy's set-up would cost more than the frames, so the
            # small loop's records (their bytes: offset and fields) are read as the columns.
            rows = np.frombuffer(bytearray().join(self._feed_small(bytes(data))) if data
                                 else bytearray(), dtype=np.dtype(self._dtype_spec))
            return Columns(rows["offset"], {f: rows[f] for f in self.codec.fields}, self.stats)
        # resolve() and _columns() in one: at 4 KiB a chunk, each Python step is a few
        # per cent of the time.
        st, base, size = self.stats, self._base, self.codec.size
        chunk = bytes(data)
        st.bytes += len(chunk)
        buf = self._buf + chunk if self._buf else chunk
        covered = self._covered - base
        scan = _scan_numpy(buf, size, len(self.codec.fields), covered)
        acc = scan.accepted
        self._account(scan, covered, size)
        st.frames += len(acc)
        st.checksum_errors += scan.errors
        st.nonfinite += scan.nonfinite
        self._buf = buf[scan.keep:]
        self._base += scan.keep
        values = scan.values
        assert values is not None
        return Columns(np.add(acc, base), dict(zip(self.codec.fields, values.T)), st)

    def records(self, columns: Columns) -> list[Sum8Received]:
        """The records :meth:`feed` gives for the frames of ``columns`` (a
        :meth:`feed_columns` batch): for a batch that needs the per-frame path."""
        rows = np.empty(len(columns), dtype=np.dtype(self._dtype_spec))
        rows["offset"] = columns.offset
        for name in self.codec.fields:
            rows[name] = columns.fields[name]
        return list(map(self._new_record, rows.view(self._rows).tolist()))

    def resolve(self, data: bytes, vector: bool) -> tuple[bytes, _Scan]:
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
        got = account(scan.accepted, covered, self._gap, scan.keep, size)
        self._gap = got.gap
        self._covered = max(self._covered, self._base + got.cover)
        st = self.stats
        st.discarded += got.discarded
        st.resyncs += got.resyncs
        st.overlapping += got.overlapping

    def finish(self) -> list[Sum8Received]:
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
    stats: Sum8ReceiverStats

    def __len__(self) -> int:
        return len(self.offset)


def _columns(codec: Sum8Codec[Any], scan: _Scan | None, base: int,
             stats: Sum8ReceiverStats) -> Columns:
    """The frames of one scan as columns, offsets from ``base``."""
    values: np.ndarray[Any, Any] | None
    if scan is None or not len(scan.accepted):
        values = np.zeros((0, len(codec.fields)), dtype=np.float32)
        offsets = np.zeros(0, dtype=np.int64)
    else:
        offsets = np.asarray(scan.accepted, dtype=np.int64) + base
        values = scan.values
        if values is None:  # pragma: no cover - feed_columns always scans vectorised
            values = np.zeros((0, len(codec.fields)), dtype=np.float32)
    return Columns(offsets, dict(zip(codec.fields, values.T)), stats)


def decode_columns(codec: Sum8Codec[Any], data: bytes | bytearray | memoryview) -> Columns:
    """Decode a whole capture at once into columns (no per-frame objects).

    Same frames, offsets and counters as feeding :class:`Sum8Receiver` the
    whole buffer and calling ``finish()``; made for offline analysis.
    """
    rx: Sum8Receiver[Any] = Sum8Receiver(codec)
    _, scan = rx.resolve(bytes(data), vector=True)
    rx.finish()
    return _columns(codec, scan, 0, rx.stats)
