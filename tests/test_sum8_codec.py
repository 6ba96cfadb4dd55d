"""Odometry and command frames: schema, fast path, errors, golden vectors."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.checksums import sum8
from fwbridge.protocols.errors import (
    ChecksumError,
    FieldValueError,
    FrameError,
    HeaderError,
    LengthError,
)
from tests.conftest import FIXTURES

f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
any32 = st.floats(width=32)


def test_sizes() -> None:
    assert odom_frame.SIZE == 19
    assert cmd_frame.SIZE == 15
    assert odom_frame.SCHEMA.sizeof() == 19
    assert cmd_frame.SCHEMA.sizeof() == 15


def test_hand_checked_odom_bytes() -> None:
    # 0.1f = 0x3DCCCCCD, 0.2f = 0x3E4CCCCD, 0.3f = 0x3E99999A, 45.0f = 0x42340000,
    # little-endian; checksum = sum(bytes 2..17) mod 256 = 1861 mod 256 = 0x45.
    frame = odom_frame.OdomFrame(0.1, 0.2, 0.3, 45.0)
    assert odom_frame.encode(frame).hex(" ") == (
        "aa 55 cd cc cc 3d cd cc 4c 3e 9a 99 99 3e 00 00 34 42 45"
    )


def test_hand_checked_cmd_bytes() -> None:
    # vx 0.2 = 0x3E4CCCCD, wz 0.5 = 0x3F000000; sum = 547 + 63 = 610 mod 256 = 0x62.
    assert cmd_frame.encode(cmd_frame.CmdFrame(0.2, 0.0, 0.5)).hex(" ") == (
        "aa 55 cd cc 4c 3e 00 00 00 00 00 00 00 3f 62"
    )


def test_golden_vectors() -> None:
    golden = json.loads((FIXTURES / "sum8_golden.json").read_text())
    for name, mod in (("odom", odom_frame), ("cmd", cmd_frame)):
        assert golden[name], name
        for case in golden[name]:
            raw = bytes.fromhex(case["hex"])
            frame = mod.decode(raw)
            assert {f: getattr(frame, f) for f in mod.CODEC.fields} == case["fields"]
            assert mod.encode(frame) == raw
            assert raw[-1] == sum8(raw[2:-1])


@given(f32, f32, f32, f32)
def test_odom_round_trip_and_schema_agree(vx: float, vy: float, wz: float, yaw: float) -> None:
    frame = odom_frame.OdomFrame(vx, vy, wz, yaw)
    raw = odom_frame.encode(frame)
    assert raw == odom_frame.CODEC.encode_with_schema(frame)
    assert odom_frame.decode(raw) == frame
    assert odom_frame.CODEC.decode_with_schema(raw) == frame


@given(f32, f32, f32)
def test_cmd_round_trip_and_schema_agree(vx: float, vy: float, wz: float) -> None:
    frame = cmd_frame.CmdFrame(vx, vy, wz)
    raw = cmd_frame.encode(frame)
    assert raw == cmd_frame.CODEC.encode_with_schema(frame)
    assert cmd_frame.decode(raw) == frame
    assert cmd_frame.CODEC.decode_with_schema(raw) == frame


@given(st.binary(min_size=15, max_size=15))
def test_fast_decode_and_schema_agree_on_any_bytes(raw: bytes) -> None:
    def outcome(fn):  # type: ignore[no-untyped-def]
        try:
            frame = fn(raw)
        except FrameError as exc:
            return type(exc), exc.field
        return struct.pack("<3f", frame.vx, frame.vy, frame.wz)

    assert outcome(cmd_frame.decode) == outcome(cmd_frame.CODEC.decode_with_schema)


def test_fast_constructor_gives_ordinary_instances() -> None:
    a = odom_frame.CODEC.make(1.0, 2.0, 3.0, 4.0)
    b = odom_frame.OdomFrame(1.0, 2.0, 3.0, 4.0)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    with pytest.raises(AttributeError):
        a.vx = 5.0  # type: ignore[misc]


def test_yaw_rad() -> None:
    assert odom_frame.OdomFrame(0, 0, 0, 180.0).yaw_rad == pytest.approx(math.pi)


@pytest.mark.parametrize(
    ("mutate", "error", "field"),
    [
        (lambda b: b[:-1], LengthError, "length"),
        (lambda b: b + b"\x00", LengthError, "length"),
        (lambda b: b"\xaa\x56" + b[2:], HeaderError, "header"),
        (lambda b: b[:-1] + bytes([(b[-1] + 1) & 0xFF]), ChecksumError, "checksum"),
    ],
)
def test_decode_errors_name_field_and_bytes(mutate, error, field) -> None:  # type: ignore[no-untyped-def]
    raw = mutate(odom_frame.encode(odom_frame.OdomFrame(0.1, 0.2, 0.3, 45.0)))
    for decode in (odom_frame.decode, odom_frame.CODEC.decode_with_schema):
        with pytest.raises(error) as info:
            decode(raw)
        assert info.value.field == field
        assert raw[:8].hex(" ") in str(info.value)
        assert "odom frame" in str(info.value)


def test_checksum_error_says_both_values() -> None:
    raw = bytearray(cmd_frame.encode(cmd_frame.CmdFrame(0.2, 0.0, 0.5)))
    raw[-1] = 0x00
    with pytest.raises(ChecksumError, match="computed 0x62, frame says 0x00"):
        cmd_frame.decode(bytes(raw))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_encode_refuses_nonfinite_unless_asked(bad: float) -> None:
    with pytest.raises(FieldValueError, match="wz"):
        cmd_frame.encode(cmd_frame.CmdFrame(0.0, 0.0, bad))
    raw = cmd_frame.encode(cmd_frame.CmdFrame(0.0, 0.0, bad), allow_nonfinite=True)
    decoded = cmd_frame.decode(raw)
    assert decoded.nonfinite == ("wz",)


def test_encode_refuses_out_of_float32_range_and_non_numbers() -> None:
    with pytest.raises(FieldValueError, match="vy: out of float32 range"):
        odom_frame.encode(odom_frame.OdomFrame(0.0, 1e39, 0.0, 0.0))
    with pytest.raises(FieldValueError, match="not a number"):
        odom_frame.encode(odom_frame.OdomFrame(0.0, "1", 0.0, 0.0))  # type: ignore[arg-type]


@given(any32, any32, any32, any32)
def test_nonfinite_reported_not_raised(vx: float, vy: float, wz: float, yaw: float) -> None:
    raw = odom_frame.encode(odom_frame.OdomFrame(vx, vy, wz, yaw), allow_nonfinite=True)
    frame = odom_frame.decode(raw)
    want = tuple(n for n, v in zip(odom_frame.CODEC.fields, (vx, vy, wz, yaw))
                 if not math.isfinite(v))
    assert frame.nonfinite == want


# -- the fast path against the generic codec of the same description ----------------------
SUM8_MODULES = (odom_frame, cmd_frame)


@pytest.mark.parametrize("mod", SUM8_MODULES, ids=lambda m: m.DESCRIPTION.name)
def test_the_factory_gives_the_modules_codec_the_sum8_specialisation(mod) -> None:  # type: ignore[no-untyped-def]
    from fwbridge.protocols.engine import codec_for
    from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec

    assert codec_for(mod.DESCRIPTION) is mod.CODEC
    assert type(mod.CODEC) is Sum8Codec
    generic = codec_for(mod.DESCRIPTION, mod.CODEC.cls, generic=True)
    assert type(generic) is not Sum8Codec
    # one schema per frame: the description's, shared by both paths
    assert mod.SCHEMA is mod.CODEC.schema is generic.schema


@given(st.data())
@pytest.mark.parametrize("mod", SUM8_MODULES, ids=lambda m: m.DESCRIPTION.name)
def test_fast_and_generic_codecs_agree_byte_for_byte(mod, data: st.DataObject) -> None:  # type: ignore[no-untyped-def]
    from fwbridge.protocols.engine import codec_for

    fast = mod.CODEC
    generic = codec_for(mod.DESCRIPTION, fast.cls, generic=True)
    n = len(fast.fields)
    values = data.draw(st.lists(any32, min_size=n, max_size=n))
    frame = mod.CODEC.cls(*values)
    for allow in (True, False):
        def outcome(codec, allow=allow):  # type: ignore[no-untyped-def]
            try:
                return codec.encode(frame, allow_nonfinite=allow)
            except FieldValueError as exc:
                return type(exc), exc.field, str(exc)

        assert outcome(fast) == outcome(generic)
    raw = fast.encode(frame, allow_nonfinite=True)
    # any bytes, often with the header and a right checksum: same frame or same error
    noise = data.draw(st.binary(min_size=fast.size - 3, max_size=fast.size - 3))
    fixed = data.draw(st.booleans())
    candidate = data.draw(st.sampled_from([
        raw, raw[:-1], raw + b"\x00", b"\xaa\x56" + raw[2:],
        b"\xaa\x55" + noise + bytes([sum8(noise)]) if fixed else b"\xaa\x55" + noise + b"\x00"]))

    def decoded(codec):  # type: ignore[no-untyped-def]
        try:
            got = codec.decode(candidate)
        except FrameError as exc:
            return type(exc)
        return struct.pack(f"<{n}f", *(getattr(got, k) for k in fast.fields))

    assert decoded(fast) == decoded(generic)


# -- the record types come from the descriptions ----------------------------------------
def _typing_fields(mod) -> list[str]:  # type: ignore[no-untyped-def]
    """The fields of the typing-only declaration of the module's record class."""
    import ast
    import inspect

    from fwbridge.protocols.engine import builtin_records

    name = "CmdFrame" if mod is cmd_frame else "OdomFrame"
    tree = ast.parse(inspect.getsource(builtin_records))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [s.target.id for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise AssertionError(f"no typing declaration of {name}")


@pytest.mark.parametrize("mod", SUM8_MODULES, ids=lambda m: m.DESCRIPTION.name)
def test_record_fields_are_the_descriptions(mod) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    cls = mod.CODEC.cls
    names = tuple(f.name for f in dataclasses.fields(cls))
    assert names == mod.DESCRIPTION.field_names == mod.FIELDS
    # Made below the engine, which makes the one codec of the description (the frame
    # module takes it from there): pickling finds the class where it was made.
    assert cls.__slots__ == names
    assert cls.__module__ == "fwbridge.protocols.engine.builtin_records"
    assert cls is getattr(mod, cls.__name__)
    assert _typing_fields(mod) == list(names)  # the type checker's view cannot drift either


def test_record_types_behave_as_the_hand_written_ones_did() -> None:
    import pickle

    frame = odom_frame.OdomFrame(vx=0.5, vy=0.0, wz=0.25, yaw_deg=90.0)
    assert frame == odom_frame.OdomFrame(0.5, 0.0, 0.25, 90.0)
    assert hash(frame) == hash(odom_frame.OdomFrame(0.5, 0.0, 0.25, 90.0))
    assert repr(frame) == "OdomFrame(vx=0.5, vy=0.0, wz=0.25, yaw_deg=90.0)"
    assert pickle.loads(pickle.dumps(frame)) == frame
    assert not hasattr(frame, "__dict__")
    assert cmd_frame.CmdFrame() == cmd_frame.ZERO == cmd_frame.CmdFrame(0.0, 0.0, 0.0)
    assert cmd_frame.CmdFrame(wz=1.0) == cmd_frame.CmdFrame(0.0, 0.0, 1.0)
    assert pickle.loads(pickle.dumps(cmd_frame.ZERO)) == cmd_frame.ZERO
    assert odom_frame.OdomFrame(math.nan, 0, math.inf, 0).nonfinite == ("vx", "wz")
    assert cmd_frame.ZERO.nonfinite == ()


def test_the_odometry_record_follows_its_toml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A changed odom.toml (a copy, read in a fresh interpreter) changes the record."""
    import subprocess
    import sys

    from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin_text

    for name in BUILTIN_NAMES:
        (tmp_path / f"{name}.toml").write_text(builtin_text(name))
    text = builtin_text("odom").replace(
        '[checksum]', '[[field]]\nname = "temp_c"\ntype = "f32"\n\n[checksum]')
    (tmp_path / "odom.toml").write_text(text)
    probe = (
        "import dataclasses, fwbridge.protocols.descriptions.builtin as b, pathlib\n"
        f"b.FRAMES_DIR = pathlib.Path({str(tmp_path)!r})\n"
        "from fwbridge.protocols import odom_frame as o\n"
        "f = o.OdomFrame(1.0, 2.0, 3.0, 4.0, temp_c=21.5)\n"
        "assert o.decode(o.encode(f)) == f\n"
        "print([x.name for x in dataclasses.fields(o.OdomFrame)], o.SIZE)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.split() == ["['vx',", "'vy',", "'wz',", "'yaw_deg',", "'temp_c']", "23"]



def test_a_built_in_frame_keeps_its_one_schema_when_many_descriptions_pass() -> None:
    # Users' descriptions share a bounded cache; a process that loads more of them than it
    # holds must not give a built-in frame a second schema.
    from fwbridge.protocols.descriptions.builtin import builtin_text
    from fwbridge.protocols.descriptions.loader import loads
    from fwbridge.protocols.engine.codec import schema_of

    first = schema_of(odom_frame.DESCRIPTION)
    text = builtin_text("odom")
    for k in range(100):
        schema_of(loads(text.replace('name = "odom"', f'name = "odom{k}"'), f"user{k}.toml"))
    assert schema_of(odom_frame.DESCRIPTION) is first is odom_frame.CODEC.schema
