"""The sum-8 receiver: chunking invariance, noise, backtracking, bounds, counters."""

from __future__ import annotations

import itertools
import json
import random
import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bench.baselines.seed_getonebyte import SeedGetOneByte
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver, decode_columns
from tests.conftest import FIXTURES

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
odom_frames = st.builds(odom_frame.OdomFrame, finite32, finite32, finite32, finite32)
# Noise rich in the header's bytes, plus truncated frames.
noise_byte = st.sampled_from([0xAA, 0x55, 0xAA, 0x00, 0xFF]) | st.integers(0, 255)
noise = st.lists(noise_byte, max_size=40).map(bytes)


def key(frame: object) -> bytes:
    """A frame's float32 bit patterns. Not re-encoding: a signalling NaN comes
    back quieted from any float32 -> float round trip, so only frames decoded
    from the same bytes compare equal, which is what the tests need."""
    return struct.pack("<4f", *odom_frame.CODEC.values(frame))  # type: ignore[arg-type]


def feed_all(rx: Sum8Receiver, chunks: list[bytes]) -> list[tuple[int, bytes]]:
    out = []
    for c in chunks:
        out += [(r.offset, key(r.frame)) for r in rx.feed(c)]
    rx.finish()
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts}) if data else []
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@st.composite
def noisy_streams(draw: st.DrawFn) -> tuple[bytes, list[int], list[bytes]]:
    frames = draw(st.lists(odom_frames, min_size=1, max_size=12))
    parts: list[bytes] = []
    offsets: list[int] = []
    encoded: list[bytes] = []
    pos = 0
    for f in frames:
        raw = odom_frame.encode(f)
        kind = draw(st.integers(0, 3))
        junk = draw(noise) if kind == 0 else raw[: draw(st.integers(1, 18))] if kind == 1 else b""
        if kind == 2:
            junk = b"\xaa\x55" + draw(noise)
        parts.append(junk)
        pos += len(junk)
        parts.append(raw)
        offsets.append(pos)
        encoded.append(raw)
        pos += len(raw)
    parts.append(draw(noise))
    return b"".join(parts), offsets, encoded


@given(noisy_streams(), st.lists(st.integers(0, 10_000), max_size=30))
def test_every_intact_frame_recovered_under_any_chunking(stream, cuts) -> None:  # type: ignore[no-untyped-def]
    data, offsets, encoded = stream
    results = []
    for chunks, threshold in (
        ([data], 512),
        ([data], 0),  # force the numpy scanner even on short input
        ([bytes([b]) for b in data], 512),
        (split(data, cuts), 512),
        (split(data, cuts), 0),
    ):
        rx = Sum8Receiver(odom_frame.CODEC)
        rx.vector_threshold = threshold
        got = feed_all(rx, chunks)
        found = dict(got)
        for off, raw in zip(offsets, encoded):
            assert found.get(off) == key(odom_frame.decode(raw)), f"frame at {off} lost"
        assert rx.stats.bytes == len(data)
        assert rx.stats.frames == len(got)
        for off, bits in got:  # the fast path agrees with the construct schema
            wire = data[off : off + odom_frame.SIZE]
            odom_frame.CODEC.check(wire)  # a whole, valid frame is on the wire there
            assert key(odom_frame.CODEC.decode_with_schema(wire)) == bits
        results.append((got, rx.stats.as_dict()))
    assert all(r == results[0] for r in results), "chunking changed frames or counters"


@given(st.binary(max_size=600), st.lists(st.integers(0, 1000), max_size=10))
def test_garbage_never_raises_and_buffer_stays_bounded(data: bytes, cuts: list[int]) -> None:
    rx = Sum8Receiver(cmd_frame.CODEC)
    for chunk in split(data, cuts):
        rx.feed(chunk)
        assert rx.pending < cmd_frame.SIZE
    rx.finish()
    assert rx.pending == 0
    # Every byte is in a reported frame or counted as discarded.
    covered = rx.stats.frames * cmd_frame.SIZE
    assert rx.stats.discarded + covered >= len(data)
    if rx.stats.overlapping == 0:
        assert rx.stats.discarded + covered == len(data)


def test_aa_aa_55_regression() -> None:
    """Seed fault 1: ``AA AA 55 …`` resets the seed's machine and loses the frame."""
    raw = odom_frame.encode(odom_frame.OdomFrame(0.5, 0.0, 0.1, 30.0))
    data = b"\xaa" + raw
    seed = SeedGetOneByte(odom_frame.SIZE, odom_frame.CODEC.make)
    assert seed.feed(data) == []  # the baseline loses it...
    rx = Sum8Receiver(odom_frame.CODEC)
    (got,) = rx.feed(data)  # ...we do not
    assert got.offset == 1 and odom_frame.encode(got.frame) == raw
    assert rx.stats.discarded == 1 and rx.stats.resyncs == 1


def test_false_header_within_17_bytes_of_real_frame() -> None:
    """Seed fault 2: a false ``AA 55`` swallows the real frame that starts inside it."""
    raw = odom_frame.encode(odom_frame.OdomFrame(-0.25, 0.75, 1.0, -45.0))
    data = b"\xaa\x55\x01\x02\x03" + raw + raw
    seed = SeedGetOneByte(odom_frame.SIZE, odom_frame.CODEC.make)
    assert len(seed.feed(data)) < 2
    rx = Sum8Receiver(odom_frame.CODEC)
    got = rx.feed(data)
    assert [r.offset for r in got] == [5, 24]
    assert rx.stats.checksum_errors == 1
    assert rx.stats.discarded == 5


def test_false_accept_cannot_swallow_the_real_frame() -> None:
    """A noise candidate whose checksum happens to match overlaps a real frame."""
    real = odom_frame.encode(odom_frame.OdomFrame(0.1, 0.2, 0.3, 45.0))
    # Build noise "AA 55 x" so that the 19 bytes from the noise header sum right.
    for lead in range(256):
        data = b"\xaa\x55" + bytes([lead]) + real
        if sum(data[2:18]) & 0xFF == data[18]:
            break
    else:  # pragma: no cover
        raise AssertionError("no colliding lead byte")
    rx = Sum8Receiver(odom_frame.CODEC)
    got = rx.feed(data)
    assert [r.offset for r in got] == [0, 3]  # the false frame AND the real one
    assert rx.stats.overlapping == 1


def test_payload_false_header_is_not_an_error() -> None:
    # A vx whose bytes contain AA 55: the candidate inside the frame is payload.
    vx = struct.unpack("<f", b"\x00\xaa\x55\x3e")[0]
    raw = odom_frame.encode(odom_frame.OdomFrame(vx, 0.0, 0.0, 0.0))
    rx = Sum8Receiver(odom_frame.CODEC)
    for b in raw + raw:
        rx.feed(bytes([b]))
    rx.finish()
    assert rx.stats.frames == 2
    assert rx.stats.checksum_errors == 0 and rx.stats.discarded == 0


def test_noisy_capture_fixture() -> None:
    data = (FIXTURES / "odom_noisy.bin").read_bytes()
    expected = json.loads((FIXTURES / "odom_noisy.json").read_text())
    rx = Sum8Receiver(odom_frame.CODEC)
    got = rx.feed(data)
    rx.finish()
    assert [r.offset for r in got] == [f["offset"] for f in expected["frames"]]
    assert rx.stats.as_dict() == expected["stats"]
    assert len(got) == 300  # the capture holds 300 intact frames
    seed = SeedGetOneByte(odom_frame.SIZE, odom_frame.CODEC.make)
    assert len(seed.feed(data)) < 280  # the seed's receiver loses a tenth of them


def test_decode_columns_matches_streaming() -> None:
    rnd = random.Random(3)
    parts = []
    for _ in range(500):
        parts.append(bytes(rnd.choice([0xAA, 0x55, rnd.randrange(256)])
                           for _ in range(rnd.randrange(0, 8))))
        vals = [rnd.uniform(-2, 2) for _ in range(4)]
        parts.append(odom_frame.encode(odom_frame.OdomFrame(*vals)))
    data = b"".join(parts)
    rx = Sum8Receiver(odom_frame.CODEC)
    got = []
    for i in range(0, len(data), 700):
        got += rx.feed(data[i : i + 700])
    rx.finish()
    cols = decode_columns(odom_frame.CODEC, data)
    assert cols.offset.tolist() == [r.offset for r in got]
    assert cols.stats == rx.stats
    yaw = np.array([r.frame.yaw_deg for r in got], dtype=np.float32)
    assert np.array_equal(cols.fields["yaw_deg"], yaw)


def test_nonfinite_frames_counted() -> None:
    nan = odom_frame.encode(odom_frame.OdomFrame(float("nan"), 0, 0, 0), allow_nonfinite=True)
    ok = odom_frame.encode(odom_frame.OdomFrame(0, 0, 0, 0))
    for threshold in (512, 0):
        rx = Sum8Receiver(odom_frame.CODEC)
        rx.vector_threshold = threshold
        got = rx.feed(nan + ok + nan)
        assert len(got) == 3 and rx.stats.nonfinite == 2


def test_huge_finite_values_are_not_counted_nonfinite() -> None:
    """The small scanner screens the floats' high bytes for 7F/FF: a finite value with
    such a byte (3e38), and an offset with one, are finite frames."""
    huge = odom_frame.encode(odom_frame.OdomFrame(3e38, -3e38, 1.0, 0.0))
    pad = b"\x00" * (0x7F000000 % 19)  # a stream offset whose byte 3 is 7F after the skip
    for threshold in (512, 0):
        rx = Sum8Receiver(odom_frame.CODEC)
        rx.vector_threshold = threshold
        rx._base = rx._covered = 0x7F000000 - len(pad)  # as if that much had gone by
        got = rx.feed(pad + huge + huge)
        assert [r.offset for r in got] == [0x7F000000, 0x7F000000 + 19]
        assert rx.stats.nonfinite == 0 and got[0].vx == np.float32(3e38)


def test_record_reads_as_the_flat_tuple() -> None:
    """A record is its bytes (offset int64, then the fields as on the wire) and reads as
    the named, flat tuple ``(offset, fields...)``: names, iteration, indexing, length,
    comparisons and hash are the tuple's; ``frame`` is the frame object."""
    frame = odom_frame.OdomFrame(0.5, -1.0, 0.25, 90.0)
    wire = odom_frame.encode(frame)
    for threshold in (512, 0):
        rx = Sum8Receiver(odom_frame.CODEC)
        rx.vector_threshold = threshold
        (r,) = rx.feed(b"\x01\x02" + wire)
        flat = (2, 0.5, -1.0, 0.25, 90.0)
        assert (r.offset, r.vx, r.vy, r.wz, r.yaw_deg) == flat == tuple(r)
        assert r[0] == 2 and r[1:] == flat[1:] and r[-1] == 90.0 and len(r) == 5
        offset, *fields = r
        assert offset == 2 and fields == list(flat[1:]) and 0.25 in r
        assert r == flat and hash(r) == hash(flat) and r != (3, *flat[1:])
        assert r < (3, 0.0, 0.0, 0.0, 0.0) and r > (1, 9.0, 9.0, 9.0, 9.0)
        assert r.frame == frame and r.frame.yaw_rad == frame.yaw_rad
        assert r._asdict() == dict(zip(("offset", *odom_frame.FIELDS), flat))
        assert repr(r) == "OdomReceived(offset=2, vx=0.5, vy=-1.0, wz=0.25, yaw_deg=90.0)"
        assert bytes(r) == struct.pack("<q", 2) + wire[2:-1]
        assert type(r) is rx.record and type(r).__name__ == "OdomReceived"
    cmd = cmd_frame.CmdFrame(0.5, 0.25, -2.0)
    (c,) = Sum8Receiver(cmd_frame.CODEC).feed(cmd_frame.encode(cmd))
    assert c.frame == cmd and len(c) == 4 and c._fields == ("offset", "vx", "vy", "wz")


def test_a_kept_record_gives_the_collector_nothing_to_walk() -> None:
    """Each frame kept is one object whose only reference is its class (a tuple of
    numbers referred to an object per number, and a collection walked them all)."""
    import gc

    data = odom_frame.encode(odom_frame.OdomFrame(1.0, 2.0, 3.0, 4.0)) * 40
    for threshold in (512, 0):
        rx = Sum8Receiver(odom_frame.CODEC)
        rx.vector_threshold = threshold
        got = rx.feed(data)
        assert len(got) == 40
        assert all(gc.get_referents(r) == [rx.record] for r in got)


# Frames with NaN and infinities among finite ones: the counters must agree too.
any32 = st.floats(width=32)
wild_frames = st.builds(odom_frame.OdomFrame, any32, any32, any32, any32).map(
    lambda f: odom_frame.encode(f, allow_nonfinite=True))


@given(st.lists(wild_frames | noise, max_size=14).map(b"".join),
       st.lists(st.integers(0, 10_000), max_size=30), st.sampled_from([512, 0]))
def test_records_and_columns_match_the_description_receiver(
        data: bytes, cuts: list[int], threshold: int) -> None:
    """The flat records of ``feed`` and the batches of ``feed_columns`` (the private fast
    paths) give, for any chunking, the frames and counters of the receiver built from
    the odometry description (the generic path)."""
    from fwbridge.protocols.descriptions.builtin import builtin
    from fwbridge.protocols.engine import receiver_for
    from fwbridge.protocols.engine.fixed_receiver import FixedReceiver

    generic = receiver_for(builtin("odom"), generic=True)  # the factory's two paths
    assert isinstance(generic, FixedReceiver)
    want = []
    for c in split(data, cuts):
        want += [(r.offset, struct.pack("<4f", *r.frame)) for r in generic.feed(c)]
    generic.finish()
    counters = {k: v for k, v in generic.stats.as_dict().items() if k != "trailer_errors"}

    rx = receiver_for(builtin("odom"))
    assert isinstance(rx, Sum8Receiver) and rx.codec is odom_frame.CODEC
    rx.vector_threshold = threshold
    cols = receiver_for(odom_frame.CODEC)
    cols.vector_threshold = threshold  # both scanners of feed_columns too
    got, batched = [], []
    for c in split(data, cuts):
        records = rx.feed(c)
        for r in records:
            assert r.frame == odom_frame.OdomFrame(*r[1:]) or r.frame.nonfinite
            assert (r.vx, r.vy, r.wz, r.yaw_deg) == tuple(r[1:]) or r.frame.nonfinite
            got.append((r.offset, struct.pack("<4f", *r[1:])))
        b = cols.feed_columns(c)
        # the batch's records are feed's, byte for byte (NaN payloads included)
        assert list(map(bytes, cols.records(b))) == list(map(bytes, records))
        values = np.stack([b.fields[k] for k in odom_frame.FIELDS], axis=1).astype("<f4")
        batched += [(o, v.tobytes()) for o, v in zip(b.offset.tolist(), values)]
    rx.finish()
    cols.finish()
    assert got == want
    assert batched == want
    assert rx.stats.as_dict() == counters
    assert cols.stats.as_dict() == counters
