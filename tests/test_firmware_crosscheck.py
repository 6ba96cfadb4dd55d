"""Randomised cross-checks: host (protocols/) and firmware_ref (C, through ctypes) agree.

Every frame one side encodes, the other decodes to the same fields; the
same noisy streams, in the same chunks, give the same frames, offsets,
rejections, answers and counters on both sides; the stop-and-wait senders
take the same steps on the same script.
"""

from __future__ import annotations

import itertools
import math
import struct

from hypothesis import given
from hypothesis import strategies as st

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.crc import preset_names
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.families import actuator
from fwbridge.protocols.families.arq import (
    Delivered,
    Failed,
    Responder,
    Retransmit,
    StopAndWaitSender,
)
from tests.fwref import CAnswer, CFrame, CReject, Firmware
from tests.fwref import firmware as firmware  # the session fixture

F32 = st.floats(width=32, allow_nan=True, allow_infinity=True)
CODECS = {19: odom_frame.CODEC, 15: cmd_frame.CODEC}


def f32_bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def cuts_of(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


# -- sum-8 -------------------------------------------------------------------
@given(st.lists(F32, min_size=4, max_size=4))
def test_odom_python_encodes_c_decodes(firmware: Firmware, vals: list[float]) -> None:
    raw = odom_frame.encode(odom_frame.OdomFrame(*vals), allow_nonfinite=True)
    want = struct.unpack("<4I", raw[2:18])  # the bits Python put on the wire
    assert firmware.sum8_decode(raw, 19) == (0, want)
    assert firmware.odom_encode(want) == raw


@given(st.lists(F32, min_size=3, max_size=3))
def test_cmd_c_encodes_python_decodes(firmware: Firmware, vals: list[float]) -> None:
    bits = [f32_bits(v) for v in vals]
    raw = firmware.cmd_encode(bits)
    assert raw == cmd_frame.encode(cmd_frame.CmdFrame(*vals), allow_nonfinite=True)
    back = cmd_frame.decode(raw)
    for got, want in zip((back.vx, back.vy, back.wz), vals):
        assert (math.isnan(got) and math.isnan(want)) or got == want


@st.composite
def sum8_streams(draw: st.DrawFn, size: int) -> bytes:
    """Frames in noise that defeats the seed: AA AA 55, false headers, truncations."""
    codec = CODECS[size]
    nf = len(codec.fields)
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 12))):
        body = draw(st.binary(min_size=4 * nf, max_size=4 * nf))
        frame = b"\xaa\x55" + body + bytes([sum(body) & 0xFF])
        kind = draw(st.integers(0, 6))
        if kind == 0:
            parts.append(b"\xaa")
        elif kind == 1:
            parts.append(b"\xaa\x55" + draw(st.binary(max_size=size)))
        elif kind == 2:
            parts.append(frame[: draw(st.integers(1, size - 1))])
        elif kind == 3:
            parts.append(bytes(draw(st.lists(st.sampled_from([0xAA, 0x55, 0x00, 0xFF]),
                                             max_size=20))))
        elif kind == 4:  # a damaged frame
            bad = bytearray(frame)
            bad[draw(st.integers(2, size - 1))] ^= draw(st.integers(1, 255))
            parts.append(bytes(bad))
        parts.append(frame)
    parts.append(draw(st.binary(max_size=8)))
    return b"".join(parts)


def _py_frames(rx: Sum8Receiver, chunk: bytes) -> list[tuple[int, tuple[float, ...]]]:
    return [(r.offset, rx.codec.values(r.frame)) for r in rx.feed(chunk)]


def _same_values(py: tuple[float, ...], c_bits: tuple[int, ...], stream: bytes, off: int) -> bool:
    wire = struct.unpack_from(f"<{len(c_bits)}I", stream, off + 2)
    if c_bits != wire:
        return False
    return all((math.isnan(p) and math.isnan(struct.unpack("<f", struct.pack("<I", b))[0]))
               or f32_bits(p) == b for p, b in zip(py, c_bits))


@given(st.data(), st.sampled_from([19, 15]), st.lists(st.integers(0, 10**6), max_size=6),
       st.booleans())
def test_sum8_same_frames_and_counters_after_every_chunk(
    firmware: Firmware, data: st.DataObject, size: int, cuts: list[int], bytewise: bool
) -> None:
    stream = data.draw(sum8_streams(size))
    py = Sum8Receiver(CODECS[size])
    c = firmware.sum8_receiver(size)
    for chunk in cuts_of(stream, cuts):
        want = _py_frames(py, chunk)
        got = c.feed(chunk, bytewise=bytewise)
        assert [o for o, _ in got] == [o for o, _ in want]
        for (off, cb), (_, pv) in zip(got, want):
            assert _same_values(pv, cb, stream, off)
        assert c.stats == py.stats.as_dict()
    c.finish()
    assert py.finish() == []  # fixed-length frames: the end decides nothing more
    assert c.stats == py.stats.as_dict()


# -- action frames -------------------------------------------------------------
SPECIAL = [b"\xfd\xdf", b"\xfe\xef", b"\xfe\xff", b"\xfe", b"\xfd"]
data_part = st.binary(max_size=24) | st.sampled_from(SPECIAL)
frame_data = st.lists(data_part, max_size=5).map(b"".join)
frames = st.builds(ActionFrame, st.integers(0, 255),
                   st.integers(0, 0x1A) | st.integers(0, 255),
                   st.sampled_from([0x01, 0x21, 0x32, 0x41, 0x42]) | st.integers(0, 255),
                   frame_data)
noise = st.lists(st.sampled_from([0xFE, 0xEF, 0xFD, 0xDF, 0xFF, 0x00]) | st.integers(0, 255),
                 max_size=24).map(bytes)


@given(frames, st.sampled_from(sorted(preset_names())))
def test_action_encode_both_ways(firmware: Firmware, frame: ActionFrame, crc: str) -> None:
    raw = action_frame.encode(frame, crc=crc)
    assert firmware.action_encode(frame.machine, int(frame.type), int(frame.sub), frame.data,
                                  crc=crc) == raw
    assert firmware.action_check(raw, crc=crc) == 0
    rx = firmware.action_receiver(crc=crc, answer=False)
    (got,) = rx.feed(raw)
    assert isinstance(got, CFrame)
    assert ActionFrame(got.machine, got.type, got.sub, got.data) == frame
    assert action_frame.decode(raw, crc=crc) == frame


@st.composite
def action_streams(draw: st.DrawFn, crc: str) -> bytes:
    parts: list[bytes] = []
    for frame in draw(st.lists(frames, max_size=6)):
        raw = action_frame.encode(frame, crc=crc)
        kind = draw(st.integers(0, 6))
        if kind == 0:
            parts.append(draw(noise))
        elif kind == 1:
            parts.append(raw[: draw(st.integers(1, len(raw) - 1))])
        elif kind == 2:  # a false header whose length points far beyond
            parts.append(b"\xfe\xef" + bytes([1, draw(st.integers(0, 8))])
                         + draw(st.integers(0, 200)).to_bytes(2, "little")
                         + draw(st.binary(max_size=3)))
        elif kind == 3:
            bad = bytearray(raw)
            bad[draw(st.integers(2, len(raw) - 1))] ^= draw(st.integers(1, 255))
            parts.append(bytes(bad))
        elif kind == 4:  # the worked example's header
            parts.append(b"\xfe\xff" + raw[2:])
        parts.append(raw)
        if draw(st.integers(0, 4)) == 0:
            parts.append(raw)  # sent again: a duplicate
    parts.append(draw(noise))
    return b"".join(parts)


@given(st.data(), st.sampled_from(["crc-ccitt-false", "modbus", "x-25"]),
       st.sampled_from([1024, 40, 0]), st.booleans(), st.booleans(),
       st.lists(st.integers(0, 10**6), max_size=6))
def test_action_same_frames_rejects_answers_counters(
    firmware: Firmware, data: st.DataObject, crc: str, max_length: int, relaxed: bool,
    bytewise: bool, cuts: list[int],
) -> None:
    stream = data.draw(action_streams(crc))
    py = ActionReceiver(crc=crc, max_length=max_length, relaxed=relaxed, keep_rejects=True)
    resp = Responder(crc=crc)
    c = firmware.action_receiver(crc=crc, max_length=max_length, relaxed=relaxed)
    c_events: list[CFrame | CReject | CAnswer] = []
    py_events: list[tuple[int, object]] = []
    for chunk in [*cuts_of(stream, cuts), None]:
        if chunk is None:
            c_events += c.finish()
            got = py.finish()
        else:
            c_events += c.feed(chunk, bytewise=bytewise)
            got = py.feed(chunk)
        py_events += [(r.offset, r) for r in got] + [(r.offset, r) for r in py.take_rejects()]
        assert c.stats == py.stats.as_dict()
    assert c.pending == py.pending == 0
    # Stream order (C reports in it; the host returns frames and rejections apart).
    py_events.sort(key=lambda e: e[0])
    py_answers: list[tuple[bool, bytes]] = []
    c_plain = [e for e in c_events if not isinstance(e, CAnswer)]
    assert len(c_plain) == len(py_events)
    for ce, (off, pe) in zip(c_plain, py_events):
        assert ce.offset == off
        if isinstance(ce, CFrame):
            assert (ce.machine, ce.type, ce.sub, ce.data) == (
                pe.frame.machine, int(pe.frame.type), int(pe.frame.sub), pe.frame.data)
            names = (("header",) if ce.defects & 1 else ()) + (("crc",) if ce.defects & 2 else ())
            assert names == pe.defects
            ans = resp.answer(pe.frame)
        else:
            assert (ce.reason, ce.machine, ce.type, ce.sub) == (
                pe.reason, pe.machine, int(pe.type), None if pe.sub is None else int(pe.sub))
            ans = resp.answer_rejected(pe)
        if ans is not None:
            py_answers.append((ans.duplicate, ans.data))
    c_answers = [(e.duplicate, e.data) for e in c_events if isinstance(e, CAnswer)]
    assert c_answers == py_answers
    assert c.responder_stats == resp.stats.as_dict()


# -- stop-and-wait ---------------------------------------------------------------
ops = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 255)), max_size=40)


@given(ops, st.integers(1, 50), st.integers(0, 4))
def test_arq_sender_same_steps(firmware: Firmware, script: list[tuple[int, int]], timeout: int,
                               retries: int) -> None:
    c = firmware.arq_sender(timeout, retries)
    py = StopAndWaitSender(timeout=float(timeout), retries=retries)
    now = 0
    sent: ActionFrame | None = None
    for op, arg in script:
        py_events: list[object] = []
        py_tx = b""
        if op == 0:  # send, when idle
            frame = ActionFrame(arg % 4, 1 + arg % 7, 0x21, bytes([arg]) * (arg % 3))
            if py.busy:
                assert c.send(frame.machine, int(frame.type), int(frame.sub), frame.data, now) == -1
                continue
            py_tx, _ = py.send(frame, float(now))
            assert c.send(frame.machine, int(frame.type), int(frame.sub), frame.data, now) == 0
            sent = frame
            c_event = None
        elif op in (1, 2):  # an answer: OK or negative, to ours or to another sub-command
            if sent is None:
                continue
            sub = int(sent.sub) if arg % 5 else 0x22
            status = 0 if op == 1 else 1 + arg % 5
            ans = action_frame.encode(ActionFrame(sent.machine, int(sent.type) + 0x10, sub,
                                                  bytes([status])))
            py_events = py.on_answer(action_frame.decode(ans), float(now))
            c_event = c.on_answer(ans, now)
        else:  # time passes, then poll
            now += arg % (2 * timeout)
            py_events = py.poll(float(now))
            c_event = c.poll(now)
        kinds = {Retransmit: "retransmit", Delivered: "delivered", Failed: "failed"}
        assert [kinds[type(e)] for e in py_events] == ([] if c_event is None else [c_event])
        py_tx += b"".join(e.data for e in py_events if isinstance(e, Retransmit))
        assert c.take_tx() == py_tx
        assert c.busy == py.busy
        # The C sender sends no reads (no result_timeout): it has no missing_results.
        py_stats = py.stats.as_dict()
        assert py_stats.pop("missing_results") == 0
        assert c.stats == py_stats


# -- actuator --------------------------------------------------------------------
@given(st.binary(min_size=8, max_size=8))
def test_actuator_both_ways(firmware: Firmware, raw: bytes) -> None:
    fields = firmware.actuator_unpack(raw)
    value = actuator.decode(raw)
    assert fields == (value.angle, value.speed, value.current, value.module_id,
                      int(value.command), int(value.fault), value.reserved_a, value.reserved_b)
    assert firmware.actuator_pack(fields) == raw == actuator.encode(value)
