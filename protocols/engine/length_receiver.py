"""Sans-I/O receiver for the length-directed frames of a description.

The action receiver's technique (:mod:`fwbridge.protocols.engine.kernels.action_receiver`)
for any header, length field, checksum and trailer: a header is a
candidate, its length field says where the check and the trailer must be,
and the candidate is accepted when they are right there, so data holding
the header or trailer bytes is fine. After a rejected candidate the scan
goes on from the byte after its header (backtracking); an accepted frame
is skipped whole (a frame inside another's data is data).

A candidate whose length field points past the bytes received holds the
scan until they arrive (at most the largest frame the description allows)
or until :meth:`LengthReceiver.finish` ends the stream, which rejects it
(``truncated``) and scans the bytes behind it again.

From :attr:`LengthReceiver.vector_threshold` bytes on, a scan judges every
candidate at once in numpy (:mod:`~fwbridge.protocols.engine.length_scan`): linear
in the buffer whatever its headers and length fields say, the prefix values
of the bytes a candidate holds kept from the call before.
"""

from __future__ import annotations

from functools import reduce
from operator import xor
from typing import TYPE_CHECKING, Any

from fwbridge.protocols.engine.codec import FrameCodec, Received
from fwbridge.protocols.engine.held_scan import HeldScan
from fwbridge.protocols.engine.receiver_counters import LengthReceiverStats
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.protocols.engine.stream_prefix import StreamPrefix

__all__ = ["LengthReceiver"]



class LengthReceiver(HeldScan[Received]):
    """Byte stream in, :class:`Received` frames out, for one length-directed description.

    ``max_length`` (optional) lowers the description's largest length value.
    """

    stats: LengthReceiverStats
    #: Buffers at least this long are scanned by :mod:`~fwbridge.protocols.engine.length_scan`.
    vector_threshold = 512

    def __init__(self, codec: FrameCodec[Any], max_length: int | None = None) -> None:
        d = codec.desc
        if d.length is None or not d.header:
            raise ConfigError(f"{d.name}: a length-directed frame with a header is needed")
        self.codec = codec
        self.stats = LengthReceiverStats()
        self.max_length = d.length.max if max_length is None else min(max_length, d.length.max)
        self.header = d.header
        self.trailer = d.trailer
        self.bias = d.data_bias
        self.overhead = d.overhead
        self.len_at = codec.len_offset
        self.len_unpack = codec.len_struct.unpack_from
        self.len_end = codec.len_offset + codec.len_struct.size
        ck = d.checksum
        self.kind = ck.algo.kind if ck else "none"
        self.algo = ck.algo if ck else None
        self.check_size = ck.size if ck else 0
        self.from_start = 0 if ck and ck.span == "all" else len(d.header)
        self._buf = b""
        self._base = 0
        self._need = 0
        self._gap = False
        self._prefix: StreamPrefix | None = None  # made by the first flood

    def finish(self) -> list[Received]:
        """End of stream: reject incomplete candidates; return the frames behind them."""
        buf = self._take_held()
        if not buf:
            return []
        return self._scan(buf, final=True)

    def _check_ok(self, buf: bytes, i: int, end: int) -> bool:
        kind = self.kind
        if kind == "none":
            return True
        b = end - len(self.trailer) - self.check_size
        a = i + self.from_start
        WORK.steps += b - a
        if kind == "sum8":
            return sum(buf[a:b]) & 0xFF == buf[b]
        if kind == "xor8":
            return reduce(xor, buf[a:b], 0) == buf[b]
        func = self.codec.check_func
        assert func is not None
        return func(buf[a:b]) == int.from_bytes(buf[b:b + self.check_size],
                                                self.codec.check_order)

    def _hold(self, buf: bytes, pos: int) -> int:
        n, h = len(buf), self.header
        for k in range(min(len(h) - 1, n - pos), 0, -1):
            if buf.endswith(h[:k]):
                return n - k
        return n

    def _scan(self, buf: bytes, final: bool) -> list[Received]:
        if len(buf) >= self.vector_threshold:
            return self._scan_numpy(buf, final)
        st = self.stats
        out: list[Received] = []
        n = len(buf)
        base = self._base
        header, trailer = self.header, self.trailer
        tl = len(trailer)
        find, startswith = buf.find, buf.startswith
        len_at, len_end, unpack = self.len_at, self.len_end, self.len_unpack
        bias, overhead, max_len = self.bias, self.overhead, self.max_length
        make, raw = self.codec.make_at, self.codec.raw_values
        check_ok = self._check_ok
        cur = 0  # bytes before cur are accounted for (in a frame or discarded)
        gap = self._gap
        pos = 0
        need = 0
        while True:
            i = pos if startswith(header, pos) else find(header, pos)
            if i < 0:
                keep = n if final else self._hold(buf, pos)
                need = n - keep + 1 if keep < n else 0
                break
            if i + len_end > n:  # the length field is not here yet
                if not final:
                    keep, need = i, len_end
                    break
                st.truncated += 1
                pos = i + 1
                continue
            value = unpack(buf, i + len_at)[0]
            if value > max_len or value < bias:
                st.length_errors += 1
                pos = i + 1
                continue
            end = i + overhead + value - bias
            if end > n:
                if not final:
                    keep, need = i, end - i
                    break
                st.truncated += 1
                pos = i + 1
                continue
            if tl and buf[end - tl:end] != trailer:
                st.trailer_errors += 1
                pos = i + 1
                continue
            if not check_ok(buf, i, end):
                st.checksum_errors += 1
                pos = i + 1
                continue
            if i > cur or gap:
                st.resyncs += 1
                st.discarded += i - cur
                gap = False
            out.append(make(base + i, *raw(buf, i, end)))
            cur = pos = end
        self._close_scan(buf, len(out), cur, gap, keep, need)
        return out

    def _scan_numpy(self, buf: bytes, final: bool) -> list[Received]:
        """:meth:`_scan` with every candidate judged at once (same frames and counters)."""
        import numpy as np

        from fwbridge.protocols.engine.length_scan import (
            check_matches,
            gather_int,
            header_hits,
            walk,
        )

        st = self.stats
        n = len(buf)
        a = np.frombuffer(buf, dtype=np.uint8)
        hits = header_hits(a, [self.header])
        fmt = self.codec.len_struct.format
        value = gather_int(a, hits + self.len_at, np.dtype(fmt))
        lf_ok = hits + self.len_end <= n
        len_bad = lf_ok & ((value > self.max_length) | (value < self.bias))
        ends = hits + self.overhead + value - self.bias
        whole = lf_ok & ~len_bad & (ends <= n)
        short = ~lf_ok | (lf_ok & ~len_bad & (ends > n))
        tl = len(self.trailer)
        tr_bad = np.zeros(len(hits), dtype=bool)
        if tl:
            at = np.flatnonzero(whole)
            rows = a[ends[at][:, None] - tl + np.arange(tl)]
            tr_bad[at] = ~(rows == np.frombuffer(self.trailer, np.uint8)).all(axis=1)
        judged = np.flatnonzero(whole & ~tr_bad)
        ck_bad = np.zeros(len(hits), dtype=bool)
        if self.kind != "none" and len(judged):
            c = self.check_size
            e = ends[judged] - tl - c
            held = None if self.algo is None else self._stream_prefix(self.algo)
            ok = check_matches(a, self.algo, hits[judged] + self.from_start, e, c,
                               self.codec.check_order, held, self._base)
            ck_bad[judged] = ~ok
        good = whole & ~tr_bad & ~ck_bad
        w = walk(hits, ends, good, None if final else short)
        v = w.visited
        st.length_errors += int(np.count_nonzero(v & len_bad))
        st.trailer_errors += int(np.count_nonzero(v & tr_bad))
        st.checksum_errors += int(np.count_nonzero(v & ck_bad))
        if final:
            st.truncated += int(np.count_nonzero(v & short))
        need = 0
        if w.stop is not None:
            i = int(hits[w.stop])
            keep = i
            need = self.len_end if not lf_ok[w.stop] else int(ends[w.stop]) - i
        else:
            keep = n if final else self._hold(buf, w.pos)
            need = n - keep + 1 if keep < n else 0
        base = self._base
        make, raw = self.codec.make_at, self.codec.raw_values
        out = [make(base + i, *raw(buf, i, end))
               for i, end in zip(w.starts.tolist(), w.stops.tolist())]
        self._close_walk(buf, w.starts, w.stops, keep, need)
        return out
