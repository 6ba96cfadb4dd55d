"""``decode -p odom|cmd`` prints each chunk's frames as one block: the same bytes as per frame."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fwbridge.cli_verbs import codec as codec_verb
from fwbridge.cli_verbs.common import shortest32, shortest_decimal32
from fwbridge.cli_verbs.table_stream import RowWriter
from fwbridge.protocols import cmd_frame, odom_frame
from tests.helpers import run_cli

SPECIAL = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-45, 1.17549435e-38, 3.4e38,
           0.1, 16777216.0, 1e16, 123456.0]


def _capture(codec: object, n: int, seed: int) -> bytes:
    """``n`` frames of random float32 bit patterns and specials (a few per 64 KiB read),
    with noise rich in header bytes between some of them."""
    rnd = random.Random(seed)
    parts = []
    nfields = len(codec.fields)  # type: ignore[attr-defined]
    for k in range(n):
        if rnd.random() < 0.05:
            parts.append(bytes(rnd.choice((0xAA, 0x55, rnd.randrange(256)))
                               for _ in range(rnd.randrange(1, 25))))
        if k % 4000 == 17:  # some reads with non-finite values, most without
            vals = [rnd.choice(SPECIAL) for _ in range(nfields)]
        elif rnd.random() < 0.5:
            vals = [struct.unpack("<f", struct.pack("<I", rnd.getrandbits(32)))[0]
                    for _ in range(nfields)]
            vals = [v if v == v and abs(v) != float("inf") else 1.5 for v in vals]
        else:
            vals = [round(rnd.uniform(-3, 3), rnd.randrange(1, 5)) for _ in range(nfields)]
        body = struct.pack(f"<{nfields}f", *vals)
        parts.append(b"\xaa\x55" + body + bytes((sum(body) & 0xFF,)))
    return b"".join(parts)


@pytest.mark.parametrize("protocol,frame_codec", [("odom", odom_frame.CODEC),
                                                  ("cmd", cmd_frame.CODEC)])
@pytest.mark.parametrize("as_json", [False, True])
def test_blocks_print_what_the_per_frame_path_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, frame_codec: object,
        as_json: bool) -> None:
    capture = tmp_path / "capture.bin"
    capture.write_bytes(_capture(frame_codec, 12_000, seed=len(protocol)))  # several reads
    args = ["-p", protocol, *(["--json"] if as_json else []), str(capture)]
    blocks = run_cli("decode", *args)
    unbuffered = run_cli("decode", *args, env={"PYTHONUNBUFFERED": "1"})
    assert blocks.returncode == 0, blocks.stderr
    monkeypatch.setattr(codec_verb, "BLOCK_CODECS", {})  # the per-frame path
    per_frame = CliRunner().invoke(codec_verb.decode_cmd, args)
    assert per_frame.exit_code == 0, per_frame.output
    assert blocks.stdout.decode() == per_frame.stdout
    assert unbuffered.stdout == blocks.stdout
    assert blocks.stderr.decode() == per_frame.stderr  # the counters


def test_shortest32_is_the_per_value_shortest_decimal() -> None:
    rnd = np.random.default_rng(5)
    bits = rnd.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    wire = np.concatenate([bits.view(np.float32), np.float32(SPECIAL)])
    wire = wire[np.isfinite(wire)]
    want = [shortest_decimal32(float(x)) if x else float(x) for x in wire]
    assert list(map(repr, shortest32(wire))) == list(map(repr, want))


def test_numbers_hand_a_too_wide_offset_back(capsys: pytest.CaptureFixture[str]) -> None:
    table = RowWriter(("vx",), width=None)
    assert table.numbers([0, 19], [[0.5, 1.5]])
    assert not table.numbers([10**10], [[0.5]])  # row() widens the column instead
    assert capsys.readouterr().out.splitlines()[2:] == ["         0           0.5",
                                                        "        19           1.5"]
