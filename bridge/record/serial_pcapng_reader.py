"""Reading pcapng serial captures carefully: every fault named by file and offset.

The blocks are parsed by :func:`fwbridge.protocols.pcapng.iter_packets`, the
one pcapng reader of serial and CAN captures: an impossible block length or
a packet on an undeclared interface is corrupt; a file that ends inside a
block is truncated (the packets before it are still delivered, then
:class:`CaptureTruncated` says where it was cut). A capture of another kind (CAN
frames, another link type) is refused with the kind found, as is a file that
is no pcapng at all; :func:`capture_kind` names the kind from a file's first
bytes for the verbs that take several formats.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

from fwbridge.bridge.record.serial_pcapng import (
    LINKTYPE_USER0,
    LINKTYPE_USER1,
    PCAPNG_MAGIC,
    Packet,
)
from fwbridge.protocols.errors import CaptureError, CaptureTruncated
from fwbridge.protocols.pcapng import (
    LINKTYPE_CAN_SOCKETCAN,
    PCAP_BIG,
    PCAP_LITTLE,
    first_link_type,
    iter_packets,
)

__all__ = ["CaptureTruncated", "capture_kind", "read_packets"]

_NAMES = {1: "rx", 2: "tx"}  # EPB flags bits 0-1: inbound, outbound
_CANDUMP = re.compile(rb"^\s*\(\d+\.\d+\)\s+\S+\s+[0-9A-Fa-f]+#")


def _linktype_kind(linktype: int) -> str:
    if linktype == LINKTYPE_USER0:
        return "serial capture (pcapng)"
    if linktype == LINKTYPE_CAN_SOCKETCAN:
        return "CAN capture (pcapng, SocketCAN frames)"
    return f"pcapng capture of link type {linktype}"


def capture_kind(head: bytes) -> str | None:
    """What kind of capture ``head`` (a file's first bytes) starts; None for raw/hex bytes."""
    if head[:4] == PCAPNG_MAGIC:
        try:
            linktype = first_link_type(io.BytesIO(head).read)
        except CaptureError:  # cut short or damaged: read it as one, the reader says where
            linktype = None
        return "serial capture (pcapng)" if linktype is None else _linktype_kind(linktype)
    if head[:4] in PCAP_LITTLE + PCAP_BIG:
        return "classic pcap capture"
    if head[:4] == b"LOGG":
        return "CAN capture (BLF)"
    first = head.split(b"\n", 1)[0]
    if _CANDUMP.match(first):
        return "CAN capture (candump log)"
    if first.lower().startswith((b"date ", b"base hex", b"base dec")):
        return "CAN capture (ASC)"
    return None


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
        try:
            for pkt in iter_packets(stream.read):
                if pkt.linktype not in (LINKTYPE_USER0, LINKTYPE_USER1):
                    raise CaptureError(f"{p}: a {_linktype_kind(pkt.linktype)}, not a serial "
                                       "capture" + (" (decode it with 'fwbridge can decode')"
                                                    if pkt.linktype == LINKTYPE_CAN_SOCKETCAN
                                                    else ""))
                direction = _NAMES.get(pkt.flags & 3, "") if pkt.flags is not None else ""
                yield Packet(pkt.ts_ns, direction, pkt.data, pkt.name, pkt.linktype)
        except CaptureTruncated as exc:
            raise CaptureTruncated(f"{p}: {exc}") from None
        except CaptureError as exc:
            if str(exc).startswith(str(p)):
                raise
            raise CaptureError(f"{p}: corrupt pcapng: {exc}") from None
