"""CAN FD frames bit by bit (ISO 11898-1:2015): fields, stuff count, CRC-17/21, two bit rates.

Layout of an FD data frame (0 = dominant)::

    SOF | ID(11) | RRS=0 | IDE=0 | FDF=1 | res=0 | BRS | ESI | DLC(4) | data     standard
    SOF | ID(11) | SRR=1 | IDE=1 | ID(18) | RRS=0 | FDF=1 | res=0 | BRS | ESI | DLC | data
    ... | FSB | stuff count (3, Gray) | parity | FSB | CRC(17 or 21, an FSB after every 4 bits)
    ... | CRC delimiter | ACK | ACK delimiter | EOF(7) | intermission(3)

- Dynamic stuffing (a complement after five equal bits, counted in the next
  run) runs from SOF through the data field; no dynamic stuff bit follows the
  last data bit (the first fixed stuff bit takes its place).
- The stuff count is the number of dynamic stuff bits modulo 8, Gray coded,
  then an even-parity bit.
- Fixed stuff bits (FSB), each the complement of the bit before it: one
  before the stuff count, one after the parity bit, one after every 4 CRC
  bits: 6 with CRC-17 (up to 16 data bytes), 7 with CRC-21.
- The CRC (CRC-17 0x1685B, CRC-21 0x102899, register initialised to
  ``1 << (width - 1)``) runs over SOF..data with its dynamic stuff bits and
  over the stuff count and parity; fixed stuff bits are left out.
- Bit rates: with BRS recessive the data phase, ESI through the last CRC bit,
  runs at the data bit rate; the rest at the nominal rate. (A controller
  switches at the sample points of BRS and of the CRC delimiter; counting
  whole bits instead moves the two switch instants by the same fraction of a
  bit in opposite directions, which is how bus-load tools count too.)

:func:`wire` is the reference, bit by bit; :func:`timing` is the fast path the
bus model uses (byte-wise stuffing tables: the fixed part of the frame does
not depend on the data), tested against it.
"""

from __future__ import annotations

from typing import NamedTuple

from fwbridge.can_bus import bits as _bits
from fwbridge.can_bus.bits import (
    DLC_LENGTHS,
    TAIL_BITS,
    Frame,
    dlc_to_len,
    field_bits,
    len_to_dlc,
)

# DLC_LENGTHS, dlc_to_len and len_to_dlc are bits.py's (Frame.make checks an FD length
# with them), and this module's names too.
__all__ = [
    "CRC17_POLY",
    "CRC21_POLY",
    "DLC_LENGTHS",
    "FdWire",
    "brs_index",
    "control_bits",
    "crc_bits",
    "crc_width",
    "dlc_to_len",
    "dynamic_stuff",
    "frame_seconds",
    "frame_ticks",
    "len_to_dlc",
    "timing",
    "wire",
]

CRC17_POLY = 0x1685B  # x^17 + x^16 + x^14 + x^13 + x^11 + x^6 + x^4 + x^3 + x + 1
CRC21_POLY = 0x102899  # x^21 + x^20 + x^13 + x^11 + x^7 + x^4 + x^3 + 1
GRAY = tuple(n ^ (n >> 1) for n in range(8))
#: Fields after the dynamic part: FSB, stuff count (3), parity, FSB.
_SC_FIELD = 6


def crc_width(frame: Frame) -> int:
    return 17 if len(frame.data) <= 16 else 21


# -- reference implementation ----------------------------------------------------
def _head_bits(can_id: int, ext: bool, brs: bool, esi: bool, dlc: int) -> list[int]:
    if ext:
        out = [0, *field_bits(can_id >> 18, 11), 1, 1, *field_bits(can_id & 0x3FFFF, 18)]
    else:
        out = [0, *field_bits(can_id, 11), 0]  # SOF, ID, RRS
    out += [0, 1, 0]  # standard: IDE, FDF, res; extended: RRS, FDF, res
    return [*out, int(brs), int(esi), *field_bits(dlc, 4)]


def control_bits(frame: Frame) -> list[int]:
    """Unstuffed bits from SOF through the data field."""
    out = _head_bits(frame.can_id, frame.extended, frame.brs, frame.esi, frame.dlc)
    for byte in frame.data:
        out += field_bits(byte, 8)
    return out


def brs_index(extended: bool) -> int:
    """Unstuffed index of BRS: the last bit at the nominal rate."""
    return 35 if extended else 16


def dynamic_stuff(bits: list[int]) -> tuple[list[int], list[bool]]:
    """Dynamic stuffing as in classic CAN, but no stuff bit after the last bit."""
    out, flags = _bits.stuff(bits)
    if flags and flags[-1]:
        out.pop()
        flags.pop()
    return out, flags


def crc_bits(bits: list[int], width: int, init: int | None = None) -> int:
    """CRC-17 or CRC-21 of a bit list, one bit at a time, register preset to 1 << (width-1)
    (``init`` other presets, e.g. 0 for the CRC catalogue's check values)."""
    poly = CRC17_POLY if width == 17 else CRC21_POLY
    top, mask = 1 << (width - 1), (1 << width) - 1
    crc = top if init is None else init
    for bit in bits:
        feedback = bit ^ (1 if crc & top else 0)
        crc = (crc << 1) & mask
        if feedback:
            crc ^= poly
    return crc


class FdWire(NamedTuple):
    """An FD frame as driven, SOF through the last CRC bit."""

    bits: list[int]
    stuff: list[bool]  # dynamic or fixed stuff bit
    fixed: list[bool]  # fixed stuff bit
    stuff_count: int  # dynamic stuff bits (before the modulo)
    dyn_end: int  # index of the first fixed stuff bit
    data_phase: int  # index of the first bit after BRS (ESI, or a stuff bit)
    crc: int


def wire(frame: Frame) -> FdWire:
    """The reference: the whole stuffed bit stream, field by field."""
    raw = control_bits(frame)
    dyn, dflags = dynamic_stuff(raw)
    count = sum(dflags)
    g = GRAY[count % 8]
    sc = [(g >> 2) & 1, (g >> 1) & 1, g & 1]
    parity = sc[0] ^ sc[1] ^ sc[2]
    width = crc_width(frame)
    crc = crc_bits([*dyn, *sc, parity], width)
    out = [*dyn, 1 - dyn[-1], *sc, parity, 1 - parity]
    stuffed = [*dflags, True, False, False, False, False, True]
    fixed = [False] * len(dyn) + [True, False, False, False, False, True]
    for i, b in enumerate(field_bits(crc, width), start=1):
        out.append(b)
        stuffed.append(False)
        fixed.append(False)
        if i % 4 == 0 and i < width:
            out.append(1 - b)
            stuffed.append(True)
            fixed.append(True)
    seen, phase = -1, len(out)
    for i, is_stuff in enumerate(dflags):
        if not is_stuff:
            seen += 1
            if seen == brs_index(frame.extended):
                phase = i + 1
                break
    return FdWire(out, stuffed, fixed, count, len(dyn), phase, crc)


# -- fast implementation -------------------------------------------------------------
_HeadKey = tuple[int, bool, bool, bool, int]
_HEAD: dict[_HeadKey, tuple[int, int, int, int]] = {}
_TIMING: dict[Frame, tuple[int, int]] = {}
_CACHE_MAX = 1 << 16
_STUFF8 = _bits.STUFF8
_STUFF7 = _bits.STUFF_PART[7]
_step = _bits.stuff_step


def _head(key: _HeadKey) -> tuple[int, int, int, int]:
    """(stuff state, stuff bits, stuffed bits through BRS, stuff bit after the last) of
    SOF..DLC, bit by bit (then cached)."""
    can_id, ext, brs, esi, dlc = key
    state, count, phase, k = _bits.STUFF_START, 0, 0, 0
    last_nominal = brs_index(ext)
    for i, bit in enumerate(_head_bits(can_id, ext, brs, esi, dlc)):
        state, k = _step(state, bit)
        if i == last_nominal:
            phase = i + 1 + count  # a stuff bit right after BRS is sent at the data rate
        count += k
    return state, count, phase, k


_STUFF16: list[int] = []


def _make_stuff16() -> list[int]:
    """The byte table squared, indexed by two bytes as a native 16-bit word (built once,
    on the first FD frame with data: 8 x 65536 entries)."""
    t8 = _STUFF8
    little = memoryview(b"\x01\x00").cast("H")[0] == 1
    out = [0] * (8 << 16)
    for state in range(8):
        for first in range(256):
            e1 = t8[(state << 8) | first]
            c1, s1 = (e1 >> 3) << 3, e1 & 7
            row = t8[s1 << 8:(s1 << 8) + 256]
            base = state << 16
            if little:  # word = first | second << 8
                out[base | first:base + 65536:256] = [c1 + e2 for e2 in row]
            else:
                out[base | first << 8:base | first << 8 | 256] = [c1 + e2 for e2 in row]
    _STUFF16[:] = out
    return _STUFF16


def timing(frame: Frame) -> tuple[int, int]:
    """(S, A): stuffed bits SOF..last CRC bit, and how many of them are sent at the
    nominal rate before the data phase (A = S without BRS). Cached per frame."""
    got = _TIMING.get(frame)
    if got is not None:
        return got
    key = (frame.can_id, frame.extended, frame.brs, frame.esi, frame.dlc)
    head = _HEAD.get(key)
    if head is None:
        if len(_HEAD) >= _CACHE_MAX:
            _HEAD.clear()
        head = _HEAD[key] = _head(key)
    state, count, phase, last_k = head
    data = frame.data
    if data:
        table = _STUFF8
        body = data[:-1]
        if len(body) & 1:
            e = table[(state << 8) | body[0]]
            count += e >> 3
            state = e & 7
            body = body[1:]
        if body:
            wide = _STUFF16 or _make_stuff16()
            for word in memoryview(body).cast("H"):  # two bytes a step (native order)
                e = wide[(state << 16) | word]
                count += e >> 3
                state = e & 7
        last = data[-1]
        e = _STUFF7[(state << 7) | (last >> 1)]
        count += e >> 3
        # the last bit's own stuff bit, if any, is never sent: the first FSB replaces it
    else:
        count -= last_k
    width = 17 if len(data) <= 16 else 21
    s = (41 if frame.extended else 22) + 8 * len(data) + count + _SC_FIELD + width \
        + (width - 1) // 4
    got = (s, phase if frame.brs else s)
    if len(_TIMING) >= _CACHE_MAX:
        _TIMING.clear()
    _TIMING[frame] = got
    return got


def frame_ticks(frame: Frame, nominal: int, data: int) -> int:
    """Duration SOF..intermission in ticks, ``nominal``/``data`` ticks per bit."""
    if not frame.fd:
        return _bits.frame_length(frame) * nominal
    s, a = timing(frame)
    return (a + TAIL_BITS) * nominal + (s - a) * data


def frame_seconds(frame: Frame, bitrate: float, data_bitrate: float | None = None) -> float:
    """Duration SOF..intermission in seconds (the data phase at ``data_bitrate``)."""
    if not frame.fd:
        return _bits.frame_length(frame) / bitrate
    s, a = timing(frame)
    return (a + TAIL_BITS) / bitrate + (s - a) / (data_bitrate or bitrate)
