"""The action-frame receiver: worked example, chunking, noise, backtracking, bounds, counters."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.baselines.patent_receiver import PatentReceiver
from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.engine.kernels.action_receiver import (
    ActionReceived,
    ActionReceiver,
    Rejected,
)
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.families import action_group
from fwbridge.protocols.hextext import parse_hex
from tests.conftest import FIXTURES

EXAMPLE = parse_hex((FIXTURES / "patent_example.hex").read_text())
SPECIAL = [b"\xfd\xdf", b"\xfe\xef", b"\xfe\xff", b"\xfe", b"\xfd"]

# Data that often holds the trailer and header bytes.
data_part = st.binary(max_size=24) | st.sampled_from(SPECIAL)
frame_data = st.lists(data_part, max_size=6).map(b"".join)
frames = st.builds(ActionFrame, st.integers(0, 255), st.integers(0, 255), st.integers(0, 255),
                   frame_data)
noise_byte = st.sampled_from([0xFE, 0xEF, 0xFD, 0xDF, 0xFF, 0x00]) | st.integers(0, 255)
noise = st.lists(noise_byte, max_size=30).map(bytes)


def run(rx: ActionReceiver, chunks: list[bytes]) -> list[ActionReceived]:
    out: list[ActionReceived] = []
    for c in chunks:
        out += rx.feed(c)
    out += rx.finish()
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts}) if data else []
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def chunkings(data: bytes, cuts: list[int]) -> list[list[bytes]]:
    return [[data], [bytes([b]) for b in data], split(data, cuts)]


@st.composite
def noisy_streams(draw: st.DrawFn) -> tuple[bytes, list[int], list[ActionFrame]]:
    """Frames with junk between them: noise, truncated or damaged frames, false headers."""
    parts: list[bytes] = []
    offsets: list[int] = []
    sent: list[ActionFrame] = []
    pos = 0
    for frame in draw(st.lists(frames, min_size=1, max_size=8)):
        raw = af.encode(frame)
        kind = draw(st.integers(0, 5))
        if kind == 0:
            junk = draw(noise)
        elif kind == 1:  # a truncated frame
            junk = raw[: draw(st.integers(1, len(raw) - 1))]
        elif kind == 2:  # a false header whose length points far beyond
            junk = b"\xfe\xef" + bytes([1, 6]) + draw(st.integers(0, 1100)).to_bytes(2, "little")
        elif kind == 3:  # a damaged frame (one byte changed)
            bad = bytearray(raw)
            k = draw(st.integers(2, len(raw) - 1))
            bad[k] ^= draw(st.integers(1, 255))
            junk = bytes(bad)
        else:
            junk = b""
        parts += [junk, raw]
        pos += len(junk)
        offsets.append(pos)
        sent.append(frame)
        pos += len(raw)
    parts.append(draw(noise))
    return b"".join(parts), offsets, sent


# -- the worked example ---------------------------------------------------------
def test_worked_example_relaxed() -> None:
    rx = ActionReceiver(relaxed=True)
    got = run(rx, [EXAMPLE])
    assert len(got) == 1
    item = got[0]
    assert item.offset == 0 and item.defects == ("header", "crc")
    f = item.frame
    assert (f.machine, f.type, f.length, f.sub) == (0, 0x06, 69, 0x32)
    servos = [(s.servo_id, s.speed, s.angle)
              for step in action_group.from_frame(f).steps for s in step.servos]
    assert servos == [(1, 80, 60), (2, 60, 50), (3, 30, 20), (1, 80, -60), (2, 60, -50),
                      (3, 30, -20)]
    assert rx.stats.relaxed_accepts == 1 and rx.stats.frames == 1


def test_worked_example_strict_is_rejected_with_reasons_counted() -> None:
    rx = ActionReceiver()
    assert rx.relaxed is False
    assert run(rx, [EXAMPLE]) == []
    st_ = rx.stats
    assert (st_.header_errors, st_.checksum_errors, st_.frames) == (1, 1, 0)
    assert st_.discarded == len(EXAMPLE)
    assert (st_.length_errors, st_.trailer_errors, st_.relaxed_accepts) == (0, 0, 0)


def test_worked_example_among_strict_frames_in_relaxed_mode() -> None:
    good = af.encode(ActionFrame(3, 4, 0x21, b"\x01\xfd\xdf"))
    stream = good + b"\x00\xfe" + EXAMPLE + good
    for rx in (ActionReceiver(relaxed=True), ActionReceiver()):
        got = run(rx, [stream])
        offsets = [r.offset for r in got]
        if rx.relaxed:
            assert offsets == [0, len(good) + 2, len(good) + 2 + len(EXAMPLE)]
            assert [r.defects for r in got] == [(), ("header", "crc"), ()]
        else:
            assert offsets == [0, len(good) + 2 + len(EXAMPLE)]


# -- properties -------------------------------------------------------------------
@given(noisy_streams(), st.lists(st.integers(0, 10_000), max_size=30))
@settings(max_examples=150, deadline=None)
def test_every_intact_frame_recovered_under_any_chunking(stream, cuts) -> None:  # type: ignore[no-untyped-def]
    data, offsets, sent = stream
    results = []
    for chunks in chunkings(data, cuts):
        rx = ActionReceiver()
        got = run(rx, chunks)
        found = {r.offset: r.frame for r in got}
        for off, frame in zip(offsets, sent):
            assert found.get(off) == frame, f"frame at {off} lost"
        # every byte is in a frame or discarded
        assert rx.stats.bytes == len(data)
        assert rx.stats.discarded + sum(af.OVERHEAD + r.frame.length for r in got) == len(data)
        assert rx.pending == 0
        results.append((got, rx.stats.as_dict()))
    assert all(r == results[0] for r in results), "chunking changed the output or counters"


@given(st.lists(frames, max_size=6), st.lists(st.integers(0, 10_000), max_size=20))
@settings(max_examples=100, deadline=None)
def test_clean_stream_back_to_back(sent, cuts) -> None:  # type: ignore[no-untyped-def]
    data = b"".join(af.encode(f) for f in sent)
    for chunks in chunkings(data, cuts):
        rx = ActionReceiver()
        assert [r.frame for r in run(rx, chunks)] == sent
        assert rx.stats.discarded == rx.stats.resyncs == 0
        assert rx.stats.header_errors == rx.stats.checksum_errors == rx.stats.trailer_errors == 0


@given(st.binary(max_size=600), st.lists(st.integers(0, 10_000), max_size=20), st.booleans())
@settings(max_examples=200, deadline=None)
def test_garbage_never_raises_and_is_accounted(data, cuts, relaxed) -> None:  # type: ignore[no-untyped-def]
    outs = []
    for chunks in chunkings(data, cuts):
        rx = ActionReceiver(relaxed=relaxed, keep_rejects=True, max_length=64)
        got = run(rx, chunks)
        assert rx.stats.discarded + sum(af.OVERHEAD + r.frame.length for r in got) == len(data)
        outs.append((got, rx.stats.as_dict(), rx.take_rejects()))
    assert all(o == outs[0] for o in outs)


@given(frames, st.sampled_from([b"\xfe\xef", b"\xfe\xff"]), noise)
@settings(max_examples=100, deadline=None)
def test_frame_inside_frame_data_is_data(inner, head, junk) -> None:  # type: ignore[no-untyped-def]
    inner_raw = head + af.encode(inner)[2:]
    outer = ActionFrame(1, 6, 0x35, junk + inner_raw + junk)
    raw = af.encode(outer)
    for relaxed in (False, True):
        got = run(ActionReceiver(relaxed=relaxed), [raw])
        assert [(r.offset, r.frame) for r in got] == [(0, outer)]


# -- examples ---------------------------------------------------------------------
def test_trailer_and_header_bytes_in_data_survive_and_patent_loses_them() -> None:
    payloads = [b"\xfd\xdf", b"\x01\xfd\xdf\x02", b"\xfe\xef\x00\x06", b"\xfd\xdf" * 10,
                af.encode(ActionFrame(0, 1, 2, b"nested"))]
    sent = [ActionFrame(k, 6, 0x32, p) for k, p in enumerate(payloads)]
    data = b"".join(af.encode(f) for f in sent)
    assert [r.frame for r in run(ActionReceiver(), [data])] == sent
    patent = PatentReceiver()
    got = patent.feed(data)
    # it ends each packet at the first FD DF: every frame with FD DF in its data is lost
    assert got == [f for f in sent if b"\xfd\xdf" not in f.data] == [sent[2]]
    assert patent.length_errors >= 4


def test_patent_receiver_is_a_working_baseline() -> None:
    rnd = random.Random(5)
    sent = []
    for k in range(200):
        d = rnd.randbytes(rnd.randrange(0, 60))
        f = ActionFrame(k % 256, 6, 0x32, d)
        raw = af.encode(f)
        if b"\xfd\xdf" not in raw[2:-2]:
            sent.append(f)
    data = b"".join(af.encode(f) for f in sent)
    rx = PatentReceiver()
    assert [f for c in split(data, list(range(0, len(data), 97))) for f in rx.feed(c)] == sent


def test_false_header_in_noise_loses_the_next_frame_for_the_patent_only() -> None:
    frame = ActionFrame(2, 5, 0x21, b"\x10\x20\x30")
    data = b"\x00\xfe\xef\x07\x01\x09" + af.encode(frame)
    got = run(ActionReceiver(), [data])
    assert [(r.offset, r.frame) for r in got] == [(6, frame)]
    assert PatentReceiver().feed(data) == []


def test_long_false_length_holds_output_until_finish_then_recovers() -> None:
    frame = ActionFrame(1, 6, 0x32, b"abc")
    false = b"\xfe\xef\x01\x06\x00\x04"  # length 1024: the maximum, far past the stream
    data = false + af.encode(frame) * 3
    rx = ActionReceiver()
    assert rx.feed(data) == []
    assert 0 < rx.pending < af.OVERHEAD + rx.max_length
    got = rx.finish()
    assert [r.offset for r in got] == [6, 20, 34]
    assert rx.stats.truncated == 1 and rx.stats.discarded == 6 and rx.stats.resyncs == 1


def test_each_rejection_is_counted_apart_and_reported() -> None:
    good = ActionFrame(4, InstructionType.WRITE_PC, SubCommand.STAND_STILL, b"\x01\x02")
    raw = af.encode(good)
    bad_trailer = raw[:-1] + b"\x00"
    bad_crc = raw[:7] + b"\x09" + raw[8:]
    too_long = b"\xfe\xef\x04\x06" + (2000).to_bytes(2, "little") + b"\x02"
    alt_header = b"\xfe\xff" + raw[2:]  # right CRC: only the header is wrong
    truncated = raw[:9]
    data = bad_trailer + raw + bad_crc + raw + too_long + raw + alt_header + raw + truncated
    rx = ActionReceiver(keep_rejects=True)
    got = run(rx, [data])
    assert [r.frame for r in got] == [good] * 4
    s = rx.stats
    assert (s.trailer_errors, s.checksum_errors, s.length_errors, s.header_errors, s.truncated) == (
        1, 1, 1, 1, 1)
    assert s.resyncs == 4 and s.frames == 4
    reasons = [(r.reason, r.machine, r.type, r.sub) for r in rx.take_rejects()]
    stand = SubCommand.STAND_STILL
    assert reasons == [("trailer", 4, 6, stand), ("crc", 4, 6, stand), ("length", 4, 6, stand),
                       ("truncated", 4, 6, stand)]
    assert rx.take_rejects() == []


def test_rejected_offsets_are_stream_offsets() -> None:
    raw = af.encode(ActionFrame(1, 2, 3, b"x"))
    data = raw + raw[:-1] + b"\x00" + raw
    rx = ActionReceiver(keep_rejects=True)
    for b in data:
        rx.feed(bytes([b]))
    rx.finish()
    assert rx.rejects == [Rejected(len(raw), "trailer", 1, 2, 3)]


def test_max_length_is_configurable() -> None:
    frame = ActionFrame(0, 6, 0x35, bytes(2000))
    raw = af.encode(frame)
    rx = ActionReceiver()
    assert run(rx, [raw]) == [] and rx.stats.length_errors == 1
    assert [r.frame for r in run(ActionReceiver(max_length=4096), [raw])] == [frame]
    small = ActionReceiver(max_length=0)
    empty = ActionFrame(0, 1, 2)
    assert [r.frame for r in run(small, [af.encode(empty)])] == [empty]


def test_buffer_stays_bounded_under_noise() -> None:
    rnd = random.Random(7)
    rx = ActionReceiver(max_length=200)
    for _ in range(3000):
        size = rnd.randrange(1, 40)
        chunk = bytes(rnd.choice((0xFE, 0xEF, rnd.randrange(256))) for _ in range(size))
        rx.feed(chunk)
        assert rx.pending < af.OVERHEAD + 200
    rx.finish()
    assert rx.pending == 0


def test_crc_preset_per_link() -> None:
    frame = ActionFrame(0, 6, 0x32, b"\x00\x01")
    raw = af.encode(frame, crc="xmodem")
    assert [r.frame for r in run(ActionReceiver(crc="xmodem"), [raw])] == [frame]
    rx = ActionReceiver()
    assert run(rx, [raw]) == [] and rx.stats.checksum_errors == 1


def test_other_alternative_headers() -> None:
    frame = ActionFrame(0, 6, 0x32, b"\x00\x01")
    raw = b"\xaa\xbb" + af.encode(frame)[2:]
    rx = ActionReceiver(relaxed=True, alt_headers=[b"\xaa\xbb", b"\xfe\xff"])
    got = run(rx, [b"\xaa" + raw])
    assert [(r.offset, r.frame, r.defects) for r in got] == [(1, frame, ("header",))]
    strict = ActionReceiver(alt_headers=[b"\xaa\xbb"])
    assert run(strict, [raw]) == [] and strict.stats.header_errors == 1
    blind = ActionReceiver(alt_headers=())
    assert run(blind, [EXAMPLE]) == [] and blind.stats.header_errors == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"max_length": -1}, {"max_length": 70000}, {"max_length": "9"}, {"crc": "crc-99"},
     {"alt_headers": [b"\xfe"]}],
)
def test_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ActionReceiver(**kwargs)  # type: ignore[arg-type]


def test_benchmark_runs_and_loses_nothing() -> None:
    from bench import bench_action_receiver

    results = bench_action_receiver.main(["--frames", "400"])
    for label in ("clean", "5% garbage"):
        ours = results[f"{label}: fwbridge ActionReceiver"]
        assert ours["recovered"] == ours["intact"] == 400
    patent = results["5% garbage: patent receiver (baseline)"]
    assert patent["recovered"] < patent["intact"]
