"""Receivers built from descriptions: round trips, chunking, backtracking, the schema as judge."""

from __future__ import annotations

import math
import random
import re
import struct
from typing import Any

import numpy as np
from construct import ConstructError
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols import action_frame, odom_frame
from fwbridge.protocols.checksums import algorithm, algorithm_names
from fwbridge.protocols.described import receiver_for
from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import FrameDescription, load, loads
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.fixed_checks import crc_rows
from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.engine.length_receiver import LengthReceiver
from fwbridge.protocols.errors import FrameError
from tests.conftest import FIXTURES
from tests.frame_strategies import descriptions, feed, frame_bytes, raw_values, streams


def reference(codec: FrameCodec[Any], buf: bytes) -> list[tuple[int, Any]]:
    """The frames in ``buf`` by brute force, the construct schema deciding each candidate."""
    d = codec.desc
    out: list[tuple[int, Any]] = []
    pos = 0
    while True:
        i = buf.find(d.header, pos)
        if i < 0:
            return out
        pos = i + 1
        if d.length is None:
            assert d.size is not None
            if i + d.size > len(buf):
                continue
            size = d.size
        else:
            at = codec.len_offset
            if i + at + codec.len_struct.size > len(buf):
                continue
            value = codec.len_struct.unpack_from(buf, i + at)[0]
            if value > d.length.max or value < d.data_bias:
                continue
            size = d.overhead + value - d.data_bias
            if i + size > len(buf):
                continue
        try:
            frame = codec.decode_with_schema(buf[i:i + size])
        except (FrameError, ConstructError):
            continue
        out.append((i, frame))
        if d.length is not None:
            pos = i + size  # length-directed receivers skip an accepted frame whole


@settings(max_examples=60)
@given(st.data(), descriptions())
def test_encode_decode_round_trip_for_random_descriptions(data: st.DataObject,
                                                          desc: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    raw = data.draw(raw_values(codec))
    wire, frame = frame_bytes(codec, raw)
    assert codec.encode_with_schema(frame, allow_nonfinite=True) == wire
    back = codec.decode(wire)
    assert back == codec.decode_with_schema(wire)
    assert codec.encode(back, allow_nonfinite=True) == wire
    assert len(wire) == (desc.size if desc.size is not None else len(wire))


@settings(max_examples=60)
@given(st.data(), descriptions())
def test_receiver_matches_the_schema_for_any_chunking(data: st.DataObject,
                                                      desc: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    stream, offsets, frames = data.draw(streams(codec))
    want = reference(codec, stream)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    rx = receiver_for(codec)
    got = feed(rx, stream, cuts)
    assert repr(got) == repr(want)  # repr: NaN fields (in false accepts) compare unequal
    whole = receiver_for(codec)
    assert repr(feed(whole, stream, [])) == repr(want)
    assert rx.stats.as_dict() == whole.stats.as_dict()
    assert rx.pending == 0 and rx.stats.bytes == len(stream)
    if isinstance(rx, FixedReceiver):  # the numpy scanner, forced on every chunk
        vec = FixedReceiver(codec)
        vec.vector_threshold = 1
        assert repr(feed(vec, stream, cuts)) == repr(want)
        assert vec.stats.as_dict() == rx.stats.as_dict()
        blocks = FixedReceiver(codec)  # candidates judged one block of one at a time
        blocks.vector_threshold, blocks.block_bytes = 1, 1
        assert repr(feed(blocks, stream, cuts)) == repr(want)
        assert blocks.stats.as_dict() == rx.stats.as_dict()
    if desc.length is None:
        # every header position is a candidate: no intact frame can be lost
        found = dict(got)
        for off, frame in zip(offsets, frames):
            assert found.get(off) == frame


@settings(max_examples=40)
@given(st.data(), descriptions(variable=True, algorithms=("crc-32", "crc-ccitt-false")))
def test_length_directed_receiver_finds_every_frame_with_a_strong_check(
        data: st.DataObject, desc: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    if desc.checksum is None:
        return
    stream, offsets, frames = data.draw(streams(codec))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    got = dict(feed(receiver_for(codec), stream, cuts))
    for off, frame in zip(offsets, frames):
        assert got.get(off) == frame


def test_fixed_receiver_agrees_with_the_odometry_receiver_on_the_noisy_capture() -> None:
    data = (FIXTURES / "odom_noisy.bin").read_bytes()
    codec: FrameCodec[Any] = FrameCodec(builtin("odom"))
    rnd = random.Random(5)
    for _ in range(6):
        cuts = sorted(rnd.randrange(len(data)) for _ in range(rnd.randrange(1, 200)))
        a, b = FixedReceiver(codec), Sum8Receiver(odom_frame.CODEC)
        got_a, got_b = feed(a, data, cuts), feed(b, data, cuts)
        assert [o for o, _ in got_a] == [o for o, _ in got_b]
        assert [tuple(vars_of(f)) for _, f in got_a] == [tuple(vars_of(f)) for _, f in got_b]
        stats = a.stats.as_dict()
        assert stats.pop("trailer_errors") == 0
        assert stats == b.stats.as_dict()


def vars_of(frame: Any) -> list[Any]:
    return [getattr(frame, k) for k in odom_frame.FIELDS]


def test_length_receiver_agrees_with_the_action_receiver() -> None:
    rnd = random.Random(9)
    parts = []
    for _ in range(200):
        if rnd.random() < 0.3:
            parts.append(bytes(rnd.choice((0xFE, 0xEF, 0xFD, 0xDF, rnd.randrange(256)))
                               for _ in range(rnd.randrange(1, 20))))
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
        parts.append(action_frame.encode(action_frame.ActionFrame(
            rnd.randrange(256), rnd.randrange(256), rnd.randrange(256), data)))
    stream = b"".join(parts)
    for chunk in (1, 7, 300, len(stream)):
        cuts = list(range(chunk, len(stream), chunk))
        a = LengthReceiver(FrameCodec(builtin("action")))  # the description's FE FF
        b = ActionReceiver()  # the kernel's own default: FE FF too
        got_a, got_b = feed(a, stream, cuts), feed(b, stream, cuts)
        assert [o for o, _ in got_a] == [o for o, _ in got_b]
        assert [(f.machine, int(f.type), int(f.sub), f.data) for _, f in got_a] == [
            (f.machine, int(f.type), int(f.sub), f.data) for _, f in got_b]
        assert a.stats.as_dict() == b.stats.as_dict()


def test_a_false_header_with_a_long_length_holds_then_backtracks() -> None:
    codec: FrameCodec[Any] = FrameCodec(load(FIXTURES / "frames" / "log.toml"))
    real = codec.encode(codec.from_mapping({"level": 1, "text": b"ok", "tick": 1}))
    stream = b"\x24\x4c\xc8" + real  # a false header saying 200 bytes
    rx = LengthReceiver(codec)
    assert rx.feed(stream) == [] and rx.pending == len(stream)
    got = rx.finish()
    assert [r.offset for r in got] == [3]
    assert rx.stats.truncated == 1 and rx.stats.discarded == 3


def test_fast_path_equals_schema_on_the_user_frames() -> None:
    for name in ("imu", "log"):
        codec: FrameCodec[Any] = FrameCodec(load(FIXTURES / "frames" / f"{name}.toml"))
        rnd = random.Random(1)
        for _ in range(50):
            frame = codec.from_mapping({
                f.name: (bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 30)))
                         if f.type == "bytes" else rnd.randrange(0, 3))
                for f in codec.stored})
            wire = codec.encode(frame)
            assert wire == codec.encode_with_schema(frame)
            assert codec.decode(wire) == codec.decode_with_schema(wire)


def test_a_chunk_with_candidates_but_no_accepted_frame() -> None:
    """A whole candidate that fails its trailer leaves no accepted row: the batch scanner
    must take zero rows (it once failed to reshape them)."""
    from fwbridge.protocols.descriptions.loader import loads
    from fwbridge.protocols.engine.codec import FrameCodec

    desc = loads('[frame]\nname = "rnd"\nheader = "00 01"\ntrailer = "00"\n'
                 'byte_order = "little"\n\n[[field]]\nname = "f0"\ntype = "u64"\n', "rnd.toml")
    rx = receiver_for(FrameCodec(desc))
    stream = b"\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00" + b"\x00\x01" + bytes(8) + b"\x07"
    got = [*rx.feed(stream[:1]), *rx.feed(stream[1:]), *rx.finish()]
    assert [(r.offset, r.frame.f0) for r in got] == [(1, 0)]


@settings(max_examples=40)
@given(st.sampled_from(algorithm_names()[2:]), st.integers(0, 40), st.integers(0, 6),
       st.randoms(use_true_random=False))
def test_crc_of_every_row_at_once_equals_crcmod(name: str, n: int, rows: int,
                                                rnd: random.Random) -> None:
    """The per-position tables of the numpy scanner, for every CRC a description can name."""
    algo = algorithm(name)
    msgs = [bytes(rnd.randrange(256) for _ in range(n)) for _ in range(rows)]
    block = np.frombuffer(b"".join(msgs), np.uint8).reshape(rows, n)
    assert crc_rows(algo, block).tolist() == [algo.func(m) for m in msgs]


# -- the factory: which path, and the fast paths against the generic ones ------------------
def test_the_factory_picks_the_fast_paths_for_the_builtins_and_the_generic_ones_otherwise(
        tmp_path: Any) -> None:
    from fwbridge.protocols import cmd_frame
    from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin_text
    from fwbridge.protocols.engine import codec_for, fast_path
    from fwbridge.protocols.engine import receiver_for as build_receiver
    from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec

    picks = {name: fast_path(builtin(name)) for name in BUILTIN_NAMES}
    assert picks == {"odom": "sum8", "cmd": "sum8", "action": "action", "actuator": None}
    assert codec_for(builtin("odom")) is odom_frame.CODEC
    assert codec_for(builtin("cmd")) is cmd_frame.CODEC
    for name in ("odom", "cmd"):
        assert type(build_receiver(builtin(name))) is Sum8Receiver
        assert type(build_receiver(builtin(name), generic=True)) is FixedReceiver
        assert type(codec_for(builtin(name), generic=True)) is FrameCodec
    assert type(build_receiver(builtin("action"))) is ActionReceiver
    assert type(build_receiver(builtin("action"), generic=True)) is LengthReceiver
    assert type(codec_for(builtin("action"))) is FrameCodec
    assert type(codec_for(builtin("actuator"))) is FrameCodec
    # user descriptions: the generic path
    for name, rx_type in (("imu", FixedReceiver), ("log", LengthReceiver)):
        desc = load(FIXTURES / "frames" / f"{name}.toml")
        assert fast_path(desc) is None
        assert type(codec_for(desc)) is FrameCodec
        assert type(build_receiver(desc)) is rx_type
    assert type(codec_for(load(FIXTURES / "frames" / "wheel.toml"))) is FrameCodec
    # the shape decides, not the name: a user's copy of odom.toml under another name is fast
    copy = tmp_path / "pose.toml"
    copy.write_text(builtin_text("odom").replace('name = "odom"', 'name = "pose"'))
    pose = load(copy)
    assert fast_path(pose) == "sum8" and type(codec_for(pose)) is Sum8Codec
    assert type(build_receiver(pose)) is Sum8Receiver
    action_copy = tmp_path / "act.toml"
    action_copy.write_text(builtin_text("action").replace('"crc-ccitt-false"', '"xmodem"'))
    assert fast_path(load(action_copy)) == "action"
    assert fast_path(loads(builtin_text("action").replace('"little"\nname = "crc"',
                                                          '"big"\nname = "crc"'), "x")) is None


def _plain(frame: Any, names: tuple[str, ...]) -> str:
    """A frame's values, enum members as their ints: ``repr`` so that NaN equals NaN."""
    vals = [getattr(frame, n) for n in names]
    return repr([int(v) if isinstance(v, int) else v for v in vals])


def _same_counters(fast: dict[str, int], generic: dict[str, int]) -> None:
    fast, generic = dict(fast), dict(generic)
    if "trailer_errors" not in fast:  # sum-8 frames have no trailer
        assert generic.pop("trailer_errors") == 0
    assert fast == generic


@st.composite
def _action_stream(draw: st.DrawFn, codec: FrameCodec[Any]) -> bytes:
    """A noisy stream of the description's frames (``streams``) with frames under its
    alternative headers and frames with a wrong check mixed in, anywhere (inside other
    frames too), and garbage after the last."""
    stream, _, _ = draw(streams(codec))
    headers = [codec.desc.header, *codec.desc.alt_headers]
    for _ in range(draw(st.integers(0, 5))):
        wire, _ = frame_bytes(codec, draw(raw_values(codec)))
        wire = draw(st.sampled_from(headers)) + wire[len(codec.desc.header):]
        if draw(st.booleans()):  # a wrong check (the byte before the trailer's)
            k = len(wire) - len(codec.desc.trailer) - 1
            wire = wire[:k] + bytes([wire[k] ^ draw(st.integers(1, 255))]) + wire[k + 1:]
        at = draw(st.integers(0, len(stream)))
        stream = stream[:at] + wire + stream[at:]
    return stream + draw(st.binary(max_size=30))


def _action_rejects(rx: Any) -> list[tuple[Any, ...]]:
    """A receiver's kept rejections as the action kernel gives them: (offset, reason,
    machine, type, sub or None), none before the type was received."""
    if isinstance(rx, ActionReceiver):
        return [(r.offset, r.reason, r.machine, int(r.type), None if r.sub is None else int(r.sub))
                for r in rx.take_rejects()]
    return [(r.offset, r.reason, r.head[2], r.head[3], r.head[6] if len(r.head) > 6 else None)
            for r in rx.take_rejects() if len(r.head) >= 4]


@settings(max_examples=80)
@given(st.data(), st.sampled_from(("odom", "cmd", "action")))
def test_fast_receivers_equal_the_generic_ones_for_every_builtin(data: st.DataObject,
                                                                  name: str) -> None:
    """Same random chunked stream with garbage: the same frames and counters both ways;
    for the action frame with its options too (relaxed or strict, rejects kept), on
    streams holding frames under its alternative header ``FE FF`` and with wrong CRCs."""
    from fwbridge.protocols.engine import codec_for
    from fwbridge.protocols.engine import receiver_for as build_receiver

    desc = builtin(name)
    codec = codec_for(desc, generic=True)
    opts: dict[str, Any] = {}
    if desc.length is not None:
        stream = data.draw(_action_stream(codec))
        opts = {"relaxed": data.draw(st.booleans()), "keep_rejects": data.draw(st.booleans())}
    else:
        stream, _, _ = data.draw(streams(codec))
        stream += data.draw(st.binary(max_size=30))  # garbage after the last frame too
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    fast, generic = build_receiver(desc, **opts), build_receiver(desc, generic=True, **opts)
    assert type(fast) is not type(generic)
    if isinstance(fast, Sum8Receiver):
        fast.vector_threshold = data.draw(st.sampled_from([512, 1]))  # both scanners
    else:  # the numpy scans and the loops, in either receiver
        fast.vector_threshold = data.draw(st.sampled_from([512, 1]))
        generic.vector_threshold = data.draw(st.sampled_from([512, 1]))
    names = codec.fields

    def frames(rx: Any) -> list[Any]:
        got, prev = [], 0
        for cut in [*sorted(cuts), len(stream)]:
            got += rx.feed(stream[prev:cut])
            prev = max(prev, cut)
        got += rx.finish()
        return [(r.offset, _plain(r.frame, names), getattr(r, "defects", ())) for r in got]

    assert frames(fast) == frames(generic)
    _same_counters(fast.stats.as_dict(), generic.stats.as_dict())
    if opts:
        assert _action_rejects(fast) == _action_rejects(generic)
        if not opts["keep_rejects"]:
            assert fast.rejects == generic.rejects == []  # type: ignore[union-attr]


@settings(max_examples=80)
@given(st.data())
def test_hand_written_action_and_actuator_codecs_equal_the_generic_ones(
        data: st.DataObject) -> None:
    from fwbridge.protocols.engine import codec_for
    from fwbridge.protocols.families import actuator

    act = codec_for(builtin("action"))
    byte = st.integers(0, 255)
    frame = action_frame.ActionFrame(data.draw(byte), data.draw(byte), data.draw(byte),
                                     data.draw(st.binary(max_size=60)))
    raw = action_frame.encode(frame)
    assert act.encode(frame) == raw
    assert _plain(act.decode(raw), act.fields) == _plain(action_frame.decode(raw), act.fields)
    damaged = bytearray(raw)
    for pos, value in data.draw(st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)),
                                         max_size=2)):
        damaged[pos % len(damaged)] = value

    def outcome(decode: Any) -> Any:
        try:
            return _plain(decode(bytes(damaged)), act.fields)
        except FrameError as exc:
            return type(exc)

    assert outcome(act.decode) == outcome(action_frame.decode)
    struct8 = data.draw(st.binary(min_size=8, max_size=8))
    gen = codec_for(builtin("actuator"))
    hand = actuator.decode(struct8)
    assert _plain(gen.decode(struct8), gen.fields) == _plain(hand, gen.fields)
    assert gen.encode(hand) == actuator.encode(hand) == struct8


def test_a_fixed_receiver_record_reads_as_the_offset_frame_pair() -> None:
    """A record is its bytes (offset, then the fields as on the wire) and reads as the
    ``Received`` pair it replaced: names, iteration, indexing, comparisons, hash, pickle;
    the collector finds nothing in it but its class."""
    import gc
    import pickle

    from fwbridge.protocols.engine.codec import Received

    codec: FrameCodec[Any] = FrameCodec(builtin("odom"), odom_frame.OdomFrame)
    frame = odom_frame.OdomFrame(0.5, -1.0, 0.25, 90.0)
    wire = odom_frame.encode(frame)
    for threshold in (512, 1):  # the small loop and the numpy scanner
        rx = FixedReceiver(codec)
        rx.vector_threshold = threshold
        got = rx.feed(b"\x01\x02" + wire * 30)
        r = got[0]
        assert (r.offset, r.frame) == (2, frame) == tuple(r) == r
        offset, kept = r
        assert offset == 2 and kept == frame and r[0] == 2 and r[-1] == frame and len(r) == 2
        assert r.frame.yaw_rad == frame.yaw_rad and frame in r
        assert hash(r) == hash((2, frame)) and r != (3, frame) and r < (3, frame)
        assert r._asdict() == {"offset": 2, "frame": frame}
        assert r._replace(offset=7) == Received(7, frame)
        assert repr(r) == str(r) == f"OdomReceived(offset=2, frame={frame!r})"
        assert bytes(r) == struct.pack("<q", 2) + wire[2:-1]
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is Received and back == r
        assert type(r) is rx.record and all(gc.get_referents(x) == [rx.record] for x in got)
        assert [x.offset for x in got] == [2 + 19 * k for k in range(30)]


def test_nonfinite_frames_are_counted_alike_by_both_scanners() -> None:
    """NaN and infinite floats, and a scaled integer whose range overflows a double, in
    either byte order: both scanners count the frames the decoded values say."""
    from fwbridge.protocols.descriptions.loader import loads

    desc = loads('[frame]\nname = "nf"\nheader = "C3"\nbyte_order = "little"\n\n'
                 '[[field]]\nname = "a"\ntype = "f32"\n\n'
                 '[[field]]\nname = "b"\ntype = "f64"\nbyte_order = "big"\n\n'
                 '[[field]]\nname = "c"\ntype = "i64"\nscale = 1e300\n\n'
                 '[[field]]\nname = "d"\ntype = "i16"\nscale = 0.01\n\n'
                 '[checksum]\nalgorithm = "sum8"\n', "nf.toml")
    codec: FrameCodec[Any] = FrameCodec(desc)
    rnd = random.Random(3)
    specials = [0.0, 1.5, float("nan"), float("inf"), -float("inf")]
    wires = []
    for _ in range(300):
        body = (struct.pack("<f", rnd.choice(specials)) + struct.pack(">d", rnd.choice(specials))
                + struct.pack("<qh", rnd.choice([0, 1, 1 << 40, -(1 << 62)]),
                              rnd.randrange(-999, 999)))
        wires.append(b"\xc3" + body + bytes([sum(body) & 0xFF]))
    frames = [codec.decode(w) for w in wires]
    stream = b"".join(wires)
    intact: dict[int, Any] = {}
    pos = 0
    for w, f in zip(wires, frames):
        intact[pos] = f
        pos += len(w)
    counts = set()
    for threshold in (1 << 30, 1):
        rx = FixedReceiver(codec)
        rx.vector_threshold = threshold
        got = feed(rx, stream, list(range(0, len(stream), 37)))
        found = dict(got)
        assert repr([found[o] for o in intact]) == repr(frames)  # every frame, the NaNs too
        want = sum(1 for _, f in got if not all(math.isfinite(v) for v in (f.a, f.b, f.c)))
        assert 0 < want < len(got) and rx.stats.nonfinite == want
        counts.add(want)
    assert len(counts) == 1
    # float fields only (the screen of the small loop, one view in numpy): a few NaNs
    odom: FrameCodec[Any] = FrameCodec(builtin("odom"))
    values = [(1.0, 2.0, 3.0, 4.0)] * 40 + [(1.0, float("nan"), 3.0, 4.0),
                                            (float("-inf"), 2.0, 3.0, 4.0)]
    rnd.shuffle(values)
    wire = b"".join(odom.encode(odom.make(*v), allow_nonfinite=True) for v in values)
    for threshold in (1 << 30, 1):
        rx = FixedReceiver(odom)
        rx.vector_threshold = threshold
        assert len(feed(rx, wire, list(range(0, len(wire), 50)))) == len(values)
        assert rx.stats.nonfinite == 2


def test_a_header_in_a_frame_s_payload_cut_by_the_chunk_is_payload_in_the_next_scan() -> None:
    """A header near the end of a frame's payload, incomplete when the chunk ends, is
    what the next call starts from; its frame's bytes are covered there, so rejecting it
    is no checksum error. Every receiver and scanner agrees."""
    yaw = struct.unpack("<f", b"\x00\xaa\x55\x3f")[0]
    first = odom_frame.encode(odom_frame.OdomFrame(1.0, 2.0, 3.0, yaw))
    assert first.find(b"\xaa\x55", 2) == 15
    later = odom_frame.encode(odom_frame.OdomFrame(0.5, 0.5, 0.5, 0.5))
    stream = first + later * 40 + b"\xaa\x55\x01" + later * 40
    desc: FrameCodec[Any] = FrameCodec(builtin("odom"))
    for threshold in (1, 1 << 30):
        stats = []
        for rx in (Sum8Receiver(odom_frame.CODEC), FixedReceiver(desc)):
            rx.vector_threshold = threshold
            got = feed(rx, stream, [20])
            assert len(got) == 81
            counters = rx.stats.as_dict()
            counters.pop("trailer_errors", None)
            stats.append(counters)
        assert stats[0] == stats[1] and stats[0]["checksum_errors"] == 1, stats


def test_every_receiver_counts_in_the_one_vocabulary() -> None:
    """Same names, same meanings: the specialisations count as the shape they belong to
    (sum-8: the fixed shape without a trailer; action: the length shape, alternative
    headers and relaxed mode included), and the C receivers gen c writes count with the
    same names."""
    from fwbridge.codegen.c_receiver import rx_header
    from fwbridge.codegen.c_support import Frame
    from fwbridge.protocols.engine.fixed_columns import ColumnsReceiver
    from fwbridge.protocols.engine.receiver_counters import RECEIVER_COUNTERS, counter_names

    shapes = {
        "fixed": counter_names(FixedReceiver(FrameCodec(builtin("odom"))).stats),
        "columns": counter_names(ColumnsReceiver(FrameCodec(builtin("odom"))).stats),
        "length": counter_names(LengthReceiver(FrameCodec(builtin("action"))).stats),
        "sum8": counter_names(receiver_for(builtin("odom")).stats),
        "action": counter_names(ActionReceiver().stats),
    }
    for shape, names in shapes.items():
        assert set(names) <= set(RECEIVER_COUNTERS), (shape, set(names) - set(RECEIVER_COUNTERS))
    assert shapes["sum8"] == tuple(n for n in shapes["fixed"] if n != "trailer_errors")
    assert shapes["columns"] == shapes["fixed"]
    assert shapes["action"] == shapes["length"]
    assert {"header_errors", "relaxed_accepts"} <= set(shapes["length"])
    for desc, shape in ((builtin("odom"), "fixed"), (builtin("action"), "length")):
        header = "\n".join(rx_header(Frame(desc, "fwg_")))
        struct_body = header.split("typedef struct {", 1)[1].split("}", 1)[0]
        assert tuple(re.findall(r"uint32_t (\w+);", struct_body)) == shapes[shape]
