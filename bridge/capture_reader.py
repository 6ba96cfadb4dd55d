"""Reading pcapng serial captures carefully: every block checked, every fault named by offset.

A block whose length is impossible (under 12, not a multiple of 4, past the
end of the file, or not repeated at its end) is corrupt; a file that ends
inside a block is truncated (the packets before it are still delivered,
then :class:`CaptureTruncated` says where it was cut). A packet on an
interface the file never declared is corrupt. A capture of another kind (CAN
frames, another link type) is refused with the kind found, as is a file that
is no pcapng at all; :func:`capture_kind` names the kind from a file's first
bytes for the verbs that take several formats.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from fwbridge.bridge.capture import (
    LINKTYPE_USER0,
    LINKTYPE_USER1,
    PCAPNG_MAGIC,
    CaptureError,
    Packet,
)

__all__ = ["CaptureTruncated", "capture_kind", "iter_blocks", "read_packets"]

_SHB, _IDB, _SPB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000003, 0x00000006
LINKTYPE_CAN_SOCKETCAN = 227
_NAMES = {1: "rx", 2: "tx"}  # EPB flags bits 0-1: inbound, outbound
_CANDUMP = re.compile(rb"^\s*\(\d+\.\d+\)\s+\S+\s+[0-9A-Fa-f]+#")


class CaptureTruncated(CaptureError):
    """The file ends inside a block (a recorder that died): what came before was read."""


def _linktype_kind(linktype: int) -> str:
    if linktype == LINKTYPE_USER0:
        return "serial capture (pcapng)"
    if linktype == LINKTYPE_CAN_SOCKETCAN:
        return "CAN capture (pcapng, SocketCAN frames)"
    return f"pcapng capture of link type {linktype}"


def capture_kind(head: bytes) -> str | None:
    """What kind of capture ``head`` (a file's first bytes) starts; None for raw/hex bytes."""
    if head[:4] == PCAPNG_MAGIC and len(head) >= 12:
        e = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        try:
            shb_len = struct.unpack_from(e + "I", head, 4)[0]
            kind, _, linktype = struct.unpack_from(e + "IIH", head, shb_len)
        except struct.error:
            return "serial capture (pcapng)"  # too short to tell: read it as one
        return _linktype_kind(linktype) if kind == _IDB else "serial capture (pcapng)"
    if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                    b"\xa1\xb2\x3c\x4d"):
        return "classic pcap capture"
    if head[:4] == b"LOGG":
        return "CAN capture (BLF)"
    first = head.split(b"\n", 1)[0]
    if _CANDUMP.match(first):
        return "CAN capture (candump log)"
    if first.lower().startswith((b"date ", b"base hex", b"base dec")):
        return "CAN capture (ASC)"
    return None


def iter_blocks(stream: BinaryIO, name: str) -> Iterator[tuple[int, int, bytes, str]]:
    """(offset, block type, body, byte order) of every block of a pcapng stream, checked."""
    size = os.fstat(stream.fileno()).st_size
    read = stream.read
    pos, e = 0, "<"
    while True:
        head = read(8)
        if not head:
            return
        if len(head) < 8:
            raise CaptureTruncated(f"{name}: truncated at offset {pos}: the file ends "
                                   f"{len(head)} bytes into a block header")
        extra = b""
        if head[:4] == PCAPNG_MAGIC:  # the same bytes in either byte order
            extra = read(4)
            e = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(extra, "")
            if not e:
                raise CaptureError(f"{name}: corrupt pcapng: offset {pos}: bad byte-order "
                                   f"magic {extra.hex(' ')}")
        elif pos == 0:
            raise CaptureError(f"{name}: not a pcapng file")
        kind, total = struct.unpack(e + "II", head)
        if total < 12 or total % 4:
            raise CaptureError(f"{name}: corrupt pcapng: offset {pos}: bad block length {total}")
        if pos + total > size:
            raise CaptureTruncated(
                f"{name}: truncated or corrupt at offset {pos}: a {total}-byte block, but the "
                f"file ends {size - pos} bytes into it")
        rest = read(total - 8 - len(extra))
        if len(rest) + 8 + len(extra) < total:  # the file shrank under us
            raise CaptureTruncated(f"{name}: truncated at offset {pos}")
        trailer = struct.unpack(e + "I", rest[-4:])[0]
        if trailer != total:
            raise CaptureError(f"{name}: corrupt pcapng: offset {pos}: block length {total}, "
                               f"but {trailer} at its end")
        yield pos, kind, extra + rest[:-4], e
        pos += total


def _options(buf: bytes, e: str) -> Iterator[tuple[int, bytes]]:
    pos = 0
    while pos + 4 <= len(buf):
        code, length = struct.unpack_from(e + "HH", buf, pos)
        if code == 0:
            return
        yield code, buf[pos + 4:pos + 4 + length]
        pos += 4 + length + (-length % 4)


def _resolution_ns(raw: bytes) -> tuple[int, int]:
    """(multiplier, divisor) turning ``if_tsresol`` units into nanoseconds, exactly."""
    if not raw:
        return 1000, 1  # the pcapng default: microseconds
    exp = raw[0] & 0x7F
    if raw[0] & 0x80:  # a power of two
        return 10**9, 2**exp
    return (10 ** (9 - exp), 1) if exp <= 9 else (1, 10 ** (exp - 9))


def read_packets(path: str | os.PathLike[str]) -> Iterator[Packet]:
    """Every packet of a pcapng serial capture, in file order; faults as CaptureError."""
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
        if stream.read(4) != PCAPNG_MAGIC:
            stream.seek(0)
            found = capture_kind(stream.read(4096))
            raise CaptureError(f"{p}: not a pcapng file" + (f" (a {found})" if found else ""))
        stream.seek(0)
        ifaces: list[tuple[int, int, int, str]] = []  # link type, ns multiplier, divisor, name
        for pos, kind, body, e in iter_blocks(stream, str(p)):
            if kind == _SHB:
                ifaces = []  # interface numbers start again in each section
            elif kind == _IDB:
                if len(body) < 8:
                    raise CaptureError(f"{p}: corrupt pcapng: offset {pos}: short interface block")
                linktype = struct.unpack_from(e + "H", body)[0]
                opts = dict(_options(body[8:], e))
                mul, div = _resolution_ns(opts.get(9, b""))
                name = opts.get(2, b"").rstrip(b"\0").decode(errors="replace")
                ifaces.append((linktype, mul, div, name))
            elif kind == _EPB:
                if len(body) < 20:
                    raise CaptureError(f"{p}: corrupt pcapng: offset {pos}: short packet block")
                iface, hi, lo, caplen = struct.unpack_from(e + "IIII", body)
                if iface >= len(ifaces):
                    raise CaptureError(f"{p}: corrupt pcapng: offset {pos}: a packet on interface "
                                       f"{iface}, but the file declares {len(ifaces)}")
                linktype, mul, div, name = ifaces[iface]
                if linktype not in (LINKTYPE_USER0, LINKTYPE_USER1):
                    raise CaptureError(f"{p}: a {_linktype_kind(linktype)}, not a serial "
                                       "capture" + (" (decode it with 'fwbridge can decode')"
                                                    if linktype == LINKTYPE_CAN_SOCKETCAN
                                                    else ""))
                if 20 + caplen > len(body):
                    raise CaptureError(f"{p}: corrupt pcapng: offset {pos}: {caplen} packet "
                                       "bytes do not fit the block")
                flags = dict(_options(body[20 + caplen + (-caplen % 4):], e)).get(2, b"")
                direction = (_NAMES.get(struct.unpack(e + "I", flags)[0] & 3, "")
                             if len(flags) == 4 else "")
                ts = ((hi << 32) | lo) * mul // div
                yield Packet(ts, direction, bytes(body[20:20 + caplen]), name, linktype)
            elif kind == _SPB and len(body) >= 4:
                orig = struct.unpack_from(e + "I", body)[0]
                yield Packet(0, "", bytes(body[4:4 + orig]))
