"""Classic CAN frames bit by bit: fields, CRC-15, bit stuffing, exact length, arbitration key.

ISO 11898-1 classic frames (standard and extended IDs, data and remote, DLC
0..8). Two implementations of the same thing:

- a reference one that builds the bit list field by field
  (:func:`frame_bits`, :func:`stuff`, :func:`wire_bits`), readable and used
  wherever the simulator needs individual bits (same-ID collisions, injected
  bit errors);
- a fast one (:func:`stuffed_length`) that packs the fields into an integer,
  runs a byte-wise CRC table and a byte-wise stuffing table. It is tested
  against the reference one for every frame shape.

Length convention (as can-utils ``canframelen -e``): the stuffed part runs
from SOF through the CRC sequence, a stuff bit after the last CRC bit
included; then CRC delimiter (1), ACK slot and delimiter (2), EOF (7) and
intermission (3) are never stuffed. ``frame_length = stuffed_length + 13``.
"""

from __future__ import annotations

from typing import NamedTuple

from fwbridge.protocols.errors import CanFrameError

__all__ = [
    "CRC_POLY",
    "DLC_LENGTHS",
    "STUFF8",
    "STUFF_PART",
    "STUFF_START",
    "TAIL_BITS",
    "Frame",
    "arbitration_end",
    "arbitration_key",
    "crc15",
    "crc15_bits",
    "dlc_to_len",
    "field_bits",
    "frame_bits",
    "frame_length",
    "len_to_dlc",
    "stuff",
    "stuff_count",
    "stuff_step",
    "stuffed_length",
    "wire_bits",
    "worst_case_length",
]

CRC_POLY = 0x4599  # x^15 + x^14 + x^10 + x^8 + x^7 + x^4 + x^3 + 1
#: CRC delimiter, ACK slot, ACK delimiter, 7 EOF bits, 3 intermission bits.
TAIL_BITS = 13
#: From SOF to the end of EOF is ``stuffed_length + EOF_END``.
EOF_END = 10
#: CAN FD data lengths by 4-bit DLC code (here, not in :mod:`can_bus.fd`, which builds
#: on this module: :meth:`Frame.make` checks an FD frame's length with it).
DLC_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
_LEN_TO_DLC = {n: i for i, n in enumerate(DLC_LENGTHS)}


def dlc_to_len(dlc: int) -> int:
    """Data bytes of an FD frame with this 4-bit DLC code."""
    return DLC_LENGTHS[dlc]


def len_to_dlc(n: int) -> int:
    """The DLC code of exactly ``n`` data bytes (0..8, 12, 16, 20, 24, 32, 48, 64)."""
    dlc = _LEN_TO_DLC.get(n)
    if dlc is None:
        raise CanFrameError(f"{n} data bytes: a CAN FD frame carries 0..8, 12, 16, 20, 24, 32, "
                            "48 or 64")
    return dlc


class Frame(NamedTuple):
    """One CAN frame as the bus sees it (hashable: it is a cache key).

    ``data`` is empty for a remote frame, whose ``dlc`` is the requested length.
    CAN FD frames (``fd``; see :mod:`can_bus.fd`) carry the 4-bit DLC code in
    ``dlc`` (9..15 for 12..64 bytes), ``brs`` (data phase at the data bit
    rate) and ``esi`` (transmitter error-passive); they are never remote.
    """

    can_id: int
    extended: bool = False
    remote: bool = False
    dlc: int = 0
    data: bytes = b""
    fd: bool = False
    brs: bool = False
    esi: bool = False

    @classmethod
    def make(cls, can_id: int, data: bytes = b"", *, extended: bool | None = None,
             remote: bool = False, dlc: int | None = None, fd: bool = False,
             brs: bool = False, esi: bool = False) -> Frame:
        """Checked constructor: ID range, DLC 0..8 (FD: a length of 0..8, 12, ..., 64),
        data length = DLC for data frames."""
        ext = can_id > 0x7FF if extended is None else extended
        if not 0 <= can_id <= (0x1FFFFFFF if ext else 0x7FF):
            kind = "an extended" if ext else "a standard"
            raise CanFrameError(f"CAN ID 0x{can_id:X} out of range for {kind} frame")
        if fd:
            if remote:
                raise CanFrameError("CAN FD has no remote frames")
            return cls(can_id, ext, False, len_to_dlc(len(data)), bytes(data), True, bool(brs),
                       bool(esi))
        if brs or esi:
            raise CanFrameError("BRS and ESI exist in CAN FD frames only")
        if remote:
            n = len(data) if dlc is None else dlc
            data = b""
        else:
            data = bytes(data)
            n = len(data) if dlc is None else dlc
            if n != len(data):
                raise CanFrameError(f"DLC {n} does not match {len(data)} data bytes")
        if not 0 <= n <= 8:
            raise CanFrameError(f"DLC {n} out of range 0..8 (classic CAN)")
        return cls(can_id, ext, remote, n, data)


# -- reference implementation ------------------------------------------------
def field_bits(value: int, width: int) -> list[int]:
    """``value`` as ``width`` bits, most significant first (as a CAN field is sent)."""
    return [(value >> (width - 1 - i)) & 1 for i in range(width)]


def frame_bits(frame: Frame, with_crc: bool = True) -> list[int]:
    """Unstuffed bits from SOF through the CRC sequence (0 = dominant). Classic frames."""
    if frame.fd:
        raise CanFrameError("a CAN FD frame: use can_bus.fd.wire")
    can_id, ext, rtr, dlc, data = frame[:5]
    bits = [0]  # SOF
    if ext:
        bits += [*field_bits(can_id >> 18, 11), 1, 1]  # base ID, SRR, IDE
        bits += [*field_bits(can_id & 0x3FFFF, 18), int(rtr), 0, 0]  # ext ID, RTR, r1, r0
    else:
        bits += [*field_bits(can_id, 11), int(rtr), 0, 0]  # ID, RTR, IDE, r0
    bits += field_bits(dlc, 4)
    if not rtr:
        for byte in data:
            bits += field_bits(byte, 8)
    if with_crc:
        bits += field_bits(crc15_bits(bits), 15)
    return bits


def crc15_bits(bits: list[int]) -> int:
    """CRC-15/CAN of a bit list, one bit at a time (init 0, no reflection, no xor)."""
    crc = 0
    for bit in bits:
        feedback = bit ^ ((crc >> 14) & 1)
        crc = (crc << 1) & 0x7FFF
        if feedback:
            crc ^= CRC_POLY
    return crc


def stuff(bits: list[int]) -> tuple[list[int], list[bool]]:
    """Insert a complement after every five equal bits; stuff bits count in the next run.

    Returns the stuffed bits and, for each, whether it is a stuff bit.
    """
    out: list[int] = []
    flags: list[bool] = []
    last, run = -1, 0
    for bit in bits:
        out.append(bit)
        flags.append(False)
        if bit == last:
            run += 1
        else:
            last, run = bit, 1
        if run == 5:
            last, run = 1 - bit, 1
            out.append(last)
            flags.append(True)
    return out, flags


def wire_bits(frame: Frame, acked: bool = True) -> list[int]:
    """The whole frame as driven on the bus, SOF through EOF (intermission excluded)."""
    stuffed, _ = stuff(frame_bits(frame))
    return stuffed + [1, 0 if acked else 1, 1] + [1] * 7


def arbitration_end(frame: Frame) -> int:
    """Index (unstuffed) of the last bit that can decide arbitration: IDE, or RTR when extended."""
    return 32 if frame.extended else 13


# -- fast implementation -----------------------------------------------------
def _make_crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 7
        for _ in range(8):
            crc = ((crc << 1) ^ CRC_POLY) if crc & 0x4000 else (crc << 1)
            crc &= 0x7FFF
        table.append(crc)
    return table


_CRC_TABLE = _make_crc_table()


def crc15(data: bytes) -> int:
    """CRC-15/CAN of whole bytes. Leading zero bits do not change it (init 0)."""
    crc = 0
    table = _CRC_TABLE
    for byte in data:
        crc = (table[((crc >> 7) ^ byte) & 0xFF] ^ (crc << 8)) & 0x7FFF
    return crc


# Stuffing state: last bit and run length 1..4 -> index last*4 + run-1. Before
# SOF the idle bus is recessive, so the start state is "last = 1, run = 1".
STUFF_START = 4


def stuff_step(state: int, bit: int) -> tuple[int, int]:
    """One bit through the stuffing state (see above): the next state, and 1 when a
    stuff bit follows this one (FD frames' data phase shares it)."""
    last, run = state >> 2, (state & 3) + 1
    if bit != last:
        return (bit << 2), 0
    run += 1
    if run == 5:  # a stuff bit of the other value starts a new run of one
        return ((1 - bit) << 2), 1
    return (bit << 2) | (run - 1), 0


def _make_stuff_table(width: int) -> list[int]:
    """Entry ``state << width | chunk`` -> ``stuff_count << 3 | new_state``."""
    table = [0] * (8 << width)
    for state in range(8):
        for chunk in range(1 << width):
            s, n = state, 0
            for i in range(width - 1, -1, -1):
                s, k = stuff_step(s, (chunk >> i) & 1)
                n += k
            table[(state << width) | chunk] = (n << 3) | s
    return table


STUFF8 = _make_stuff_table(8)
STUFF_PART = [[0]] + [_make_stuff_table(w) for w in range(1, 8)]


def _packed(frame: Frame) -> tuple[int, int]:
    """(value, width): the unstuffed SOF..data bits as one integer, SOF most significant."""
    can_id, ext, rtr, dlc, data = frame[:5]
    if ext:
        v = ((can_id >> 18) << 27) | (3 << 25) | ((can_id & 0x3FFFF) << 7) | (rtr << 6) | dlc
        width = 39
    else:
        v = (can_id << 7) | (rtr << 6) | dlc
        width = 19
    if data and not rtr:
        v = (v << (8 * len(data))) | int.from_bytes(data, "big")
        width += 8 * len(data)
    return v, width


def stuff_count(value: int, width: int) -> int:
    """Stuff bits inserted into the ``width``-bit sequence ``value`` (MSB first)."""
    part = width & 7
    raw = value.to_bytes((width + 7) >> 3, "big")
    state, total, start = STUFF_START, 0, 0
    if part:
        e = STUFF_PART[part][(state << part) | raw[0]]
        total, state, start = e >> 3, e & 7, 1
    table = STUFF8
    for i in range(start, len(raw)):
        e = table[(state << 8) | raw[i]]
        total += e >> 3
        state = e & 7
    return total


_LEN_CACHE: dict[Frame, int] = {}
_HEAD_CACHE: dict[tuple[int, bool, bool, int], tuple[int, int, int]] = {}
_CACHE_MAX = 1 << 16
_STUFF7 = STUFF_PART[7]


def _head(can_id: int, ext: bool, rtr: bool, dlc: int) -> tuple[int, int, int]:
    """(CRC register, stuff state, stuff bits) after SOF..DLC, bit by bit (then cached)."""
    v, width = _packed(Frame(can_id, ext, rtr, dlc, b""))
    crc, state, count = 0, STUFF_START, 0
    for i in range(width - 1, -1, -1):
        bit = (v >> i) & 1
        feedback = bit ^ ((crc >> 14) & 1)
        crc = ((crc << 1) & 0x7FFF) ^ (CRC_POLY if feedback else 0)
        state, k = stuff_step(state, bit)
        count += k
    return crc, state, count


def stuffed_length(frame: Frame) -> int:
    """Bits from SOF through the CRC sequence, stuff bits included (cached per frame).

    The SOF..DLC part is worked out once per (ID, kind, DLC); the data bytes
    then run through the CRC table and the stuffing table together, and the
    15 CRC bits through the stuffing table (8 + 7 bits).
    """
    n = _LEN_CACHE.get(frame)
    if n is not None:
        return n
    if frame.fd:
        raise CanFrameError("a CAN FD frame: use can_bus.fd.timing")
    can_id, ext, rtr, dlc, data = frame[:5]
    key = (can_id, ext, rtr, dlc)
    head = _HEAD_CACHE.get(key)
    if head is None:
        if len(_HEAD_CACHE) >= _CACHE_MAX:
            _HEAD_CACHE.clear()
        head = _HEAD_CACHE[key] = _head(can_id, ext, rtr, dlc)
    crc, state, count = head
    table, stuff8 = _CRC_TABLE, STUFF8
    if not rtr:
        for byte in data:
            crc = (table[((crc >> 7) ^ byte) & 0xFF] ^ (crc << 8)) & 0x7FFF
            e = stuff8[(state << 8) | byte]
            count += e >> 3
            state = e & 7
    e = stuff8[(state << 8) | (crc >> 7)]
    count += e >> 3
    count += _STUFF7[((e & 7) << 7) | (crc & 0x7F)] >> 3
    n = (39 if ext else 19) + (0 if rtr else 8 * len(data)) + 15 + count
    if len(_LEN_CACHE) >= _CACHE_MAX:
        _LEN_CACHE.clear()
    _LEN_CACHE[frame] = n
    return n


def frame_length(frame: Frame) -> int:
    """Bits the frame occupies the bus, SOF through intermission."""
    return stuffed_length(frame) + TAIL_BITS


def worst_case_length(dlc: int, extended: bool = False) -> int:
    """Upper bound of :func:`frame_length` (Davis et al. 2007): one stuff bit per 4 bits."""
    g = 54 if extended else 34
    return 8 * dlc + g + TAIL_BITS + (g + 8 * dlc - 1) // 4


def arbitration_key(frame: Frame) -> int:
    """Bits that decide arbitration as one integer: the lowest key wins the bus.

    base ID (11) | RTR or SRR | IDE | extended ID (18) | RTR of extended frames.
    A data frame beats a remote one with the same ID; a standard frame beats
    an extended one with the same base ID (its IDE, or its RTR against SRR).
    A CAN FD frame contends as a data frame (its RRS bit is dominant); against
    a classic data frame with the same ID it loses at FDF, after arbitration.
    """
    can_id, ext, rtr = frame[0], frame[1], frame[2]  # FD frames: RRS dominant, as a data frame
    if ext:
        return ((can_id >> 18) << 21) | (3 << 19) | ((can_id & 0x3FFFF) << 1) | rtr
    return (can_id << 21) | (rtr << 20)
