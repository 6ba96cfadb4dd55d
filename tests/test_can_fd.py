"""CAN FD in the bit model: hand-computed frames, the fast path against the bit-by-bit
reference, two bit rates, arbitration against classic frames, errors in both phases, and
FD through the python-can interface."""

from __future__ import annotations

import itertools

import can
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.can_bus import fd
from fwbridge.can_bus.bits import TAIL_BITS, Frame, frame_length
from fwbridge.can_bus.faults import Party, resolve
from fwbridge.can_bus.model import BusModel, ErrorFrame, ErrorState, FrameDelivered
from fwbridge.can_bus.modeltypes import StateChanged

_names = itertools.count()


def bits(text: str) -> list[int]:
    return [int(c) for c in text if c in "01"]


# -- hand-computed frames (ISO 11898-1:2015 layout, see can_bus/fd.py) -------------------------
def test_alternating_frame_has_no_dynamic_stuff_bits() -> None:
    # ID 0x555 and 0x55 bytes alternate: DLC 1000 then data 0101... never five equal bits.
    f = Frame.make(0x555, b"\x55" * 8, fd=True, brs=True)
    w = fd.wire(f)
    assert w.bits[:22] == bits("0 10101010101 0 0 1 0 1 0 1000")
    assert w.stuff_count == 0
    # stuff count 0: FSB (complement of the last data bit, 1 -> 0), Gray 000, parity 0, FSB 1
    assert w.bits[86:92] == bits("0 000 0 1")
    assert len(w.bits) == 86 + 6 + 17 + 4 == 113  # CRC-17 with 4 FSBs in it
    assert fd.timing(f) == (113, 17)  # SOF..BRS at the nominal rate
    # 500 kbit/s nominal, 2 Mbit/s data: (17 + 13) / 500k + 96 / 2M = 60 us + 48 us
    assert fd.frame_seconds(f, 500_000, 2_000_000) == pytest.approx(108e-6)
    assert fd.frame_seconds(f._replace(brs=False), 500_000, 2_000_000) == pytest.approx(
        (113 + 13) / 500_000)


def test_all_dominant_header_stuffs_three_times() -> None:
    # SOF + ID 0 + RRS + IDE: 14 zeros -> stuff after the 5th and 10th; then FDF 1, and
    # res, BRS, ESI, DLC 0000 are 7 zeros -> a stuff bit after the 5th: 3 in all.
    f = Frame.make(0, b"", fd=True)
    w = fd.wire(f)
    assert w.bits[:25] == bits("00000 1 00000 1 0000 1 00000 1 00")
    assert w.stuff_count == 3
    assert w.bits[25:31] == bits("1 010 1 0")  # FSB, Gray(3) = 010, parity 1, FSB
    assert len(w.bits) == 25 + 6 + 17 + 4 == 52
    assert fd.frame_ticks(f, 1, 1) == 52 + TAIL_BITS == 65


def test_no_dynamic_stuff_bit_after_the_last_data_bit() -> None:
    # DLC ...1 then data 1111 0000: five ones -> stuff 0; that 0 and 0000 make five zeros
    # ending on the last data bit: that stuff bit is not sent (the first FSB takes its place).
    f = Frame.make(0x555, b"\xf0", fd=True, brs=True)
    w = fd.wire(f)
    assert w.stuff_count == 1
    assert w.dyn_end == 22 + 8 + 1
    assert w.bits[w.dyn_end] == 1  # the FSB complements the last data bit (0)
    assert fd.timing(f) == (31 + 6 + 17 + 4, 17)
    assert fd.frame_seconds(f, 500_000, 2_000_000) == pytest.approx(30 / 500e3 + 41 / 2e6)


def test_crc21_frames_carry_seven_fixed_stuff_bits() -> None:
    f = Frame.make(0x123, bytes(range(20)), fd=True)
    w = fd.wire(f)
    assert fd.crc_width(f) == 21 and sum(w.fixed) == 7
    assert sum(fd.wire(Frame.make(0x123, bytes(16), fd=True)).fixed) == 6


def test_crc_polynomials_match_the_catalogue_check_values() -> None:
    msg = [int(b) for byte in b"123456789" for b in f"{byte:08b}"]
    assert fd.crc_bits(msg, 17, init=0) == 0x04F03  # CRC-17/CAN-FD
    assert fd.crc_bits(msg, 21, init=0) == 0x0ED841  # CRC-21/CAN-FD


def test_dlc_codes() -> None:
    assert [fd.len_to_dlc(n) for n in (8, 12, 16, 20, 24, 32, 48, 64)] == list(range(8, 16))
    with pytest.raises(ValueError, match="13 data bytes"):
        Frame.make(1, bytes(13), fd=True)
    with pytest.raises(ValueError, match="remote"):
        Frame.make(1, fd=True, remote=True)
    with pytest.raises(ValueError, match="FD frames only"):
        Frame.make(1, b"", brs=True)


# -- fast path against the reference -----------------------------------------------------------
def _fd_frames() -> st.SearchStrategy[Frame]:
    return st.builds(
        lambda ext, cid, n, fill, raw, brs, esi: Frame.make(
            cid & (0x1FFFFFFF if ext else 0x7FF),
            (raw * 64)[:n] if fill is None else bytes([fill]) * n, extended=ext, fd=True,
            brs=brs, esi=esi),
        st.booleans(), st.integers(0, 0x1FFFFFFF), st.sampled_from(fd.DLC_LENGTHS),
        st.one_of(st.none(), st.sampled_from([0x00, 0xFF, 0xF0, 0x0F, 0x1F, 0xE0])),
        st.binary(min_size=1, max_size=64), st.booleans(), st.booleans())


@settings(max_examples=400, deadline=None)
@given(_fd_frames())
def test_fast_timing_equals_the_bit_by_bit_reference(frame: Frame) -> None:
    w = fd.wire(frame)
    s, a = fd.timing(frame)
    assert s == len(w.bits)
    assert a == (w.data_phase if frame.brs else s)
    # stuff bits: dynamic ones only in the dynamic part, fixed ones each a complement
    assert sum(w.stuff[:w.dyn_end]) == w.stuff_count
    for i, fixed in enumerate(w.fixed):
        if fixed:
            assert w.bits[i] != w.bits[i - 1]
    # the stuff count field: Gray code of the count modulo 8, then even parity
    sc = w.bits[w.dyn_end + 1:w.dyn_end + 5]
    assert sc[:3] == [int(c) for c in f"{fd.GRAY[w.stuff_count % 8]:03b}"]
    assert sum(sc) % 2 == 0
    # duration bit by bit: each bit at its phase's rate, nt = 5, dt = 1 (1 and 5 Mbit/s)
    per_bit = [5 if i < w.data_phase or not frame.brs else 1 for i in range(len(w.bits))]
    assert fd.frame_ticks(frame, 5, 1) == sum(per_bit) + 5 * TAIL_BITS


@settings(max_examples=100, deadline=None)
@given(_fd_frames())
def test_model_times_fd_frames_exactly(frame: Frame) -> None:
    m = BusModel(1_000_000, data_bitrate=5_000_000)
    assert (m.nt, m.dt, m.tick_rate) == (5, 1, 5_000_000)
    a, b = m.add_node(), m.add_node()
    m.submit(a, frame)
    m.submit(a, frame)
    ev = [e for e in m.run_until_idle() if type(e) is FrameDelivered]
    assert [e.receivers for e in ev] == [(b,), (b,)]
    ticks = fd.frame_ticks(frame, 5, 1)
    assert ev[0].time - ev[0].start == ticks - 3 * 5  # to the end of EOF
    assert ev[1].start == ev[0].start + ticks  # back to back, intermission included
    assert m.busy_bits == 2 * ticks


def test_classic_frames_keep_their_timing_on_an_fd_bus() -> None:
    m = BusModel(500_000, data_bitrate=2_000_000)
    a, _ = m.add_node(), m.add_node()
    f = Frame.make(0x123, b"\x01\x02")
    m.submit(a, f)
    (ev,) = m.run_until_idle()
    assert ev.time - ev.start == (frame_length(f) - 3) * m.nt
    assert m.seconds(m.busy_bits) == pytest.approx(frame_length(f) / 500_000)


# -- arbitration between classic and FD frames ----------------------------------------------------
def _race(*frames: Frame) -> list[Frame]:
    m = BusModel(500_000, data_bitrate=2_000_000)
    nodes = [m.add_node() for _ in frames]
    m.add_node("listener")
    for n, f in zip(nodes, frames):
        m.submit(n, f)
    return [e.frame for e in m.run_until_idle() if type(e) is FrameDelivered]


def test_fd_and_classic_frames_arbitrate_by_id() -> None:
    classic, fd_low, fd_high = (Frame.make(0x100, b"\x01"), Frame.make(0x0FF, b"\x02", fd=True),
                                Frame.make(0x101, b"\x03", fd=True, brs=True))
    assert _race(fd_high, classic, fd_low) == [fd_low, classic, fd_high]
    # RRS is dominant: an FD frame beats a classic remote frame with the same ID
    remote = Frame.make(0x200, remote=True, dlc=2)
    fd_same = Frame.make(0x200, b"\x04", fd=True)
    assert _race(remote, fd_same) == [fd_same, remote]


def test_same_id_classic_and_fd_collide_at_fdf() -> None:
    classic, fdf = Frame.make(0x555, b"\x01"), Frame.make(0x555, b"\x01", fd=True)
    out = resolve({1: classic, 2: fdf}, {1: Party(1, False), 2: Party(2, False)},
                  [Party(3, False)])
    # no stuff bit before it (ID 0x555): the FD transmitter sends FDF (bit 14) recessive and
    # reads dominant: a bit error after arbitration
    assert out.error == "bit" and out.position == 14 and out.detector == 2


# -- errors in both phases -----------------------------------------------------------------------
def test_errors_in_the_data_phase_and_in_the_fixed_stuff_bits() -> None:
    m = BusModel(1_000_000, data_bitrate=5_000_000)
    f = Frame.make(0x123, bytes(range(16)), fd=True, brs=True)
    w = fd.wire(f)
    s, a = fd.timing(f)
    tx, rx = {1: Party(1, False)}, [Party(2, False), Party(3, False)]
    # a receiver misreads a data-phase bit: stuff or CRC error, flagged at the nominal rate
    k = a + 40
    out = resolve({1: f}, tx, rx, {2: k})
    assert not out.delivered and out.error in ("stuff", "crc")
    flag_at = m._at(f, out.position + 1)
    if out.position < s:
        assert flag_at == a * 5 + (out.position + 1 - a) * 1
    assert out.tec == {1: 8} and out.rec[2] == 9 and out.rec[3] == 1
    # a misread fixed stuff bit is a form error where it happens
    fsb = max(i for i, x in enumerate(w.fixed) if x)
    out = resolve({1: f}, tx, rx, {3: fsb})
    assert (out.error, out.position, out.detector) == ("form", fsb, 3)
    assert m._at(f, fsb + 1) == a * 5 + (fsb + 1 - a)


def test_fault_confinement_with_fd_frames_and_esi() -> None:
    m = BusModel(1_000_000, data_bitrate=5_000_000, seed=3)
    tx, rx = m.add_node("tx"), m.add_node("rx")
    m.set_faults(rx, bit_error_rate=1.0)  # the receiver flags every frame
    f = Frame.make(0x10, bytes(64), fd=True, brs=True)
    for _ in range(20):
        m.submit(tx, f)
    events = m.run_until(m.bits(0.05))
    changes = [e for e in events if type(e) is StateChanged and e.node == tx]
    assert changes and changes[0].new is ErrorState.PASSIVE and changes[0].tec == 128
    assert any(type(e) is ErrorFrame for e in events)
    # error-passive now: its FD frames leave with ESI recessive
    m.set_faults(rx, bit_error_rate=0.0)
    m.flush(tx)
    m.submit(tx, f)
    assert m.node(tx).state is ErrorState.PASSIVE
    got = [e for e in m.run_until_idle() if type(e) is FrameDelivered]
    assert got[0].frame.esi and got[0].frame._replace(esi=False) == f


# -- the python-can interface -------------------------------------------------------------------
def test_fd_messages_through_python_can() -> None:
    ch = f"fd{next(_names)}"
    a = can.Bus(interface="fwbridge", channel=ch, fd=True, data_bitrate=4_000_000,
                bitrate=1_000_000, pacing="afap")
    b = can.Bus(interface="fwbridge", channel=ch, fd=True)
    classic = can.Bus(interface="fwbridge", channel=ch)
    try:
        assert a.protocol is can.CanProtocol.CAN_FD and classic.protocol is can.CanProtocol.CAN_20
        msg = can.Message(arbitration_id=0x18DA00F1, is_extended_id=True, is_fd=True,
                          bitrate_switch=True, data=bytes(range(48)))
        a.send(msg)
        got = b.recv(1.0)
        assert got is not None and got.is_fd and got.bitrate_switch
        assert not got.error_state_indicator and got.dlc == 48 and bytes(got.data) == msg.data
        f = Frame.make(msg.arbitration_id, bytes(msg.data), fd=True, brs=True)
        assert got.timestamp - a.sim.epoch == pytest.approx(
            fd.frame_seconds(f, 1e6, 4e6) - 3e-6, abs=1e-6)  # float epoch: ~0.2 us
        assert classic.recv(0) is None  # a classic node ignores FD frames
        with pytest.raises(can.CanOperationError, match="fd=True"):
            classic.send(can.Message(arbitration_id=1, is_fd=True, data=b"\x01"))
        with pytest.raises(can.CanOperationError, match="12, 16"):
            a.send(can.Message(arbitration_id=1, is_fd=True, data=bytes(13)))
    finally:
        for bus in (a, b, classic):
            bus.shutdown()


def test_busload_counts_the_fd_data_phase_at_its_rate() -> None:
    from fwbridge.cli_verbs.can_busload import bus_bits

    msg = can.Message(arbitration_id=0x555, is_extended_id=False, is_fd=True,
                      bitrate_switch=True, data=b"\x55" * 8)
    # 17 + 13 nominal bits, 96 data-phase bits at 4x the rate: 24 nominal bit times
    assert bus_bits(msg, 500_000, 2_000_000) == 30 + 24
    msg.bitrate_switch = False
    assert bus_bits(msg, 500_000, 2_000_000) == 126
