"""pcapng (and classic pcap) captures of CAN frames, link type 227 (LINKTYPE_CAN_SOCKETCAN).

Each packet is a SocketCAN ``struct can_frame``: CAN ID with the EFF/RTR/ERR
flags as a big-endian u32, payload length u8, padding, two reserved bytes,
8 data bytes. Wireshark and tshark dissect it as CAN. Timestamps are written
with nanosecond resolution (``if_tsresol`` = 9); the packet direction flag
of each Enhanced Packet Block says received or transmitted. One interface
block per channel name.

:class:`PcapngWriter` and :class:`PcapngReader` are python-can
``MessageWriter``/``MessageReader`` classes, so python-can's ``Logger`` and
``LogReader`` (hence ``can.logger``, ``can.player``, ``can.logconvert``)
handle ``.pcapng`` once they are registered under python-can's
``can.io.message_writer`` / ``can.io.message_reader`` entry points.
"""

from __future__ import annotations

import io
import math
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import can
from can.io.generic import BinaryIOMessageReader, BinaryIOMessageWriter
from can.typechecking import StringPathLike

from fwbridge.bridge.record.safe_output import open_output
from fwbridge.protocols.errors import CaptureError
from fwbridge.protocols.pcapng import (
    INBOUND,
    LINKTYPE_CAN_SOCKETCAN,
    OUTBOUND,
    PCAP_BIG,
    PCAP_LITTLE,
    enhanced_packet,
    interface_description,
    iter_packets,
    section_header,
)

__all__ = ["LINKTYPE_CAN_SOCKETCAN", "PcapngReader", "PcapngWriter", "decode_packet",
           "encode_packet", "parse", "read_pcap"]

CAN_EFF_FLAG, CAN_RTR_FLAG, CAN_ERR_FLAG = 0x80000000, 0x40000000, 0x20000000
CAN_EFF_MASK = 0x1FFFFFFF
_FRAME = struct.Struct(">IBBBB8s")
_SNAPLEN = 16


def encode_packet(msg: can.Message) -> bytes:
    """The 16-byte SocketCAN frame of ``msg``."""
    can_id = msg.arbitration_id & (CAN_EFF_MASK if msg.is_extended_id else 0x7FF)
    if msg.is_extended_id:
        can_id |= CAN_EFF_FLAG
    if msg.is_remote_frame:
        can_id |= CAN_RTR_FLAG
    if msg.is_error_frame:
        can_id = CAN_ERR_FLAG | (msg.arbitration_id & CAN_EFF_MASK)
    data = b"" if msg.is_remote_frame else bytes(msg.data or b"")
    if len(data) > 8:
        raise CaptureError("CAN FD frames do not fit link type 227's classic layout")
    return _FRAME.pack(can_id, msg.dlc if msg.is_remote_frame else len(data), 0, 0, 0,
                       data.ljust(8, b"\0"))


def decode_packet(packet: bytes, timestamp: float = 0.0, channel: Any = None,
                  is_rx: bool = True) -> can.Message:
    """A python-can message from a SocketCAN frame (8..16 bytes)."""
    if len(packet) < 8:
        raise CaptureError(f"SocketCAN frame too short: {len(packet)} bytes")
    can_id, length = struct.unpack_from(">IB", packet)
    rtr, err = bool(can_id & CAN_RTR_FLAG), bool(can_id & CAN_ERR_FLAG)
    ext = bool(can_id & CAN_EFF_FLAG)
    length = min(length, 8)
    data = b"" if rtr else bytes(packet[8:8 + length])
    return can.Message(timestamp=timestamp, arbitration_id=can_id & CAN_EFF_MASK,
                       is_extended_id=ext or err, is_remote_frame=rtr, is_error_frame=err,
                       dlc=length, data=data, channel=channel, is_rx=is_rx)


class PcapngWriter(BinaryIOMessageWriter):
    """python-can MessageWriter for pcapng (a Listener: hand it to a Notifier, or call it)."""

    def __init__(self, file: StringPathLike | BinaryIO, append: bool = False,
                 **kwargs: Any) -> None:
        # A new section is always written; appending one to an existing file is valid pcapng.
        if isinstance(file, (str, os.PathLike)) and not append:
            file = cast("BinaryIO", open_output(file))  # a link replaced, never written through
        super().__init__(file, mode="ab" if append else "wb")
        self.file.write(section_header())
        self._ifaces: dict[str, int] = {}
        self.count = 0

    def _iface(self, channel: Any) -> int:
        name = "can" if channel is None else str(channel)
        idx = self._ifaces.get(name)
        if idx is None:
            idx = self._ifaces[name] = len(self._ifaces)
            self.file.write(interface_description(LINKTYPE_CAN_SOCKETCAN, _SNAPLEN, name))
        return idx

    def on_message_received(self, msg: can.Message) -> None:
        packet = encode_packet(msg)
        ts = msg.timestamp or 0.0
        whole = math.floor(ts)  # the fraction is exact in a float; scale only that
        ns = whole * 10**9 + round((ts - whole) * 1e9)
        flags = INBOUND if msg.is_rx else OUTBOUND
        self.file.write(enhanced_packet(self._iface(msg.channel), ns, packet, flags))
        self.count += 1


class PcapngReader(BinaryIOMessageReader):
    """python-can MessageReader for pcapng and classic pcap files (link type 227)."""

    def __init__(self, file: StringPathLike | BinaryIO, **kwargs: Any) -> None:
        super().__init__(file, mode="rb")

    def __iter__(self) -> Iterator[can.Message]:
        yield from _parse(self.file.read)
        self.stop()


def read_pcap(path: str | Path) -> Iterator[can.Message]:
    """CAN messages from a pcapng or classic pcap file with link type 227 (read a block at
    a time: memory stays bounded whatever the file's size)."""
    with open(path, "rb") as f:
        yield from _parse(f.read)


#: The longest packet of a classic pcap file (the largest snap length tools write).
CLASSIC_PACKET_MAX = 262144


def parse(data: bytes) -> Iterator[can.Message]:
    """CAN messages in the bytes of a pcapng or classic pcap file.

    Packets of other link types are skipped (a file with no CAN packet among
    them is refused, naming the link type found); a malformed or truncated
    file raises :class:`CaptureError` (a ``ValueError``) naming the offset,
    after the messages before it.
    """
    yield from _parse(io.BytesIO(data).read)


def _parse(read: Callable[[int], bytes]) -> Iterator[can.Message]:
    """:func:`parse` on a stream's ``read``."""
    magic = read(4)
    if magic in PCAP_LITTLE + PCAP_BIG:
        yield from _read_classic(magic, read)
        return

    def again(n: int) -> bytes:  # the magic read above, then the stream
        nonlocal magic
        if magic:
            out, magic = magic[:n], magic[n:]
            return out
        return read(n)

    can_packets, other = 0, set()
    for pkt in iter_packets(again):
        if pkt.linktype == LINKTYPE_CAN_SOCKETCAN:
            can_packets += 1
            is_rx = pkt.flags is None or (pkt.flags & 0x3) != OUTBOUND
            yield decode_packet(pkt.data, pkt.ts, pkt.name or None, is_rx)
        else:
            other.add(pkt.linktype)
    if other and not can_packets:
        kinds = ", ".join("147 (a fwbridge serial capture)" if t == 147 else str(t)
                          for t in sorted(other))
        raise CaptureError(f"no CAN frames: its packets are of link type {kinds}, not 227 "
                           "(SocketCAN)")


def _read_classic(magic: bytes, read: Callable[[int], bytes]) -> Iterator[can.Message]:
    rest = read(20)
    if len(rest) < 20:
        raise CaptureError(f"classic pcap: {4 + len(rest)}-byte file, shorter than its "
                           "24-byte header")
    e = "<" if magic in PCAP_LITTLE else ">"
    frac = 10**9 if magic in (PCAP_LITTLE[1], PCAP_BIG[1]) else 10**6  # the nanosecond ones
    linktype = struct.unpack_from(e + "I", rest, 16)[0] & 0x0FFFFFFF
    record = struct.Struct(e + "IIII")  # a packet's header: seconds, fraction, lengths
    pos = 24
    while True:
        head = read(16)
        if not head:
            return
        if len(head) < 16:
            raise CaptureError(f"offset {pos}: truncated: the file ends inside a packet header")
        sec, sub, caplen, _ = record.unpack(head)
        if caplen > CLASSIC_PACKET_MAX:
            raise CaptureError(f"offset {pos}: packet length {caplen} out of bounds (bytes "
                               f"{pos + 8}-{pos + 11}; at most {CLASSIC_PACKET_MAX})")
        data = read(caplen)
        if len(data) < caplen:
            raise CaptureError(f"offset {pos}: truncated or corrupt: a {caplen}-byte packet, but "
                               f"the file ends {len(data)} bytes into it")
        if linktype == LINKTYPE_CAN_SOCKETCAN:
            yield decode_packet(data, sec + sub / frac)
        pos += 16 + caplen
