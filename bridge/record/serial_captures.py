"""Reading a serial capture, whatever its format: pcapng (:mod:`.serial_pcapng_reader`)
or an MCAP capture's raw channels (:mod:`.serial_channels`)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from fwbridge.bridge.record.mcap_reader import Declared, read_mcap
from fwbridge.bridge.record.mcap_sink import McapError, looks_like_mcap
from fwbridge.bridge.record.serial_channels import RAW_DIRECTIONS, decode_raw
from fwbridge.bridge.record.serial_pcapng import LINKTYPE_USER1, RX, TX, Packet
from fwbridge.bridge.record.serial_pcapng_reader import read_packets
from fwbridge.protocols.errors import CaptureError, ConfigError

__all__ = ["read_capture", "read_mcap_packets", "read_payloads"]


def read_capture(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """Every packet of a pcapng serial capture (or an MCAP capture's raw channels), in order.

    Enhanced and simple packet blocks are read; other blocks are skipped.
    Every fault is a :class:`CaptureError` naming the offset (see
    :mod:`bridge.record.serial_pcapng_reader`); a file cut short (a killed recorder) gives
    its whole packets, then ``CaptureTruncated``.
    """
    if Path(path).is_file():
        with open(path, "rb") as head:
            if looks_like_mcap(head.read(8)):  # an MCAP capture: its raw channels
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


def read_mcap_packets(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """The reads and writes of an MCAP serial capture, as pcapng's :class:`Packet`."""
    declared: Declared = {}
    packets = 0
    try:
        for rec in read_mcap(path, RAW_DIRECTIONS, channels=declared):
            packet = Packet(rec.log_time_ns, RAW_DIRECTIONS[rec.topic], decode_raw(rec.data))
            packets += 1
            yield packet
    except McapError:
        raise  # it names the file, and says whether it was cut (CaptureTruncated)
    except (ValueError, struct.error) as exc:
        raise CaptureError(f"{path}: packet {packets + 1} does not decode: {exc}") from None
    if not packets and declared and not declared.keys() & RAW_DIRECTIONS.keys():
        on_can = {"/from_can_bus", "/to_can_bus"} & declared.keys()
        raise CaptureError(f"{path}: wrong kind of capture: "
                           + ("a CAN capture (MCAP), not a serial capture (decode it with "
                              "'fwbridge can decode')" if on_can
                              else f"no serial bytes (topics: {', '.join(sorted(declared))})"))
