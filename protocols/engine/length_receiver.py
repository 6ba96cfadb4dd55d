"""Sans-I/O receiver for the length-directed frames of a description.

A header is a candidate, its length field says where the check and the
trailer must be, and the candidate is accepted when they are right there,
so data holding the header or trailer bytes is fine. After a rejected
candidate the scan goes on from the byte after its header (backtracking);
an accepted frame is skipped whole (a frame inside another's data is data).

A candidate is judged once its head is here (its header and the fields
before the variable data, the length among them): a candidate whose head,
or whose length field, points past the bytes received holds the scan until
they arrive (at most the largest frame the description allows) or until
:meth:`LengthReceiver.finish` ends the stream, which rejects it
(``truncated``) and scans the bytes behind it again. Waiting for the whole
head, not just the length field, makes what a kept rejection holds the same
whatever the chunking.

The options of the shape (the action kernel,
:mod:`fwbridge.protocols.engine.kernels.action_receiver`, has the same and
is held to this receiver byte for byte):

- the description's alternative headers (``[frame].alt_headers``): frames
  under one are candidates too, never accepted in strict mode; when their
  length and trailer are right they count as ``header_errors`` (and as
  ``checksum_errors`` too when their check is wrong). So such a candidate can
  hold the scan like a false header can. Their length, trailer and truncation
  rejections are not counted: the counters are about the description's header.
- ``relaxed``: alternative headers are accepted and the check is not
  required; every frame comes as a :class:`RelaxedReceived` naming its
  defects, and those with one count as ``relaxed_accepts``. Never the default.
- ``keep_rejects``: the rejected candidates under the header are kept as
  :class:`Rejection` records (:meth:`LengthReceiver.take_rejects`), enough to
  answer them.

From :attr:`LengthReceiver.vector_threshold` bytes on, a scan judges every
candidate at once in numpy (:mod:`~fwbridge.protocols.engine.length_scan`): linear
in the buffer whatever its headers and length fields say, the prefix values
of the bytes a candidate holds kept from the call before.
"""

from __future__ import annotations

import re
from functools import reduce
from operator import xor
from typing import TYPE_CHECKING, Any, NamedTuple

from fwbridge.protocols.descriptions.loader import MAX_FRAME
from fwbridge.protocols.engine.codec import FrameCodec, Received
from fwbridge.protocols.engine.held_scan import HeldScan
from fwbridge.protocols.engine.receiver_counters import LengthReceiverStats
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.protocols.engine.stream_prefix import StreamPrefix

__all__ = ["LengthReceiver", "Rejection", "RelaxedReceived"]

def _common_prefix(headers: tuple[bytes, ...]) -> bytes:
    """The bytes every one of ``headers`` starts with."""
    k = 0
    while all(len(h) > k and h[k] == headers[0][k] for h in headers):
        k += 1
    return headers[0][:k]


class RelaxedReceived(NamedTuple):
    """A frame a relaxed receiver gave, the stream offset of its first header byte, and the
    checks it failed: ``"header"`` (an alternative header) and the check's name (the
    description's ``[checksum].name``: ``"checksum"`` unless it says otherwise, the action
    frame's ``"crc"``); empty for an intact frame."""

    offset: int
    frame: Any
    defects: tuple[str, ...] = ()


class Rejection(NamedTuple):
    """A rejected candidate under the description's header, kept when asked for.

    ``reason``: ``"length"`` (the length field out of range), ``"trailer"``, the check's
    name (a wrong check), or ``"truncated"`` (the stream ended inside it); ``head``: its
    bytes from the header to the variable data (the fields before it), fewer only when
    the stream ended first.
    """

    offset: int
    reason: str
    head: bytes


class LengthReceiver(HeldScan[Received | RelaxedReceived]):
    """Byte stream in, :class:`Received` frames out (:class:`RelaxedReceived` in relaxed
    mode), for one length-directed description.

    ``max_length`` (optional): the largest length value accepted, in place of the
    description's (a link may allow more or less), within the length field's range.
    ``relaxed``, ``keep_rejects``: the module's options.
    """

    stats: LengthReceiverStats
    #: Buffers at least this long are scanned by :mod:`~fwbridge.protocols.engine.length_scan`.
    vector_threshold = 512

    def __init__(self, codec: FrameCodec[Any], max_length: int | None = None, *,
                 relaxed: bool = False, keep_rejects: bool = False) -> None:
        d = codec.desc
        if d.length is None or not d.header:
            raise ConfigError(f"{d.name}: a length-directed frame with a header is needed")
        top = min(d.field(d.length.field).info.hi, MAX_FRAME + d.data_bias)
        if max_length is None:
            max_length = d.length.max
        elif (not isinstance(max_length, int) or isinstance(max_length, bool)
              or not 0 <= max_length <= top):
            raise ConfigError(f"max_length must be an int in 0..{top}, got {max_length!r}")
        self.codec = codec
        self.stats = LengthReceiverStats()
        self.max_length = max_length
        self.relaxed = relaxed
        self.keep_rejects = keep_rejects
        self.rejects: list[Rejection] = []
        self.header = d.header
        self.alt_headers = d.alt_headers
        self.headers = (d.header, *d.alt_headers)
        # One header: bytes.find. More: bytes.find of the bytes they all start with (FE for
        # FE EF and FE FF), at memchr speed, each hit then looked up; a regex of them all
        # (the leftmost match) when they share no first byte.
        self._heads = frozenset(self.headers)
        self._lead = _common_prefix(self.headers) if d.alt_headers else b""
        self._search = re.compile(b"|".join(re.escape(h) for h in self.headers)).search if (
            d.alt_headers and not self._lead) else None
        self.trailer = d.trailer
        self.bias = d.data_bias
        self.overhead = d.overhead
        self.len_at = codec.len_offset
        self.len_unpack = codec.len_struct.unpack_from
        self.len_end = codec.len_offset + codec.len_struct.size
        self.head_end = codec.data_offset
        ck = d.checksum
        self.kind = ck.algo.kind if ck else "none"
        self.algo = ck.algo if ck else None
        self.check_size = ck.size if ck else 0
        self.check_name = ck.name if ck else "checksum"
        self.from_start = 0 if ck and ck.span == "all" else len(d.header)
        # defects of a relaxed frame: (under the header?, check right?) -> names
        self._defects = {(True, True): (), (True, False): (self.check_name,),
                         (False, True): ("header",), (False, False): ("header", self.check_name)}
        self._buf = b""
        self._base = 0
        self._need = 0
        self._gap = False
        self._prefix: StreamPrefix | None = None  # made by the first flood

    def finish(self) -> list[Received | RelaxedReceived]:
        """End of stream: reject incomplete candidates; return the frames behind them."""
        buf = self._take_held()
        if not buf:
            return []
        return self._scan(buf, final=True)

    def take_rejects(self) -> list[Rejection]:
        """The :class:`Rejection` records kept since the last call (``keep_rejects``)."""
        out, self.rejects = self.rejects, []
        return out

    def _keep_reject(self, buf: bytes, i: int, reason: str) -> None:
        """Keep the rejected candidate at ``buf[i]`` (counted by the caller: the loop counts
        inline, a call per candidate costing more than the count)."""
        self.rejects.append(Rejection(self._base + i, reason, buf[i:i + self.head_end]))

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
        """Where the bytes to hold begin: the longest end of ``buf`` (from ``pos`` on) that
        begins a header, which the next chunk may complete."""
        n = len(buf)
        for k in range(min(len(self.header) - 1, n - pos), 0, -1):
            tail = buf[n - k:]
            if any(h.startswith(tail) for h in self.headers):
                return n - k
        return n

    def _scan(self, buf: bytes, final: bool) -> list[Received | RelaxedReceived]:
        if len(buf) >= self.vector_threshold:
            return self._scan_numpy(buf, final)
        st = self.stats
        out: list[Received | RelaxedReceived] = []
        n = len(buf)
        base = self._base
        header, trailer = self.header, self.trailer
        tl = len(trailer)
        find, startswith, search = buf.find, buf.startswith, self._search
        len_at, head_end, unpack = self.len_at, self.head_end, self.len_unpack
        bias, overhead, max_len = self.bias, self.overhead, self.max_length
        make_at, make, raw = self.codec.make_at, self.codec.make, self.codec.raw_values
        check_ok, keep_reject = self._check_ok, self._keep_reject
        relaxed, keep_rejects, defects = self.relaxed, self.keep_rejects, self._defects
        cur = 0  # bytes before cur are accounted for (in a frame or discarded)
        gap = self._gap
        pos = 0
        need = 0
        primary = True
        lead, heads, hl = self._lead, self._heads, len(header)
        while True:
            if lead:
                while True:  # the next lead that begins a whole header
                    i = find(lead, pos)
                    if i < 0:
                        break
                    primary = startswith(header, i)
                    if primary or buf[i:i + hl] in heads:
                        break
                    if i + hl > n:  # a header's beginning at the end: held below
                        i = -1
                        break
                    pos = i + 1
            elif search is None:
                i = pos if startswith(header, pos) else find(header, pos)
            else:
                m = search(buf, pos)
                i = m.start() if m else -1
                primary = i >= 0 and startswith(header, i)
            if i < 0:
                keep = n if final else self._hold(buf, pos)
                need = n - keep + 1 if keep < n else 0
                break
            if i + head_end > n:  # the length field, or a field before the data, not here yet
                if not final:
                    keep, need = i, head_end
                    break
                if primary:
                    st.truncated += 1
                    if keep_rejects:
                        keep_reject(buf, i, "truncated")
                pos = i + 1
                continue
            value = unpack(buf, i + len_at)[0]
            if value > max_len or value < bias:
                if primary:
                    st.length_errors += 1
                    if keep_rejects:
                        keep_reject(buf, i, "length")
                pos = i + 1
                continue
            end = i + overhead + value - bias
            if end > n:
                if not final:
                    keep, need = i, end - i
                    break
                if primary:
                    st.truncated += 1
                    if keep_rejects:
                        keep_reject(buf, i, "truncated")
                pos = i + 1
                continue
            if tl and buf[end - tl:end] != trailer:
                if primary:
                    st.trailer_errors += 1
                    if keep_rejects:
                        keep_reject(buf, i, "trailer")
                pos = i + 1
                continue
            ok = check_ok(buf, i, end)
            if not (primary and ok) and not relaxed:
                if not primary:
                    st.header_errors += 1
                if not ok:
                    st.checksum_errors += 1
                    if primary and keep_rejects:
                        keep_reject(buf, i, self.check_name)
                pos = i + 1
                continue
            if i > cur or gap:
                st.resyncs += 1
                st.discarded += i - cur
                gap = False
            if relaxed:
                flaws = defects[primary, ok]
                if flaws:
                    st.relaxed_accepts += 1
                out.append(RelaxedReceived(base + i, make(*raw(buf, i, end)), flaws))
            else:
                out.append(make_at(base + i, *raw(buf, i, end)))
            cur = pos = end
        self._close_scan(buf, len(out), cur, gap, keep, need)
        return out

    def _scan_numpy(self, buf: bytes, final: bool) -> list[Received | RelaxedReceived]:
        """:meth:`_scan` with every candidate judged at once (same frames, counters and
        rejections)."""
        import numpy as np

        from fwbridge.protocols.engine.length_scan import (
            check_matches,
            gather_int,
            header_hits_of,
            walk,
        )

        st = self.stats
        n = len(buf)
        a = np.frombuffer(buf, dtype=np.uint8)
        # primary: which candidates are under the header (None: all, no alternative headers)
        hits, primary = header_hits_of(a, self.header, self.alt_headers)
        fmt = self.codec.len_struct.format
        value = gather_int(a, hits + self.len_at, np.dtype(fmt))
        lf_ok = hits + self.head_end <= n
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
        shaped = whole & ~tr_bad  # length and trailer right: judged by header and check
        judged = np.flatnonzero(shaped)
        ck_ok = np.ones(len(hits), dtype=bool)
        if self.kind != "none" and len(judged):
            c = self.check_size
            e = ends[judged] - tl - c
            held = None if self.algo is None else self._stream_prefix(self.algo)
            ck_ok[judged] = check_matches(a, self.algo, hits[judged] + self.from_start, e, c,
                                          self.codec.check_order, held, self._base)
        relaxed = self.relaxed
        taken = ck_ok if primary is None else primary & ck_ok  # what strict mode takes
        good = shaped if relaxed else shaped & taken
        w = walk(hits, ends, good, None if final else short)
        v = w.visited
        vp = v if primary is None else v & primary
        st.length_errors += int(np.count_nonzero(vp & len_bad))
        st.trailer_errors += int(np.count_nonzero(vp & tr_bad))
        if final:
            st.truncated += int(np.count_nonzero(vp & short))
        ck_bad = None
        if not relaxed:
            refused = v & shaped & ~taken
            ck_bad = refused & ~ck_ok
            st.checksum_errors += int(np.count_nonzero(ck_bad))
            if primary is not None:
                st.header_errors += int(np.count_nonzero(refused & ~primary))
                ck_bad &= primary  # kept rejects: under the header only
        if self.keep_rejects:
            self._keep_rejects(buf, hits, vp, len_bad, tr_bad, ck_bad,
                               short if final else None)
        need = 0
        if w.stop is not None:
            i = int(hits[w.stop])
            keep = i
            need = self.head_end if not lf_ok[w.stop] else int(ends[w.stop]) - i
        else:
            keep = n if final else self._hold(buf, w.pos)
            need = n - keep + 1 if keep < n else 0
        base = self._base
        make, raw = self.codec.make, self.codec.raw_values
        starts, stops = w.starts.tolist(), w.stops.tolist()
        out: list[Received | RelaxedReceived]
        if relaxed:
            defects = self._defects
            out = []
            for k, i, end in zip(w.accepted, starts, stops):
                flaws = defects[primary is None or bool(primary[k]), bool(ck_ok[k])]
                if flaws:
                    st.relaxed_accepts += 1
                out.append(RelaxedReceived(base + i, make(*raw(buf, i, end)), flaws))
        else:
            make_at = self.codec.make_at
            out = [make_at(base + i, *raw(buf, i, end)) for i, end in zip(starts, stops)]
        self._close_walk(buf, w.starts, w.stops, keep, need)
        return out

    def _keep_rejects(self, buf: bytes, hits: Any, vp: Any, len_bad: Any, tr_bad: Any,
                      ck_bad: Any, short: Any) -> None:
        """Keep the numpy scan's rejections under the header, in stream order (as the loop
        does): ``vp`` the candidates it judged under the header, each mask a reason."""
        import numpy as np

        reasons = np.full(len(hits), "", dtype=object)
        if short is not None:
            reasons[vp & short] = "truncated"
        reasons[vp & len_bad] = "length"
        reasons[vp & tr_bad] = "trailer"
        if ck_bad is not None:
            reasons[ck_bad] = self.check_name
        base, head_end = self._base, self.head_end
        for k in np.flatnonzero(reasons != "").tolist():
            i = int(hits[k])
            self.rejects.append(Rejection(base + i, reasons[k], buf[i:i + head_end]))
