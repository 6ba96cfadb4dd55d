"""Generated C: compiles clean, checks the golden vectors, receives like the Python receivers."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import FrameDescription, load
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.engine.codec import FrameCodec
from tests.c_harness import build, check, reencode, run_receiver
from tests.conftest import FIXTURES
from tests.frame_strategies import descriptions, feed, raw_values, streams

USER = [load(FIXTURES / "frames" / "imu.toml"), load(FIXTURES / "frames" / "log.toml")]
BUILTIN = [builtin(n) for n in ("odom", "cmd", "action", "actuator")]


def _golden() -> dict[str, list[bytes]]:
    s8 = json.loads((FIXTURES / "sum8_golden.json").read_text())
    act = json.loads((FIXTURES / "action_golden.json").read_text())
    can = json.loads((FIXTURES / "actuator_golden.json").read_text())
    return {
        "odom": [bytes.fromhex(v["hex"]) for v in s8["odom"]],
        "cmd": [bytes.fromhex(v["hex"]) for v in s8["cmd"]],
        "action": [bytes.fromhex(v["hex"]) for v in act["frames"]
                   if v["crc"] == "crc-ccitt-false"],
        "actuator": [bytes.fromhex(v["hex"]) for v in can["structs"]],
    }


def test_golden_vectors_check_and_reencode_in_c(tmp_path: Path) -> None:
    lib = build(BUILTIN + USER, tmp_path)
    for name, frames in _golden().items():
        for frame in frames:
            assert check(lib, name, frame) == 0, (name, frame.hex())
            assert reencode(lib, name, frame) == frame
            if name != "actuator":
                bad = frame[:-3] + bytes([frame[-3] ^ 0x40]) + frame[-2:]
                assert check(lib, name, bad) != 0
    for desc in USER:
        codec: FrameCodec[Any] = FrameCodec(desc)
        for k in range(20):
            frame = codec.encode(codec.from_mapping({
                f.name: (bytes(range(k)) if f.type == "bytes" else k % 3) for f in codec.stored}))
            assert check(lib, desc.name, frame) == 0
            assert reencode(lib, desc.name, frame) == frame
        assert check(lib, desc.name, frame[:-1]) == -1


def _compare(lib: Any, desc: FrameDescription, stream: bytes, cuts: list[int]) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    rx = receiver_for(codec, generic=True)  # the C receivers are the description-driven one
    want = feed(rx, stream, cuts)
    nstats = len(rx.stats.as_dict())
    # The third run: rx_feed given one byte at a time (its inline path) for the first
    # half, then the chunks, so the two paths also hand held bytes over to each other.
    one_byte_then_cuts = sorted(set(cuts) | set(range(len(stream) // 2)))
    for bytewise, at in ((False, cuts), (True, cuts), (False, one_byte_then_cuts)):
        got, stats = run_receiver(lib, desc.name, nstats, stream, at, bytewise)
        assert [o for o, _ in got] == [o for o, _ in want]
        # repr: a NaN field compares unequal to itself, its repr does not
        assert [repr(codec.decode(f)) for _, f in got] == [repr(f) for _, f in want]
        assert dict(zip(rx.stats.as_dict(), stats)) == rx.stats.as_dict()


def test_c_receivers_match_python_on_the_noisy_capture(tmp_path: Path) -> None:
    lib = build(BUILTIN + USER, tmp_path)
    data = (FIXTURES / "odom_noisy.bin").read_bytes()
    _compare(lib, builtin("odom"), data, list(range(0, len(data), 37)))
    _compare(lib, builtin("odom"), data, [])


def test_c_receivers_count_the_alternative_headers_like_python(tmp_path: Path) -> None:
    """The action description's FE FF: frames under it (CRC right or wrong), among frames,
    wrong CRCs, truncated frames and noise rich in header bytes; the C receiver refuses
    them and counts them as the Python one does."""
    import random

    from fwbridge.protocols import action_frame as af

    desc = builtin("action")
    lib = build([desc], tmp_path)
    rnd = random.Random(11)
    parts = []
    for _ in range(300):
        raw = af.encode(af.ActionFrame(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256),
                                       bytes(rnd.randrange(256) for _ in range(rnd.randrange(30)))))
        kind = rnd.randrange(5)
        if kind == 0:
            raw = b"\xfe\xff" + raw[2:]
        elif kind == 1:
            raw = raw[:-3] + bytes([raw[-3] ^ 0x10]) + raw[-2:]
            raw = rnd.choice((b"\xfe\xff", b"\xfe\xef")) + raw[2:]
        elif kind == 2:
            raw = raw[:rnd.randrange(1, len(raw))]
        parts.append(raw + bytes(rnd.choice((0xFE, 0xEF, 0xFF, 0xFD, 0xDF, 0))
                                 for _ in range(rnd.randrange(3))))
    stream = b"".join(parts)
    rx = receiver_for(FrameCodec(desc), generic=True)
    feed(rx, stream, [])
    assert rx.stats.header_errors > 20 and rx.stats.checksum_errors > 20
    for step in (1, 7, 4096):
        _compare(lib, desc, stream, list(range(0, len(stream), step)))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), descriptions())
def test_generated_c_receives_like_the_python_receiver(data: st.DataObject,
                                                       desc: FrameDescription) -> None:
    codec: FrameCodec[Any] = FrameCodec(desc)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build([desc], Path(tmp))
        for _ in range(4):
            stream, _, _ = data.draw(streams(codec))
            cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
            _compare(lib, desc, stream, cuts)
        raw = data.draw(raw_values(codec))
        frame = codec.encode(codec.make(*raw), allow_nonfinite=True)
        assert check(lib, desc.name, frame) == 0
        assert reencode(lib, desc.name, frame) == frame


def test_committed_firmware_code_is_what_the_generator_writes() -> None:
    from fwbridge.codegen.c import generate

    files = generate(BUILTIN, "fw_frames_gen", "fwg_")
    src = FIXTURES.parent.parent / "firmware_ref" / "src"
    for name, text in files.items():
        assert (src / name).read_text() == text, (
            f"firmware_ref/src/{name} differs from the descriptions: run `fwbridge gen c odom cmd "
            "action actuator -o firmware_ref/src --name fw_frames_gen --prefix fwg_`")


def test_gen_c_cli_writes_files_that_compile(tmp_path: Path) -> None:
    from tests.c_harness import CFLAGS, compiler
    from tests.helpers import run_cli

    imu = str(FIXTURES / "frames" / "imu.toml")
    proc = run_cli("gen", "c", imu, "action", "-o", str(tmp_path), "--name", "robot")
    assert proc.returncode == 0, proc.stderr
    res = subprocess.run([compiler(), *CFLAGS, "-c", str(tmp_path / "robot.c"), "-o",
                          str(tmp_path / "robot.o")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    bad = run_cli("gen", "c", imu, imu, "-o", str(tmp_path))
    assert bad.returncode == 2 and b"two descriptions name the frame 'imu'" in bad.stderr
