"""MCAP files read back, damage and all: :func:`read_mcap`.

A whole file is read through its summary (seekable, in log-time order), once
the summary's CRC holds; a compact file (no chunk indexes), a damaged summary
or a file cut by a crash (SIGKILL, power loss) is read record by record up to
its last whole chunk. Damage that loses no message is said as one
:class:`~fwbridge.bridge.record.damage.CaptureWarning` each; damage that
does is an error naming the file and where. Every record and chunk is bounded
(:data:`RECORD_LIMIT`).

The ``mcap`` package (the ``mcap`` extra) is imported only when a file is read.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fwbridge.bridge.record.damage import warn_damage
from fwbridge.bridge.record.mcap_sink import INSTALL_HINT, McapError, looks_like_mcap
from fwbridge.bridge.record.mcap_writer import MAGIC
from fwbridge.protocols.errors import CaptureTruncated

__all__ = ["RECORD_LIMIT", "Declared", "McapRecord", "McapTruncated", "read_mcap"]

#: A file's channels as :func:`read_mcap` finds them: topic -> (message encoding, schema text).
Declared = dict[str, tuple[str, str]]
#: The longest record read (a damaged length must not make the reader allocate gigabytes).
RECORD_LIMIT = 256 << 20


@dataclass(frozen=True, slots=True)
class McapRecord:
    """One message read back: its channel's topic and schema name, time and bytes."""

    topic: str
    schema_name: str
    log_time_ns: int
    data: bytes


class McapTruncated(McapError, CaptureTruncated):
    """An MCAP file cut short (a recorder killed mid-run): its whole records came first."""


def read_mcap(path: str | os.PathLike[str], topics: Iterable[str] | None = None,
              *, on_error: Callable[[str], Any] | None = None,
              channels: Declared | None = None) -> Iterator[McapRecord]:
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
    and nothing is raised. ``channels``: filled with every channel the file
    declares (wanted or not), its topic -> (message encoding, schema text),
    each before its first message.
    """
    p = Path(path)
    try:
        from mcap.stream_reader import StreamReader
    except ImportError:
        raise McapError(INSTALL_HINT) from None
    wanted = None if topics is None else set(topics)

    def damaged(why: str, exc: McapError) -> None:
        if on_error is not None:
            on_error(why)
            return
        raise exc

    with _open(p) as stream:
        if not looks_like_mcap(stream.read(8)):
            raise McapError(f"{p}: not an MCAP file")
        size = os.fstat(stream.fileno()).st_size
        indexed, trouble = _seeking(stream, size)
        if indexed is not None:
            yield from _indexed(p, stream, size, indexed, wanted, damaged, channels)
            return
        stream.seek(0)  # compact (a summary without chunk indexes), damaged or cut
        scan = StreamReader(stream, skip_magic=False, validate_crcs=True, emit_chunks=True,
                            record_size_limit=RECORD_LIMIT)
        yield from _recover(p, stream, scan, wanted, damaged, channels, trouble)


def _open(p: Path) -> IO[bytes]:
    try:
        return open(p, "rb")  # the caller closes it
    except FileNotFoundError:
        raise McapError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise McapError(f"{p}: is a directory, not a capture file") from None
    except PermissionError:
        raise McapError(f"{p}: permission denied") from None


def _seeking(stream: IO[bytes], size: int) -> tuple[tuple[Any, Any] | None, str | None]:
    """(reader, summary) of a file read by its chunk indexes, when its summary holds and
    has them (else None), and why the summary was not used when it is damaged or cut."""
    from mcap.reader import SeekingReader

    trouble = _summary_trouble(stream, size)
    if trouble is not None:
        return None, trouble
    stream.seek(0)
    try:
        reader = SeekingReader(stream, validate_crcs=True, record_size_limit=RECORD_LIMIT)
        summary = reader.get_summary()
    except Exception as exc:  # a summary that does not parse (the library raises anything)
        return None, f"summary damaged ({_why(exc)})"
    if summary is None:
        return None, None
    if any(ix.uncompressed_size > RECORD_LIMIT or ix.chunk_length > RECORD_LIMIT
           or ix.chunk_start_offset + ix.chunk_length > size for ix in summary.chunk_indexes):
        return None, "summary damaged (a chunk index out of bounds)"
    return ((reader, summary) if summary.chunk_indexes else None), None


def _indexed(p: Path, stream: IO[bytes], size: int, indexed: tuple[Any, Any],
             wanted: set[str] | None, damaged: Callable[[str, McapError], None],
             channels: Declared | None) -> Iterator[McapRecord]:
    """The messages by the chunk indexes, in log-time order; then the bytes between the
    chunks checked against the data section's CRC."""
    reader, summary = indexed
    if channels is not None:
        for ch in summary.channels.values():
            channels[ch.topic] = _declared(ch, summary.schemas.get(ch.schema_id))
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
    outside = _data_crc_trouble(stream, size)
    if outside is not None:  # every chunk held its CRC: no message is lost
        warn_damage(p, outside)


#: The footer record (opcode, length, summary start, summary offset start, CRC) and the magic.
_FOOTER = struct.Struct("<BQQQI8s")
#: The DataEnd record (opcode, length, the data section's CRC).
_DATA_END = struct.Struct("<BQI")


def _footer(stream: IO[bytes], size: int) -> tuple[int, int, int] | None:
    """(summary start, summary offset start, summary CRC) of a file with a whole footer."""
    if size < 8 + _FOOTER.size:
        return None
    stream.seek(size - _FOOTER.size)
    op, length, start, offsets, crc, magic = _FOOTER.unpack(stream.read(_FOOTER.size))
    return (start, offsets, crc) if op == 0x02 and length == 20 and magic == MAGIC else None


def _crc_of(stream: IO[bytes], start: int, length: int, crc: int = 0) -> int | None:
    """The CRC-32 of ``length`` bytes from ``start``, read a block at a time; None when
    the file ends first."""
    stream.seek(start)
    while length > 0:
        block = stream.read(min(length, 1 << 20))
        if not block:
            return None
        crc = zlib.crc32(block, crc)
        length -= len(block)
    return crc


def _data_crc_trouble(stream: IO[bytes], size: int) -> str | None:
    """Damage between the chunks (message indexes, records outside chunks), which the
    indexed read skips: the data section's CRC in its DataEnd record, if written. A
    second read of the data section: the indexed read seeks from chunk to chunk and
    never sees the bytes between them (crc32 runs at memory speed beside decoding)."""
    footer = _footer(stream, size)
    end = footer[0] - _DATA_END.size if footer else 0
    if end < 8:
        return None
    stream.seek(end)
    op, length, crc = _DATA_END.unpack(stream.read(_DATA_END.size))
    if op != 0x0F or length != 4 or crc == 0:
        return None
    got = _crc_of(stream, 0, end)
    return _outside(got, crc) if got is not None and got != crc else None


def _outside(got: int, crc: int) -> str:
    return (f"data section damaged outside the chunks (crc mismatch: {got:08x}, its end says "
            f"{crc:08x}); every chunk's own CRC held: no message lost")


def _summary_trouble(stream: IO[bytes], size: int) -> str | None:
    """Why the summary cannot be trusted (cut, or its CRC does not hold), or None."""
    footer = _footer(stream, size)
    if footer is None:
        return "summary cut (no footer)"
    start, offsets, crc = footer
    footer_at = size - _FOOTER.size
    if not 0 <= start <= footer_at or (start and not start <= offsets <= footer_at) \
            or (start and footer_at - start > RECORD_LIMIT):
        return f"summary damaged (footer: summary start {start} out of bounds)"
    if crc == 0:  # not written (allowed by the spec): nothing to check
        return None
    begin = start if start else footer_at
    got = _crc_of(stream, begin, footer_at - begin)
    if got is None:
        return "summary cut (no footer)"
    got = zlib.crc32(struct.pack("<BQQQ", 0x02, 20, start, offsets), got)
    if got != crc:
        return f"summary damaged (crc mismatch: {got:08x}, footer says {crc:08x})"
    return None


def _declared(channel: Any, schema: Any) -> tuple[str, str]:
    """A channel's message encoding and its schema's text (none: "")."""
    return (channel.message_encoding,
            schema.data.decode("utf-8", "replace") if schema is not None else "")


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) < 200 else text[:200] + "..."


def _recover(p: Path, stream: IO[bytes], reader: Any, wanted: set[str] | None,
             damaged: Callable[[str, McapError], None],
             channels: Declared | None, trouble: str | None) -> Iterator[McapRecord]:
    """Records in file order until the data section ends or breaks (a cut file); at its
    end, ``trouble`` (why the summary was not used) said as a warning."""
    from mcap.records import Channel, Chunk, DataEnd, Footer, Message, Schema
    from mcap.stream_reader import breakup_chunk

    schemas: dict[int, Any] = {}  # id -> Schema record
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
            schemas[record.id] = record
        elif isinstance(record, Channel):
            known[record.id] = (record.topic, record.schema_id)
            if channels is not None:
                channels[record.topic] = _declared(record, schemas.get(record.schema_id))
        elif isinstance(record, Message):
            topic, schema_id = known.get(record.channel_id, ("", 0))
            if wanted is None or topic in wanted:
                schema = schemas.get(schema_id)
                yield McapRecord(topic, schema.name if schema else "", record.log_time,
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
