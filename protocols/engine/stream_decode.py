"""Decode a byte stream chunk by chunk with one receiver: the ``decode`` pipeline.

:func:`decode_stream` feeds every chunk to the receiver and hands each
chunk's frames on as one batch (so a caller writes a batch at once), then
the frames the receiver still holds at the end; it returns the receiver's
counters. A caller with a faster path for whole chunks (the numpy columns
of a fixed-size frame, printed as a block) passes it as ``feed``: it decodes
the chunk with the same receiver, so the counters are the same. No I/O: the
chunks come from the caller (a file, stdin, a capture's payloads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["decode_stream"]


def decode_stream(
    rx: Any, chunks: Iterable[bytes], on_frames: Callable[[list[Any]], None], *,
    feed: Callable[[bytes], None] | None = None,
) -> dict[str, int]:
    """Decode ``chunks`` with ``rx`` (``feed``, ``finish``, ``stats``); ``on_frames`` gets
    each chunk's frames (and the tail's), ``feed`` (when given) takes each chunk instead.
    Returns ``rx``'s counters at the end."""
    for chunk in chunks:
        if feed is not None:
            feed(chunk)
        else:
            on_frames(list(rx.feed(chunk)))
    on_frames(list(rx.finish()))
    counters: dict[str, int] = rx.stats.as_dict()
    return counters
