"""MCAP files written: :class:`McapSink`, a sink of
:class:`~fwbridge.bridge.record.channel_streams.Streams`.

A chunked, indexed (or compact), compressed MCAP file, written by
:class:`~fwbridge.bridge.record.mcap_writer.McapWriter` through
:func:`~fwbridge.bridge.record.safe_output.open_output` (no link followed, a
full disk said once). The file is finalised (summary, indexes) by
:meth:`McapSink.close`, which every recording verb calls from a ``finally``
(idempotent, so a signal handler may call it too). A chunk is written out
once its messages span ``flush_interval`` seconds of message time (or reach
``chunk_size``), so a file cut by a crash (SIGKILL, power loss) reads up to
its last whole chunk (:mod:`~fwbridge.bridge.record.mcap_reader`).

The compressors (the ``mcap`` extra) are imported only when a file is opened.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO, Any

from fwbridge.bridge.record.channel_streams import ChannelSpec
from fwbridge.bridge.record.mcap_writer import CHUNK_SIZE, MAGIC, McapWriter
from fwbridge.bridge.record.safe_output import OutputError, open_output
from fwbridge.protocols.errors import CaptureError

__all__ = ["INSTALL_HINT", "McapError", "McapSink", "looks_like_mcap"]

#: A chunk is closed at least this often (seconds of message time).
FLUSH_INTERVAL = 1.0
#: The extra that brings the MCAP writer and reader.
INSTALL_HINT = "MCAP files need the mcap package: pip install 'fwbridge[mcap]'"


class McapError(CaptureError):
    """An MCAP file that cannot be written or read: names the file and the problem."""


def looks_like_mcap(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts an MCAP file."""
    return head[:8] == MAGIC


class McapSink:
    """A new MCAP file: chunked, compressed, with its summary (statistics, schemas, channels).

    Thread-safe; :meth:`close` is idempotent and finalises the file. Channels
    are registered on first use. ``compression`` is ``"zstd"``, ``"lz4"`` or
    ``"none"``. ``index``: message and chunk indexes (seekable by time), or
    not (``False``, compact: a third of the bytes of a CAN recording; see
    :mod:`~fwbridge.bridge.record.mcap_writer`). A chunk is closed at ``chunk_size``
    bytes or once its messages span ``flush_interval`` seconds. Written
    by :class:`~fwbridge.bridge.record.mcap_writer.McapWriter`. Messages carry
    sequence 0 ("not relevant" in the spec): a file loses none between two.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        compression: str = "zstd",
        chunk_size: int = CHUNK_SIZE,
        flush_interval: float = FLUSH_INTERVAL,
        profile: str = "ros2",
        metadata: dict[str, str] | None = None,
        stream: IO[bytes] | None = None,
        index: bool = True,
    ) -> None:
        kinds = {"zstd": "zstd", "lz4": "lz4", "none": ""}
        if compression not in kinds:
            raise McapError(f"compression {compression!r}: use zstd, lz4 or none")
        if not 0 < flush_interval < 1e9:
            raise McapError(f"flush interval {flush_interval!r} s: must be positive")
        self.path = Path(path)
        try:
            # ``stream``: an open file to write instead (a file moved into place later).
            self._stream: IO[bytes] | None = (
                stream if stream is not None else open_output(self.path))  # link replaced
        except OutputError as exc:
            raise McapError(str(exc)) from None
        try:
            self._writer: Any = McapWriter(self._stream, compression=kinds[compression],
                                           chunk_size=chunk_size, profile=profile, index=index,
                                           flush_ns=int(flush_interval * 1e9))
        except ImportError:
            self._stream.close()
            raise McapError(INSTALL_HINT) from None
        if metadata:
            self._writer.add_metadata("fwbridge", metadata)
        self._schemas: dict[tuple[str, str], int] = {}
        self._channels = 0
        self._lock = threading.Lock()

    def add_channel(self, spec: ChannelSpec) -> int:
        with self._lock:
            if self._writer is None:
                return 0
            key = (spec.schema_name, spec.schema_encoding)
            schema_id = self._schemas.get(key)
            if schema_id is None:
                schema_id = self._schemas[key] = len(self._schemas) + 1
                self._writer.add_schema(schema_id, spec.schema_name, spec.schema_encoding,
                                        spec.schema.encode())
            self._channels += 1
            self._writer.add_channel(self._channels, schema_id, spec.topic,
                                     spec.message_encoding)
            return self._channels

    def log(self, handle: Any, data: bytes, log_time_ns: int) -> None:
        with self._lock:
            writer = self._writer
            if writer is None:
                return  # closed while another thread still recorded: drop, don't crash
            writer.add_message(handle, log_time_ns, data)

    def log_many(self, items: list[tuple[Any, int, bytes]]) -> None:
        """Messages (handle, log time, data) in order, under one lock (a recorder's batch)."""
        with self._lock:
            writer = self._writer
            if writer is not None:  # else closed while another thread still recorded
                writer.add_messages(items)

    @property
    def buffered(self) -> int:
        """Bytes not yet on disk (the open chunk, before compression)."""
        with self._lock:
            return 0 if self._writer is None else int(self._writer.buffered)

    def close(self) -> None:
        """Write the last chunk, the indexes and the summary; close the file. Idempotent."""
        with self._lock:
            writer, self._writer = self._writer, None
            stream, self._stream = self._stream, None
            if writer is not None:
                try:
                    writer.finish()
                finally:
                    if stream is not None:
                        stream.close()
