"""``decode -p DESC.toml`` by columns: the fixed receiver's frames, the per-frame path's lines.

The columns receiver (protocols/engine/fixed_columns.py) is held to the fixed
receiver for random descriptions, streams with noise and damage, and any
chunking; the block printer (cli_verbs/block_rows.py) to the per-frame
path's table and JSON lines, on captures of arbitrary field bytes (NaN,
huge exponents, unlabelled enum values, unknown flag bits).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fwbridge.cli_verbs import block_rows
from fwbridge.cli_verbs import codec as codec_verb
from fwbridge.cli_verbs.frames import described, description_decoder
from fwbridge.cli_verbs.table_stream import RowWriter
from fwbridge.protocols.checksums import algorithm
from fwbridge.protocols.descriptions.loader import FrameDescription, loads
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.fixed_columns import ColumnsReceiver, columns_receiver
from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
from tests.frame_strategies import descriptions, streams
from tests.helpers import ROOT, cli_env

# Every kind of column: labels (known or not), flags (with unknown bits), bytes, doubles of
# any bit pattern, a float32, a 64-bit integer, a scaled field with an offset; a trailer.
MIXED = """
[frame]
name = "mixed"
header = "C3 3C"
trailer = "0A"
byte_order = "little"

[[field]]
name = "mode"
type = "u8"
enum = { 0 = "idle", 1 = "run", 2 = "calibrate" }

[[field]]
name = "raw"
type = "bytes"
size = 3

[[field]]
name = "big"
type = "f64"

[[field]]
name = "v"
type = "f32"
byte_order = "big"

[[field]]
name = "n"
type = "u64"

[[field]]
name = "t"
type = "i32"
scale = 2.0
offset = 100.0

[[field]]
name = "state"
type = "u16"
flags = { 0x01 = "over_current", 0x04 = "hot", 0x100 = "stalled" }

[checksum]
algorithm = "crc-16-modbus"
"""
# A number last, a one-byte header and sum-8 over everything.
NUMBER_LAST = """
[frame]
name = "tail"
header = "7E"
byte_order = "big"

[[field]]
name = "kind"
type = "u8"
enum = { 1 = "a", 2 = "bb" }

[[field]]
name = "x"
type = "f64"

[checksum]
algorithm = "sum8"
span = "all"
"""
# The odometry description: the sum-8 receiver's columns (float32 fields, NaN and all).
ODOM = (ROOT / "protocols" / "frames" / "odom.toml").read_text()
TEXTS = {"mixed": MIXED, "tail": NUMBER_LAST, "odom": ODOM}


def _feed_columns(rx: ColumnsReceiver, data: bytes, cuts: list[int]) -> list[tuple[int, Any]]:
    got = []
    prev = 0
    for cut in [*sorted(cuts), len(data)]:
        got += rx.records(rx.feed_columns(data[prev:cut]))
        prev = max(prev, cut)
    rx.finish()
    return [(r.offset, r.frame) for r in got]


def _feed(rx: FixedReceiver, data: bytes) -> list[tuple[int, Any]]:
    got = rx.feed(data) + rx.finish()
    return [(r.offset, r.frame) for r in got]


@settings(max_examples=150, deadline=None)
@given(st.data(), descriptions(variable=False))
def test_columns_receiver_gives_the_fixed_receivers_frames(data: st.DataObject,
                                                           desc: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    rx = columns_receiver(codec)
    assume(rx is not None)
    assert rx is not None
    stream, _, _ = data.draw(streams(codec))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(stream) - 1, 0)),
                                         st.integers(1, 255)), max_size=3))
    damaged = bytearray(stream)
    for at, bits in flips:  # damaged frames: a bad check, a bad trailer, a header gone
        if damaged:
            damaged[at] ^= bits
    cuts = data.draw(st.lists(st.integers(0, len(damaged)), max_size=8))
    want_rx = FixedReceiver(codec)
    want = _feed(want_rx, bytes(damaged))
    assert repr(_feed_columns(rx, bytes(damaged), cuts)) == repr(want)  # repr: NaN != NaN
    assert rx.stats.as_dict() == want_rx.stats.as_dict()
    assert rx.pending == 0


def test_no_columns_path_without_a_fixed_layout() -> None:
    from fwbridge.protocols.descriptions.builtin import builtin

    assert columns_receiver(FrameCodec(builtin("action"))) is None  # a length field


def _capture(desc_text: str, bodies: list[bytes], noise: list[bytes], bad: list[bool]) -> bytes:
    """Frames of the given field bytes (a valid check unless ``bad``), noise before each."""
    d = loads(desc_text)
    ck = d.checksum
    assert ck is not None and d.size is not None
    out = []
    for body, junk, broken in zip(bodies, noise, bad):
        start = len(d.header) if ck.span != "all" else 0
        frame = d.header + body
        value = algorithm(ck.algorithm).func(frame[start:]) ^ (1 if broken else 0)
        out.append(junk + frame + value.to_bytes(ck.size, ck.byte_order) + d.trailer)
    return b"".join(out)


def _invoke(args: list[str], per_frame: bool) -> Any:
    if not per_frame:
        return CliRunner().invoke(codec_verb.decode_cmd, args)
    real = block_rows.column_blocks
    block_rows.column_blocks = lambda *a, **k: None  # type: ignore[assignment]
    try:
        return CliRunner().invoke(codec_verb.decode_cmd, args)
    finally:
        block_rows.column_blocks = real


def _body_size(text: str) -> int:
    d = loads(text)
    assert d.size is not None and d.checksum is not None
    return d.size - len(d.header) - len(d.trailer) - d.checksum.size


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(TEXTS)), st.data(), st.booleans(),
       st.one_of(st.integers(5, 300), st.just(1 << 16)))
def test_blocks_print_what_the_per_frame_path_prints(name: str, data: st.DataObject,
                                                     as_json: bool, chunk: int) -> None:
    text = TEXTS[name]
    size = _body_size(text)
    n = data.draw(st.integers(0, 400))
    # a few distinct frames repeated (values formatted once each), or all different
    pool = data.draw(st.lists(st.binary(min_size=size, max_size=size), min_size=1,
                              max_size=n or 1))
    bodies = data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    noise = data.draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
    bad = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / f"{name}.toml"
        spec.write_text(text)
        capture = Path(tmp) / "capture.bin"
        capture.write_bytes(_capture(text, bodies, noise, bad))
        args = ["-p", str(spec), "--format", "raw", *(["--json"] if as_json else []),
                str(capture)]
        real_chunk = codec_verb.READ_CHUNK
        codec_verb.READ_CHUNK = chunk  # many reads, frames cut across them
        try:
            blocks, per_frame = _invoke(args, False), _invoke(args, True)
        finally:
            codec_verb.READ_CHUNK = real_chunk
    assert blocks.exit_code == 0, blocks.output
    assert per_frame.exit_code == 0, per_frame.output
    assert blocks.stdout == per_frame.stdout
    assert blocks.stderr == per_frame.stderr  # the counters


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(TEXTS)), st.data(), st.integers(30, 140))
def test_blocks_fit_a_terminal_as_rows_do(name: str, data: st.DataObject, width: int) -> None:
    text = TEXTS[name]
    size = _body_size(text)
    bodies = data.draw(st.lists(st.binary(min_size=size, max_size=size), min_size=1,
                                max_size=30))
    stream = _capture(text, bodies, [b""] * len(bodies), [False] * len(bodies))
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / f"{name}.toml"
        spec.write_text(text)
        protocol, dec = description_decoder(str(spec))
        codec = described(str(spec)).codec

    def printed(blocks: bool) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            table = RowWriter(dec.columns, title="t", widths=dec.widths, left=dec.text,
                              width=width)

            def per_frame(items: list[Any]) -> None:
                for item in items:
                    table.row(item.offset, dec.row(item))

            rx = dec.make({})
            printer = block_rows.column_blocks(rx, codec, protocol, table, per_frame)
            assert printer is not None
            if blocks:
                printer.take(stream)
            else:
                per_frame(rx.feed(stream))
        return out.getvalue()

    assert printed(True) == printed(False)


WRITES = """
import io, os, sys
class Counting(io.FileIO):
    calls = 0
    def write(self, b):
        Counting.calls += 1
        return super().write(b)
# what PYTHONUNBUFFERED=1 gives: a text layer writing through to the file, no buffer
sys.stdout = io.TextIOWrapper(Counting(1, "w", closefd=False), encoding="utf-8",
                              write_through=True)
from fwbridge.cli import main
try:
    main(sys.argv[1:])
finally:
    sys.stdout.flush()
    os.write(2, b"writes=%d\\n" % Counting.calls)
"""


@pytest.mark.parametrize("spec", ["odom", "bench/frames/imu19.toml"])
@pytest.mark.parametrize("as_json", [False, True])
def test_unbuffered_output_is_written_in_blocks(tmp_path: Path, spec: str,
                                                as_json: bool) -> None:
    d = described(str(ROOT / spec) if spec.endswith(".toml") else spec)
    frame = bytes(d.codec.encode(d.codec.from_mapping({})))
    capture = tmp_path / "capture.bin"
    capture.write_bytes(frame * 40_000)
    reads = -(-capture.stat().st_size // codec_verb.READ_CHUNK)
    proc = subprocess.run(
        [sys.executable, "-c", WRITES, "decode", "-p", spec, *(["--json"] * as_json),
         str(capture)], capture_output=True, cwd=ROOT, check=False,
        env={**cli_env(None), "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") >= 40_000
    writes = int(proc.stderr.decode().rsplit("writes=", 1)[1])
    assert writes <= reads + 4  # one a read (and the title and header), not one a frame


def test_shortest32_text_is_shortest32s_repr() -> None:
    import numpy as np

    from fwbridge.cli_verbs.common import shortest32

    rnd = np.random.default_rng(11)
    bits = rnd.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    wire = bits.view(np.float32)
    scaled = rnd.uniform(-1, 1, 50_000) * 10.0 ** rnd.integers(-8, 18, 50_000)
    special = [0.0, -0.0, 1e-45, 1.17549435e-38, 3.4e38, 0.1, 16777216.0, 1e16, 1e-4,
               9.999999e-5, 9999999.0, 12345678.0, 1696620.25]
    wire = np.concatenate([wire[np.isfinite(wire)], scaled.astype(np.float32),
                           np.float32(special)])
    assert block_rows.shortest32_text(wire) == list(map(repr, shortest32(wire)))
