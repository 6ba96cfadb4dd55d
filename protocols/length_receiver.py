"""Sans-I/O receiver for the length-directed frames of a description.

The action receiver's technique (:mod:`fwbridge.protocols.action_receiver`)
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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from operator import xor
from typing import Any

from fwbridge.protocols.counters import Counters
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.frame_codec import FrameCodec, Received
from fwbridge.protocols.held_scan import HeldScan

__all__ = ["LengthReceiver", "LengthReceiverStats"]


@dataclass(slots=True)
class LengthReceiverStats(Counters):
    """Counters; every byte fed is in a frame, discarded, or still pending."""

    frames: int = 0
    bytes: int = 0
    discarded: int = 0
    resyncs: int = 0
    length_errors: int = 0
    trailer_errors: int = 0
    checksum_errors: int = 0
    truncated: int = 0


class LengthReceiver(HeldScan[Received]):
    """Byte stream in, :class:`Received` frames out, for one length-directed description.

    ``max_length`` (optional) lowers the description's largest length value.
    """

    stats: LengthReceiverStats

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
        self.check_size = ck.size if ck else 0
        self.from_start = 0 if ck and ck.span == "all" else len(d.header)
        self._buf = b""
        self._base = 0
        self._need = 0
        self._gap = False

    def finish(self) -> list[Received]:
        """End of stream: reject incomplete candidates; return the frames behind them."""
        if not self._buf:
            return []
        return self._scan(self._buf, final=True)

    def _check_ok(self, buf: bytes, i: int, end: int) -> bool:
        kind = self.kind
        if kind == "none":
            return True
        b = end - len(self.trailer) - self.check_size
        a = i + self.from_start
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
        if keep > cur:
            st.discarded += keep - cur
            gap = True
        st.frames += len(out)
        self._gap = gap
        self._buf = buf[keep:]
        self._base = base + keep
        self._need = need
        return out
