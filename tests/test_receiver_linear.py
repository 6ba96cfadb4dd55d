"""Every receiver is linear in its input, whatever the stream: a flood of false headers
costs a bounded amount of checksum work per byte, and the linear scans give the same
frames and counters as the per-candidate ones. No numpy warning reaches a caller."""

from __future__ import annotations

import random
import struct
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_hostile_streams import FIXED, LENGTH
from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.checksums import algorithm, algorithm_names, xor8
from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import FrameDescription, loads
from fwbridge.protocols.engine import codec_for, length_scan, receiver_for
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.fixed_columns import columns_receiver
from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver, decode_columns
from fwbridge.protocols.engine.length_receiver import LengthReceiver
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.engine.window_checks import window_checks
from tests.frame_strategies import descriptions, feed, streams


def _little_frame(name: str, header: str, check: str, fields: list[str]) -> str:
    """A little-endian frame's description, its check over the payload; ``fields`` are
    the ``[[field]]`` tables' keys."""
    return "\n".join(['[frame]', f'name = "{name}"', f'header = "{header}"',
                      'byte_order = "little"', *(f'[[field]]\n{f}' for f in fields),
                      '[checksum]', f'algorithm = "{check}"', 'span = "payload"', ''])


#: An AA 55 / float32 / sum-8 frame of 1 KiB: the sum-8 receiver's shape, made large.
SUM8 = _little_frame("wide", "AA 55", "sum8", [f'name = "f{k}"\ntype = "f32"' for k in range(256)])


def desc(text: str) -> FrameDescription:
    return loads(text, "linear.toml")


def _fixed_flood(n: int) -> bytes:
    return b"\x5a\xa5" * (n // 2)


def _length_flood(n: int) -> bytes:
    # every candidate's length field says 4096: valid, so each would be checked whole
    return b"\x5a\xa5\x00\x10" * (n // 4)


def _action_flood(n: int) -> bytes:
    # FE EF, a length of 1021 and FD DF every 8 bytes: each candidate's trailer is right
    # (11 + 1021 - 2 is 6 mod 8), so each would be CRC-checked over 1 KiB
    return b"\xfe\xef\x00\x00\xfd\x03\xfd\xdf" * (n // 8)


def _alt_flood(n: int) -> bytes:
    # the action flood under FE FF, the description's alternative header, after FE EF
    return b"\xfe\xef\x00\x00\xfd\x03\xfd\xdf\xfe\xff\x00\x00\xfd\x03\xfd\xdf" * (n // 16)


def _action_generic(**opts: Any) -> Callable[[], Any]:
    """The action description's generic receiver with a link's options."""
    return lambda: receiver_for(builtin("action"), generic=True, **opts)


def _sum8_flood(n: int) -> bytes:
    return b"\xaa\x55" * (n // 2)


def _feed_all(rx: Any, data: bytes, chunk: int) -> int:
    got = 0
    for i in range(0, len(data), chunk):
        got += len(rx.feed(data[i:i + chunk]))
    got += len(rx.finish())
    return got


def _columns_feed(rx: Any, data: bytes, chunk: int) -> int:
    got = 0
    for i in range(0, len(data), chunk):
        got += len(rx.feed_columns(data[i:i + chunk]))
    rx.finish()
    return got


SHAPES: dict[str, tuple[Callable[[], Any], Callable[[int], bytes], Callable[..., int]]] = {
    "fixed": (lambda: receiver_for(desc(FIXED)), _fixed_flood, _feed_all),
    "length": (lambda: receiver_for(desc(LENGTH)), _length_flood, _feed_all),
    "action": (lambda: ActionReceiver(), _action_flood, _feed_all),
    "action, alternative headers": (lambda: ActionReceiver(), _alt_flood, _feed_all),
    "action relaxed": (lambda: ActionReceiver(relaxed=True), _alt_flood, _feed_all),
    "length, alternative headers": (_action_generic(), _alt_flood, _feed_all),
    "length relaxed": (_action_generic(relaxed=True), _alt_flood, _feed_all),
    "length, rejects kept": (_action_generic(keep_rejects=True), _alt_flood, _feed_all),
    "sum8": (lambda: receiver_for(desc(SUM8)), _sum8_flood, _feed_all),
    "columns": (lambda: columns_receiver(codec_for(desc(FIXED), generic=True)), _fixed_flood,
                _columns_feed),
    "sum8 columns": (lambda: receiver_for(desc(SUM8)), _sum8_flood, _columns_feed),
}


def work(make: Callable[[], Any], data: bytes, run: Callable[..., int], chunk: int) -> int:
    before = WORK.steps
    run(make(), data, chunk)
    return WORK.steps - before


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("chunk", [4096, 1 << 20], ids=["4KiB", "whole"])
def test_a_flood_of_false_headers_costs_a_bounded_work_per_byte(shape: str, chunk: int) -> None:
    make, flood, run = SHAPES[shape]
    n = 1 << 18
    one, two = work(make, flood(n), run, chunk), work(make, flood(2 * n), run, chunk)
    # A few bytes of checksum work per input byte, and twice the input is twice the work
    # (reading each candidate's span would be hundreds of bytes per byte: a frame / 2).
    assert one <= 12 * n, (shape, one / n)
    assert two <= 2.2 * one + 4 * chunk, (shape, one, two)


def test_the_work_counter_sees_a_span_read_per_candidate() -> None:
    """The measure can fail: the per-candidate loop, forced on the flood, reads a frame's
    span per header (the behaviour before the linear scans)."""
    n = 1 << 14
    rx = LengthReceiver(codec_for(desc(LENGTH), generic=True))
    rx.vector_threshold = 1 << 30
    before = WORK.steps
    _feed_all(rx, _length_flood(n), 1 << 20)
    assert WORK.steps - before > 500 * n
    fx = FixedReceiver(codec_for(desc(FIXED), generic=True))
    fx.direct_budget = 1 << 30
    before = WORK.steps
    _feed_all(fx, _fixed_flood(n), 1 << 20)
    assert WORK.steps - before > 500 * n


def test_frames_in_the_flood_are_all_found() -> None:
    """Losslessness in the linear scans: real frames between the false headers."""
    for text, flood in ((FIXED, _fixed_flood), (LENGTH, _length_flood)):
        d = desc(text)
        codec = codec_for(d, generic=True)
        rnd = random.Random(7)
        parts, offsets, pos = [], [], 0
        for _ in range(5):
            noise = flood(rnd.randrange(2, 20000) // 4 * 4)
            parts.append(noise)
            pos += len(noise)
            payload = bytes(rnd.randrange(256) for _ in range(4096 if d.size else 1000))
            raw = codec.encode(codec.cls(payload))
            parts.append(raw)
            offsets.append(pos)
            pos += len(raw)
        data = b"".join(parts)
        for chunk in (4096, len(data)):
            rx = receiver_for(d)
            got = {r.offset for k in range(0, len(data), chunk) for r in rx.feed(data[k:k + chunk])}
            got |= {r.offset for r in rx.finish()}
            assert set(offsets) <= got, (d.name, chunk)


@contextmanager
def _windows_only() -> Iterator[None]:
    """Every check by prefix values (the direct reads' budget at zero)."""
    saved = length_scan.DIRECT_BUDGET
    length_scan.DIRECT_BUDGET = -(1 << 40)
    try:
        yield
    finally:
        length_scan.DIRECT_BUDGET = saved


@settings(max_examples=80, deadline=None)
@given(st.data(), descriptions())
def test_the_linear_scans_equal_the_per_candidate_ones(data: st.DataObject,
                                                       d: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(d)
    stream, _, _ = data.draw(streams(codec))
    stream += data.draw(st.binary(max_size=40))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    ref = receiver_for(codec)
    if isinstance(ref, LengthReceiver):
        ref.vector_threshold = 1 << 30  # the loop alone
    want = repr(feed(ref, stream, cuts))
    for direct in (True, False):
        rx = receiver_for(codec)
        if isinstance(rx, FixedReceiver):
            rx.vector_threshold = 1
            rx.direct_budget = 1 << 30 if direct else -1
        else:
            rx.vector_threshold = 1
        if direct:
            got = repr(feed(rx, stream, cuts))
        else:
            with _windows_only():
                got = repr(feed(rx, stream, cuts))
        assert got == want
        assert rx.stats.as_dict() == ref.stats.as_dict()
        assert rx.pending == 0


_SPECIAL = [b"\xfd\xdf", b"\xfe\xef", b"\xfe\xff", b"\xfe", b"\xfd"]
_part = st.binary(max_size=24) | st.sampled_from(_SPECIAL)
_frames = st.builds(ActionFrame, st.integers(0, 255), st.integers(0, 255), st.integers(0, 255),
                    st.lists(_part, max_size=6).map(b"".join))


@st.composite
def action_streams(draw: st.DrawFn) -> tuple[bytes]:
    """Action frames (and alternative-header ones) among noise, damaged and truncated
    frames and false headers whose length points far."""
    parts: list[bytes] = []
    for frame in draw(st.lists(_frames, min_size=1, max_size=8)):
        raw = af.encode(frame)
        kind = draw(st.integers(0, 5))
        if kind == 0:
            parts.append(draw(st.binary(max_size=30)))
        elif kind == 1:
            parts.append(raw[: draw(st.integers(1, len(raw) - 1))])
        elif kind == 2:
            parts.append(b"\xfe\xef\x01\x06" + draw(st.integers(0, 1100)).to_bytes(2, "little"))
        elif kind == 3:
            bad = bytearray(raw)
            bad[draw(st.integers(2, len(raw) - 1))] ^= draw(st.integers(1, 255))
            parts.append(bytes(bad))
        elif kind == 4:
            parts.append(b"\xfe\xff" + raw[2:])  # an alternative header
        parts.append(raw)
    return (b"".join(parts),)


@settings(max_examples=120, deadline=None)
@given(action_streams(), st.lists(st.integers(0, 10_000), max_size=20), st.booleans(),
       st.booleans(), st.booleans(), st.binary(max_size=40))
def test_the_action_receivers_linear_scans_equal_their_loops(
        stream: Any, cuts: list[int], relaxed: bool, keep_rejects: bool, generic: bool,
        tail: bytes) -> None:
    """The kernel and the generic length receiver of the action description, with the
    link's options: the numpy scan gives the loop's frames, counters and rejections."""
    data = stream[0] + tail
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]

    def run(threshold: int) -> tuple[Any, ...]:
        rx = receiver_for(builtin("action"), relaxed=relaxed, keep_rejects=keep_rejects,
                          max_length=64, generic=generic)
        rx.vector_threshold = threshold
        got = [r for c in chunks for r in rx.feed(c)] + rx.finish()
        return got, rx.stats.as_dict(), rx.pending, rx.take_rejects()  # type: ignore[union-attr]

    want = run(1 << 30)
    assert run(1) == want
    with _windows_only():
        assert run(1) == want


@pytest.mark.parametrize("name", algorithm_names())
def test_window_checks_equal_the_checksum_of_each_window(name: str) -> None:
    algo = algorithm(name)
    rnd = random.Random(name)
    for n in (0, 1, 31, 32, 33, 200, 1000):
        buf = bytes(rnd.randrange(256) for _ in range(n))
        a = np.frombuffer(buf, np.uint8)
        s = np.array([rnd.randrange(n + 1) for _ in range(40)], dtype=np.intp)
        e = s + np.array([rnd.randrange(n - x + 1) for x in s], dtype=np.intp)
        got = window_checks(algo).values(a, s, e).tolist()
        assert got == [algo.func(buf[x:y]) for x, y in zip(s.tolist(), e.tolist())]
        if n > 9:
            s9 = np.array([rnd.randrange(n - 9) for _ in range(20)], dtype=np.intp)
            got = window_checks(algo).values(a, s9, s9 + 9).tolist()
            assert got == [algo.func(buf[x:x + 9]) for x in s9.tolist()]


# -- no numpy warning reaches a caller ------------------------------------------------
FLOATS = _little_frame("fl", "A5", "xor8", ['name = "a"\ntype = "f32"', 'name = "b"\ntype = "f64"',
                                           'name = "c"\ntype = "u32"\nscale = 1e300'])


def _hostile_floats(count: int) -> bytes:
    values = [float("nan"), float("inf"), float("-inf"), 3.4e38, -0.0, 1e-45]
    rnd = random.Random(3)
    out = bytearray()
    for k in range(count):
        out += rnd.randbytes(rnd.randrange(0, 5))
        v = values[k % len(values)]
        w = values[(k + 1) % len(values)]
        body = struct.pack("<fdI", v, w, rnd.randrange(1 << 32))
        out += b"\xa5" + body + bytes([xor8(body)])
    return bytes(out)


def test_no_numpy_warning_escapes_the_receivers() -> None:
    old = np.seterr(all="warn")  # numpy's defaults: warn on invalid and overflow
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            d = desc(FLOATS)
            codec = codec_for(d, generic=True)
            data = _hostile_floats(400)
            for chunk in (7, 600, len(data)):
                rx = receiver_for(d)
                _feed_all(rx, data, chunk)
                assert rx.stats.nonfinite > 0
                cols = columns_receiver(codec)
                assert cols is not None
                _columns_feed(cols, data, chunk)
            odom = receiver_for(codec_for(loads(_ODOM, "o.toml")))
            assert isinstance(odom, Sum8Receiver)
            raw = b"".join(b"\xaa\x55" + struct.pack("<ff", *v)
                           + bytes([sum(struct.pack("<ff", *v)) & 0xFF])
                           for v in _odom_values(300))
            for chunk in (5, 4096, len(raw)):
                rx = receiver_for(codec_for(loads(_ODOM, "o.toml")))
                _feed_all(rx, raw, chunk)
                rx2 = receiver_for(codec_for(loads(_ODOM, "o.toml")))
                _columns_feed(rx2, raw, chunk)
            assert decode_columns(odom.codec, raw).stats.nonfinite > 0
            # float32 fields alone, another header: the fixed receiver's one-sum screen
            plain = loads(_ODOM.replace("AA 55", "A5 5A"), "p.toml")
            raw = raw.replace(b"\xaa\x55", b"\xa5\x5a")
            for chunk in (5, 4096, len(raw)):
                fx = receiver_for(plain)
                assert isinstance(fx, FixedReceiver)
                _feed_all(fx, raw, chunk)
                assert fx.stats.nonfinite > 0
    finally:
        np.seterr(**old)


_ODOM = _little_frame("od", "AA 55", "sum8",
                      ['name = "x"\ntype = "f32"', 'name = "y"\ntype = "f32"'])


def _odom_values(count: int) -> list[tuple[float, float]]:
    vals = [float("nan"), float("inf"), float("-inf"), 3.4e38, 1.0]
    return [(vals[k % 5], vals[(k * 3 + 1) % 5]) for k in range(count)]


def test_the_floods_are_judged_by_one_pass_not_a_frame_per_header() -> None:
    """A fixed frame's flood with a matching CRC planted: the frame is found, and the
    checks read each byte a few times only."""
    d = desc(FIXED)
    codec = codec_for(d, generic=True)
    frame = codec.encode(codec.cls(b"\x5a\xa5" * 2048))
    data = _fixed_flood(1 << 16) + frame + _fixed_flood(1 << 16)
    rx = receiver_for(d)
    before = WORK.steps
    got = [r.offset for r in rx.feed(data)] + [r.offset for r in rx.finish()]
    assert (1 << 16) in got
    assert WORK.steps - before < 12 * len(data)
    assert struct.calcsize("<I") == codec.check_size


def test_kept_rejects_do_not_make_the_action_receiver_quadratic() -> None:
    """With rejects kept (a device answering NAKs) the per-candidate loop runs: past a
    budget its CRC verdicts come from one pass, and the frames, counters and rejects are
    those of the linear scan."""
    frame = af.encode(af.ActionFrame(3, 4, 0x31, bytes(range(200))))
    data = _action_flood(1 << 16) + frame + _action_flood(1 << 15)
    kept = ActionReceiver(keep_rejects=True)
    before = WORK.steps
    got = kept.feed(data) + kept.finish()
    assert WORK.steps - before < 12 * len(data)
    plain = ActionReceiver()
    assert got == plain.feed(data) + plain.finish()
    assert [r.offset for r in got] == [1 << 16]
    assert kept.stats.as_dict() == plain.stats.as_dict()
    rejects = kept.take_rejects()
    assert len(rejects) == kept.stats.checksum_errors + kept.stats.trailer_errors + (
        kept.stats.length_errors + kept.stats.truncated)


def test_a_small_read_full_of_candidates_goes_to_the_linear_scan() -> None:
    """A serial port's read (under 512 bytes) of a flood against a 100-byte frame: the
    small loop gives up past its budget, and the numpy scan gives the same result."""
    d = loads("""[frame]
name = "mid"
header = "A5"
[[field]]
name = "blob"
type = "bytes"
size = 100
[checksum]
algorithm = "crc-32"
span = "payload"
""", "mid.toml")
    codec = codec_for(d, generic=True)
    frame = codec.encode(codec.cls(b"\xa5" * 100))
    data = b"\xa5" * 150 + frame + b"\xa5" * 150
    small = receiver_for(d)
    before = WORK.steps
    got = [r for k in range(0, len(data), 400) for r in small.feed(data[k:k + 400])]
    got += small.finish()
    assert WORK.steps - before < 12 * len(data)
    ref = FixedReceiver(codec)
    ref.vector_threshold, ref.direct_budget = 1, 1 << 30
    want = [r for k in range(0, len(data), 400) for r in ref.feed(data[k:k + 400])]
    want += ref.finish()
    assert got == want and 150 in [r.offset for r in got]
    assert small.stats.as_dict() == ref.stats.as_dict()


def test_small_reads_of_a_flood_against_a_mid_sized_sum8_frame_stay_linear() -> None:
    """Reads under 512 bytes go to the small loop unless their headers would make it read
    more than a few bytes a byte; a frame among the flood is found either way."""
    d = loads("\n".join(['[frame]', 'name = "mid8"', 'header = "AA 55"', 'byte_order = "little"']
                        + [f'[[field]]\nname = "f{k}"\ntype = "f32"' for k in range(50)]
                        + ['[checksum]', 'algorithm = "sum8"', 'span = "payload"']), "m.toml")
    rx = receiver_for(d)
    assert isinstance(rx, Sum8Receiver)
    body = struct.pack("<50f", *range(50))
    frame = b"\xaa\x55" + body + bytes([sum(body) & 0xFF])
    data = _sum8_flood(20_000) + frame + _sum8_flood(20_000)
    before = WORK.steps
    got = [r.offset for k in range(0, len(data), 400) for r in rx.feed(data[k:k + 400])]
    assert WORK.steps - before < 12 * len(data)
    assert 20_000 in got
    whole = receiver_for(d)
    assert [r.offset for r in whole.feed(data)] == got
    assert whole.stats.as_dict() == rx.stats.as_dict()
