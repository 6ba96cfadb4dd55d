"""Sans-I/O receiver for action frames (PROTOCOLS.md 3).

The receiver :func:`fwbridge.protocols.engine.receiver_for` picks for a
description with the action frame's layout, with the length-directed
shape's options (the description's alternative headers, relaxed mode, kept
rejections, the link's CRC and length maximum); the tests hold it to the
generic length-directed receiver of the same description and options, byte
for byte (its :class:`Rejected` is the generic ``Rejection`` read as the
action frame's machine, type and sub-command, none before the type byte
arrived; its defect ``"crc"`` is the description's name of its check).

Length-directed: a header is a candidate, its length field says where the
trailer must be, and the candidate is accepted when the trailer and the CRC
are right there. Data holding ``FD DF`` or ``FE EF`` is therefore fine (the
patent's receiver ends a frame at the first ``FD DF`` and loses those).
After a rejected candidate the scan goes on from the byte after its header
(backtracking), so a false header in noise cannot swallow the frame behind
it. An accepted frame is skipped whole: a frame carried inside another
frame's data is data, not a frame.

Output may wait, but nothing intact is lost: a false header whose length
field points past the bytes received so far holds the scan until those
bytes arrive (at most ``11 + max_length``), or until :meth:`finish` ends the
stream, which rejects such candidates and returns the frames behind them.

Counters: each kind of rejection apart. ``header_errors`` counts frames
with an alternative header (``FE FF``: length and trailer right) that strict
mode refuses; when their CRC is wrong too, ``checksum_errors`` counts that as
well. To see them, strict mode treats the alternative headers as candidates
too (never accepted), so they can hold the scan like a false ``FE EF``;
``alt_headers=()`` turns that off. Relaxed mode accepts the alternative
headers and ignores the CRC; it is never the default, and each frame it
lets through names its defects.

From :attr:`ActionReceiver.vector_threshold` bytes on (and unless rejects are
kept, which takes a record per rejection), a scan judges every candidate at
once in numpy (:mod:`~fwbridge.protocols.engine.length_scan`): linear in the buffer
whatever its headers and length fields say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from fwbridge.protocols.action_frame import (
    HEADER,
    OVERHEAD,
    RELAXED_HEADERS,
    SUB_OF,
    TYPE_OF,
    ActionFrame,
    InstructionType,
    SubCommand,
    make_unchecked,
)
from fwbridge.protocols.checksums import algorithm
from fwbridge.protocols.crc import DEFAULT_CRC, crc_function, preset
from fwbridge.protocols.engine.held_scan import HeldScan
from fwbridge.protocols.engine.receiver_counters import LengthReceiverStats
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.protocols.engine.stream_prefix import StreamPrefix

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "ActionReceived",
    "ActionReceiver",
    "Rejected",
]

DEFAULT_MAX_LENGTH = 1024
#: Rejection reason -> the stats counter it adds to.
_COUNTERS = {"truncated": "truncated", "length": "length_errors", "trailer": "trailer_errors"}
_FD, _DF = 0xFD, 0xDF
_PRIMARY = HEADER[0] << 8 | HEADER[1]


class ActionReceived(NamedTuple):
    """A decoded frame and the stream offset of its first header byte.

    ``defects`` names the checks a relaxed-mode frame failed (``"header"``,
    ``"crc"``); it is always empty in strict mode.
    """

    offset: int
    frame: ActionFrame
    defects: tuple[str, ...] = ()


class Rejected(NamedTuple):
    """A rejected candidate with a ``FE EF`` header, kept when asked for.

    Enough to answer it (PROTOCOLS.md 3.3): ``reason`` is ``"length"``
    (over the maximum), ``"trailer"``, ``"crc"`` or ``"truncated"`` (the
    stream ended inside it); ``sub`` is ``None`` when it was not received.
    """

    offset: int
    reason: str
    machine: int
    type: InstructionType | int
    sub: SubCommand | int | None



class ActionReceiver(HeldScan[ActionReceived]):
    """Byte stream in, :class:`ActionReceived` action frames out.

    ``crc``: the link's CRC-16 preset name. ``max_length``: the largest data
    length accepted (longer is a ``length_errors`` rejection). ``relaxed``:
    accept ``alt_headers`` and skip the CRC check. ``keep_rejects``: collect
    :class:`Rejected` candidates in :attr:`rejects` (for NAK answers).
    """

    stats: LengthReceiverStats
    #: Buffers at least this long are scanned by :mod:`~fwbridge.protocols.engine.length_scan`.
    vector_threshold = 512

    def __init__(
        self,
        *,
        crc: str = DEFAULT_CRC,
        max_length: int = DEFAULT_MAX_LENGTH,
        relaxed: bool = False,
        alt_headers: Iterable[bytes] = RELAXED_HEADERS[1:],
        keep_rejects: bool = False,
    ) -> None:
        if not isinstance(max_length, int) or not 0 <= max_length <= 0xFFFF:
            raise ConfigError(f"max_length must be an int in 0..65535, got {max_length!r}")
        alts = tuple(bytes(h) for h in alt_headers)
        bad = [h for h in alts if len(h) != 2]
        if bad:
            raise ConfigError(f"alternative headers must be 2 bytes, got {bad!r}")
        self.crc = crc
        self._crc = crc_function(crc)  # raises ConfigError listing the presets
        self._algo = algorithm(preset(crc).name)
        self.max_length = max_length
        self.relaxed = relaxed
        self.alt_headers = tuple(h for h in alts if h != HEADER)
        self.keep_rejects = keep_rejects
        self.rejects: list[Rejected] = []
        self.stats = LengthReceiverStats()
        codes = {_PRIMARY} | {h[0] << 8 | h[1] for h in self.alt_headers}
        firsts = sorted({c >> 8 for c in codes})
        # One memchr-speed bytes.find when every header starts with the same
        # byte (the default, FE); a character-class regex otherwise.
        self._first = bytes(firsts[:1]) if len(firsts) == 1 else None
        self._first_re = re.compile(b"[" + b"".join(re.escape(bytes((f,))) for f in firsts) + b"]")
        self._codes = frozenset(codes)
        self._firsts = frozenset(firsts)
        self._buf = b""
        self._base = 0  # stream offset of self._buf[0]
        self._prefix: StreamPrefix | None = None  # made by the first flood
        self._need = 0  # bytes self._buf must hold before a scan can decide anything
        self._gap = False  # bytes were discarded since the last frame

    def finish(self) -> list[ActionReceived]:
        """End of stream: decide the held-back candidates; return the frames behind them.

        A candidate still incomplete is rejected (``truncated``), and the bytes
        after its header are scanned again, so a false header with a long
        length field does not hide the frames that follow it.
        """
        buf = self._take_held()
        if not buf:
            return []
        return self._scan(buf, final=True)

    def take_rejects(self) -> list[Rejected]:
        """The :class:`Rejected` candidates collected since the last call."""
        out, self.rejects = self.rejects, []
        return out

    # -- the scan -------------------------------------------------------------
    def _rejected(self, buf: bytes, i: int, reason: str) -> None:
        """Count a rejected ``FE EF`` candidate (and keep it, when asked to)."""
        counter = _COUNTERS[reason]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if self.keep_rejects:
            self._reject(buf, i, reason)

    def _reject(self, buf: bytes, i: int, reason: str) -> None:
        n = len(buf)
        if n - i < 4:  # machine code and type not received: nothing to attribute
            return
        sub = SUB_OF[buf[i + 6]] if n - i > 6 else None
        self.rejects.append(Rejected(self._base + i, reason, buf[i + 2], TYPE_OF[buf[i + 3]], sub))

    def _scan(self, buf: bytes, final: bool) -> list[ActionReceived]:
        """Resolve ``buf`` (held bytes + new chunk) as far as its bytes allow."""
        if len(buf) >= self.vector_threshold and not self.keep_rejects:
            return self._scan_numpy(buf, final)
        st = self.stats
        out: list[ActionReceived] = []
        append = out.append
        new = tuple.__new__  # ActionReceived's own __new__ is a Python call; skip it
        crcf = self._crc
        n = len(buf)
        base = self._base
        max_len = self.max_length
        relaxed = self.relaxed
        codes = self._codes
        first = self._first
        find = buf.find
        startswith = buf.startswith
        keep_rejects = self.keep_rejects
        spent, budget = 0, 4 * n + 2048  # CRC bytes read directly before the one-pass verdicts
        verdicts: dict[int, bool] | None = None
        make = make_unchecked
        type_of, sub_of = TYPE_OF, SUB_OF
        cur = 0  # bytes before cur are accounted for (in a frame or discarded)
        gap = self._gap
        pos = 0
        need = 0
        while True:
            if startswith(HEADER, pos):  # back-to-back frames: no search
                i = pos
                primary = True
            else:
                if first is not None:
                    i = find(first, pos)
                else:
                    m = self._first_re.search(buf, pos)
                    i = m.start() if m else -1
                if i < 0:
                    keep = n
                    break
                if i + 1 >= n:  # a lone first header byte at the end
                    keep = n if final else i
                    need = 2
                    break
                code = buf[i] << 8 | buf[i + 1]
                if code not in codes:
                    pos = i + 1
                    continue
                primary = code == _PRIMARY
            if i + 7 > n:  # length field and sub-command not here yet
                if not final:
                    keep, need = i, 7
                    break
                if primary:
                    self._rejected(buf, i, "truncated")
                pos = i + 1
                continue
            length = buf[i + 4] | buf[i + 5] << 8
            if length > max_len:
                if primary:
                    self._rejected(buf, i, "length")
                pos = i + 1
                continue
            end = i + OVERHEAD + length
            if end > n:
                if not final:
                    keep, need = i, end - i
                    break
                if primary:
                    self._rejected(buf, i, "truncated")
                pos = i + 1
                continue
            if buf[end - 2] != _FD or buf[end - 1] != _DF:
                if primary:
                    self._rejected(buf, i, "trailer")
                pos = i + 1
                continue
            # a bytes slice: cheaper than a memoryview slice at these sizes
            spent += end - 6 - i
            if spent <= budget:
                crc_ok = crcf(buf[i + 2 : end - 4]) == buf[end - 4] | buf[end - 3] << 8
            else:  # a flood of CRC candidates (rejects kept): every verdict in one pass
                if verdicts is None:
                    verdicts = self._crc_verdicts(buf)
                crc_ok = verdicts[i]
            defects: tuple[str, ...] = ()
            if not (primary and crc_ok):
                if not relaxed:
                    if not primary:
                        st.header_errors += 1
                    if not crc_ok:
                        st.checksum_errors += 1
                        if primary and keep_rejects:
                            self._reject(buf, i, "crc")
                    pos = i + 1
                    continue
                defects = ("crc",) if primary else ("header",) if crc_ok else ("header", "crc")
                st.relaxed_accepts += 1
            if i > cur or gap:
                st.resyncs += 1
                st.discarded += i - cur
                gap = False
            frame = make(buf[i + 2], type_of[buf[i + 3]], sub_of[buf[i + 6]], buf[i + 7 : end - 4])
            append(new(ActionReceived, (base + i, frame, defects)))
            cur = pos = end
        WORK.steps += min(spent, budget)
        self._close_scan(buf, len(out), cur, gap, keep, need)
        return out

    def _crc_verdicts(self, buf: bytes) -> dict[int, bool]:
        """Whether the CRC is right, for every candidate of ``buf`` whose length and
        trailer are (by prefix registers: linear in ``buf``)."""
        import numpy as np

        from fwbridge.protocols.engine.length_scan import check_matches, header_hits

        n = len(buf)
        a = np.frombuffer(buf, dtype=np.uint8)
        hits = header_hits(a, [bytes((c >> 8, c & 0xFF)) for c in sorted(self._codes)])
        hits = hits[hits + 7 <= n]
        ends = hits + OVERHEAD + (a[hits + 4].astype(np.int64) | a[hits + 5].astype(
            np.int64) << 8)
        whole = ends <= n
        hits, ends = hits[whole], ends[whole]
        shaped = (a[ends - 2] == _FD) & (a[ends - 1] == _DF)
        hits, ends = hits[shaped], ends[shaped]
        ok = check_matches(a, self._algo, hits + 2, ends - 4, 2, "little")
        return dict(zip(hits.tolist(), ok.tolist()))

    def _scan_numpy(self, buf: bytes, final: bool) -> list[ActionReceived]:
        """:meth:`_scan` with every candidate judged at once (same frames and counters)."""
        import numpy as np

        from fwbridge.protocols.engine.length_scan import check_matches, header_hits, walk

        st = self.stats
        n = len(buf)
        a = np.frombuffer(buf, dtype=np.uint8)
        codes = sorted(self._codes)
        hits = header_hits(a, [bytes((c >> 8, c & 0xFF)) for c in codes])
        primary = (a[hits] == HEADER[0]) & (a[np.minimum(hits + 1, n - 1)] == HEADER[1])
        lf_ok = hits + 7 <= n
        at = np.where(lf_ok, hits, 0)  # a short candidate's length is never read
        at = np.minimum(at, max(n - 6, 0))
        length = a[at + 4].astype(np.int64) | a[at + 5].astype(np.int64) << 8 if n >= 6 else (
            np.zeros(len(hits), dtype=np.int64))
        len_bad = lf_ok & (length > self.max_length)
        ends = hits + OVERHEAD + length
        whole = lf_ok & ~len_bad & (ends <= n)
        short = ~lf_ok | (lf_ok & ~len_bad & (ends > n))
        w_at = np.flatnonzero(whole)
        tr_bad = np.zeros(len(hits), dtype=bool)
        e = ends[w_at]
        tr_bad[w_at] = (a[e - 2] != _FD) | (a[e - 1] != _DF)
        judged = np.flatnonzero(whole & ~tr_bad)
        crc_ok = np.zeros(len(hits), dtype=bool)
        if len(judged):
            crc_ok[judged] = check_matches(a, self._algo, hits[judged] + 2, ends[judged] - 4, 2,
                                           "little", self._stream_prefix(self._algo), self._base)
        shaped = whole & ~tr_bad  # length and trailer right: judged by header and CRC
        good = shaped if self.relaxed else shaped & primary & crc_ok
        w = walk(hits, ends, good, None if final else short)
        v = w.visited
        vp = v & primary
        st.length_errors += int(np.count_nonzero(vp & len_bad))
        st.trailer_errors += int(np.count_nonzero(vp & tr_bad))
        if final:
            st.truncated += int(np.count_nonzero(vp & short))
        if not self.relaxed:
            refused = v & shaped & ~(primary & crc_ok)
            st.header_errors += int(np.count_nonzero(refused & ~primary))
            st.checksum_errors += int(np.count_nonzero(refused & ~crc_ok))
        need = 0
        if w.stop is not None:
            keep = int(hits[w.stop])
            need = 7 if not lf_ok[w.stop] else int(ends[w.stop]) - keep
        elif not final and w.pos <= n - 1 and buf[n - 1] in self._firsts:
            keep, need = n - 1, 2  # a lone first header byte at the end
        else:
            keep = n
        out: list[ActionReceived] = []
        new = tuple.__new__
        base = self._base
        make, type_of, sub_of = make_unchecked, TYPE_OF, SUB_OF
        relaxed = self.relaxed
        for k, i, end in zip(w.accepted, w.starts.tolist(), w.stops.tolist()):
            defects: tuple[str, ...] = ()
            if relaxed and not (primary[k] and crc_ok[k]):
                defects = (("crc",) if primary[k] else
                           ("header",) if crc_ok[k] else ("header", "crc"))
                st.relaxed_accepts += 1
            frame = make(buf[i + 2], type_of[buf[i + 3]], sub_of[buf[i + 6]], buf[i + 7:end - 4])
            out.append(new(ActionReceived, (base + i, frame, defects)))
        self._close_walk(buf, w.starts, w.stops, keep, need)
        return out
