"""Sans-I/O receiver for the fixed-size frames of a description.

The odometry receiver's technique (:mod:`fwbridge.protocols.sum8_receiver`),
for any header, trailer, field types and checksum: every header position
is a candidate, inside a frame just accepted too (a weak checksum passes by
chance, and must not swallow the real frame it overlaps); after a rejected
candidate the scan goes on from the byte after its header (backtracking);
between calls only the unresolved tail is kept (a partial candidate or a
trailing prefix of the header: less than one frame).

Two scanners give the same result: a ``bytes.find`` loop for small inputs
and a numpy pass for large ones (header search, trailer and sum-8/XOR
checks, field decoding through a structured dtype compiled from the
description). CRCs run crcmod's C function once per complete candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from math import isfinite
from operator import xor
from typing import Any

import numpy as np

from fwbridge.protocols.counters import Counters
from fwbridge.protocols.frame_codec import FrameCodec, Received

__all__ = ["FixedReceiver", "FixedReceiverStats", "numpy_dtype"]


@dataclass(slots=True)
class FixedReceiverStats(Counters):
    """Counters; every byte fed is in a frame, discarded, or still pending."""

    frames: int = 0
    bytes: int = 0
    checksum_errors: int = 0
    trailer_errors: int = 0
    discarded: int = 0
    resyncs: int = 0
    nonfinite: int = 0
    overlapping: int = 0


def numpy_dtype(codec: FrameCodec[Any]) -> np.dtype[Any]:
    """The structured dtype of the fields of a fixed-size description."""
    parts: list[tuple[Any, ...]] = []
    for f in codec.desc.fields:
        if f.type == "bytes":
            parts.append((f.name, "u1", (f.size,)))
            continue
        order = "<" if f.byte_order == "little" else ">"
        kind = {"uint": "u", "int": "i", "float": "f"}[f.info.kind]
        parts.append((f.name, f"{order}{kind}{f.info.size}"))
    return np.dtype(parts)


@dataclass(slots=True)
class _Scan:
    accepted: Any  # positions (list or ndarray) relative to the buffer
    columns: list[list[Any]] | None  # raw field values per field, when vectorised
    checksum_errors: int
    trailer_errors: int
    keep: int
    nonfinite: int = 0


class FixedReceiver:
    """Byte stream in, :class:`Received` frames out, for one fixed-size description."""

    #: Inputs at least this long use the numpy scanner.
    vector_threshold = 512

    def __init__(self, codec: FrameCodec[Any]) -> None:
        d = codec.desc
        if d.size is None or not d.header:
            raise ValueError(f"{d.name}: a fixed-size frame with a header is needed")
        self.codec = codec
        self.stats = FixedReceiverStats()
        self.header = d.header
        self.size = d.size
        self.trailer = d.trailer
        ck = d.checksum
        self.kind = ck.algo.kind if ck else "none"
        c = ck.size if ck else 0
        self.span = (0 if ck and ck.span == "all" else len(d.header), d.size - len(d.trailer) - c)
        self.check_func = codec.check_func
        self.check_order = codec.check_order
        self.dtype = numpy_dtype(codec)
        self.float_fields = [f.name for f in d.fields if f.info.kind == "float"]
        self.bytes_fields = [f.name for f in d.fields if f.type == "bytes"]
        self._single = codec.prefix[0].struct if len(codec.prefix) == 1 else None
        self._buf = b""
        self._base = 0
        self._covered = 0
        self._gap = False

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (always less than one frame)."""
        return len(self._buf)

    # -- candidate checks ---------------------------------------------------------
    def _ok(self, buf: bytes, i: int) -> int:
        """0 when the candidate at ``i`` is a frame; 1 bad check; 2 bad trailer."""
        size, t = self.size, self.trailer
        if t and buf[i + size - len(t): i + size] != t:
            return 2
        a, b = self.span
        kind = self.kind
        if kind == "sum8":
            return 0 if sum(buf[i + a:i + b]) & 0xFF == buf[i + b] else 1
        if kind == "xor8":
            return 0 if reduce(xor, buf[i + a:i + b], 0) == buf[i + b] else 1
        if kind == "crc":
            assert self.check_func is not None
            c = b + self.codec.check_size
            got = int.from_bytes(buf[i + b:i + c], self.check_order)
            return 0 if self.check_func(buf[i + a:i + b]) == got else 1
        return 0

    def _hold(self, buf: bytes, pos: int) -> int:
        """Where to cut when no header starts at or after ``pos``: keep a header prefix."""
        n = len(buf)
        h = self.header
        for k in range(min(len(h) - 1, n - pos), 0, -1):
            if buf.endswith(h[:k]):
                return n - k
        return n

    # -- scanners -----------------------------------------------------------------
    def _scan_python(self, buf: bytes, covered: int) -> _Scan:
        n, size, header = len(buf), self.size, self.header
        accepted: list[int] = []
        errors = [0, 0, 0]
        pos = 0
        find, ok = buf.find, self._ok
        while True:
            i = find(header, pos)
            if i < 0:
                return _Scan(accepted, None, errors[1], errors[2], self._hold(buf, pos))
            if i + size > n:
                return _Scan(accepted, None, errors[1], errors[2], i)
            why = ok(buf, i)
            if not why:
                accepted.append(i)
                covered = i + size
            elif i >= covered:
                errors[why] += 1
            pos = i + 1

    def _scan_numpy(self, buf: bytes, covered: int) -> _Scan:
        n, size, header = len(buf), self.size, self.header
        a = np.frombuffer(buf, dtype=np.uint8)
        hl = len(header)
        hits = np.flatnonzero(a[: n - hl + 1] == header[0])
        for k in range(1, hl):
            hits = hits[a[hits + k] == header[k]]
        ncomplete = int(np.searchsorted(hits, n - size, side="right"))
        complete = hits[:ncomplete]
        rows = a[complete[:, None] + np.arange(size)]
        why = np.zeros(len(complete), dtype=np.uint8)
        lo, hi = self.span
        if self.trailer:
            tl = len(self.trailer)
            bad_t = ~(rows[:, size - tl:] == np.frombuffer(self.trailer, np.uint8)).all(axis=1)
            why[bad_t] = 2
        if self.kind == "sum8":
            bad = (rows[:, lo:hi].sum(axis=1, dtype=np.uint32) & 0xFF) != rows[:, hi]
            why[bad & (why == 0)] = 1
        elif self.kind == "xor8":
            bad = np.bitwise_xor.reduce(rows[:, lo:hi], axis=1) != rows[:, hi]
            why[bad & (why == 0)] = 1
        elif self.kind == "crc":
            ok = self._ok
            for k in np.flatnonzero(why == 0).tolist():
                if ok(buf, int(complete[k])):
                    why[k] = 1
        good = why == 0
        acc = complete[good]
        errs = [0, 0]
        invalid = complete[~good]
        if len(invalid):
            j = np.searchsorted(acc, invalid) - 1
            ends = np.where(j >= 0, acc[np.maximum(j, 0)] + size if len(acc) else 0, 0)
            outside = (invalid >= ends) & (invalid >= covered)
            reason = why[~good][outside]
            errs = [int(np.count_nonzero(reason == 1)), int(np.count_nonzero(reason == 2))]
        if ncomplete < len(hits):
            keep = int(hits[ncomplete])
        else:
            keep = self._hold(buf, max(0, n - hl + 1))
        body = np.ascontiguousarray(rows[good, hl: hl + self.dtype.itemsize])
        rec = body.view(self.dtype).reshape(-1)
        nonfinite = 0
        if self.float_fields and len(rec):
            fin = np.ones(len(rec), dtype=bool)
            for name in self.float_fields:
                fin &= np.isfinite(rec[name])
            nonfinite = int(len(rec) - np.count_nonzero(fin))
        columns = []
        for name in self.dtype.names or ():
            col = rec[name]
            columns.append([bytes(r) for r in col] if name in self.bytes_fields else col.tolist())
        return _Scan(acc, columns, errs[0], errs[1], keep, nonfinite)

    # -- feeding ------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> list[Received]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data:
            return []
        base = self._base
        chunk = bytes(data)
        self.stats.bytes += len(chunk)
        buf = self._buf + chunk if self._buf else chunk
        covered = self._covered - base
        vector = len(buf) >= max(self.vector_threshold, self.size)
        scan = self._scan_numpy(buf, covered) if vector else self._scan_python(buf, covered)
        self._account(scan, covered)
        st = self.stats
        st.frames += len(scan.accepted)
        st.checksum_errors += scan.checksum_errors
        st.trailer_errors += scan.trailer_errors
        self._buf = buf[scan.keep:]
        self._base += scan.keep
        make = self.codec.make_at
        if scan.columns is not None:
            st.nonfinite += scan.nonfinite
            offsets = (np.asarray(scan.accepted) + base).tolist()
            return list(map(make, offsets, *scan.columns))
        single, hl = self._single, len(self.header)
        if single is not None:
            unpack = single.unpack_from
            out = [make(base + p, *unpack(buf, p + hl)) for p in scan.accepted]
        else:
            raw = self.codec.raw_values
            out = [make(base + p, *raw(buf, p)) for p in scan.accepted]
        if self.float_fields and out:
            names = self.float_fields
            st.nonfinite += sum(1 for r in out if not all(
                isfinite(getattr(r.frame, k)) for k in names))
        return out

    def _account(self, scan: _Scan, covered: int) -> None:
        """Discarded bytes, resyncs and overlaps for the region this call resolved."""
        size = self.size
        cur = max(covered, 0)  # bytes of this buffer before cur are in a frame
        gap = self._gap
        discarded = resyncs = overlapping = 0
        acc = scan.accepted
        if isinstance(acc, np.ndarray) and len(acc):
            step = np.diff(acc)
            first = int(acc[0])
            if first >= cur and (len(acc) == 1 or int(step.min()) >= size):
                # no overlaps (the common case): one resync per gap between frames
                resyncs = int(np.count_nonzero(step > size)) + (1 if gap or first > cur else 0)
                end = int(acc[-1]) + size
                discarded = end - cur - size * len(acc)
                cur, gap = end, False
                acc = []
            else:
                acc = acc.tolist()
        for p in acc:
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

    def finish(self) -> list[Received]:
        """End of stream: count the held-back tail as discarded (no frame can be in it)."""
        tail = len(self._buf)
        uncovered = max(0, self._base + tail - max(self._covered, self._base))
        self.stats.discarded += uncovered
        if uncovered:
            self._gap = True
        self._base += tail
        self._buf = b""
        return []
