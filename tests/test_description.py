"""Frame descriptions: the built-ins come from TOML, user frames load, bad ones are refused."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from construct import (
    Bytes,
    Checksum,
    Const,
    Enum,
    FlagsEnum,
    Float32l,
    Int8sl,
    Int8ul,
    Int16ul,
    RawCopy,
    Rebuild,
    Struct,
    len_,
    this,
)

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.action_frame import InstructionType, SubCommand
from fwbridge.protocols.checksums import sum8
from fwbridge.protocols.crc import crc_function
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.descriptions.loader import DescriptionError, load, loads
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.errors import ChecksumError, FieldValueError, LengthError
from fwbridge.protocols.families import actuator
from fwbridge.protocols.families.actuator import Fault
from tests.conftest import FIXTURES

FRAMES = FIXTURES / "frames"


def _old_sum8_schema(fields: tuple[str, ...]) -> Struct:
    """The sum-8 schema as it was written by hand before descriptions."""
    body = Struct(*(name / Float32l for name in fields))
    return Struct("header" / Const(b"\xaa\x55"), "body" / RawCopy(body),
                  "checksum" / Checksum(Int8ul, sum8, this.body.data))


def _old_action_schema(crc: str) -> Struct:
    """The action schema as it was written by hand before descriptions."""
    body = Struct(
        "machine" / Int8ul,
        "type" / Enum(Int8ul, InstructionType),
        "length" / Rebuild(Int16ul, len_(this.data)),
        "sub" / Enum(Int8ul, SubCommand),
        "data" / Bytes(this.length),
    )
    return Struct("header" / Const(b"\xfe\xef"), "body" / RawCopy(body),
                  "crc" / Checksum(Int16ul, crc_function(crc), this.body.data),
                  "trailer" / Const(b"\xfd\xdf"))


_OLD_ACTUATOR = Struct(
    "angle" / Int8sl, "speed" / Int8ul, "current" / Int8ul, "module_id" / Int8ul,
    "command" / Enum(Int8ul, SubCommand), "fault" / FlagsEnum(Int8ul, Fault),
    "reserved_a" / Int8ul, "reserved_b" / Int8ul,
)


def test_sum8_schemas_from_descriptions_match_the_hand_written_ones_on_golden_vectors() -> None:
    golden = json.loads((FIXTURES / "sum8_golden.json").read_text())
    for mod in (odom_frame, cmd_frame):
        old = _old_sum8_schema(mod.FIELDS)
        assert mod.SCHEMA is mod.CODEC.schema
        for vec in golden[mod.CODEC.name]:
            raw = bytes.fromhex(vec["hex"])
            value = {"body": {"value": vec["fields"]}}
            assert mod.SCHEMA.build(value) == old.build(value) == raw
            assert mod.SCHEMA.parse(raw).body.value == old.parse(raw).body.value


def test_action_schema_from_its_description_matches_the_hand_written_one() -> None:
    golden = json.loads((FIXTURES / "action_golden.json").read_text())
    for vec in golden["frames"]:
        raw = bytes.fromhex(vec["hex"])
        fields = dict(vec["fields"], data=bytes.fromhex(vec["fields"]["data"]))
        new, old = action_frame.schema(vec["crc"]), _old_action_schema(vec["crc"])
        value = {"body": {"value": fields}}
        assert new.build(value) == old.build(value) == raw
        assert new.parse(raw).body.value == old.parse(raw).body.value


def test_actuator_schema_from_its_description_matches_the_hand_written_one() -> None:
    golden = json.loads((FIXTURES / "actuator_golden.json").read_text())
    for vec in golden["structs"]:
        raw = bytes.fromhex(vec["hex"])
        assert actuator.SCHEMA.build(vec["fields"]) == _OLD_ACTUATOR.build(vec["fields"]) == raw
        assert actuator.SCHEMA.parse(raw) == _OLD_ACTUATOR.parse(raw)


def test_builtin_enum_labels_are_the_python_enums() -> None:
    act = builtin("action")
    assert dict(act.field("type").enum) == {
        v: m.name for v, m in InstructionType._value2member_map_.items()}
    assert dict(act.field("sub").enum) == {
        v: m.name for v, m in SubCommand._value2member_map_.items()}
    assert dict(builtin("actuator").field("fault").flags) == {
        f.value: f.name for f in Fault if f.value}


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_generic_codec_agrees_with_the_builtin_codecs(name: str) -> None:
    codec: FrameCodec[object] = FrameCodec(builtin(name))
    golden = {"odom": ("sum8_golden.json", "odom"), "cmd": ("sum8_golden.json", "cmd"),
              "action": ("action_golden.json", "frames"),
              "actuator": ("actuator_golden.json", "structs")}[name]
    for vec in json.loads((FIXTURES / golden[0]).read_text())[golden[1]]:
        if vec.get("crc", "crc-ccitt-false") != "crc-ccitt-false":
            continue
        raw = bytes.fromhex(vec["hex"])
        frame = codec.decode(raw)
        assert codec.decode_with_schema(raw) == frame
        assert codec.encode(frame) == codec.encode_with_schema(frame) == raw
        want = {k: (bytes.fromhex(v) if k == "data" else v) for k, v in vec["fields"].items()}
        assert {k: (int(v) if not isinstance(v, (bytes, float)) else v)
                for k, v in codec.to_mapping(frame).items()} == want


def test_user_frame_scaled_big_endian_crc16_modbus() -> None:
    codec: FrameCodec[object] = FrameCodec(load(FRAMES / "imu.toml"))
    assert codec.size == 20 and codec.desc.checksum is not None
    assert codec.desc.checksum.algorithm == "modbus"
    frame = codec.from_mapping({"seq": 3, "mode": 1, "ax": 0.5, "ay": -1, "temp": 25.5})
    raw = codec.encode(frame)
    assert raw[:2] == b"\x5a\xa5" and raw[4:6] == (50).to_bytes(2, "big")
    assert raw[12:14] == (55).to_bytes(2, "little", signed=True)  # per-field byte order
    assert crc_function("modbus")(raw[2:-2]) == int.from_bytes(raw[-2:], "little")
    assert codec.encode_with_schema(frame) == raw
    assert codec.decode(raw) == codec.decode_with_schema(raw) == frame
    assert codec.decode(raw).mode.name == "run"
    with pytest.raises(ChecksumError, match="imu frame: checksum"):
        codec.decode(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(FieldValueError,
                       match=r"ax: 4000.0 is out of range -327.68..327.67 \(i16, scaled\)"):
        codec.encode(codec.from_mapping({"ax": 4.0 * 1000}))


def test_length_directed_frame_counting_the_whole_frame() -> None:
    codec: FrameCodec[object] = FrameCodec(load(FRAMES / "log.toml"))
    raw = codec.encode(codec.from_mapping({"level": 3, "text": b"\r\nhi", "tick": 513}))
    assert raw[2] == len(raw) and raw.endswith(b"\r\n")
    assert codec.decode(raw) == codec.decode_with_schema(raw)
    with pytest.raises(LengthError, match="log frame: len"):
        codec.decode(raw[:3] + b"x" + raw[3:])


GOOD = """
[frame]
name = "imu"
header = "5A A5"

[[field]]
name = "len"
type = "u8"

[[field]]
name = "text"
type = "bytes"

[length]
field = "len"
data = "text"

[checksum]
algorithm = "sum8"
"""


def _bad(text: str) -> DescriptionError:
    with pytest.raises(DescriptionError) as info:
        loads(textwrap.dedent(text), "imu.toml")
    return info.value


BASE = """\
[frame]
name = "imu"
header = "5A A5"

[[field]]
name = "ax"
type = "i16"

[[field]]
name = "n"
type = "u8"
"""


@pytest.mark.parametrize(("text", "message"), [
    (BASE.replace('type = "i16"', 'type = "i24"'),
     "imu.toml:7: field[1].type: unknown type 'i24'"),
    (BASE + '[length]\nfield = "size"\ndata = "ax"\n',
     "imu.toml:13: length.field: no field named 'size'"),
    (BASE.replace('header = "5A A5"\n', ""),
     "imu.toml:1: frame.header: required"),
    (BASE.replace('"5A A5"', '"5A G5"'), "imu.toml:3: frame.header: not hex bytes"),
    (BASE + '[checksum]\nalgorithm = "crc-17"\n',
     "imu.toml:13: checksum.algorithm: unknown checksum algorithm 'crc-17'"),
    (BASE + '[checksum]\nalgorithm = "sum8"\nspan = "body"\n',
     "imu.toml:14: checksum.span: 'body': choose one of payload, after-header, all"),
    (BASE.replace('name = "n"', 'name = "ax"'),
     "imu.toml:10: field[2].name: 'ax' is declared twice"),
    (BASE.replace('type = "u8"', 'type = "bytes"'),
     "imu.toml:11: field[2].type: bytes field 'n' needs a size, or a [length] table"),
    (BASE.replace('type = "u8"', 'type = "bytes"') + '[length]\nfield = "ax"\ndata = "n"\n',
     "imu.toml:13: length.field: 'ax' must be a plain unsigned integer field, not i16"),
    ('[frame]\nname = "f"\nheader = "01"\n[[field]]\nname = "text"\ntype = "bytes"\n'
     '[[field]]\nname = "n"\ntype = "u8"\n[length]\nfield = "n"\ndata = "text"\n',
     "imu.toml:12: length.data: 'text' comes before its length field 'n'"),
    (BASE + 'colour = "red"\n', "imu.toml:12: field[2].colour: unknown key"),
    (BASE.replace('type = "u8"', 'type = "u8"\nenum = { 300 = "big" }'),
     "imu.toml:12: field[2].enum: 300 does not fit in u8"),
    (BASE.replace('type = "u8"', 'type = "u8"\nflags = { 3 = "two" }'),
     "imu.toml:12: field[2].flags: 3 is not a single bit"),
    (BASE.replace('type = "i16"', 'type = "i16"\nscale = 0'),
     "imu.toml:8: field[1].scale: must not be 0"),
    (BASE.replace('name = "ax"', 'name = "header"'), "imu.toml:6: field[1].name: 'header' is "
     "reserved"),
    (BASE.replace('name = "imu"', 'name = "IMU frame"'), "imu.toml:2: frame.name: 'IMU frame' "
     "is not a name"),
    (BASE + "[[field]\n", "imu.toml:12: toml: not valid TOML"),
    (BASE.replace('name = "n"', 'name = "end"'), "imu.toml:10: field[2].name: 'end' is a keyword "
     "of the generated C or Lua code"),
    (BASE + '[can]\n[[can.message]]\nname = "m"\nid = 0x100\n',
     "frame.header: a CAN payload has no header"),
    (BASE.replace('header = "5A A5"\n', "") + '[can]\n[[can.message]]\nname = "m"\nid = 0x800\n',
     "imu.toml:14: can.message[1].id: 0x800 does not fit a 11-bit identifier"),
    (BASE.replace('"i16"', '"u64"').replace('header = "5A A5"\n', "")
     + '[can]\n[[can.message]]\nname = "m"\nid = 1\n',
     "can: a CAN payload has at most 8 bytes; the fields take 9"),
])
def test_bad_descriptions_are_refused_naming_file_line_and_key(text: str, message: str) -> None:
    err = _bad(text)
    assert str(err).startswith(message) or message in str(err), str(err)


def _alt(value: str, text: str = GOOD) -> str:
    return text.replace('header = "5A A5"\n', f'header = "5A A5"\nalt_headers = {value}\n')


@pytest.mark.parametrize(("text", "message"), [
    (_alt('["5A"]'), "imu.toml:5: frame.alt_headers: '5A' is 1 bytes; the header is 2"),
    (_alt('["5A A6 00"]'), "imu.toml:5: frame.alt_headers: '5A A6 00' is 3 bytes"),
    (_alt('["5A A5"]'), "imu.toml:5: frame.alt_headers: '5A A5' is given twice (or is the "
     "header itself)"),
    (_alt('["5A A6", "5a a6"]'), "imu.toml:5: frame.alt_headers: '5a a6' is given twice"),
    (_alt('["5A G6"]'), "imu.toml:5: frame.alt_headers: not hex bytes: '5A G6'"),
    (_alt('"5A A6"'), "imu.toml:5: frame.alt_headers: expected an array, got '5A A6'"),
    (_alt("[0x5AA6]"), "imu.toml:5: frame.alt_headers: expected hex strings"),
    (_alt('["5A 00", "5A 01", "5A 02", "5A 03", "5A 04"]'),
     "imu.toml:5: frame.alt_headers: 5 headers; at most 4"),
    (_alt('["5A A6"]', BASE), "imu.toml:4: frame.alt_headers: only a length-directed frame"),
])
def test_bad_alternative_headers_are_refused_naming_the_key(text: str, message: str) -> None:
    err = _bad(text)
    assert str(err).startswith(message), str(err)
    assert err.key == "frame.alt_headers"


def test_alternative_headers_load_and_the_action_frame_names_fe_ff() -> None:
    desc = loads(_alt('["5A A6", "0x5B,0xA5"]'), "imu.toml")
    assert desc.alt_headers == (b"\x5a\xa6", b"\x5b\xa5")
    assert loads(GOOD, "imu.toml").alt_headers == ()
    assert builtin("action").alt_headers == (b"\xfe\xff",)
    assert all(builtin(n).alt_headers == () for n in ("odom", "cmd", "actuator"))


def test_a_good_variable_description_loads() -> None:
    desc = loads(GOOD, "imu.toml")
    assert desc.size is None and desc.min_size == 2 + 1 + 1 and desc.max_size == 4 + 255


def test_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(DescriptionError, match="no such file"):
        load(tmp_path / "nope.toml")
