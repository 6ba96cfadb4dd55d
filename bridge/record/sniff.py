"""Sniff a serial link: decode the frames arriving on it as they come, capture its bytes.

:func:`run_sniff` is what ``fwbridge sniff`` runs on a port it opened: it
reads until its duration ends, the line looks like the wrong baud rate (bytes
and no frame for ``garbage_timeout`` seconds), the port goes away or a stop
ends the caller's view; each read goes to the capture and the receiver, each
frame to the caller (and whole to the capture's frames interface, when it has
one), the counters to the view's status. The frames still in the receiver
are handed on at the end, except after the port went away. Every way out
closes the link and the capture.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from fwbridge.bridge.link.transports import IO_ERRORS, read_some
from fwbridge.bridge.node.health import GarbageReport, GarbageWatch
from fwbridge.bridge.record.serial_pcapng import RX

__all__ = ["SniffConfig", "SniffResult", "SniffTap", "frame_errors", "record_frame", "run_sniff"]

StatsUpdate = Callable[[dict[str, int]], None]


class SniffTap(Protocol):
    """The bytes of the frames a receiver accepts, by stream offset (for a capture's
    frames interface)."""

    def feed(self, chunk: bytes) -> None: ...

    def frame(self, offset: int) -> bytes | None: ...


@dataclass(frozen=True)
class SniffConfig:
    """How long to sniff (None: until stopped) and when bytes without a frame end it
    (0: never)."""

    duration: float | None = None
    garbage_timeout: float = 3.0


@dataclass
class SniffResult:
    """The receiver's last counters, and why the run ended early: the wrong-baud
    verdict, or the error of a port that went away."""

    stats: dict[str, int] = field(default_factory=dict)
    garbage: GarbageReport | None = None
    lost: BaseException | None = None


def frame_errors(stats: dict[str, int]) -> int:
    """The receiver's errors of every kind, summed."""
    return sum(v for k, v in stats.items() if k.endswith("_errors"))


@contextlib.contextmanager
def _no_view() -> Iterator[StatsUpdate]:
    yield lambda _stats: None


def record_frame(capture: Any, tap: SniffTap | None, item: Any) -> None:
    """Put an accepted frame on the capture's frames interface (pcapng), whole."""
    if capture is not None and tap is not None and hasattr(capture, "write_frame"):
        frame = tap.frame(item.offset)
        if frame is not None:
            capture.write_frame(RX, frame)


def run_sniff(
    link: Any, rx: Any, config: SniffConfig, on_frame: Callable[[Any], None], *,
    capture: Any = None, tap: SniffTap | None = None,
    view: Callable[[], AbstractContextManager[StatsUpdate]] = _no_view,
    on_ready: Callable[[], None] = lambda: None,
) -> SniffResult:
    """Sniff the open ``link`` with the receiver ``rx`` (``feed``, ``finish``, ``stats``)
    until ``config`` or ``view`` ends it; ``link`` and ``capture`` are closed on every
    way out. ``view`` is entered around the reading (a status line, the stop policy: a
    stop it swallows ends the reading normally) and gives the function that gets the
    counters after each read; ``on_ready`` is called first inside it (so a stop right
    after the caller says it is ready takes the normal way out)."""
    result = SniffResult()

    def take(items: Any) -> None:
        for item in items:
            on_frame(item)
            record_frame(capture, tap, item)

    try:
        end = None if config.duration is None else time.monotonic() + config.duration
        watch = GarbageWatch(config.garbage_timeout, time.monotonic())
        with view() as update:
            on_ready()
            while end is None or time.monotonic() < end:
                try:
                    data = read_some(link)
                except IO_ERRORS as exc:
                    result.lost = exc
                    break
                now = time.monotonic()
                if data:
                    if capture is not None:
                        capture.write(RX, data)
                    if tap is not None:
                        tap.feed(data)
                    take(rx.feed(data))
                stats = rx.stats.as_dict()
                result.garbage = watch.update(stats["frames"], stats["bytes"],
                                              frame_errors(stats), now)
                if result.garbage is not None:
                    break
                update(stats)
        if result.lost is None:
            tail = rx.finish()
            take(tail if isinstance(tail, list) else ())
    finally:
        link.close()
        if capture is not None:
            capture.close()
    result.stats = rx.stats.as_dict()
    return result
