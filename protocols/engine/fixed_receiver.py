"""Sans-I/O receiver for the fixed-size frames of a description.

The odometry receiver's technique (:mod:`fwbridge.protocols.engine.kernels.sum8_receiver`),
for any header, trailer, field types and checksum: every header position
is a candidate, inside a frame just accepted too (a weak checksum passes by
chance, and must not swallow the real frame it overlaps); after a rejected
candidate the scan goes on from the byte after its header (backtracking);
between calls only the unresolved tail is kept (a partial candidate or a
trailing prefix of the header: less than one frame).

Two scanners give the same result: a ``bytes.find`` loop for small inputs
and a numpy pass for large ones (header search, trailer and sum-8/XOR
checks over every candidate at once, each record's bytes built in numpy).
CRCs: crcmod's C function per candidate in the small scanner, per-position
tables over all candidates at once in the numpy one. Records
(:mod:`fwbridge.protocols.engine.fixed_received`) keep the fields' bytes; a frame
is decoded when ``item.frame`` is read.

Linear whatever the stream: each scanner reads candidates' spans only while
that costs a few bytes per input byte (:attr:`FixedReceiver.direct_budget`;
the small loop gives a flood to the numpy scanner); beyond, every candidate
is judged by prefix values (:mod:`~fwbridge.protocols.engine.window_checks`), O(1)
each after one pass over the buffer, the prefix values of the held bytes
kept from the call before. A chunk that cannot complete the held candidate
is only kept, not scanned again.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import partial, reduce
from operator import xor
from typing import Any

import numpy as np

from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.fixed_checks import (
    FiniteCheck,
    check_table,
    numpy_dtype,
    xor_rows,
)
from fwbridge.protocols.engine.fixed_received import FixedReceived, received_class
from fwbridge.protocols.engine.held_scan import HeldBytes
from fwbridge.protocols.engine.receiver_counters import FixedReceiverStats
from fwbridge.protocols.engine.stream_accounting import WORK, account
from fwbridge.protocols.engine.stream_prefix import StreamPrefix
from fwbridge.protocols.errors import ConfigError

__all__ = ["FixedReceiver"]



@dataclass(slots=True)
class _Scan:
    accepted: Any  # positions (list or ndarray) relative to the buffer
    body: Any  # accepted frames' field bytes (uint8 rows), from the numpy scanner
    checksum_errors: int
    trailer_errors: int
    keep: int
    nonfinite: int = 0


class FixedReceiver(HeldBytes):
    """Byte stream in, :class:`FixedReceived` records out, for one fixed-size description.

    A record reads as the ``(offset, frame)`` pair of a :class:`Received`
    (``item.offset``, ``item.frame``) and is stored as its bytes: a kept
    frame is one object with nothing in it for the garbage collector.
    """

    #: Inputs at least this long use the numpy scanner.
    vector_threshold = 512
    #: Bytes one scan takes at most (a longer chunk is scanned in slices).
    max_scan = 1 << 18
    #: Candidate bytes the numpy scanner gathers at once (its index array is 8 times this).
    block_bytes = 1 << 20
    #: Largest per-position CRC tables the numpy scanner builds (bytes).
    crc_table_bytes = 8 << 20
    #: Checksum bytes a scan may read per byte scanned before it checks by prefixes.
    direct_budget = 2

    def __init__(self, codec: FrameCodec[Any]) -> None:
        d = codec.desc
        if d.size is None or not d.header:
            raise ConfigError(f"{d.name}: a fixed-size frame with a header is needed")
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
        self.algo = ck.algo if ck else None
        self._crc_table: np.ndarray[Any, Any] | None = None
        span = self.span[1] - self.span[0] + codec.check_size
        # The per-position tables take 256 entries a byte: beyond a few megabytes (a large
        # frame) the CRC of each candidate is crcmod's instead.
        if (ck is not None and self.kind == "crc"
                and span * 256 * max(2, ck.algo.width // 8) <= self.crc_table_bytes):
            self._crc_table, self._crc_zero = check_table(
                ck.algo, self.span[1] - self.span[0], codec.check_size, self.check_order)
            self._crc_pos = (np.arange(self.span[1] - self.span[0] + codec.check_size,
                                       dtype=np.intp) << 8)[:, None]
        self._cols = np.arange(self.span[0], d.size)
        c = codec.check_size if ck else 0
        self._check_cols = np.arange(self.span[1], self.span[1] + c)
        self._trailer_cols = np.arange(d.size - len(d.trailer), d.size)
        self._field_cols = np.arange(len(d.header), len(d.header) + self.dtype.itemsize)
        self._trailer_arr = np.frombuffer(d.trailer, np.uint8)
        # A record is the offset and the fields' bytes as on the wire (fixed_received).
        self.record = received_class(codec)
        self._new_record = partial(bytes.__new__, self.record)  # skips the type call
        self._fields_at = len(d.header)
        self._pack = struct.Struct(f"<q{self.dtype.itemsize}s").pack
        self._rows = f"V{8 + self.dtype.itemsize}"  # numpy: one record's bytes
        # Fields decoded as floats: float fields, and scaled ones (a large raw value times a
        # large scale is infinite); a frame with any of them not finite counts in nonfinite.
        self.float_fields = [f.name for f in d.fields if f.info.kind == "float" or f.scaled]
        self._finite = FiniteCheck(d.fields, self.dtype)
        self._screen4 = self._finite.screen_by_4
        # What the small loop reads, in one attribute: it runs once a serial port's read.
        self._small = (d.header, d.size, *self.span, len(d.header),
                       len(d.header) + self.dtype.itemsize,
                       self.kind == "sum8" and not d.trailer,  # the common check, inline
                       self._pack, self.record, self._ok)
        self._buf = b""
        self._more: list[bytes] = []  # chunks kept while the held candidate lacks bytes
        self._more_len = 0
        self._base = 0
        self._covered = 0
        self._gap = False
        self._prefix: StreamPrefix | None = None  # made by the first flood

    def _kept(self, data: bytes | bytearray | memoryview) -> bool:
        """Keep ``data`` without a scan when the held candidate still lacks bytes (True):
        a large frame read a few bytes at a time is not copied and searched again with
        every read. Otherwise join what was kept to the held bytes (False)."""
        if (len(self._buf) + self._more_len + len(data) < self.size
                and self._buf.startswith(self.header)):
            self._keep(bytes(data))
            self.stats.bytes += len(data)
            return True
        self._take_held()
        return False

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
    def _scan_numpy(self, buf: bytes, covered: int) -> _Scan:
        n, size, header = len(buf), self.size, self.header
        a = np.frombuffer(buf, dtype=np.uint8)
        hl = len(header)
        # Each header byte compared over the whole buffer: vector compares are cheaper than
        # gathering the bytes after each first byte.
        heads = a[: n - hl + 1] == header[0]
        for k in range(1, hl):
            heads &= a[k: n - hl + 1 + k] == header[k]
        hits = np.flatnonzero(heads)
        # Candidates too near the end to be whole: the last few heads (a frame's worth).
        ncomplete = len(hits) - int(np.count_nonzero(heads[max(0, n - size + 1):]))
        complete = hits[:ncomplete]
        g = self.span[0]
        if ncomplete * (size - g) <= self.direct_budget * n:
            bad_c, bad_t, good, body = self._judge_rows(a, complete)
        else:
            # A flood of candidates (false headers every few bytes): each judged by prefix
            # values, O(1) a candidate after one pass over the buffer, instead of reading
            # its whole span (O(frame) a candidate, O(n * frame) a scan).
            bad_c, bad_t = self._bad_windows(a, complete)
            good = ~bad_c if bad_t is None else ~(bad_c | bad_t)
            body = a[complete[good][:, None] + self._field_cols]
        errs = [0, 0]
        if len(body) == ncomplete:
            acc = complete
        else:
            acc = complete[good]
            # A rejected candidate inside an accepted frame is that frame's payload: the end
            # of the frames before each candidate is a running maximum that accepted ones
            # raise (past themselves, so they never count), from where earlier calls ended.
            cover = np.maximum.accumulate(np.where(good, complete + size, covered))
            outside = complete >= cover
            errs[0] = int(np.count_nonzero(bad_c & outside))
            if bad_t is not None:
                errs[1] = int(np.count_nonzero(bad_t & outside))
        if ncomplete < len(hits):
            keep = int(hits[ncomplete])
        else:
            keep = self._hold(buf, max(0, n - hl + 1))
        nonfinite = self._finite.count_rows(body) if len(acc) else 0
        return _Scan(acc, body, errs[0], errs[1], keep, nonfinite)

    def _judge_rows(self, a: np.ndarray[Any, Any], complete: np.ndarray[Any, Any]) -> tuple[
            Any, Any, Any, Any]:
        """(bad check, bad trailer, good, accepted field bytes) of the candidates, each
        read whole (the scan's budget allows it: candidates are few)."""
        # Candidates are gathered a block at a time, from the first byte the check covers:
        # a gather of them all is candidates x frame size; a block keeps the working memory
        # to a few megabytes.
        size, hl = self.size, len(self.header)
        g = self.span[0]
        ncomplete = len(complete)
        WORK.steps += ncomplete * (size - g)
        per = max(1, self.block_bytes // (size - g))
        parts: list[tuple[Any, Any, Any, Any]] = []
        for start in range(0, max(ncomplete, 1), per):
            rows = a[complete[start:start + per, None] + self._cols]
            bad_c, bad_t = self._bad_rows(rows)
            good = ~bad_c if bad_t is None else ~(bad_c | bad_t)
            fields = rows[:, hl - g: hl - g + self.dtype.itemsize]
            everyone = np.count_nonzero(good) == len(good)
            parts.append((bad_c, bad_t, good,
                          fields if everyone else np.compress(good, fields, axis=0)))
        if len(parts) == 1:
            bad_c, bad_t, good, body = parts[0]
        else:
            bad_c, good, body = (np.concatenate([p[k] for p in parts]) for k in (0, 2, 3))
            bad_t = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
        return bad_c, bad_t, good, body

    def _bad_windows(self, a: np.ndarray[Any, Any], complete: np.ndarray[Any, Any]) -> tuple[
            Any, Any]:
        """:meth:`_bad_rows` by prefix values: the trailer and check field read at each
        candidate, the check over its span from :mod:`window_checks`."""
        if self.trailer:
            WORK.steps += len(complete) * len(self.trailer)
            bad_t = ~(a[complete[:, None] + self._trailer_cols] == self._trailer_arr).all(axis=1)
        else:
            bad_t = None
        if self.algo is None:
            bad_c = np.zeros(len(complete), dtype=bool)
        else:
            lo, hi = self.span
            # the held bytes' prefix values kept from the calls before: each byte read once
            held = self._stream_prefix(self.algo)
            bad_c = ~held.matches(a, self._base, complete + lo, complete + hi,
                                  len(self._check_cols), self.check_order)
        if bad_t is not None:
            bad_c &= ~bad_t
        return bad_c, bad_t

    def _bad_rows(self, rows: np.ndarray[Any, Any]) -> tuple[Any, Any]:
        """(bad check, bad trailer or None) of each candidate row; a bad trailer is not
        also counted a bad check."""
        g, size = self.span[0], self.size
        lo, hi = self.span[0] - g, self.span[1] - g
        if self.trailer:
            tl = len(self.trailer)
            bad_t = ~(rows[:, size - g - tl:] == self._trailer_arr).all(axis=1)
        else:
            bad_t = None
        if self.kind == "sum8":
            bad_c = rows[:, lo:hi].sum(axis=1, dtype=np.uint8) != rows[:, hi]  # wraps at 256
        elif self.kind == "xor8":
            bad_c = np.bitwise_xor.reduce(rows[:, lo:hi], axis=1) != rows[:, hi]
        elif self.kind == "crc":
            assert self.algo is not None
            # message and check field in one gather: the XOR of every position's entry
            # is crc(zeros) exactly when the CRC matches the check field
            block = rows[:, lo:hi + self.codec.check_size]
            if self._crc_table is not None:
                bad_c = xor_rows(self._crc_table, self._crc_pos, block) != self._crc_zero
            else:
                func, order, end = self.check_func, self.check_order, hi - lo
                assert func is not None
                bad_c = np.fromiter((func(r[:end].tobytes()) != int.from_bytes(
                    r[end:].tobytes(), order) for r in block), dtype=bool, count=len(block))
        else:
            bad_c = np.zeros(len(rows), dtype=bool)
        if bad_t is not None:
            bad_c &= ~bad_t
        return bad_c, bad_t

    # -- feeding ------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> list[FixedReceived]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data or self._kept(data):
            return []
        if len(self._buf) + len(data) < max(self.vector_threshold, self.size):
            got = self._feed_small(bytes(data))  # a serial port's reads
            if got is not None:
                return got
            return self._feed(data, small=False)
        step = max(self.max_scan, self.size)
        if len(data) <= step:
            return self._feed(data)
        # Any chunking gives the same frames and counters: a long chunk is scanned in
        # slices, so the scanner's working memory does not grow with the chunk.
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        out: list[FixedReceived] = []
        for i in range(0, len(view), step):
            out += self._feed(view[i:i + step])
        return out

    def _feed(self, data: bytes | bytearray | memoryview, small: bool = True) -> list[
            FixedReceived]:
        if not data:
            return []
        if small and len(self._buf) + len(data) < max(self.vector_threshold, self.size):
            got = self._feed_small(bytes(data))
            if got is not None:
                return got
        offsets, body = self._scan_chunk(data)
        # The records' bytes built in numpy, one bytes object each by tolist(), and map
        # keeps the per-frame loop in C: no Python call per frame.
        rows = np.empty((len(offsets), 8 + self.dtype.itemsize), dtype=np.uint8)
        rows[:, :8] = offsets.astype("<i8").view(np.uint8).reshape(-1, 8)
        rows[:, 8:] = body
        return list(map(self._new_record, rows.view(self._rows).ravel().tolist()))

    def feed_rows(self, data: bytes | bytearray | memoryview) -> tuple[Any, Any]:
        """Take the next chunk of the stream; the frames it completes as (their stream
        offsets, int64; their fields' bytes, uint8 rows of :attr:`dtype`'s size), by the
        numpy scanner whatever the chunk's size: for batch users
        (:mod:`~fwbridge.protocols.engine.fixed_columns`). Same frames and counters as
        :meth:`feed`, which a stream may mix with it."""
        if data and self._kept(data):
            return np.zeros(0, np.int64), np.zeros((0, self.dtype.itemsize), np.uint8)
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        step = max(self.max_scan, self.size)
        parts = [self._scan_chunk(view[i:i + step]) for i in range(0, len(view), step)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self.dtype.itemsize), np.uint8)
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def _scan_chunk(self, data: bytes | bytearray | memoryview) -> tuple[Any, Any]:
        """One numpy scan of the held-back bytes and ``data``: offsets and field bytes."""
        base = self._base
        chunk = bytes(data)
        st = self.stats
        st.bytes += len(chunk)
        buf = self._buf + chunk if self._buf else chunk
        if len(buf) < self.size:  # no candidate can be whole: scanned again with the next
            self._buf = buf
            return np.zeros(0, np.int64), np.zeros((0, self.dtype.itemsize), np.uint8)
        covered = self._covered - base
        scan = self._scan_numpy(buf, covered)
        self._account(scan, covered)
        st.frames += len(scan.accepted)
        st.checksum_errors += scan.checksum_errors
        st.trailer_errors += scan.trailer_errors
        st.nonfinite += scan.nonfinite
        self._buf = buf[scan.keep:]
        self._base += scan.keep
        if self._prefix is not None:
            self._prefix.drop_before(self._base)
        return np.asarray(scan.accepted, dtype=np.int64) + base, scan.body

    def _feed_small(self, data: bytes) -> list[FixedReceived] | None:
        """The ``bytes.find`` scan, the stream accounting and the records in one loop.

        Small chunks (a serial port's reads) are mostly per-call cost: this
        makes no scan or accounting objects. The property tests hold it to the
        numpy scanner and to any chunking. None (and nothing changed) when its
        candidates would read more than a few checksum bytes per byte: the
        numpy scanner judges a flood of candidates in linear time.
        """
        st = self.stats
        buf = self._buf + data if self._buf else data
        header, size, lo, hi, f0, f1, sum8, pack, cls, ok = self._small
        base, n = self._base, len(buf)
        # The checksum bytes this loop would read are at most (headers) x (span): past a
        # few a byte (a flood of candidates), the numpy scan judges them in linear time.
        # count() misses overlapping headers: a header's length times it bounds them.
        work = buf.count(header) * len(header) * (hi - lo)
        if work > 4 * n + (hi - lo):
            return None
        cov = self._covered - base  # candidates before it are payload, not errors
        cur = cov if cov > 0 else 0  # end of the bytes in frames (stream_accounting's cover)
        gap = self._gap
        bad_check = bad_trailer = discarded = resyncs = overlapping = 0
        out: list[FixedReceived] = []
        new, append, find = bytes.__new__, out.append, buf.find
        pos = 0
        while True:
            i = find(header, pos)
            if i < 0:
                if len(header) == 2:  # the common header: a trailing first byte is kept
                    keep = n - 1 if n - 1 >= pos and buf[n - 1] == header[0] else n
                else:
                    keep = self._hold(buf, pos)
                break
            if i + size > n:
                keep = i
                break
            why = (0 if sum(buf[i + lo:i + hi]) & 0xFF == buf[i + hi] else 1) if sum8 else ok(
                buf, i)
            if not why:
                append(new(cls, pack(base + i, buf[i + f0:i + f1])))
                if i < cur:
                    overlapping += 1
                elif i > cur or gap:
                    discarded += i - cur
                    resyncs += 1
                    gap = False
                cov = cur = i + size  # candidates only move forward: this frame ends last
            elif i >= cov:
                if why == 1:
                    bad_check += 1
                else:
                    bad_trailer += 1
            pos = i + 1  # every header position is a candidate, inside frames too
        if keep > cur:
            discarded += keep - cur
            gap = True
        st.bytes += len(data)
        WORK.steps += work
        self._gap = gap
        if base + cur > self._covered:
            self._covered = base + cur
        self._buf = buf[keep:]
        self._base = base + keep
        if out:
            st.frames += len(out)
            if self._screen4:  # float32 fields: their high bytes, one slice (as Sum8Receiver)
                high = b"".join(out)[3::4]
                if b"\x7f" in high or b"\xff" in high:
                    st.nonfinite += self._finite.count_records(out)
            elif self._finite.names:
                st.nonfinite += self._finite.count_records(out)
        if discarded or bad_check or bad_trailer or overlapping:  # none, mostly: no stores
            st.discarded += discarded
            st.resyncs += resyncs
            st.overlapping += overlapping
            st.checksum_errors += bad_check
            st.trailer_errors += bad_trailer
        elif resyncs:
            st.resyncs += resyncs
        return out

    def _account(self, scan: _Scan, covered: int) -> None:
        """Discarded bytes, resyncs and overlaps for the region this call resolved."""
        got = account(scan.accepted, covered, self._gap, scan.keep, self.size)
        self._gap = got.gap
        self._covered = max(self._covered, self._base + got.cover)
        st = self.stats
        st.discarded += got.discarded
        st.resyncs += got.resyncs
        st.overlapping += got.overlapping

    def finish(self) -> list[FixedReceived]:
        """End of stream: count the held-back tail as discarded (no frame can be in it)."""
        tail = len(self._buf) + self._more_len
        self._more, self._more_len = [], 0
        uncovered = max(0, self._base + tail - max(self._covered, self._base))
        self.stats.discarded += uncovered
        if uncovered:
            self._gap = True
        self._base += tail
        self._buf = b""
        return []
