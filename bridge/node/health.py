"""Link health from receiver counters: the "wrong baud rate?" suspicion.

At a wrong baud rate a UART still delivers bytes, but they are garbage: no
frame ever passes its checksum. A healthy link at 200 Hz decodes a frame
every 5 ms, so seconds of bytes without one is a strong signal.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GarbageReport", "GarbageWatch"]


@dataclass(frozen=True)
class GarbageReport:
    """Bytes kept arriving for ``seconds`` and none of them made a frame."""

    seconds: float
    bytes: int
    checksum_errors: int

    def message(self, port: str, baud: int | None = None, fix: str = "") -> str:
        """One line: what was seen, the suspicion, and ``fix`` (how to change the rate)."""
        rate = f"the link runs at {baud} baud and " if baud else ""
        how = f" ({fix})" if fix else ""
        return (
            f"only garbage on {port} for {self.seconds:.1f} s ({self.bytes} bytes, "
            f"{self.checksum_errors} checksum errors, no valid frame): wrong baud rate? "
            f"{rate}it must match the firmware's UART setting{how}; or the wrong protocol"
        )


class GarbageWatch:
    """Reports once per episode when ``timeout`` seconds of bytes yield no frame.

    Fed the receiver's cumulative counters; an idle link (no bytes) is not
    garbage. ``timeout`` 0 disables the watch.
    """

    #: Fewer bytes than this in the window is line noise, not a wrong baud rate.
    min_bytes = 32

    def __init__(self, timeout: float, now: float) -> None:
        self.timeout = timeout
        self.reset(now)

    def reset(self, now: float, frames: int = 0, nbytes: int = 0, errors: int = 0) -> None:
        """Start a new window (after a frame, or on a reopened link)."""
        self._since = now
        self._frames, self._bytes, self._errors = frames, nbytes, errors
        self._last_bytes = nbytes
        self._last_seen = now
        self._reported = False

    def update(self, frames: int, nbytes: int, errors: int, now: float) -> GarbageReport | None:
        """Counters now; a report the first time the window qualifies as garbage."""
        if frames != self._frames:
            self.reset(now, frames, nbytes, errors)
            return None
        if nbytes != self._last_bytes:
            if self._last_bytes == self._bytes:
                self._since = now  # the window starts with the first garbage, not the silence
            self._last_bytes, self._last_seen = nbytes, now
        if self.timeout <= 0 or self._reported:
            return None
        span = now - self._since
        got = nbytes - self._bytes
        # Garbage must still be arriving: a burst followed by silence is not a baud problem.
        if span >= self.timeout and got >= self.min_bytes and now - self._last_seen < 1.0:
            self._reported = True
            return GarbageReport(span, got, errors - self._errors)
        return None
