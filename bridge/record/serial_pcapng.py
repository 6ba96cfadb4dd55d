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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fwbridge.bridge.node.sinks import RX, TX, ByteSink, SinkBase
from fwbridge.bridge.record.safe_output import open_output
from fwbridge.protocols.errors import CaptureError
from fwbridge.protocols.pcapng import (
    INBOUND,
    MAGIC,
    OUTBOUND,
    enhanced_packet,
    interface_description,
    section_header,
)

__all__ = [
    "FRAMES_INTERFACE",
    "INBOUND",
    "LINKTYPE_USER0",
    "LINKTYPE_USER1",
    "OUTBOUND",
    "RX",
    "TX",
    "ByteSink",
    "CaptureError",
    "CaptureWriter",
    "Packet",
    "looks_like_pcapng",
]

LINKTYPE_USER0 = 147
#: The frames a receiver accepted, one per packet, on a second interface beside
#: the raw reads: Wireshark dissects those whole even when the reads split them.
LINKTYPE_USER1 = 148
FRAMES_INTERFACE = "fwbridge-frames"
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
    link_type: int = LINKTYPE_USER0  # LINKTYPE_USER1: an accepted frame, not a read


def looks_like_pcapng(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a pcapng capture."""
    return head[:4] == PCAPNG_MAGIC


class CaptureWriter(SinkBase):
    """Appends packets to a new pcapng file; safe to call from several threads.

    A node's sink (:mod:`bridge.node.sinks`): it records the link's bytes.

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
        frames: str | None = None,
    ) -> None:
        if isinstance(target, (str, os.PathLike)):
            self.path: Path | None = Path(target)
            self._stream: IO[bytes] = open_output(self.path)  # a link replaced, never followed
        else:
            self.path, self._stream = None, target
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self.packets = 0
        self.bytes = 0
        self._open = True
        self._stream.write(section_header()
                           + interface_description(LINKTYPE_USER0, SNAPLEN, port, description))
        self._frames_iface = frames is not None
        if frames is not None:  # interface 1: whole frames, named by their family
            self._stream.write(interface_description(LINKTYPE_USER1, SNAPLEN, FRAMES_INTERFACE,
                                                     f"fwbridge frames: {frames}"))
        self.frames = 0
        self._stream.flush()

    def write(self, direction: str, data: bytes, ts_ns: int | None = None,
              interface: int = 0) -> None:
        """Record ``data`` read (``"rx"``) or written (``"tx"``) at ``ts_ns`` (default: now).

        ``interface=1`` (a writer made with ``frames=``): ``data`` is one whole frame a
        receiver accepted, not a read; see :meth:`write_frame`.
        """
        if not data:
            return
        flag = _FLAG[direction]
        ts = self._clock_ns() if ts_ns is None else ts_ns
        with self._lock:
            if not self._open:
                return  # closed while another thread was still reading: drop, don't crash
            for start in range(0, len(data), SNAPLEN):
                chunk = bytes(data[start : start + SNAPLEN])
                self._stream.write(enhanced_packet(interface, ts, chunk, flag))
                if interface:
                    self.frames += 1
                else:
                    self.packets += 1
                    self.bytes += len(chunk)
            self._stream.flush()

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        self.write(direction, data, ts_ns)

    def write_frame(self, direction: str, frame: bytes, ts_ns: int | None = None) -> None:
        """Record one whole accepted frame on the frames interface (``frames=`` given)."""
        if self._frames_iface:
            self.write(direction, frame, ts_ns, interface=1)

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
