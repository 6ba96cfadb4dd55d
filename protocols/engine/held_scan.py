"""The bytes a receiver holds back, and the length-directed receivers' chunk entry.

A length-directed receiver keeps the bytes it could not decide yet (a
candidate whose length says more bytes are coming) and needs at least
``_need`` of them before a scan can decide anything; :class:`HeldScan` gives
such a receiver its :meth:`feed` and :attr:`pending`, and the receiver
supplies ``_scan``. Each scan ends in :meth:`HeldScan._close_scan` (a numpy
scan's in :meth:`HeldScan._close_walk`): what the bytes around its frames
mean for the counters, and what is held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # prefix values and arrays come with the first numpy scan
    import numpy as np

    from fwbridge.protocols.checksums import Algorithm
    from fwbridge.protocols.engine.stream_prefix import StreamPrefix

__all__ = ["HeldBytes", "HeldScan"]

T = TypeVar("T")


class _StreamCounts(Protocol):
    bytes: int
    frames: int
    discarded: int
    resyncs: int


class HeldBytes:
    """The bytes a receiver holds back between calls: ``_buf``, then the chunks kept
    while the held candidate cannot be decided (a list, joined when it can: a long frame
    arriving a few bytes at a time is not copied again with every read); and
    ``_prefix``, the stream's prefix values once a flood made them. The fixed-size
    receivers use it as it is; :class:`HeldScan` adds the length-directed ones' chunk
    entry."""

    _buf: bytes
    _prefix: StreamPrefix | None
    _more: list[bytes]
    _more_len: int = 0

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (less than the largest frame + one chunk)."""
        return len(self._buf) + self._more_len

    def _keep(self, chunk: bytes) -> None:
        """Keep ``chunk`` after the held bytes, unjoined."""
        if self._more_len == 0:
            self._more = []
        self._more.append(chunk)
        self._more_len += len(chunk)

    def _take_held(self) -> bytes:
        """The held-back bytes, the kept chunks joined to them."""
        if self._more_len:
            self._buf = b"".join([self._buf, *self._more])
            self._more, self._more_len = [], 0
        return self._buf

    def _stream_prefix(self, algo: Algorithm) -> StreamPrefix:
        """The stream's prefix values, made by the first flood and kept between calls: the
        bytes a waiting candidate holds are read once, however long it holds them."""
        if self._prefix is None:
            from fwbridge.protocols.engine.stream_prefix import StreamPrefix

            self._prefix = StreamPrefix(algo)
        return self._prefix


class HeldScan(HeldBytes, Generic[T]):
    """Base of a receiver with held bytes from stream offset ``_base``, ``_need`` (bytes
    the held candidate needs before it can be decided), ``_gap`` (bytes were discarded
    since the last frame), ``stats`` and ``_scan``."""

    _base: int
    _need: int
    _gap: bool
    stats: _StreamCounts

    def feed(self, data: bytes | bytearray | memoryview) -> list[T]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data:
            return []
        chunk = bytes(data)
        self.stats.bytes += len(chunk)
        held = len(self._buf) + self._more_len
        if held:
            if held + len(chunk) < self._need:  # the held candidate still cannot be decided
                self._keep(chunk)
                return []
            buf = b"".join([self._take_held(), chunk])
        else:
            buf = chunk
        return self._scan(buf, final=False)

    def _scan(self, buf: bytes, final: bool) -> list[T]:
        raise NotImplementedError

    def _close_scan(self, buf: bytes, frames: int, cur: int, gap: bool, keep: int,
                    need: int) -> None:
        """End a scan of ``buf`` that accepted ``frames`` frames, the last ending at
        ``cur``: the bytes from there to ``keep`` are discarded (the next frame is a
        resync), those from ``keep`` on are held, needing ``need`` bytes in all."""
        st = self.stats
        if keep > cur:
            st.discarded += keep - cur
            gap = True
        st.frames += frames
        self._gap = gap
        self._buf = buf[keep:]
        self._base += keep
        self._need = need
        if self._prefix is not None:  # the values of bytes let go are not needed again
            self._prefix.drop_before(self._base)

    def _close_walk(self, buf: bytes, starts: np.ndarray[Any, Any],
                    stops: np.ndarray[Any, Any], keep: int, need: int) -> None:
        """:meth:`_close_scan` for the frames a numpy scan accepted, ``buf[starts:stops]``
        (in order, none overlapping), counted at once: the bytes before each frame are
        discarded, and a frame after such bytes (or after a gap before this scan) is a
        resync."""
        gap = self._gap
        cur = 0
        if len(starts):
            lead = starts.copy()  # the bytes between each frame and the one before
            lead[1:] -= stops[:-1]
            skipped = lead > 0
            st = self.stats
            st.resyncs += int(skipped.sum()) + (1 if gap and not skipped[0] else 0)
            st.discarded += int(lead.sum())
            gap = False
            cur = int(stops[-1])
        self._close_scan(buf, len(starts), cur, gap, keep, need)
