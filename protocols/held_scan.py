"""The chunk entry of the length-directed receivers: hold back, join, scan.

A length-directed receiver keeps the bytes it could not decide yet (a
candidate whose length says more bytes are coming) and needs at least
``_need`` of them before a scan can decide anything; :class:`HeldScan` gives
such a receiver its :meth:`feed` and :attr:`pending`, and the receiver
supplies ``_scan``.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

__all__ = ["HeldScan"]

T = TypeVar("T")


class _ByteCount(Protocol):
    bytes: int


class HeldScan(Generic[T]):
    """Base of a receiver with ``_buf`` (held-back bytes), ``_need`` (bytes the held
    candidate needs before it can be decided), ``stats.bytes`` and ``_scan``.

    Chunks that cannot decide the held candidate are only kept (a list, joined when
    the candidate can be decided): a long frame arriving a few bytes at a time is
    not copied again with every read.
    """

    _buf: bytes
    _need: int
    stats: _ByteCount
    _more: list[bytes]
    _more_len: int = 0

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (less than the largest frame + one chunk)."""
        return len(self._buf) + self._more_len

    def _take_held(self) -> bytes:
        """The held-back bytes, the kept chunks joined to them."""
        if self._more_len:
            self._buf = b"".join([self._buf, *self._more])
            self._more, self._more_len = [], 0
        return self._buf

    def feed(self, data: bytes | bytearray | memoryview) -> list[T]:
        """Take the next chunk of the stream; return the frames it completes."""
        if not data:
            return []
        chunk = bytes(data)
        self.stats.bytes += len(chunk)
        held = len(self._buf) + self._more_len
        if held:
            if held + len(chunk) < self._need:  # the held candidate still cannot be decided
                if self._more_len == 0:
                    self._more = []
                self._more.append(chunk)
                self._more_len += len(chunk)
                return []
            buf = b"".join([self._take_held(), chunk])
        else:
            buf = chunk
        return self._scan(buf, final=False)

    def _scan(self, buf: bytes, final: bool) -> list[T]:
        raise NotImplementedError
