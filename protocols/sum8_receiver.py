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
float decoding vectorised over the chunk). This is the receiver
:func:`fwbridge.protocols.engine.receiver_for` picks for a sum-8 description;
the tests hold it to the generic receiver and the construct schema byte for byte.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from math import isfinite
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from fwbridge.protocols.counters import Counters
from fwbridge.protocols.stream_accounting import account
from fwbridge.protocols.sum8 import HEADER, Sum8Codec

if TYPE_CHECKING:  # numpy loads with the first large chunk: a serial port's reads never need it
    import numpy as np

__all__ = ["Columns", "ReceiverStats", "Sum8Received", "Sum8Receiver", "decode_columns",
           "received_class"]

T = TypeVar("T")

_AA = HEADER[0]
_55 = HEADER[1]


class Sum8Received(tuple[Any, ...]):
    """A received frame: the stream offset of its first header byte, then its fields.

    A flat tuple of numbers, ``(offset, vx, vy, ...)``, with each field by name
    (``item.vx``) as in a named tuple; :func:`received_class` makes one
    subclass per frame family. Flat so that a frame kept is one object holding
    only numbers: a record nesting a frame object cost two allocations, and
    twice the garbage collector's traversals, per frame kept.

    ``item.frame`` builds the family's frame object (``OdomFrame``...) from the
    fields on each access: for code that wants it; hot loops read the fields.
    """

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ("offset",)
    _frame_of: ClassVar[Callable[..., Any]]

    @property
    def offset(self) -> int:
        """Stream offset of the frame's first header byte."""
        return int(self[0])

    @property
    def frame(self) -> Any:
        """The decoded frame object, made from the fields."""
        return type(self)._frame_of(*self[1:])


_CLASSES: dict[int, tuple[Sum8Codec[Any], type[Sum8Received]]] = {}


def received_class(codec: Sum8Codec[Any]) -> type[Sum8Received]:
    """The :class:`Sum8Received` subclass of ``codec``'s frames (one per codec)."""
    got = _CLASSES.get(id(codec))
    if got is not None and got[0] is codec:
        return got[1]
    name = "".join(p.title() for p in codec.name.split("_")) + "Received"
    base = namedtuple(name, ("offset", *codec.fields))  # type: ignore[misc]
    cls = type(name, (base, Sum8Received), {
        "__slots__": (), "__module__": __name__, "__doc__": Sum8Received.__doc__,
        "_frame_of": staticmethod(codec.make)})
    _CLASSES[id(codec)] = (codec, cls)
    return cls


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
    import numpy as np

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
        self._new_record = partial(tuple.__new__, self.record)
        self.stats = ReceiverStats()
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
        if len(self._buf) + len(data) < self.vector_threshold:
            return self._feed_small(bytes(data))
        base = self._base
        _, scan = self.resolve(bytes(data), True)
        if scan.values is None:  # fewer than 2 bytes: no frame
            return []
        import numpy as np

        # map and zip keep the per-frame loop in C: no Python call per frame.
        offsets = (np.asarray(scan.accepted) + base).tolist()
        return list(map(self._new_record, zip(offsets, *scan.values.T.tolist())))

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
        new, cls = tuple.__new__, self.record  # the class's own __new__ is a Python call
        unpack, find, append = self.codec.struct.unpack_from, buf.find, out.append
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
                append(new(cls, (base + i, *unpack(buf, i + 2))))
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
            # A sum of float32 values cannot overflow a double: it is NaN or
            # infinite exactly when one of them is.
            st.nonfinite += len(out) - sum(map(isfinite, map(sum, out)))
        return out

    def feed_columns(self, data: bytes | bytearray | memoryview) -> Columns:
        """:meth:`feed` for high rates: the chunk's frames as numpy columns, no per-frame object.

        Same frames, offsets and counters as :meth:`feed` for any chunking;
        the columns' ``stats`` is this receiver's (live) counters.
        """
        base = self._base
        _, scan = self.resolve(bytes(data), True) if data else (b"", None)
        return _columns(self.codec, scan, base, self.stats)

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
    stats: ReceiverStats

    def __len__(self) -> int:
        return len(self.offset)


def _columns(codec: Sum8Codec[Any], scan: _Scan | None, base: int,
             stats: ReceiverStats) -> Columns:
    """The frames of one scan as columns, offsets from ``base``."""
    import numpy as np

    values: np.ndarray[Any, Any] | None
    if scan is None or not len(scan.accepted):
        values = np.zeros((0, len(codec.fields)), dtype=np.float32)
        offsets = np.zeros(0, dtype=np.int64)
    else:
        offsets = np.asarray(scan.accepted, dtype=np.int64) + base
        values = scan.values
        if values is None:  # pragma: no cover - feed_columns always scans vectorised
            values = np.zeros((0, len(codec.fields)), dtype=np.float32)
    fields = {name: values[:, k] for k, name in enumerate(codec.fields)}
    return Columns(offsets, fields, stats)


def decode_columns(codec: Sum8Codec[Any], data: bytes | bytearray | memoryview) -> Columns:
    """Decode a whole capture at once into columns (no per-frame objects).

    Same frames, offsets and counters as feeding :class:`Sum8Receiver` the
    whole buffer and calling ``finish()``; made for offline analysis.
    """
    rx: Sum8Receiver[Any] = Sum8Receiver(codec)
    _, scan = rx.resolve(bytes(data), vector=True)
    rx.finish()
    return _columns(codec, scan, 0, rx.stats)
