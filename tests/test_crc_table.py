"""One checksum table: the action frame's CRC-16 presets are the descriptions' CRC-16s."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols import crc
from fwbridge.protocols.checksums import Algorithm, algorithm, algorithm_names
from fwbridge.protocols.errors import ConfigError

CRCS = algorithm_names(kind="crc")


def _reflect(value: int, width: int) -> int:
    return int(f"{value:0{width}b}"[::-1], 2)


def reference(algo: Algorithm, data: bytes) -> int:
    """Bit by bit from the parameters alone (crcmod's convention: ``init`` is the
    register's start XOR ``xor_out``, already reflected for a reflected CRC)."""
    w, mask = algo.width, (1 << algo.width) - 1
    reg = algo.init ^ algo.xor_out
    if algo.reverse:
        poly = _reflect(algo.poly, w)
        for byte in data:
            reg ^= byte
            for _ in range(8):
                reg = (reg >> 1) ^ poly if reg & 1 else reg >> 1
    else:
        top = 1 << (w - 1)
        for byte in data:
            reg ^= byte << (w - 8)
            for _ in range(8):
                reg = ((reg << 1) ^ algo.poly if reg & top else reg << 1) & mask
    return reg ^ algo.xor_out


def test_the_presets_are_the_tables_crc16s_in_its_order() -> None:
    names = crc.preset_names()
    assert names == tuple(n for n in CRCS if algorithm(n).width == 16)
    assert len(names) == 19 and crc.DEFAULT_CRC in names
    assert algorithm_names(width=16) == names  # sum8 and xor8 are 8 bits
    assert algorithm_names(width=8)[:2] == ("sum8", "xor8")


@pytest.mark.parametrize("name", crc.preset_names())
def test_a_preset_is_its_algorithm(name: str) -> None:
    p, a = crc.preset(name), algorithm(name)
    assert crc.crc_function(name) is a.func  # one function per CRC, not two
    assert (p.name, p.poly, p.reverse, p.init, p.xor_out, p.check) == (
        a.name, a.poly | 1 << 16, a.reverse, a.init, a.xor_out, a.check)


@pytest.mark.parametrize("name", CRCS)
def test_every_crc_meets_its_check_value_from_its_parameters(name: str) -> None:
    a = algorithm(name)
    assert reference(a, b"123456789") == a.check == a.func(b"123456789")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(crc.preset_names()), st.binary(max_size=300))
def test_presets_and_table_agree_byte_for_byte(name: str, data: bytes) -> None:
    a = algorithm(name)
    want = reference(a, data)
    assert crc.crc16(data, name) == crc.crc_function(name)(memoryview(data)) == want
    assert a.func(bytearray(data)) == want


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CRCS), st.binary(max_size=200))
def test_every_crc_of_the_table_agrees_with_its_parameters(name: str, data: bytes) -> None:
    a = algorithm(name)
    assert a.func(data) == reference(a, data)


def test_only_16_bit_crcs_are_presets() -> None:
    algorithm("crc-32")  # the table has it; the action frame's two bytes do not
    for bad in ("crc-32", "sum8", "crc-8"):
        with pytest.raises(ConfigError, match="unknown CRC-16 preset"):
            crc.preset(bad)


def test_the_tables_spellings_work_for_presets() -> None:
    assert crc.preset("crc-16-modbus").name == crc.preset("CrcModbus").name == "modbus"
    assert crc.preset("crc_ccitt_false") == crc.preset()  # the same function too
    assert algorithm("CrcXmodem") is algorithm("xmodem")
