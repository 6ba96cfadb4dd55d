"""MCAP files and live Foxglove views: one set of channels, any number of sinks.

A recording names its channels once (:class:`ChannelSpec`: topic, schema,
encodings) and writes messages to a :class:`Streams`, which hands them to
every sink: :class:`McapSink` (a chunked, indexed, compressed MCAP file) and
:class:`FoxgloveSink` (a Foxglove WebSocket server, loopback by default).
So a file and a live view carry the same topics, schemas and bytes.

An MCAP file is finalised (summary, indexes) by :meth:`McapSink.close`,
which every recording verb calls from a ``finally`` (idempotent, so a signal
handler may call it too). A chunk is written out once its messages span
``flush_interval`` seconds of message time (or reach ``chunk_size``), so a
file cut by a crash (SIGKILL, power loss) reads up to its last whole chunk:
:func:`read_mcap` falls back from the index to reading the records in order
(as it reads a compact file, which has no index).

The ``mcap`` package (the ``mcap`` extra) is imported only when a file is
opened, ``foxglove-sdk`` (the ``foxglove`` extra) only when a live view starts.
"""

from __future__ import annotations

import errno
import functools
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from fwbridge.bridge.link.link_urls import is_loopback_host
from fwbridge.bridge.record.damage import warn_damage
from fwbridge.bridge.record.safe_output import OutputError, open_output
from fwbridge.protocols.errors import CaptureError, CaptureTruncated

__all__ = [
    "MCAP_MAGIC",
    "ChannelSpec",
    "FoxgloveSink",
    "McapError",
    "McapRecord",
    "McapSink",
    "McapTruncated",
    "Sink",
    "Streams",
    "is_mcap",
    "looks_like_mcap",
    "read_mcap",
]

#: First bytes of every MCAP file.
MCAP_MAGIC = b"\x89MCAP0\r\n"
#: Chunk size before compression: small enough that a crash loses little.
CHUNK_SIZE = 256 * 1024
#: A chunk is closed at least this often (seconds of message time).
FLUSH_INTERVAL = 1.0
#: Where the live view listens unless told otherwise: loopback only.
LIVE_HOST, LIVE_PORT = "127.0.0.1", 8765
#: The longest record read (a damaged length must not make the reader allocate gigabytes).
RECORD_LIMIT = 256 << 20
#: The extra that brings the MCAP writer and reader.
INSTALL_HINT = "MCAP files need the mcap package: pip install 'fwbridge[mcap]'"


class McapError(CaptureError):
    """An MCAP file that cannot be written or read: names the file and the problem."""


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One channel: topic, schema (name, encoding, text) and message encoding."""

    topic: str
    schema_name: str
    schema_encoding: str  # "ros2msg", "jsonschema"
    schema: str
    message_encoding: str  # "cdr", "json"


@dataclass(frozen=True, slots=True)
class McapRecord:
    """One message read back: its channel's topic and schema name, time and bytes."""

    topic: str
    schema_name: str
    log_time_ns: int
    data: bytes


class Sink(Protocol):
    """Where messages go: a file or a live server."""

    def add_channel(self, spec: ChannelSpec) -> Any: ...

    def log(self, handle: Any, data: bytes, log_time_ns: int) -> None: ...

    def close(self) -> None: ...


def looks_like_mcap(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts an MCAP file."""
    return head[:8] == MCAP_MAGIC


def is_mcap(path: str | os.PathLike[str]) -> bool:
    """True for a ``.mcap`` name, or an existing file that starts with the MCAP magic."""
    p = Path(path)
    if p.suffix.lower() == ".mcap":
        return True
    try:
        with open(p, "rb") as f:
            return looks_like_mcap(f.read(8))
    except OSError:
        return False


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
        from fwbridge.bridge.record.mcap_writer import McapWriter

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


class FoxgloveSink:
    """A Foxglove WebSocket server (foxglove-sdk) serving the channels live.

    Listens on ``host:port`` (loopback by default; port 0 picks a free one,
    see :attr:`port`) through :class:`~fwbridge.bridge.record.live_front.SubprotocolFront`,
    which serves both names of the protocol (``foxglove.sdk.v1``, and
    ``foxglove.websocket.v1`` of older apps and ``@foxglove/ws-protocol``). Channels
    keep their schemas and encodings (``ros2msg`` + ``cdr``, ``jsonschema`` +
    ``json``), so the live view and an MCAP file
    of the same run show the same. Its own context: two views in one process
    stay apart.
    """

    def __init__(self, host: str = LIVE_HOST, port: int = LIVE_PORT,
                 name: str = "fwbridge") -> None:
        try:
            import foxglove
        except ImportError:
            raise McapError("the live view needs foxglove-sdk: "
                            "pip install 'fwbridge[foxglove]'") from None
        from fwbridge.bridge.record.live_front import SubprotocolFront

        self._fox = foxglove
        self._context = foxglove.Context()
        try:  # the SDK's server, reached only through the front (loopback, any free port)
            self.server: Any = foxglove.start_server(name=name, host="127.0.0.1", port=0,
                                                     context=self._context)
        except Exception as exc:  # the SDK raises its FoxgloveError
            why = str(exc).removeprefix(f"{type(exc).__name__}: ").strip()
            raise McapError(f"cannot serve the live view: {why}") from None
        try:
            self.front = SubprotocolFront(host, port, int(self.server.port))
        except OSError as exc:
            self.server.stop()
            why = exc.strerror or str(exc)
            if exc.errno == errno.EADDRINUSE:
                why = "the port is in use (--foxglove-port 0 picks a free one)"
            raise McapError(f"cannot serve the live view on {host}:{port}: {why}") from None
        self.host = host
        self._lock = threading.Lock()
        self._closed = False

    @property
    def port(self) -> int:
        return self.front.port

    @property
    def loopback(self) -> bool:
        """Only this machine can connect: a loopback address (or a name of loopbacks only)."""
        return is_loopback_host(self.host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    def add_channel(self, spec: ChannelSpec) -> Any:
        schema = self._fox.Schema(name=spec.schema_name, encoding=spec.schema_encoding,
                                  data=spec.schema.encode())
        return self._fox.Channel(spec.topic, schema=schema, message_encoding=spec.message_encoding,
                                 context=self._context)

    def log(self, handle: Any, data: bytes, log_time_ns: int) -> None:
        if not self._closed:
            handle.log(data, log_time=log_time_ns)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.front.close()
        self.server.stop()


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


class McapTruncated(McapError, CaptureTruncated):
    """An MCAP file cut short (a recorder killed mid-run): its whole records came first."""


def read_mcap(path: str | os.PathLike[str], topics: Iterable[str] | None = None,
              *, on_error: Callable[[str], Any] | None = None,
              channels: set[str] | None = None) -> Iterator[McapRecord]:
    """The messages of an MCAP file in log-time order (file order for a cut or compact file).

    The summary is trusted only when its CRC (the footer's ``summary_crc``)
    holds: a compact file (no chunk indexes: CAN recordings), a file whose
    summary is damaged (a bad CRC, a record that does not parse) or missing
    (a recorder killed mid-run, a file cut in its summary) is read record by
    record, every chunk's CRC and the data section's CRC checked. Damage
    that loses no message (a summary read past this way) is said as a
    :class:`~fwbridge.bridge.record.damage.CaptureWarning` naming the file. A
    file cut in its data section gives its messages up to its last whole
    chunk, then :class:`McapTruncated` names the file and where it was cut; a
    damaged one (bad CRC, a chunk that does not decompress, a broken record)
    gives its messages up to the damage, then :class:`McapError` naming the
    file and offset. ``on_error`` instead: it is told why the read stopped,
    and nothing is raised. ``channels``: filled with every topic the file
    declares (wanted or not).
    """
    p = Path(path)
    try:
        from mcap.reader import SeekingReader
        from mcap.stream_reader import StreamReader
    except ImportError:
        raise McapError(INSTALL_HINT) from None
    wanted = None if topics is None else set(topics)
    try:
        stream = open(p, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise McapError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise McapError(f"{p}: is a directory, not a capture file") from None
    except PermissionError:
        raise McapError(f"{p}: permission denied") from None

    def damaged(why: str, exc: McapError) -> None:
        if on_error is not None:
            on_error(why)
            return
        raise exc

    with stream:
        if not looks_like_mcap(stream.read(8)):
            raise McapError(f"{p}: not an MCAP file")
        size = os.fstat(stream.fileno()).st_size
        summary, trouble = None, _summary_trouble(stream, size)
        if trouble is None:
            stream.seek(0)
            try:
                reader = SeekingReader(stream, validate_crcs=True,
                                       record_size_limit=RECORD_LIMIT)
                summary = reader.get_summary()
            except Exception as exc:  # a summary that does not parse (the library raises anything)
                trouble = f"summary damaged ({_why(exc)})"
            if summary is not None and any(
                    ix.uncompressed_size > RECORD_LIMIT or ix.chunk_length > RECORD_LIMIT
                    or ix.chunk_start_offset + ix.chunk_length > size
                    for ix in summary.chunk_indexes):
                summary, trouble = None, "summary damaged (a chunk index out of bounds)"
        if summary is not None and summary.chunk_indexes:
            if channels is not None:
                channels.update(ch.topic for ch in summary.channels.values())
            count = 0
            try:
                for schema, channel, message in reader.iter_messages(topics=wanted,
                                                                     log_time_order=True):
                    count += 1
                    yield McapRecord(channel.topic, schema.name if schema else "",
                                     message.log_time, bytes(message.data))
            except Exception as exc:  # a damaged chunk: the library's error, whatever it is
                why = f"corrupt MCAP after {count} messages: {_why(exc)}"
                damaged(why, McapError(f"{p}: {why}"))
                return
            outside = _data_crc_trouble(stream)
            if outside is not None:  # every chunk held its CRC: no message is lost
                warn_damage(p, outside)
            return
        stream.seek(0)  # compact (a summary without chunk indexes), damaged or cut
        scan = StreamReader(stream, skip_magic=False, validate_crcs=True, emit_chunks=True,
                            record_size_limit=RECORD_LIMIT)
        yield from _recover(p, stream, scan, wanted, damaged, channels, trouble)


#: The footer record (opcode, length, summary start, summary offset start, CRC) and the magic.
_FOOTER = struct.Struct("<BQQQI8s")


def _data_crc_trouble(stream: IO[bytes]) -> str | None:
    """Damage between the chunks (message indexes, records outside chunks), which the
    indexed read skips: the data section's CRC in its DataEnd record, if written."""
    footer = _footer_of(stream)
    start = footer[0] if footer else 0
    if start < 8 + 13:
        return None
    stream.seek(start - 13)
    op, length, crc = struct.unpack("<BQI", stream.read(13))
    if op != 0x0F or length != 4 or crc == 0:
        return None
    stream.seek(0)
    got, left = 0, start - 13
    while left > 0:
        block = stream.read(min(left, 1 << 20))
        if not block:
            return None
        got = zlib.crc32(block, got)
        left -= len(block)
    return _outside(got, crc) if got != crc else None


def _outside(got: int, crc: int) -> str:
    return (f"data section damaged outside the chunks (crc mismatch: {got:08x}, its end says "
            f"{crc:08x}); every chunk's own CRC held: no message lost")


def _footer_of(stream: IO[bytes]) -> tuple[int, int] | None:
    """(summary start, summary offset start) of a file with a whole footer."""
    size = os.fstat(stream.fileno()).st_size
    if size < 8 + _FOOTER.size:
        return None
    stream.seek(size - _FOOTER.size)
    op, length, start, offsets, _, magic = _FOOTER.unpack(stream.read(_FOOTER.size))
    return (start, offsets) if op == 0x02 and length == 20 and magic == MCAP_MAGIC else None


def _summary_trouble(stream: IO[bytes], size: int) -> str | None:
    """Why the summary cannot be trusted (cut, or its CRC does not hold), or None."""
    if size < 8 + _FOOTER.size:
        return "summary cut (no footer)"
    stream.seek(size - _FOOTER.size)
    op, length, start, offsets, crc, magic = _FOOTER.unpack(stream.read(_FOOTER.size))
    if magic != MCAP_MAGIC or op != 0x02 or length != 20:
        return "summary cut (no footer)"
    footer_at = size - _FOOTER.size
    if not 0 <= start <= footer_at or (start and not start <= offsets <= footer_at) \
            or (start and footer_at - start > RECORD_LIMIT):
        return f"summary damaged (footer: summary start {start} out of bounds)"
    if crc == 0:  # not written (allowed by the spec): nothing to check
        return None
    stream.seek(start if start else footer_at)
    got, left = 0, footer_at - (start if start else footer_at)
    while left > 0:
        block = stream.read(min(left, 1 << 20))
        if not block:
            return "summary cut (no footer)"
        got = zlib.crc32(block, got)
        left -= len(block)
    got = zlib.crc32(struct.pack("<BQQQ", op, length, start, offsets), got)
    if got != crc:
        return f"summary damaged (crc mismatch: {got:08x}, footer says {crc:08x})"
    return None


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) < 200 else text[:200] + "..."


def _recover(p: Path, stream: IO[bytes], reader: Any, wanted: set[str] | None,
             damaged: Callable[[str, McapError], None],
             channels: set[str] | None, trouble: str | None) -> Iterator[McapRecord]:
    """Records in file order until the data section ends or breaks (a cut file); at its
    end, ``trouble`` (why the summary was not used) said as a warning."""
    from mcap.records import Channel, Chunk, DataEnd, Footer, Message, Schema
    from mcap.stream_reader import breakup_chunk

    schemas: dict[int, str] = {}
    known: dict[int, tuple[str, int]] = {}
    it = _records(reader.records, Chunk, breakup_chunk)
    good = 8  # the offset after the last whole record (of the file: chunks count whole)
    size = os.fstat(stream.fileno()).st_size
    while True:
        try:
            record = next(it)
        except StopIteration:
            why = f"cut at byte {good} of {size}: no end of data; read up to the last whole chunk"
            damaged(why, McapTruncated(f"{p}: {why}"))
            return
        except Exception as exc:
            if isinstance(getattr(exc, "record", None), DataEnd):  # every chunk held its CRC
                _said(p, trouble, _outside(getattr(exc, "actual", 0), getattr(exc, "expected", 0)))
                return
            at = stream.tell()
            if at >= size:
                why = (f"cut at byte {good} of {size} ({_why(exc)}); "
                       "read up to the last whole chunk")
                damaged(why, McapTruncated(f"{p}: {why}"))
            else:
                why = f"corrupt MCAP near byte {good}: {_why(exc)}"
                damaged(why, McapError(f"{p}: {why}"))
            return
        good = stream.tell()
        if isinstance(record, Schema):
            schemas[record.id] = record.name
        elif isinstance(record, Channel):
            known[record.id] = (record.topic, record.schema_id)
            if channels is not None:
                channels.add(record.topic)
        elif isinstance(record, Message):
            topic, schema_id = known.get(record.channel_id, ("", 0))
            if wanted is None or topic in wanted:
                yield McapRecord(topic, schemas.get(schema_id, ""), record.log_time,
                                 bytes(record.data))
        elif isinstance(record, DataEnd | Footer):
            _said(p, trouble)
            return


def _said(p: Path, trouble: str | None, *more: str) -> None:
    """The damage a scan got past, one warning each: why the summary was not used, and
    what else was found."""
    if trouble is not None:
        warn_damage(p, f"{trouble}; read by scanning the data section")
    for what in more:
        warn_damage(p, what)


def _records(records: Iterator[Any], chunk_type: Any, breakup: Callable[..., list[Any]]
             ) -> Iterator[Any]:
    """The records with each chunk's broken up, a chunk checked before it is decompressed
    (a damaged size must not make the reader allocate gigabytes)."""
    for record in records:
        if isinstance(record, chunk_type):
            if record.compression not in ("", "zstd", "lz4"):
                raise McapError(f"chunk compression {record.compression[:40]!r} unknown")
            if record.uncompressed_size > RECORD_LIMIT:
                raise McapError(f"chunk of {record.uncompressed_size} bytes uncompressed "
                                f"(the limit is {RECORD_LIMIT})")
            yield from breakup(record, validate_crc=True)
        else:
            yield record
