"""pcapng captures of serial links, both directions, readable by Wireshark and tshark.

One interface per capture with link type LINKTYPE_USER0 (147: "private
use", so Wireshark shows the raw bytes and can be told how to dissect them
under DLT_USER), nanosecond timestamps (``if_tsresol`` = 9) and each packet's
direction in the EPB flags (bits 0-1: 1 inbound = received from the device,
2 outbound = sent to it). A packet is one read or one write on the link.

Written and read with python-pcapng, which handles this layout exactly
(custom link type, ``epb_flags``, ``if_tsresol``); the tests check the
files with tshark where it is installed.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import pcapng.blocks as pcapng_blocks
from pcapng import FileScanner, FileWriter
from pcapng.exceptions import PcapngException
from pcapng.utils import pack_timestamp_resolution

# python-pcapng 2.1 warns about its own option table (``if_tsresol`` has no
# declared type) on every block it handles; nothing a caller can act on.
warnings.filterwarnings("ignore", "Field type should not be", DeprecationWarning, "pcapng")

__all__ = [
    "INBOUND",
    "LINKTYPE_USER0",
    "OUTBOUND",
    "RX",
    "TX",
    "ByteSink",
    "CaptureError",
    "CaptureWriter",
    "Packet",
    "looks_like_pcapng",
    "read_capture",
    "read_payloads",
]

LINKTYPE_USER0 = 147
INBOUND = 1  # EPB flags direction: received by the host (device -> host)
OUTBOUND = 2  # sent by the host (host -> device)
RX, TX = "rx", "tx"
_FLAG = {RX: INBOUND, TX: OUTBOUND}
_NAME = {INBOUND: RX, OUTBOUND: TX}
#: First bytes of every pcapng file: the Section Header Block type.
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
SNAPLEN = 65535


class CaptureError(ValueError):
    """A capture file that cannot be read: names the file and the problem."""


@dataclass(frozen=True, slots=True)
class Packet:
    """One read (``rx``) or write (``tx``) on a link; ``direction`` "" if not recorded."""

    ts_ns: int
    direction: str
    data: bytes
    interface: str = ""


class ByteSink(Protocol):
    """Where a link's bytes are recorded: a pcapng or MCAP capture, a live view."""

    def write(self, direction: str, data: bytes, ts_ns: int | None = None) -> None: ...

    def close(self) -> None: ...


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
        shb = pcapng_blocks.SectionHeader(options={"shb_userappl": "fwbridge"})
        opts: dict[str, Any] = {"if_name": port, "if_tsresol": pack_timestamp_resolution(10, 9)}
        if description:
            opts["if_description"] = description
        shb.new_member(
            pcapng_blocks.InterfaceDescription,
            link_type=LINKTYPE_USER0,
            snaplen=SNAPLEN,
            options=opts,
        )
        self._shb = shb
        self._writer: Any = FileWriter(self._stream, shb)
        self._stream.flush()

    def write(self, direction: str, data: bytes, ts_ns: int | None = None) -> None:
        """Record ``data`` read (``"rx"``) or written (``"tx"``) at ``ts_ns`` (default: now)."""
        if not data:
            return
        flag = _FLAG[direction]
        ts = self._clock_ns() if ts_ns is None else ts_ns
        with self._lock:
            if self._writer is None:
                return  # closed while another thread was still reading: drop, don't crash
            for start in range(0, len(data), SNAPLEN):
                chunk = bytes(data[start : start + SNAPLEN])
                epb = self._shb.new_member(
                    pcapng_blocks.EnhancedPacket,
                    interface_id=0,
                    timestamp_high=ts >> 32,
                    timestamp_low=ts & 0xFFFFFFFF,
                    packet_data=chunk,
                    options={"epb_flags": flag},
                )
                self._writer.write_block(epb)
                self.packets += 1
                self.bytes += len(chunk)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if self._writer is None:
                return
            self._writer = None
            self._stream.flush()
            if self.path is not None:
                self._stream.close()

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resolution_ns(iface: Any) -> tuple[int, int]:
    """(multiplier, divisor) turning raw timestamp units into nanoseconds, exactly."""
    raw = iface.options.get("if_tsresol") if "if_tsresol" in iface.options else None
    if not raw:
        return 1000, 1  # the pcapng default: microseconds
    code = raw[0]
    exp = code & 0x7F
    if code & 0x80:  # a power of two
        return 10**9, 2**exp
    return (10 ** (9 - exp), 1) if exp <= 9 else (1, 10 ** (exp - 9))


def read_capture(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """Every packet of a pcapng file (or of an MCAP capture's raw channels), in file order.

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
        head = stream.read(8)
        if head == b"\x89MCAP0\r\n":  # an MCAP capture: its raw channels
            from fwbridge.bridge.mcap_capture import read_mcap_packets

            yield from read_mcap_packets(p)
            return
        if not looks_like_pcapng(head):
            raise CaptureError(f"{p}: not a pcapng file")
        stream.seek(0)
        scales: dict[int, tuple[int, int]] = {}
        try:
            for block in FileScanner(stream):
                if isinstance(block, pcapng_blocks.EnhancedPacket):
                    iface = block.interface
                    key = id(iface)
                    if key not in scales:
                        scales[key] = _resolution_ns(iface)
                    mul, div = scales[key]
                    raw = (block.timestamp_high << 32) | block.timestamp_low
                    flags = block.options.get("epb_flags") if "epb_flags" in block.options else None
                    direction = _NAME.get(int(flags) & 3, "") if flags is not None else ""
                    name = iface.options.get("if_name", "") if "if_name" in iface.options else ""
                    yield Packet(raw * mul // div, direction, bytes(block.packet_data), name)
                elif isinstance(block, pcapng_blocks.SimplePacket):
                    yield Packet(0, "", bytes(block.packet_data))
        except (PcapngException, struct.error, ValueError) as exc:
            if "truncat" in type(exc).__name__.lower() or isinstance(exc, struct.error):
                return  # cut short mid-block: keep what was complete
            raise CaptureError(f"{p}: corrupt pcapng: {exc}") from None


def read_payloads(path: str | os.PathLike[str], direction: str | None = None) -> Iterator[bytes]:
    """The bytes of a capture's packets, optionally one direction (``"rx"``/``"tx"``)."""
    if direction not in (None, RX, TX):
        raise ValueError(f"direction must be 'rx', 'tx' or None, not {direction!r}")
    for packet in read_capture(path):
        if direction is None or packet.direction == direction:
            yield packet.data
