"""Frame bits: hand-computed vectors, CRC-15 against crcmod, fast path against reference.

How the vectors were computed: the unstuffed string is the fields written
out in order (SOF, ID, RTR/SRR, IDE, r0/r1, DLC, data, CRC); the CRC comes
from crcmod (a CRC-16 engine with polynomial x * P(x) gives CRC-15 shifted
left by one: (M x^16) mod (x P) = x ((M x^15) mod P)), not from can_bus.
Stuff bits, shown in brackets, follow the rule "after five equal bits insert
the complement, which counts in the next run", applied by hand from SOF to
the last CRC bit. Total = stuffed + CRC delimiter 1 + ACK 2 + EOF 7 + IFS 3.
"""

from __future__ import annotations

import re

import crcmod
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.can_bus.bits import (
    Frame,
    arbitration_key,
    crc15,
    crc15_bits,
    frame_bits,
    frame_length,
    stuff,
    stuff_count,
    stuffed_length,
    wire_bits,
    worst_case_length,
)

_crc16 = crcmod.mkCrcFun(0x18B32, initCrc=0, rev=False, xorOut=0)  # x * (CRC-15/CAN poly)


def crc15_by_crcmod(bits: str) -> int:
    pad = "0" * (-len(bits) % 8)  # leading zeros do not change a zero-init CRC
    return int(_crc16(int(pad + bits, 2).to_bytes((len(bits) + len(pad)) // 8, "big"))) >> 1


# (frame, unstuffed SOF..CRC, stuffed with [stuff bits], total bits incl. IFS)
VECTORS = [
    # All dominant: 34 zeros, a stuff bit after every 5 -> 6; 40 + 13 = 53.
    (Frame(0x000, False, False, 0, b""),
     "0" * 34,
     "00000[1]00000[1]00000[1]00000[1]00000[1]00000[1]0000", 53),
    # 0x123#0102: ID 00100100011, RTR IDE r0 000, DLC 0010, data, CRC 0x69FE.
    (Frame(0x123, False, False, 2, b"\x01\x02"),
     "0" "00100100011" "000" "0010" "00000001" "00000010" "110100111111110",
     "00010010001100000[1]100000[1]000100000[1]01011010011111[0]1110", 67),
    # Remote frame 0x123, DLC 4: no data field, no stuff bit at all.
    (Frame(0x123, False, True, 4, b""),
     "0" "00100100011" "100" "0100" "100001101010010",
     "0001001000111000100100001101010010", 47),
    # Extended ID 0, DLC 0: SRR and IDE recessive split the zeros; CRC 0x4610.
    (Frame(0x0, True, False, 0, b""),
     "0" "00000000000" "11" "000000000000000000" "000" "0000" "100011000010000",
     "00000[1]00000[1]001100000[1]00000[1]00000[1]00000[1]00000[1]100011000010000", 74),
    # Feedback of module 1: the CRC ends in five zeros, so a stuff bit follows
    # the last CRC bit (stuffing covers SOF through the CRC sequence).
    (Frame(0x201, False, False, 8, bytes.fromhex("0A1E050138000000")),
     "0" "01000000001" "000" "1000" "00001010" "00011110" "00000101" "00000001" "00111000"
     "00000000" "00000000" "00000000" "101010001100000",
     "00100000[1]0001000100000[1]001010000111100000[1]010100000[1]0010011100000[1]00000[1]"
     "00000[1]00000[1]00000[1]00101010001100000[1]", 121),
    # Worst-case stuffing found for 8 data bytes: 19 stuff bits, 130 bits, which
    # is can-utils' worst-case estimate (269 + 48 * 8) // 5; alternating runs of
    # five make the complement start the next run ("11111[0]11111[0]").
    (Frame(0x7C0, False, False, 8, bytes.fromhex("2FFFE1FA0FF87810")),
     "0" "11111000000" "000" "1000" "00101111" "11111111" "11100001" "11111010" "00001111"
     "11111000" "01111000" "00010000" "011110000111101",
     "011111[0]0000[1]00000[1]100000[1]1011111[0]11111[0]11111[0]0000[1]1111[0]110100000[1]"
     "1111[0]11111[0]0000[1]1111[0]0000[1]00100000[1]1111[0]0000[1]1111[0]01", 130),
]


@pytest.mark.parametrize(("frame", "unstuffed", "stuffed", "total"), VECTORS,
                         ids=lambda v: repr(v) if isinstance(v, Frame) else None)
def test_hand_computed_vectors(frame: Frame, unstuffed: str, stuffed: str, total: int) -> None:
    assert "".join(map(str, frame_bits(frame))) == unstuffed
    crc_bits = unstuffed[-15:]
    assert int(crc_bits, 2) == crc15_by_crcmod(unstuffed[:-15])
    bits, flags = stuff(frame_bits(frame))
    shown = "".join(f"[{b}]" if f else str(b) for b, f in zip(bits, flags))
    assert shown == stuffed
    plain = re.sub(r"\[(\d)\]", r"\1", stuffed)
    assert stuffed_length(frame) == len(plain) == len(bits)
    assert frame_length(frame) == total == len(plain) + 13
    assert len(wire_bits(frame)) == total - 3  # intermission not part of the frame


def test_crc_table_matches_bitwise_and_crcmod() -> None:
    for data in (b"", b"\x00", b"\x01", b"\xff" * 8, bytes(range(11))):
        bits = [int(b) for byte in data for b in f"{byte:08b}"]
        assert crc15(data) == crc15_bits(bits) == crc15_by_crcmod("".join(map(str, bits)) or "0")


frames = st.builds(
    lambda ext, cid, rtr, data, dlc: Frame.make(
        cid % (1 << (29 if ext else 11)), b"" if rtr else data, extended=ext, remote=rtr,
        dlc=dlc if rtr else None),
    st.booleans(), st.integers(0, (1 << 29) - 1), st.booleans(),
    st.binary(max_size=8) | st.lists(st.sampled_from([0, 0xFF, 0x0F, 0xF0]), max_size=8).map(bytes),
    st.integers(0, 8))


@settings(max_examples=400, deadline=None)
@given(frames)
def test_fast_length_equals_reference(frame: Frame) -> None:
    bits, _ = stuff(frame_bits(frame))
    assert stuffed_length(frame) == len(bits)
    assert frame_length(frame) <= worst_case_length(frame.dlc, frame.extended)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1), min_size=1, max_size=200))
def test_stuffing_properties(tail: list[int]) -> None:
    seq = [0, *tail]  # every stuffed sequence starts with SOF
    out, flags = stuff(seq)
    assert stuff_count(int("".join(map(str, seq)), 2), len(seq)) == sum(flags)
    # no six equal bits on the wire; removing the stuff bits gives the input back
    assert not re.search("000000|111111", "".join(map(str, out)))
    assert [b for b, f in zip(out, flags) if not f] == seq
    # each stuff bit is the complement of the five bits before it
    for i, f in enumerate(flags):
        if f:
            assert len(set(out[i - 5:i])) == 1 and out[i] != out[i - 1]


def test_arbitration_key_rules() -> None:
    data = Frame(0x123, False, False, 0, b"")
    remote = Frame(0x123, False, True, 0, b"")
    ext_same_base = Frame(0x123 << 18, True, False, 0, b"")
    ext_remote = Frame(0x123 << 18, True, True, 0, b"")
    assert arbitration_key(data) < arbitration_key(remote)  # data beats remote
    assert arbitration_key(remote) < arbitration_key(ext_same_base)  # IDE: standard wins
    assert arbitration_key(ext_same_base) < arbitration_key(ext_remote)
    assert arbitration_key(Frame(0x122, False, True, 0, b"")) < arbitration_key(data)
    # a lower base ID wins even against a standard frame's RTR/IDE
    assert arbitration_key(Frame(0x122 << 18 | 0x3FFFF, True, True, 0, b"")) < arbitration_key(data)


@settings(max_examples=300, deadline=None)
@given(frames, frames)
def test_arbitration_key_is_the_bitwise_contest(a: Frame, b: Frame) -> None:
    """The lower key belongs to the frame whose arbitration bits win, dominant (0) first."""

    def arbitration_bits(f: Frame) -> list[int]:  # after SOF: through IDE, or extended RTR
        return frame_bits(f)[1:33 if f.extended else 14]

    fa, fb = arbitration_bits(a), arbitration_bits(b)
    first = next((i for i, (x, y) in enumerate(zip(fa, fb)) if x != y), None)
    if first is None:
        assert arbitration_key(a) == arbitration_key(b)
    else:
        assert (fa[first] == 0) == (arbitration_key(a) < arbitration_key(b))


def test_frame_make_checks() -> None:
    with pytest.raises(ValueError, match="out of range"):
        Frame.make(0x800, extended=False)
    with pytest.raises(ValueError, match="DLC 9"):
        Frame.make(0x1, bytes(9))
    assert Frame.make(0x800).extended  # above 0x7FF defaults to extended
    assert Frame.make(0x10, remote=True, dlc=3) == Frame(0x10, False, True, 3, b"")
