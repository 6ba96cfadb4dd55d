"""The frames of a fixed-size description as numpy columns, a chunk at a time.

:class:`~fwbridge.protocols.frame_receiver.FixedReceiver` makes one record
per frame; a decoder of a large capture that prints whole blocks wants the
chunk's frames as columns instead (one array per field), as
:meth:`~fwbridge.protocols.sum8_receiver.Sum8Receiver.feed_columns` gives
for the odometry family. :class:`ColumnsReceiver` is that for any
fixed-size description with a header and a sum-8, XOR-8, CRC or no check:
the same scan as the fixed receiver's numpy pass (every header position a
candidate, the unresolved tail held back), the same frames, offsets and
counters for any chunking (the tests hold the two together), and
:meth:`ColumnsReceiver.records` turns a batch back into the fixed
receiver's records for the rare batch a caller cannot print as a block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbridge.protocols.frame_codec import FrameCodec, Received
from fwbridge.protocols.frame_receiver import FixedReceiverStats, crc_rows, numpy_dtype
from fwbridge.protocols.stream_accounting import account

__all__ = ["ColumnsReceiver", "FixedColumns", "columns_receiver"]

#: Largest per-position CRC tables (bytes) a columns receiver builds; beyond, no columns path.
CRC_TABLE_BYTES = 8 << 20


@dataclass(frozen=True)
class FixedColumns:
    """One batch of frames: their stream offsets and one array per field.

    Values as the fixed receiver's records hold them before labels: scaled
    fields as doubles (``raw * scale + offset``), other numbers as on the
    wire, a bytes field as a 2-D ``uint8`` array (a row per frame), enum and
    flags fields as their raw integers.
    """

    offset: np.ndarray[Any, Any]
    fields: dict[str, np.ndarray[Any, Any]]
    stats: FixedReceiverStats

    def __len__(self) -> int:
        return len(self.offset)


def columns_receiver(codec: FrameCodec[Any]) -> ColumnsReceiver | None:
    """A columns receiver for ``codec``'s description, or None when it has no fixed layout
    (a length field, no header, a check whose vector tables would be too large)."""
    d = codec.desc
    if d.size is None or not d.header or d.length is not None:
        return None
    ck = d.checksum
    if ck is not None:
        kind = ck.algo.kind
        if kind not in ("sum8", "xor8", "crc"):
            return None
        if kind == "crc":
            span = d.size - len(d.trailer) - ck.size - (0 if ck.span == "all" else len(d.header))
            if span * 256 * max(2, ck.algo.width // 8) > CRC_TABLE_BYTES:
                return None
    if any(f.scaled and (f.enum or f.flags or f.type == "bytes") for f in d.fields):
        return None
    return ColumnsReceiver(codec)


class ColumnsReceiver:
    """Byte stream in, :class:`FixedColumns` out: the fixed receiver's frames, as columns."""

    #: Bytes one scan takes at most (a longer chunk is scanned in slices): bounded memory.
    max_scan = 1 << 18
    #: Candidate bytes gathered at once (a flood of headers against a large frame).
    block_bytes = 1 << 20

    def __init__(self, codec: FrameCodec[Any]) -> None:
        d = codec.desc
        assert d.size is not None and d.header, "see columns_receiver()"
        self.codec = codec
        self.stats = FixedReceiverStats()
        self.header = d.header
        self.size = d.size
        self.trailer = d.trailer
        ck = d.checksum
        self.kind = ck.algo.kind if ck else "none"
        self.algo = ck.algo if ck else None
        c = ck.size if ck else 0
        self.check_size = c
        self.check_order = codec.check_order
        # the bytes the check covers, from the first byte a candidate row is gathered at
        self.span = (0 if ck and ck.span == "all" else len(d.header), d.size - len(d.trailer) - c)
        self.dtype = numpy_dtype(codec)
        self._cols = np.arange(self.span[0], d.size)
        self._trailer = np.frombuffer(d.trailer, np.uint8)
        self._scaled = [(f.name, f.scale if f.scale is not None else 1.0, f.offset)
                        for f in d.fields if f.scaled]
        self.float_fields = [f.name for f in d.fields if f.info.kind == "float" or f.scaled]
        self._buf = b""
        self._base = 0
        self._covered = 0
        self._gap = False

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (always less than one frame)."""
        return len(self._buf)

    def feed_columns(self, data: bytes | bytearray | memoryview) -> FixedColumns:
        """Take the next chunk of the stream; return the frames it completes, as columns."""
        view = memoryview(data).cast("B")
        step = max(self.max_scan, self.size)
        parts = [self._feed(view[i:i + step]) for i in range(0, len(view), step)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return self._empty()
        fields = {name: np.concatenate([p.fields[name] for p in parts])
                  for name in parts[0].fields}
        return FixedColumns(np.concatenate([p.offset for p in parts]), fields, self.stats)

    def _empty(self) -> FixedColumns:
        rec = np.zeros(0, dtype=self.dtype)
        return self._decoded(np.zeros(0, dtype=np.int64), rec)

    def _feed(self, data: memoryview) -> FixedColumns:
        st = self.stats
        st.bytes += len(data)
        buf = self._buf + data.tobytes() if self._buf else data.tobytes()
        n, size, header = len(buf), self.size, self.header
        if n < size:  # no candidate can be complete: the next call scans these bytes again
            self._buf = buf
            return self._empty()
        base = self._base
        covered = self._covered - base
        a = np.frombuffer(buf, dtype=np.uint8)
        hl = len(header)
        hits = np.flatnonzero(a[: n - hl + 1] == header[0])
        for k in range(1, hl):
            hits = hits[a[hits + k] == header[k]]
        ncomplete = int(np.searchsorted(hits, n - size, side="right"))
        complete = hits[:ncomplete]
        g = self.span[0]
        per = max(1, self.block_bytes // (size - g))
        bad_cs, bad_ts, bodies = [], [], []
        for start in range(0, max(ncomplete, 1), per):
            rows = a[complete[start:start + per, None] + self._cols]
            bad_c, bad_t = self._bad_rows(rows)
            good = ~(bad_c | bad_t)
            bad_cs.append(bad_c)
            bad_ts.append(bad_t)
            bodies.append(rows[good, hl - g:hl - g + self.dtype.itemsize])
        bad_c = np.concatenate(bad_cs)
        bad_t = np.concatenate(bad_ts)
        good = ~(bad_c | bad_t)
        acc = complete[good]
        if len(acc) != len(complete):
            invalid = complete[~good]
            j = np.searchsorted(acc, invalid) - 1
            ends = np.where(j >= 0, acc[np.maximum(j, 0)] + size if len(acc) else 0, 0)
            outside = (invalid >= ends) & (invalid >= covered)  # inside a frame: its payload
            st.checksum_errors += int(np.count_nonzero(bad_c[~good] & outside))
            st.trailer_errors += int(np.count_nonzero(bad_t[~good] & outside))
        keep = int(hits[ncomplete]) if ncomplete < len(hits) else self._hold(buf, n - hl + 1)
        got = account(acc, covered, self._gap, keep, size)
        self._gap = got.gap
        self._covered = max(self._covered, base + got.cover)
        st.discarded += got.discarded
        st.resyncs += got.resyncs
        st.overlapping += got.overlapping
        st.frames += len(acc)
        self._buf = buf[keep:]
        self._base = base + keep
        body = np.ascontiguousarray(np.concatenate(bodies))
        rec = body.view(self.dtype).reshape(len(acc))
        return self._decoded(acc.astype(np.int64) + base, rec)

    def _decoded(self, offsets: np.ndarray[Any, Any], rec: np.ndarray[Any, Any]) -> FixedColumns:
        """The columns of structured records ``rec``: scaled fields scaled, non-finite counted."""
        names = self.dtype.names or ()
        fields = {name: rec[name] for name in names}
        with np.errstate(over="ignore", invalid="ignore"):  # an infinite result is the value
            for name, scale, offset in self._scaled:
                col = np.multiply(fields[name], scale, dtype=np.float64)
                if offset:
                    np.add(col, offset, out=col)
                fields[name] = col
        if self.float_fields and len(offsets):
            fin = np.ones(len(offsets), dtype=bool)
            for name in self.float_fields:
                fin &= np.isfinite(fields[name])
            self.stats.nonfinite += int(len(offsets) - np.count_nonzero(fin))
        return FixedColumns(offsets, fields, self.stats)

    def _bad_rows(self, rows: np.ndarray[Any, Any]) -> tuple[Any, Any]:
        """(bad check, bad trailer) of each candidate row; a bad trailer is not also a bad
        check (the fixed receiver counts each rejected candidate once)."""
        g, size = self.span[0], self.size
        lo, hi = 0, self.span[1] - g
        if self.trailer:
            bad_t = ~(rows[:, size - g - len(self.trailer):] == self._trailer).all(axis=1)
        else:
            bad_t = np.zeros(len(rows), dtype=bool)
        if self.kind == "sum8":
            bad_c = (rows[:, lo:hi].sum(axis=1, dtype=np.uint32) & 0xFF) != rows[:, hi]
        elif self.kind == "xor8":
            bad_c = np.bitwise_xor.reduce(rows[:, lo:hi], axis=1) != rows[:, hi]
        elif self.kind == "crc":
            assert self.algo is not None
            got = np.zeros(len(rows), dtype=np.uint64)
            for j in range(self.check_size):
                shift = 8 * (j if self.check_order == "little" else self.check_size - 1 - j)
                got |= rows[:, hi + j].astype(np.uint64) << np.uint64(shift)
            bad_c = crc_rows(self.algo, rows[:, lo:hi]) != got
        else:
            bad_c = np.zeros(len(rows), dtype=bool)
        return bad_c & ~bad_t, bad_t

    def _hold(self, buf: bytes, pos: int) -> int:
        """Where to cut when no header starts at or after ``pos``: keep a header prefix."""
        n = len(buf)
        h = self.header
        for k in range(min(len(h) - 1, n - max(pos, 0)), 0, -1):
            if buf.endswith(h[:k]):
                return n - k
        return n

    def records(self, columns: FixedColumns) -> list[Received]:
        """The records the fixed receiver gives for the frames of ``columns`` (a batch
        that needs the per-frame path)."""
        values = [columns.fields[f.name].tolist() if f.type != "bytes"
                  else [bytes(r) for r in columns.fields[f.name]] for f in self.codec.desc.fields]
        return list(map(self.codec.make_at_scaled, columns.offset.tolist(), *values))

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
