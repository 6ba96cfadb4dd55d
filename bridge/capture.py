"""pcapng captures of serial links, both directions, readable by Wireshark and tshark.

One interface per capture with link type LINKTYPE_USER0 (147: "private
use", so Wireshark shows the raw bytes and can be told how to dissect them
under DLT_USER), nanosecond timestamps (``if_tsresol`` = 9) and each packet's
direction in the EPB flags (bits 0-1: 1 inbound = received from the device,
2 outbound = sent to it). A packet is one read or one write on the link.

Written and read through :mod:`fwbridge.protocols.pcapng`, the blocks the
CAN captures use too; the tests check the files with tshark.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fwbridge.protocols.errors import CaptureError, ConfigError
from fwbridge.protocols.pcapng import (
    INBOUND,
    MAGIC,
    OUTBOUND,
    enhanced_packet,
    interface_description,
    iter_packets,
    section_header,
)

__all__ = [
    "INBOUND",
    "LINKTYPE_USER0",
    "OUTBOUND",
    "RX",
    "TX",
    "CaptureError",
    "CaptureWriter",
    "Packet",
    "looks_like_pcapng",
    "read_capture",
    "read_payloads",
]

LINKTYPE_USER0 = 147
RX, TX = "rx", "tx"
_FLAG = {RX: INBOUND, TX: OUTBOUND}
_NAME = {INBOUND: RX, OUTBOUND: TX}
#: First bytes of every pcapng file: the Section Header Block type.
PCAPNG_MAGIC = MAGIC
SNAPLEN = 65535


@dataclass(frozen=True, slots=True)
class Packet:
    """One read (``rx``) or write (``tx``) on a link; ``direction`` "" if not recorded."""

    ts_ns: int
    direction: str
    data: bytes
    interface: str = ""


def looks_like_pcapng(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a pcapng capture."""
    return head[:4] == PCAPNG_MAGIC


class CaptureWriter:
    """Appends packets to a new pcapng file; safe to call from several threads.

    Each packet is flushed as it is written, so a capture killed mid-run is
    still readable up to its last packet, and tshark can follow a live file.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[bytes],
        *,
        port: str = "serial",
        description: str = "",
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if isinstance(target, (str, os.PathLike)):
            self.path: Path | None = Path(target)
            self._stream: IO[bytes] = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        else:
            self.path, self._stream = None, target
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self.packets = 0
        self.bytes = 0
        self._open = True
        self._stream.write(section_header()
                           + interface_description(LINKTYPE_USER0, SNAPLEN, port, description))
        self._stream.flush()

    def write(self, direction: str, data: bytes, ts_ns: int | None = None) -> None:
        """Record ``data`` read (``"rx"``) or written (``"tx"``) at ``ts_ns`` (default: now)."""
        if not data:
            return
        flag = _FLAG[direction]
        ts = self._clock_ns() if ts_ns is None else ts_ns
        with self._lock:
            if not self._open:
                return  # closed while another thread was still reading: drop, don't crash
            for start in range(0, len(data), SNAPLEN):
                chunk = bytes(data[start : start + SNAPLEN])
                self._stream.write(enhanced_packet(0, ts, chunk, flag))
                self.packets += 1
                self.bytes += len(chunk)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if not self._open:
                return
            self._open = False
            self._stream.flush()
            if self.path is not None:
                self._stream.close()

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_capture(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """Every packet of a pcapng file, in file order.

    Enhanced and simple packet blocks are read; other blocks are skipped. A
    file cut short after its last complete packet (a killed recorder) reads
    up to that packet.
    """
    p = Path(path)
    try:
        stream = open(p, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise CaptureError(f"{p}: no such capture file") from None
    except IsADirectoryError:
        raise CaptureError(f"{p}: is a directory, not a capture file") from None
    except PermissionError:
        raise CaptureError(f"{p}: permission denied") from None
    with stream:
        if not looks_like_pcapng(stream.read(4)):
            raise CaptureError(f"{p}: not a pcapng file")
        stream.seek(0)
        try:
            for pkt in iter_packets(stream.read):
                direction = _NAME.get(pkt.flags & 3, "") if pkt.flags is not None else ""
                yield Packet(pkt.ts_ns, direction, pkt.data, pkt.name)
        except CaptureError as exc:
            raise CaptureError(f"{p}: corrupt pcapng: {exc}") from None


def read_payloads(path: str | os.PathLike[str], direction: str | None = None) -> Iterator[bytes]:
    """The bytes of a capture's packets, optionally one direction (``"rx"``/``"tx"``)."""
    if direction not in (None, RX, TX):
        raise ConfigError(f"direction must be 'rx', 'tx' or None, not {direction!r}")
    for packet in read_capture(path):
        if direction is None or packet.direction == direction:
            yield packet.data
