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

import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import can
from can.io.generic import BinaryIOMessageReader, BinaryIOMessageWriter
from can.typechecking import StringPathLike

from fwbridge.protocols.errors import CaptureError

__all__ = ["LINKTYPE_CAN_SOCKETCAN", "PcapngReader", "PcapngWriter", "decode_packet",
           "encode_packet", "parse", "read_pcap"]

LINKTYPE_CAN_SOCKETCAN = 227
CAN_EFF_FLAG, CAN_RTR_FLAG, CAN_ERR_FLAG = 0x80000000, 0x40000000, 0x20000000
CAN_EFF_MASK = 0x1FFFFFFF
_FRAME = struct.Struct(">IBBBB8s")
_SHB, _IDB, _SPB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000003, 0x00000006
_BOM = 0x1A2B3C4D
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


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


class PcapngWriter(BinaryIOMessageWriter):
    """python-can MessageWriter for pcapng (a Listener: hand it to a Notifier, or call it)."""

    def __init__(self, file: StringPathLike | BinaryIO, append: bool = False,
                 **kwargs: Any) -> None:
        # A new section is always written; appending one to an existing file is valid pcapng.
        super().__init__(file, mode="ab" if append else "wb")
        shb = struct.pack("<IHHq", _BOM, 1, 0, -1) + _opt(4, b"fwbridge") + _opt(0, b"")
        self.file.write(_block(_SHB, shb))
        self._ifaces: dict[str, int] = {}
        self.count = 0

    def _iface(self, channel: Any) -> int:
        name = "can" if channel is None else str(channel)
        idx = self._ifaces.get(name)
        if idx is None:
            idx = self._ifaces[name] = len(self._ifaces)
            body = struct.pack("<HHI", LINKTYPE_CAN_SOCKETCAN, 0, _SNAPLEN)
            body += _opt(2, name.encode()) + _opt(9, b"\x09") + _opt(0, b"")
            self.file.write(_block(_IDB, body))
        return idx

    def on_message_received(self, msg: can.Message) -> None:
        packet = encode_packet(msg)
        ts = msg.timestamp or 0.0
        whole = math.floor(ts)  # the fraction is exact in a float; scale only that
        ns = whole * 10**9 + round((ts - whole) * 1e9)
        flags = struct.pack("<I", 0x1 if msg.is_rx else 0x2)  # direction: inbound / outbound
        body = struct.pack("<IIIII", self._iface(msg.channel), ns >> 32, ns & 0xFFFFFFFF,
                           len(packet), len(packet)) + packet + _opt(2, flags) + _opt(0, b"")
        self.file.write(_block(_EPB, body))
        self.count += 1


class PcapngReader(BinaryIOMessageReader):
    """python-can MessageReader for pcapng and classic pcap files (link type 227)."""

    def __init__(self, file: StringPathLike | BinaryIO, **kwargs: Any) -> None:
        super().__init__(file, mode="rb")

    def __iter__(self) -> Iterator[can.Message]:
        yield from parse(self.file.read())
        self.stop()


def _options(buf: bytes, e: str) -> Iterator[tuple[int, bytes]]:
    pos = 0
    while pos + 4 <= len(buf):
        code, n = struct.unpack_from(e + "HH", buf, pos)
        if code == 0:
            return
        yield code, buf[pos + 4:pos + 4 + n]
        pos += 4 + n + (-n % 4)


def _ticks_per_second(raw: bytes) -> int:
    v = raw[0]
    return int(2 ** (v & 0x7F) if v & 0x80 else 10**v)


def read_pcap(path: str | Path) -> Iterator[can.Message]:
    """CAN messages from a pcapng or classic pcap file with link type 227."""
    yield from parse(Path(path).read_bytes())


def parse(data: bytes) -> Iterator[can.Message]:
    """CAN messages in the bytes of a pcapng or classic pcap file.

    Packets of other link types are skipped; a truncated last block ends the
    iteration; a malformed file raises ``ValueError`` naming the offset.
    """
    if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                    b"\xa1\xb2\x3c\x4d"):
        yield from _read_classic(data)
        return
    try:
        yield from _read_blocks(data)
    except struct.error as exc:  # a block shorter than its fixed fields
        raise CaptureError(f"malformed pcapng block: {exc}") from None


def _read_blocks(data: bytes) -> Iterator[can.Message]:
    pos, e = 0, "<"
    ifaces: list[tuple[int, int, str | None, float]] = []  # linktype, ticks/s, name, offset
    while pos + 12 <= len(data):
        kind = struct.unpack_from("<I", data, pos)[0]
        if kind == _SHB:
            bom = data[pos + 8:pos + 12]
            e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
            if not e:
                raise CaptureError(f"offset {pos}: bad byte-order magic {bom.hex()}")
            ifaces = []
        elif pos == 0:
            raise CaptureError("not a pcapng file (no section header block)")
        kind, total = struct.unpack_from(e + "II", data, pos)
        if total < 12 or total % 4 or pos + total > len(data):
            if pos + total > len(data):
                return  # truncated capture: keep what is complete
            raise CaptureError(f"offset {pos}: bad block length {total}")
        body = data[pos + 8:pos + total - 4]
        if kind == _IDB:
            linktype = struct.unpack_from(e + "H", body)[0]
            res, name, offset = 10**6, None, 0.0
            for code, val in _options(body[8:], e):
                if code == 9 and val:
                    res = _ticks_per_second(val)
                elif code == 2:
                    name = val.rstrip(b"\0").decode(errors="replace")
                elif code == 14 and len(val) == 8:
                    offset = float(struct.unpack(e + "q", val)[0])
            ifaces.append((linktype, res, name, offset))
        elif kind == _EPB:
            iface, hi, lo, caplen, _ = struct.unpack_from(e + "IIIII", body)
            if iface >= len(ifaces):
                raise CaptureError(f"offset {pos}: packet on undeclared interface {iface}")
            linktype, res, name, offset = ifaces[iface]
            if linktype == LINKTYPE_CAN_SOCKETCAN:
                is_rx = True
                opts_at = 20 + caplen + (-caplen % 4)
                for code, val in _options(body[opts_at:], e):
                    if code == 2 and len(val) == 4:
                        is_rx = (struct.unpack(e + "I", val)[0] & 0x3) != 2
                ts = ((hi << 32) | lo) / res + offset  # int / int: correctly rounded
                yield decode_packet(body[20:20 + caplen], ts, name, is_rx)
        pos += total


def _read_classic(data: bytes) -> Iterator[can.Message]:
    if len(data) < 24:
        raise CaptureError(f"classic pcap: {len(data)}-byte file, shorter than its 24-byte header")
    magic = data[:4]
    e = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    frac = 10**9 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 10**6
    linktype = struct.unpack_from(e + "I", data, 20)[0] & 0x0FFFFFFF
    pos = 24
    while pos + 16 <= len(data):
        sec, sub, caplen, _ = struct.unpack_from(e + "IIII", data, pos)
        if pos + 16 + caplen > len(data):
            return
        if linktype == LINKTYPE_CAN_SOCKETCAN:
            yield decode_packet(data[pos + 16:pos + 16 + caplen], sec + sub / frac)
        pos += 16 + caplen
