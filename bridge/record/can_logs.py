"""Captures of CAN traffic: python-can's log formats plus pcapng, and candump text.

- :func:`open_writer` / :func:`read_messages`: by file extension; ``.pcapng``
  (and ``.pcap`` for reading) through :mod:`bridge.record.can_pcapng`, ``.mcap`` through
  :mod:`bridge.record.can_mcap`, everything else
  through python-can (``.log`` candump, ``.asc``, ``.blf``, ``.csv``,
  ``.trc``, ``.mf4``, ``.db``).
- :func:`decode_actuators`: the actuator structs in any capture.
- :func:`parse_frame` / :func:`format_frame` / :func:`candump_line`: can-utils'
  ``ID#DATA`` notation (``123#DEADBEEF``, ``1F334455#11``, ``123#R``,
  ``123#R4``, bytes optionally dot-separated).
"""

from __future__ import annotations

import importlib.util
import io
import re
import struct
import zlib
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import can
from can.io.blf import BLFParseError
from can.io.logger import MESSAGE_WRITERS

from fwbridge.bridge.record.can_pcapng import PcapngWriter, read_pcap
from fwbridge.bridge.record.safe_output import open_output, prepare
from fwbridge.can_bus.ids import ActuatorMessage, from_message
from fwbridge.protocols.errors import CaptureError, CaptureTruncated, FrameError

__all__ = ["PCAP_SUFFIXES", "CaptureNotFound", "CaptureReadError", "candump_line",
           "decode_actuators",
           "format_frame", "open_writer", "parse_frame", "read_messages", "writable_suffixes"]

PCAP_SUFFIXES = (".pcapng", ".pcap")


class CaptureReadError(CaptureError):
    """A capture that cannot be read: corrupt, truncated, or another format."""


class CaptureTruncatedRead(CaptureReadError, CaptureTruncated):
    """A capture cut short: its whole frames came first."""


_PARSE_ERRORS = (BLFParseError, struct.error, zlib.error, EOFError, UnicodeDecodeError,
                 IndexError, KeyError, ValueError)

#: Writers that need a package python-can leaves optional: suffix -> that package.
_WRITER_NEEDS = {".mf4": "asammdf"}


def _writer_available(suffix: str) -> bool:
    need = _WRITER_NEEDS.get(suffix)
    return need is None or importlib.util.find_spec(need) is not None


def writable_suffixes() -> list[str]:
    """File extensions :func:`open_writer` can write here (.mf4 only with asammdf)."""
    return sorted(s for s in {*MESSAGE_WRITERS, ".pcapng", ".mcap"} - {".gz"}
                  if _writer_available(s))


def open_writer(path: str | Path, **kwargs: Any) -> can.Listener:
    """A python-can Listener writing to ``path``; the format follows the extension."""
    p = Path(path)
    if p.suffix.lower() == ".pcapng":
        return PcapngWriter(p, **kwargs)
    if p.suffix.lower() == ".mcap":  # the mcap extra, imported only for these files
        from fwbridge.bridge.record.can_mcap import McapCanWriter

        return McapCanWriter(p, **kwargs)
    if p.suffix.lower() == ".pcap":
        raise CaptureError(f"{p}: write .pcapng (classic .pcap is read only)")
    if p.suffix.lower() not in MESSAGE_WRITERS:
        raise CaptureError(f"{p}: unknown capture format {p.suffix!r}; use one of "
                         + ", ".join(writable_suffixes()))
    if not _writer_available(p.suffix.lower()):
        raise CaptureError(f"{p}: writing {p.suffix} needs the {_WRITER_NEEDS[p.suffix.lower()]} "
                         "package, which is not installed; use one of "
                         + ", ".join(writable_suffixes()))
    writer: Any = MESSAGE_WRITERS[p.suffix.lower()]
    if p.suffix.lower() in _TEXT_READERS:  # text logs: a line a write, kept whole on a full disk
        text = io.TextIOWrapper(open_output(p), encoding="utf-8", write_through=True)
        listener: can.Listener = writer(text, **kwargs)
        return listener
    if p.suffix.lower() == ".blf":
        blf: can.Listener = writer(open_output(p), **kwargs)
        return blf
    return can.Logger(prepare(p), **kwargs)  # python-can opens the path: a link there is gone


class CaptureNotFound(CaptureError, FileNotFoundError):
    """No capture file at that path (a ``FileNotFoundError`` too, for callers that catch it)."""


def read_messages(path: str | Path) -> Iterator[can.Message]:
    """Every message in a capture file, in file order."""
    p = Path(path)
    if not p.is_file():
        raise CaptureNotFound(f"{p}: no such file")
    if p.suffix.lower() in PCAP_SUFFIXES:
        yield from read_pcap(p)
        return
    if p.suffix.lower() == ".mcap":
        from fwbridge.bridge.record.can_mcap import read_mcap_messages

        yield from read_mcap_messages(p)
        return
    suffix = p.suffix.lower()
    try:
        if suffix == ".blf":
            with CheckedBLFReader(p) as blf:
                yield from blf
                _check_blf_length(p, blf)
        elif suffix in _TEXT_READERS:
            with BoundedLines(p) as lines, _TEXT_READERS[suffix](lines) as text:
                yield from text
                lines.check()  # the over-long lines skipped, if any: named after the frames
            if suffix == ".asc":
                _check_asc_end(p)
        else:
            with can.LogReader(p) as reader:
                yield from reader
    except CaptureError:
        raise
    except _PARSE_ERRORS as exc:  # python-can's readers raise whatever their parser hit
        raise CaptureReadError(f"corrupt or truncated {p.suffix} data: {exc}") from exc


#: The longest line of a text log (bytes): a CAN FD frame's line is under 300.
LINE_LIMIT = 64 * 1024
#: The largest BLF object (a log container holds about 128 KiB) and a container inflated.
BLF_OBJECT_LIMIT = 16 << 20
#: The largest BLF file header (144 bytes as written; more is reserved space).
BLF_HEADER_LIMIT = 64 * 1024

_TEXT_READERS: dict[str, Any] = {".log": can.CanutilsLogReader, ".asc": can.ASCReader,
                                 ".csv": can.CSVReader, ".trc": can.TRCReader}


class LongLineCount:
    """The over-long lines a bounded reader of ``path`` skipped: how many, and where the
    first began; :meth:`check` names them once the other lines' frames are out."""

    def __init__(self, path: str | Path, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.long = 0
        self.first: tuple[int, int] | None = None  # (line number, byte offset)

    def skipped(self, line: int, at: int) -> None:
        self.long += 1
        if self.first is None:
            self.first = (line, at)

    def check(self) -> None:
        """CaptureReadError if a line was too long (after the frames of the others)."""
        if self.first is not None:
            line, at = self.first
            raise CaptureReadError(
                f"{self.path}: {self.long} line(s) longer than {self.limit} bytes skipped "
                f"(the first: line {line}, from byte {at})")


class BoundedLines(LongLineCount):
    """A text log read line by line, no line longer than ``limit`` bytes held in memory.

    What python-can's text readers iterate instead of the file: a longer line
    is skipped (read past in bounded pieces) and counted; :meth:`check` then
    names the file, how many there were and where the first began.
    """

    def __init__(self, path: str | Path, limit: int = LINE_LIMIT) -> None:
        super().__init__(Path(path), limit)
        self._line = 0
        self._at = 0
        self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while True:
            raw = self._file.readline(self.limit + 1)
            if not raw:
                raise StopIteration
            start, self._line = self._at, self._line + 1
            self._at += len(raw)
            if len(raw) <= self.limit or raw.endswith(b"\n"):
                return raw.decode("utf-8")
            while raw and not raw.endswith(b"\n"):  # the rest of the line, a piece at a time
                raw = self._file.readline(self.limit)
                self._at += len(raw)
            self.skipped(self._line, start)

    def __bool__(self) -> bool:
        return True

    def __enter__(self) -> BoundedLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()


class CheckedBLFReader(can.BLFReader):
    """python-can's BLF reader with every size it reads checked first.

    A damaged file header (its size), object (signature, size) or log
    container (compression method, what it inflates to) is one
    :class:`CaptureReadError` naming the file, the field and the byte offset,
    never a silent end (python-can skips an unknown compression and reads a
    header of any size) or an allocation of gigabytes.
    """

    def __init__(self, file: str | Path, **kwargs: Any) -> None:
        from can.io.blf import FILE_HEADER_STRUCT, systemtime_to_timestamp

        can.io.generic.BinaryIOMessageReader.__init__(self, file, mode="rb")
        self.path = Path(file)
        size = self.path.stat().st_size
        data = self.file.read(FILE_HEADER_STRUCT.size)
        if data[:4] != b"LOGG":
            raise CaptureReadError(f"{self.path}: not a BLF file (signature "
                                   f"{data[:4].hex(' ') or 'missing'} is not LOGG, bytes 0-3)")
        if len(data) < FILE_HEADER_STRUCT.size:
            raise CaptureTruncatedRead(f"{self.path}: cut at byte {len(data)}, inside the "
                                       f"{FILE_HEADER_STRUCT.size}-byte BLF file header")
        header = FILE_HEADER_STRUCT.unpack(data)
        header_size = header[1]
        if not FILE_HEADER_STRUCT.size <= header_size <= min(BLF_HEADER_LIMIT, size):
            raise CaptureReadError(
                f"{self.path}: BLF header size {header_size} out of bounds (bytes 4-7: "
                f"{data[4:8].hex(' ')}; {FILE_HEADER_STRUCT.size} to {BLF_HEADER_LIMIT})")
        self.file_size = header[10]
        self.uncompressed_size = header[11]
        self.object_count = header[12]
        self.start_timestamp = systemtime_to_timestamp(header[14:22])
        self.stop_timestamp = systemtime_to_timestamp(header[22:30])
        self.file.read(header_size - FILE_HEADER_STRUCT.size)
        self._tail = b""
        self._pos = 0

    def __iter__(self) -> Generator[can.Message, None, None]:
        from can.io.blf import (
            LOG_CONTAINER,
            LOG_CONTAINER_STRUCT,
            NO_COMPRESSION,
            OBJ_HEADER_BASE_STRUCT,
            ZLIB_DEFLATE,
        )

        base = OBJ_HEADER_BASE_STRUCT.size
        while True:
            at = self.file.tell()
            data = self.file.read(base)
            if len(data) < base:
                break  # the end, or a cut (the header's file size tells: _check_blf_length)
            signature, _, _, obj_size, obj_type = OBJ_HEADER_BASE_STRUCT.unpack(data)
            if signature != b"LOBJ":
                raise CaptureReadError(f"{self.path}: BLF object at byte {at}: signature "
                                       f"{data[:4].hex(' ')} is not LOBJ (bytes {at}-{at + 3})")
            if not base <= obj_size <= BLF_OBJECT_LIMIT:
                raise CaptureReadError(
                    f"{self.path}: BLF object at byte {at}: size {obj_size} out of bounds "
                    f"(bytes {at + 8}-{at + 11}: {data[8:12].hex(' ')}; at most "
                    f"{BLF_OBJECT_LIMIT})")
            obj_data = self.file.read(obj_size - base)
            self.file.read(obj_size % 4)  # padding
            if obj_type != LOG_CONTAINER:
                continue
            if len(obj_data) < LOG_CONTAINER_STRUCT.size:
                break  # cut inside the container's header
            method, _ = LOG_CONTAINER_STRUCT.unpack_from(obj_data)
            packed = obj_data[LOG_CONTAINER_STRUCT.size:]
            if method == NO_COMPRESSION:
                raw = packed
            elif method == ZLIB_DEFLATE:
                inflate = zlib.decompressobj()
                raw = inflate.decompress(packed, BLF_OBJECT_LIMIT)
                if inflate.unconsumed_tail:
                    raise CaptureReadError(
                        f"{self.path}: BLF container at byte {at} inflates beyond "
                        f"{BLF_OBJECT_LIMIT} bytes")
            else:
                raise CaptureReadError(
                    f"{self.path}: BLF container at byte {at}: compression method {method} "
                    f"unknown (bytes {at + base}-{at + base + 1}; 0 none, 2 zlib)")
            yield from self._parse_container(raw)
            if len(self._tail) > BLF_OBJECT_LIMIT:
                raise CaptureReadError(f"{self.path}: BLF object across containers from byte "
                                       f"{at} longer than {BLF_OBJECT_LIMIT} bytes")
        self.stop()


def _check_blf_length(p: Path, reader: can.BLFReader) -> None:
    """A BLF file shorter than its header says was cut (python-can's reader just stops)."""
    size = p.stat().st_size
    declared = int(getattr(reader, "file_size", 0) or 0)
    if declared > size:
        raise CaptureTruncatedRead(f"{p}: cut at byte {size} of the {declared} its header "
                                   "declares; read up to the last whole object")


def _check_asc_end(p: Path) -> None:
    """An ASC log ends with ``End TriggerBlock``: one without it was cut."""
    size = p.stat().st_size
    with open(p, "rb") as f:
        f.seek(max(0, size - 256))
        tail = f.read().rstrip().rsplit(b"\n", 1)[-1].strip()
    if tail.lower() != b"end triggerblock":
        raise CaptureTruncatedRead(f"{p}: cut at byte {size}: no 'End TriggerBlock' line; "
                                   "read up to the last whole line")


def decode_actuators(source: str | Path | Iterable[can.Message]
                     ) -> Iterator[ActuatorMessage | tuple[can.Message, FrameError]]:
    """Actuator structs (commands and feedback) found in a capture or message stream.

    A frame on an actuator ID whose data is malformed yields ``(message, error)``
    instead of stopping the iteration; other frames are skipped.
    """
    messages = read_messages(source) if isinstance(source, (str, Path)) else source
    for msg in messages:
        try:
            got = from_message(msg)
        except FrameError as exc:
            yield msg, exc
            continue
        if got is not None:
            yield got


_SPEC = re.compile(r"^(?P<id>[0-9A-Fa-f]{1,8})#(?:(?P<rtr>[Rr])(?P<len>[0-8])?|"
                   r"(?P<data>(?:[0-9A-Fa-f]{2}\.?)*))$")


def parse_frame(text: str) -> can.Message:
    """A message from can-utils notation: 3 hex digits = standard ID, 8 = extended."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise CaptureError(f"{text!r}: expected ID#DATA (e.g. 123#DEADBEEF, 1F334455#11, 123#R)")
    id_text = m["id"]
    if len(id_text) not in (3, 8):
        raise CaptureError(f"{text!r}: the ID needs 3 hex digits (standard) or 8 (extended)")
    extended = len(id_text) == 8
    can_id = int(id_text, 16)
    if can_id > (0x1FFFFFFF if extended else 0x7FF):
        raise CaptureError(f"{text!r}: ID 0x{can_id:X} out of range")
    if m["rtr"]:
        return can.Message(arbitration_id=can_id, is_extended_id=extended, is_remote_frame=True,
                           dlc=int(m["len"] or 0))
    data = bytes.fromhex((m["data"] or "").replace(".", ""))
    if len(data) > 8:
        raise CaptureError(f"{text!r}: {len(data)} data bytes, classic CAN carries at most 8")
    return can.Message(arbitration_id=can_id, is_extended_id=extended, data=data)


def format_frame(msg: can.Message) -> str:
    """can-utils notation of ``msg`` (``123#DEADBEEF``, ``123#R4``)."""
    ident = f"{msg.arbitration_id:08X}" if msg.is_extended_id else f"{msg.arbitration_id:03X}"
    if msg.is_error_frame:
        ident = f"{0x20000000 | msg.arbitration_id:08X}"
    if msg.is_remote_frame:
        return f"{ident}#R{msg.dlc if msg.dlc else ''}"
    return f"{ident}#{bytes(msg.data).hex().upper()}"


def candump_line(msg: can.Message, channel: Any = None, t: float | None = None) -> str:
    """One line as ``candump -L`` prints it: ``(timestamp) channel ID#DATA`` (``t`` in place
    of the message's timestamp: a relative time)."""
    ch = msg.channel if msg.channel is not None else (channel if channel is not None else "can0")
    return f"({msg.timestamp if t is None else t:.6f}) {ch} {format_frame(msg)}"
