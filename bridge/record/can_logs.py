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
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import can
from can.io.blf import BLFParseError
from can.io.logger import MESSAGE_WRITERS

from fwbridge.bridge.record.can_pcapng import PcapngWriter, read_pcap
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
    return can.Logger(p, **kwargs)


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
    try:
        with can.LogReader(p) as reader:
            yield from reader
            if isinstance(reader, can.BLFReader):
                _check_blf_length(p, reader)
            elif p.suffix.lower() == ".asc":
                _check_asc_end(p)
    except CaptureError:
        raise
    except _PARSE_ERRORS as exc:  # python-can's readers raise whatever their parser hit
        raise CaptureReadError(f"corrupt or truncated {p.suffix} data: {exc}") from exc


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
