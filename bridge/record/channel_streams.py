"""Channels declared once, messages fanned out to every sink: a file and a live view alike.

A recording names its channels once (:class:`ChannelSpec`: topic, schema,
encodings) and writes messages to a :class:`Streams`, which hands them to
every :class:`Sink`: :class:`~fwbridge.bridge.record.mcap_sink.McapSink` (an
MCAP file) and :class:`~fwbridge.bridge.record.live_view.FoxgloveSink` (the
Foxglove live view). So a file and a live view carry the same topics, schemas
and bytes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ChannelSpec", "Sink", "Streams"]


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One channel: topic, schema (name, encoding, text) and message encoding."""

    topic: str
    schema_name: str
    schema_encoding: str  # "ros2msg", "jsonschema"
    schema: str
    message_encoding: str  # "cdr", "json"



class Sink(Protocol):
    """Where messages go: a file or a live server."""

    def add_channel(self, spec: ChannelSpec) -> Any: ...

    def log(self, handle: Any, data: bytes, log_time_ns: int) -> None: ...

    def close(self) -> None: ...


class Streams:
    """Channels declared once, messages fanned out to every sink (file, live view).

    ``channel(spec)`` returns a small integer for :meth:`log`; the sinks'
    own handles stay inside. Declaring a spec twice returns the same one.
    """

    def __init__(self, sinks: Iterable[Sink] = ()) -> None:
        self.sinks: list[Sink] = list(sinks)
        self._specs: dict[str, int] = {}
        self._handles: list[list[Any]] = []
        self._lock = threading.Lock()
        self._closed = False

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def channel(self, spec: ChannelSpec) -> int:
        with self._lock:
            got = self._specs.get(spec.topic)
            if got is not None:
                return got
            handles = [sink.add_channel(spec) for sink in self.sinks]
            self._handles.append(handles)
            self._specs[spec.topic] = len(self._handles) - 1
            return len(self._handles) - 1

    def log(self, channel: int, data: bytes, log_time_ns: int) -> None:
        for sink, handle in zip(self.sinks, self._handles[channel]):
            sink.log(handle, data, log_time_ns)

    def writer(self, channel: int) -> Callable[[bytes, int], None]:
        """``log`` bound to one channel, as direct as the sinks allow (hot paths)."""
        pairs = list(zip(self.sinks, self._handles[channel]))
        if len(pairs) == 1:
            sink, handle = pairs[0]
            return functools.partial(sink.log, handle)
        return functools.partial(self.log, channel)

    def batch_logger(self, channels: list[int]
                     ) -> tuple[list[Any], Callable[[list[tuple[Any, int, bytes]]], None]]:
        """For a batch of messages on ``channels``: their keys and the function that logs
        ``[(key, log time, data), ...]`` in order (one sink call for a lone MCAP file)."""
        if len(self.sinks) == 1 and hasattr(self.sinks[0], "log_many"):
            many: Callable[[list[tuple[Any, int, bytes]]], None] = self.sinks[0].log_many
            return [self._handles[c][0] for c in channels], many

        def each(items: list[tuple[Any, int, bytes]]) -> None:
            for channel, log_time_ns, data in items:
                self.log(channel, data, log_time_ns)

        return list(channels), each

    def close(self) -> None:
        """Close every sink once (files finalised); safe from finally blocks and handlers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        errors: list[BaseException] = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # close the others all the same
                errors.append(exc)
        if errors:
            raise errors[0]
