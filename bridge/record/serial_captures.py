"""Reading a serial capture, whatever its format: pcapng (:mod:`.serial_pcapng_reader`)
or an MCAP capture's raw channels (:mod:`.serial_mcap`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from fwbridge.bridge.record.serial_mcap import read_mcap_packets
from fwbridge.bridge.record.serial_pcapng import LINKTYPE_USER1, RX, TX, Packet
from fwbridge.bridge.record.serial_pcapng_reader import read_packets
from fwbridge.protocols.errors import ConfigError

__all__ = ["read_capture", "read_payloads"]


def read_capture(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """Every packet of a pcapng serial capture (or an MCAP capture's raw channels), in order.

    Enhanced and simple packet blocks are read; other blocks are skipped.
    Every fault is a :class:`CaptureError` naming the offset (see
    :mod:`bridge.record.serial_pcapng_reader`); a file cut short (a killed recorder) gives
    its whole packets, then ``CaptureTruncated``.
    """
    if Path(path).is_file():
        with open(path, "rb") as head:
            if head.read(8) == b"\x89MCAP0\r\n":  # an MCAP capture: its raw channels
                return read_mcap_packets(Path(path))
    return read_packets(path)


def read_payloads(path: str | os.PathLike[str], direction: str | None = None) -> Iterator[bytes]:
    """The bytes of a capture's packets, optionally one direction (``"rx"``/``"tx"``)."""
    if direction not in (None, RX, TX):
        raise ConfigError(f"direction must be 'rx', 'tx' or None, not {direction!r}")
    for packet in read_capture(path):
        if packet.link_type == LINKTYPE_USER1:
            continue  # accepted frames, copies of bytes the reads already hold
        if direction is None or packet.direction == direction:
            yield packet.data
