"""pcapng blocks: the one writer and reader of fwbridge's captures (serial and CAN).

Sans-I/O: the block builders return bytes, :func:`iter_packets` pulls bytes
through a ``read(n)`` callable (a file's ``read``); nothing here opens a
file. The serial captures (:mod:`fwbridge.bridge.record.serial_pcapng`, link type 147) and
the CAN captures (:mod:`fwbridge.bridge.record.can_pcapng`, link type 227) are both
built from these blocks, which Wireshark and tshark open:

- a Section Header Block (little-endian, ``shb_userappl`` = fwbridge);
- one Interface Description Block per interface: link type, snap length,
  ``if_name``, ``if_description``, ``if_tsresol`` = 9 (nanoseconds);
- an Enhanced Packet Block per packet, with the ``epb_flags`` direction
  (:data:`INBOUND`, :data:`OUTBOUND`).

Reading accepts either byte order, any ``if_tsresol`` and ``if_tsoffset``
and Simple Packet Blocks. A file cut short (a killed recorder) gives its
whole packets, then :class:`CaptureTruncated`; anything else malformed is a
:class:`CaptureError`. Both name the offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fwbridge.protocols.errors import CaptureError, CaptureTruncated

__all__ = [
    "INBOUND",
    "LINKTYPE_CAN_SOCKETCAN",
    "MAGIC",
    "OUTBOUND",
    "PCAP_BIG",
    "PCAP_LITTLE",
    "PcapngPacket",
    "enhanced_packet",
    "first_link_type",
    "interface_description",
    "iter_packets",
    "section_header",
]

#: First bytes of every pcapng file: the Section Header Block type.
MAGIC = b"\x0a\x0d\x0d\x0a"
INBOUND = 1  # epb_flags direction: received by the host (device -> host)
OUTBOUND = 2  # sent by the host (host -> device)
LINKTYPE_CAN_SOCKETCAN = 227  # the CAN captures' link type
#: Classic pcap's magic numbers (microsecond, nanosecond) as a little- or big-endian
#: writer left them: the global header's other fields are in the same byte order.
PCAP_LITTLE = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
PCAP_BIG = (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")

_SHB, _IDB, _SPB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000003, 0x00000006
_BOM = 0x1A2B3C4D
_OPT_END, _OPT_NAME, _OPT_DESCRIPTION, _OPT_TSRESOL, _OPT_TSOFFSET = 0, 2, 3, 9, 14
_SHB_USERAPPL, _EPB_FLAGS = 4, 2
_NS = 10**9
_BLOCK_MAX = 1 << 28  # a block claiming more than 256 MiB is corrupt, not big


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


def section_header(application: str = "fwbridge") -> bytes:
    """A Section Header Block (little-endian, section length unknown)."""
    body = struct.pack("<IHHq", _BOM, 1, 0, -1)
    body += _opt(_SHB_USERAPPL, application.encode()) + _opt(_OPT_END, b"")
    return _block(_SHB, body)


def interface_description(linktype: int, snaplen: int, name: str = "",
                          description: str = "") -> bytes:
    """An Interface Description Block with nanosecond timestamps."""
    body = struct.pack("<HHI", linktype, 0, snaplen)
    if name:
        body += _opt(_OPT_NAME, name.encode())
    if description:
        body += _opt(_OPT_DESCRIPTION, description.encode())
    body += _opt(_OPT_TSRESOL, b"\x09") + _opt(_OPT_END, b"")
    return _block(_IDB, body)


def enhanced_packet(interface: int, ts_ns: int, data: bytes, flags: int | None = None) -> bytes:
    """An Enhanced Packet Block: ``data`` at ``ts_ns`` (ns since the epoch) on ``interface``."""
    body = struct.pack("<IIIII", interface, (ts_ns >> 32) & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF,
                       len(data), len(data))
    body += data + b"\0" * (-len(data) % 4)
    if flags is not None:
        body += _opt(_EPB_FLAGS, struct.pack("<I", flags)) + _opt(_OPT_END, b"")
    return _block(_EPB, body)


@dataclass(frozen=True, slots=True)
class PcapngPacket:
    """One packet read back, with what its interface block said."""

    interface: int
    linktype: int
    name: str
    ticks: int  # raw timestamp units (0 for a Simple Packet Block)
    ticks_per_second: int
    offset_s: int  # if_tsoffset, whole seconds
    flags: int | None  # epb_flags, None when absent
    data: bytes

    @property
    def ts_ns(self) -> int:
        """The timestamp in integer nanoseconds (exact for decimal resolutions up to ns)."""
        return self.ticks * _NS // self.ticks_per_second + self.offset_s * _NS

    @property
    def ts(self) -> float:
        """The timestamp in seconds, correctly rounded from the raw ticks."""
        return self.ticks / self.ticks_per_second + self.offset_s


def _options(buf: bytes, e: str) -> Iterator[tuple[int, bytes]]:
    pos = 0
    while pos + 4 <= len(buf):
        code, n = struct.unpack_from(e + "HH", buf, pos)
        if code == _OPT_END:
            return
        yield code, buf[pos + 4:pos + 4 + n]
        pos += 4 + n + (-n % 4)


def _ticks_per_second(raw: bytes) -> int:
    v = raw[0]
    return int(2 ** (v & 0x7F) if v & 0x80 else 10 ** (v & 0x7F))


def _read_exact(read: Callable[[int], bytes], n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = read(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _blocks(read: Callable[[int], bytes]) -> Iterator[tuple[int, int, bytes, str]]:
    """Every block of a pcapng stream as (offset, type, body, byte order), its lengths
    checked; each Section Header Block sets the byte order of the blocks after it."""
    e = "<"
    pos = 0
    while True:
        head = _read_exact(read, 8)
        if not head:
            return
        if len(head) < 8:
            raise CaptureTruncated(f"truncated at offset {pos}: the file ends {len(head)} "
                                   "bytes into a block header")
        if head[:4] == MAGIC:
            bom = _read_exact(read, 4)
            if len(bom) < 4:
                raise CaptureTruncated(f"truncated at offset {pos}: the file ends inside a "
                                       "section header")
            e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
            if not e:
                raise CaptureError(f"offset {pos}: bad byte-order magic {bom.hex()}")
            head += bom
        elif pos == 0:
            raise CaptureError("not a pcapng file (no section header block)")
        kind, total = struct.unpack_from(e + "II", head)
        if total < 12 + (len(head) - 8) or total % 4 or total > _BLOCK_MAX:
            raise CaptureError(f"offset {pos}: bad block length {total}")
        rest = _read_exact(read, total - len(head))
        if len(rest) < total - len(head):  # a recorder that died: what came before was read
            raise CaptureTruncated(f"truncated or corrupt at offset {pos}: a {total}-byte "
                                   f"block, but the file ends {len(head) + len(rest)} bytes "
                                   "into it")
        if struct.unpack(e + "I", rest[-4:])[0] != total:
            raise CaptureError(f"offset {pos}: block lengths disagree (leading {total})")
        yield pos, kind, (head + rest)[8:-4], e
        pos += total


def first_link_type(read: Callable[[int], bytes]) -> int | None:
    """The link type of a pcapng stream's first interface (its first Interface Description
    Block), in either byte order; None when a packet or the end comes first. What is no
    pcapng, or is cut or corrupt before that block, raises as :func:`iter_packets` does."""
    for pos, kind, body, e in _blocks(read):
        if kind == _IDB:
            if len(body) < 2:
                raise CaptureError(f"offset {pos}: malformed pcapng block: interface "
                                   "description shorter than its link type")
            return int(struct.unpack_from(e + "H", body)[0])
        if kind in (_EPB, _SPB):
            return None
    return None


def iter_packets(read: Callable[[int], bytes]) -> Iterator[PcapngPacket]:
    """Every packet of a pcapng stream, in order, read block by block through ``read``."""
    ifaces: list[tuple[int, int, str, int]] = []  # linktype, ticks/s, name, offset
    for pos, kind, body, e in _blocks(read):
        try:
            if kind == _SHB:
                ifaces = []  # a new section declares its own interfaces
            elif kind == _IDB:
                linktype = struct.unpack_from(e + "H", body)[0]
                res, name, offset = 10**6, "", 0
                for code, val in _options(body[8:], e):
                    if code == _OPT_TSRESOL and val:
                        res = _ticks_per_second(val)
                    elif code == _OPT_NAME:
                        name = val.rstrip(b"\0").decode(errors="replace")
                    elif code == _OPT_TSOFFSET and len(val) == 8:
                        offset = struct.unpack(e + "q", val)[0]
                ifaces.append((linktype, res, name, offset))
            elif kind == _EPB:
                iface, hi, lo, caplen, _ = struct.unpack_from(e + "IIIII", body)
                if iface >= len(ifaces):
                    raise CaptureError(f"offset {pos}: packet on undeclared interface {iface}")
                if 20 + caplen > len(body):
                    raise CaptureError(f"offset {pos}: packet longer than its block")
                flags = None
                for code, val in _options(body[20 + caplen + (-caplen % 4):], e):
                    if code == _EPB_FLAGS and len(val) == 4:
                        flags = struct.unpack(e + "I", val)[0]
                linktype, res, name, offset = ifaces[iface]
                yield PcapngPacket(iface, linktype, name, (hi << 32) | lo, res, offset, flags,
                                   bytes(body[20:20 + caplen]))
            elif kind == _SPB and ifaces:
                linktype, res, name, offset = ifaces[0]
                orig = struct.unpack_from(e + "I", body)[0]
                yield PcapngPacket(0, linktype, name, 0, res, 0, None,
                                   bytes(body[4:4 + min(orig, len(body) - 4)]))
        except struct.error as exc:  # a block shorter than its fixed fields
            raise CaptureError(f"offset {pos}: malformed pcapng block: {exc}") from None
