"""Generated code from hostile descriptions, and the files the generators read and write.

Text that reads otherwise than it compiles (bidirectional overrides, controls) is
refused at load and escaped by every generator; the C is clean under gcc and clang
with -Werror; a flags field's high bits make a dissector that loads and dissects in
tshark; a DBC is refused where a reader would take it for broken (keywords as names,
one CAN ID twice, non-finite numbers), checked with cantools; robot files,
descriptions and JSON configs are bounded in nesting and size; ``gen`` writes its own
earlier output again without ``--force``, and nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import FrameDescription, load, loads
from fwbridge.protocols.descriptions.names import DBC_KEYWORDS
from tests.c_harness import CFLAGS, compiler
from tests.conftest import FIXTURES
from tests.description_refusals import IMU, description_files, gen_error, one_error, refused
from tests.helpers import run_cli

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})

CAN = """\
[frame]
name = "wheel"
{frame}
[[field]]
name = "a"
type = "u8"
{field}
[[field]]
name = "b"
type = "u8"
[can]
[[can.message]]
name = "{msg}"
id = 0x100
sender = "{sender}"
{more}
"""


def _can(frame: str = "", field: str = "", msg: str = "m", sender: str = "ecu",
         more: str = "") -> str:
    return CAN.format(frame=frame, field=field, msg=msg, sender=sender, more=more)


def _cc(cc: str, tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    src = [str(tmp_path / n) for n in files if n.endswith(".c")]
    return subprocess.run([cc, *CFLAGS, "-c", *src, "-o", os.devnull], capture_output=True,
                          text=True, cwd=tmp_path)


def _compilers() -> list[str]:
    """gcc, and clang and the Cortex-M compiler where installed (firmware is built with it)."""
    return [compiler(), *(cc for cc in ("clang", "arm-none-eabi-gcc") if shutil.which(cc))]


# -- text: refused at load, escaped by every generator ----------------------------------------
@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200f", "\u200b", "\ufeff", "\x07",
                                  "\u0085", "\ue000", "\u2028"])
@pytest.mark.parametrize(("frame", "field", "key"), [
    ('doc = "IMU {c} frame"', "", "frame.doc"),
    ("", 'unit = "m{c}s"', "field[1].unit"),
    ("", 'doc = "acceleration {c}"', "field[1].doc"),
])
def test_hidden_characters_in_text_are_refused_naming_key_and_code_point(
        char: str, frame: str, field: str, key: str) -> None:
    c = f"\\u{ord(char):04X}" if unicodedata.category(char) == "Cc" else char  # TOML escape
    text = IMU.format(frame=frame.format(c=c), field=field.format(c=c))
    err = refused(text)
    assert f": {key}: U+{ord(char):04X}" in err, err
    assert char not in err  # the error line shows the code point, not the character


@pytest.mark.parametrize("key", ["unit", "doc"])
def test_hidden_characters_in_can_signal_text_are_refused(key: str) -> None:
    more = ('[[can.signal]]\nname = "ab"\ntype = "u16"\nbyte = 0\nreplaces = ["a", "b"]\n'
            f'{key} = "x\u202ey"\n')
    assert f": can.signal[1].{key}: U+202E (RIGHT-TO-LEFT OVERRIDE)" in refused(_can(more=more))


def test_gen_refuses_a_bidi_override_with_one_error_line(tmp_path: Path) -> None:
    text = IMU.format(frame='doc = "safe \u202e evil"', field="")
    for verb in ("c", "wireshark"):
        assert "frame.doc: U+202E (RIGHT-TO-LEFT OVERRIDE)" in gen_error(tmp_path, verb, text)
    can = _can(field='unit = "m\u2066s"')
    assert "field[1].unit: U+2066 (LEFT-TO-RIGHT ISOLATE)" in gen_error(tmp_path, "dbc", can)


@pytest.mark.parametrize(("text", "key"), [
    (IMU.replace('name = "imu"', 'name = "im\u202eu"'), "frame.name"),
    (IMU.replace('name = "ax"', 'name = "\u0430x"'), "field[1].name"),  # Cyrillic a
    (IMU.format(frame="", field='enum = { 0 = "id\u2066le" }'), "field[1].enum"),
    (IMU.format(frame="", field="") + 'name = "s\u200bum"\n', "checksum.name"),
    (_can(msg="m\u202e"), "can.message[1].name"),
    (_can(sender="ecu\u202e"), "can.message[1].sender"),
    (_can(more='[[can.signal]]\nname = "a\u202eb"\ntype = "u16"\nbyte = 0\n'
               'replaces = ["a", "b"]\n'), "can.signal[1].name"),
])
def test_names_are_ascii_identifiers_so_no_hidden_character_passes(text: str, key: str) -> None:
    """Names become identifiers: only ASCII letters, digits and _ (checked, not escaped)."""
    err = refused(text.replace("{frame}", "").replace("{field}", ""))
    assert f": {key}: " in err and "\u202e" not in err and "\u2066" not in err, err


def test_an_unknown_key_with_hidden_characters_is_shown_escaped() -> None:
    err = refused(IMU.format(frame='"do\u202ec" = "x"', field=""))
    assert "frame.'do\\u202ec': unknown key" in err and "\u202e" not in err, err


def test_printable_text_beyond_ascii_is_still_taken() -> None:
    desc = loads(IMU.format(frame='doc = "Beschleunigung, µ-Gerät"', field='unit = "°/s²"'))
    assert desc.fields[0].unit == "°/s²"


EVIL = "a\u202eb\u2066c\x00d\x1be\u0085f\u2028g\ud800h\\i??/j*/k/*l\"m\nn"


def _evil(desc: FrameDescription) -> FrameDescription:
    """``desc`` with every text field set to EVIL: built in code, no loader in the way."""
    fields = tuple(dataclasses.replace(f, unit=EVIL, doc=EVIL) for f in desc.fields)
    signals = tuple(dataclasses.replace(s, unit=EVIL, doc=EVIL) for s in desc.can_signals)
    return dataclasses.replace(desc, doc=EVIL, fields=fields, can_signals=signals)


def _shown(text: str) -> set[str]:
    """The hidden characters in ``text`` besides the code's own line ends and tabs."""
    return {f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in HIDDEN
            and c not in "\n\t"}


def test_no_generator_copies_hidden_characters_into_code(tmp_path: Path) -> None:
    from fwbridge.codegen import c, dbc, wireshark

    serial = _evil(load(FIXTURES / "frames" / "imu.toml"))
    actuator = _evil(builtin("actuator"))
    outputs = {**c.generate([serial, actuator], "fw"), "fw.lua": wireshark.generate([serial]),
               "fw.dbc": dbc.generate([actuator])}
    for name, text in outputs.items():
        assert not _shown(text), (name, _shown(text))
    # a backslash: shown in C comments (it would splice lines) and DBC strings, escaped in Lua
    assert "h<U+005C>i" in outputs["fw.h"] and "h<U+005C>i" in outputs["fw.dbc"]
    assert "h\\\\i" in outputs["fw.lua"]
    assert "*/k" not in outputs["fw.h"] and "??/" not in outputs["fw.h"]
    assert "a<U+202E>b<U+2066>c" in outputs["fw.h"]  # shown, not hidden
    assert "a\\226\\128\\174b" in outputs["fw.lua"]  # the same UTF-8 bytes, escaped
    assert outputs["fw.lua"].isascii() and outputs["fw.dbc"].isascii()
    for cc in _compilers():  # gcc: -Wbidi-chars; both: -Werror
        proc = _cc(cc, tmp_path, {k: v for k, v in outputs.items() if k.startswith("fw.")
                                  and k[-2:] in (".h", ".c")})
        assert proc.returncode == 0, (cc, proc.stderr)


def test_the_dbc_of_hostile_text_parses_with_the_text_shown(tmp_path: Path) -> None:
    cantools = pytest.importorskip("cantools")
    from fwbridge.codegen import dbc

    out = tmp_path / "x.dbc"
    out.write_text(dbc.generate([_evil(builtin("actuator"))]), encoding="utf-8")
    db = cantools.database.load_file(str(out))
    sig = db.messages[0].signals[0]
    assert sig.unit == ("a<U+202E>b<U+2066>c<U+0000>d<U+001B>e<U+0085>f<U+2028>g<U+D800>h"
                        "<U+005C>i??/j*/k/*l'm<U+000A>n")
    assert len(db.messages) == len(dbc.generate([builtin("actuator")]).split("\nBO_ ")) - 1


def test_the_dissector_shows_hostile_text_as_the_same_string(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    from fwbridge.codegen import wireshark
    from fwbridge.codegen.lua_check import lua_loads

    lua = tmp_path / "x.lua"
    lua.write_text(wireshark.generate([_evil(load(FIXTURES / "frames" / "imu.toml"))]))
    assert lua_loads(lua) is None


# -- C: clean under gcc and clang --------------------------------------------------------------
def test_the_generated_c_is_clean_under_every_compiler_with_werror(tmp_path: Path) -> None:
    """clang's -Wconversion caught the byte reads of 16-bit fields (int back to uint16_t)."""
    from fwbridge.codegen.c import generate

    big = IMU.format(frame='byte_order = "big"', field="").replace(
        '[checksum]\nalgorithm = "sum8"', '[checksum]\nalgorithm = "crc-16-modbus"\n'
        'byte_order = "big"')
    descs = [builtin(n) for n in ("odom", "cmd", "action", "actuator")] + [
        load(p) for p in sorted((FIXTURES / "frames").glob("*.toml"))] + [
        dataclasses.replace(loads(big), name="imu_be")]
    files = generate(descs, "all", "p_")
    for cc in _compilers():
        proc = _cc(cc, tmp_path, files)
        assert proc.returncode == 0, (cc, proc.stderr[-3000:])


# -- Lua: flag bits above 31 -------------------------------------------------------------------
U64_FLAGS = """\
[frame]
name = "st{k}"
header = "5A A{k}"
byte_order = "{order}"
[[field]]
name = "faults"
type = "{type}"
flags = {{ 1 = "low", 0x80000000 = "b31", 0x100000000 = "b32", {top} = "top" }}
[checksum]
algorithm = "sum8"
"""


@pytest.mark.parametrize(("k", "order", "ftype", "top"), [
    (0, "little", "u64", 1 << 63), (1, "big", "u64", 1 << 63), (2, "little", "i64", 1 << 62)])
def test_flags_above_bit_31_make_a_dissector_that_loads_and_dissects(
        tmp_path: Path, k: int, order: str, ftype: str, top: int) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    from fwbridge.bridge.record.serial_pcapng import RX, CaptureWriter
    from fwbridge.cli_verbs.frames import FrameTap
    from fwbridge.protocols.described import Described

    spec = tmp_path / "st.toml"
    spec.write_text(U64_FLAGS.format(k=k, order=order, type=ftype, top=hex(top)))
    d = Described.of(load(spec))
    values = [1, 1 << 31, 1 << 32, top, top | (1 << 32) | 1, 0]
    frames = [d.codec.encode(d.codec.from_mapping({"faults": v})) for v in values]
    capture = tmp_path / "st.pcapng"
    stream = b"".join(frames)  # as `record -p` writes it: reads of 5 bytes, frames whole
    rx, tap = d.receiver(), FrameTap(d.desc)
    with CaptureWriter(capture, frames=d.desc.name) as cap:
        for i in range(0, len(stream), 5):
            cap.write(RX, stream[i:i + 5])
            tap.feed(stream[i:i + 5])
            for item in rx.feed(stream[i:i + 5]):
                frame = tap.frame(item.offset)
                assert frame is not None
                cap.write_frame(RX, frame)
    lua = tmp_path / "st.lua"
    gen = run_cli("gen", "wireshark", str(spec), "-o", str(lua))
    assert gen.returncode == 0, gen.stderr
    n = f"fwbridge.st{k}.faults"
    proc = subprocess.run(["tshark", "-X", f"lua_script:{lua}", "-r", str(capture), "-Y",
                           "frame.interface_id == 1", "-T", "fields",
                           *[a for f in ("low", "b31", "b32", "top") for a in ("-e", f"{n}.{f}")]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Lua: Error" not in proc.stderr, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    bits = [1, 1 << 31, 1 << 32, top]
    assert rows == [[str(int(bool(v & b))) for b in bits] for v in values]
    plugins = tmp_path / "plugins"
    install = run_cli("wireshark", "install", str(spec), "--dir", str(plugins))
    assert install.returncode == 0, install.stderr
    assert (plugins / "fwbridge.lua").is_file()


def test_gen_wireshark_writes_no_dissector_that_does_not_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    from click.testing import CliRunner

    from fwbridge.cli_verbs.gen import gen_group
    from fwbridge.codegen import wireshark

    out = tmp_path / "x.lua"
    good = wireshark.generate([builtin("odom")])
    monkeypatch.setattr(wireshark, "generate", lambda descs: good + "\nlocal x = nil + 1\n")
    res = CliRunner().invoke(gen_group, ["wireshark", "odom", "-o", str(out)])
    assert res.exit_code != 0
    assert "does not load in tshark" in str(res.exception)
    assert "attempt to perform arithmetic" in str(res.exception)  # tshark's own words
    assert not out.exists()


# -- DBC: what no reader would take ------------------------------------------------------------
#: Keywords cantools reads as names (the attribute types, Vector__XXX): refused all the same.
_CANTOOLS_TAKES = {"INT", "HEX", "FLOAT", "STRING", "ENUM", "VECTOR__XXX"}


@pytest.mark.parametrize("word", sorted(DBC_KEYWORDS))
def test_dbc_keywords_as_names_are_refused_and_would_break_the_dbc(tmp_path: Path,
                                                                   word: str) -> None:
    cantools = pytest.importorskip("cantools")
    from fwbridge.codegen.dbc import generate

    sender = "Vector__XXX" if word == "VECTOR__XXX" else word
    err = refused(_can(sender=sender))
    assert f"can.message[1].sender: {sender!r} is a word of the DBC grammar" in err
    if word.lower().replace("_", "a")[0].isalpha():
        msg_err = refused(_can(msg=word.lower()))
        assert f"can.message[1].name: CAN message {word.lower()!r}" in msg_err
        assert "word of the DBC grammar" in msg_err
    # What the refusal keeps out: the same DBC with the word in the names' places.
    text = generate([loads(_can(msg="mplace", sender="Nplace"))])
    cantools.database.load_string(text, database_format="dbc")
    kept = []  # the places where the word reads back as the name it was given
    for place, msg, node in (("Nplace", "mplace", sender), ("mplace", sender, "Nplace")):
        try:
            db = cantools.database.load_string(text.replace(place, sender),
                                               database_format="dbc")
        except cantools.database.UnsupportedDatabaseFormatError:
            continue
        if [(m.name, m.senders) for m in db.messages] == [(msg, [node])]:
            kept.append(place)
    assert word in _CANTOOLS_TAKES or len(kept) < 2, kept


def test_gen_dbc_refuses_a_keyword_with_one_error_line(tmp_path: Path) -> None:
    err = gen_error(tmp_path, "dbc", _can(msg="sg_"))
    assert "d0.toml" in err and "can.message[1].name" in err and "'sg_'" in err
    err = gen_error(tmp_path, "dbc", _can(sender="BO_"))
    assert "can.message[1].sender: 'BO_'" in err


def test_one_can_id_twice_is_refused_in_a_description_and_across_them(tmp_path: Path) -> None:
    cantools = pytest.importorskip("cantools")
    from fwbridge.codegen.dbc import generate

    two = _can(more='[[can.message]]\nname = "m2"\nid = 0x0FF\nnodes = [0, 3]\n')
    err = gen_error(tmp_path, "dbc", two)
    assert "d0.toml:" in err and "can.message[2].id: CAN ID 0x100 (message 'm2_1')" in err
    assert "message 'm' (can.message[1])" in err
    other = _can(msg="n").replace('name = "wheel"', 'name = "wheel2"')
    err = gen_error(tmp_path, "dbc", _can(), other)
    assert "d1.toml: can.message[1].id: CAN ID 0x100 (message 'n')" in err
    assert "is already message 'm' of" in err and "d0.toml" in err
    extended = other.replace('id = 0x100', 'id = 0x100\nextended = true')
    proc = run_cli("gen", "dbc", *description_files(tmp_path, _can(), extended), "-o",
                   str(tmp_path / "ok.dbc"))
    assert proc.returncode == 0, proc.stderr  # an extended 0x100 is another ID
    assert len(cantools.database.load_file(str(tmp_path / "ok.dbc")).messages) == 2
    # What the refusal keeps out: a reader keeps one of the two messages of one ID.
    text = generate([loads(_can()), loads(other.replace("0x100", "0x101"))])
    db = cantools.database.load_string(text.replace("BO_ 257 ", "BO_ 256 ").replace(
        " 257 ", " 256 "), database_format="dbc")
    assert db.get_message_by_frame_id(0x100).name == "n"  # "m" is gone


@pytest.mark.parametrize(("key", "value"), [("scale", "inf"), ("offset", "nan"),
                                            ("scale", "-inf")])
def test_non_finite_can_signal_numbers_are_refused(tmp_path: Path, key: str, value: str) -> None:
    more = ('[[can.signal]]\nname = "ab"\ntype = "u16"\nbyte = 0\nreplaces = ["a", "b"]\n'
            f'{key} = {value}\n')
    err = gen_error(tmp_path, "dbc", _can(more=more))
    assert "d0.toml:" in err and f"can.signal[1].{key}: {float(value)!r}" in err


def test_a_scale_whose_range_is_not_finite_is_refused_by_gen_dbc(tmp_path: Path) -> None:
    cantools = pytest.importorskip("cantools")
    from fwbridge.codegen.dbc import generate

    err = gen_error(tmp_path, "dbc", _can(field="scale = 1e307"))
    assert "d0.toml: field[1].scale: 1e+307 on 8 bits" in err and "inf" in err
    # What the refusal keeps out: the numbers as Python writes them, which cantools refuses.
    text = generate([loads(_can(field="scale = 2.0"))])
    assert "(2,0) [0|510]" in text
    for bad in ("(inf,0) [0|inf]", "(2,nan) [nan|nan]"):
        with pytest.raises(cantools.database.UnsupportedDatabaseFormatError):
            cantools.database.load_string(text.replace("(2,0) [0|510]", bad),
                                          database_format="dbc")


def test_field_scales_and_offsets_stay_refused_when_not_finite() -> None:
    for key, value in (("scale", "inf"), ("offset", "nan")):
        assert f"field[1].{key}: {float(value)!r}" in refused(_can(field=f"{key} = {value}"))


# -- nesting and size of what the tool reads ----------------------------------------------------
DEEP = "a = " + "[" * 3000 + "]" * 3000 + "\n"
DOTTED = "[link]\n" + "x" + ".y" * 3000 + " = 1\n"


@pytest.mark.parametrize("text", [DEEP, "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n",
                                  DOTTED, "[" + ".".join(["t"] * 3000) + "]\n"],
                         ids=["arrays", "inline-tables", "dotted-key", "table-header"])
def test_a_deeply_nested_robot_file_is_one_error_line(tmp_path: Path, text: str) -> None:
    robot = tmp_path / "robot.toml"
    robot.write_text(text)
    err = one_error(run_cli("bridge", str(robot), "--duration", "0.1"))
    assert f"{robot}:" in err and "nested more than 32 deep" in err


def test_every_robot_file_reader_bounds_nesting(tmp_path: Path) -> None:
    from fwbridge.bridge.node.config import load_config
    from fwbridge.bridge.robots.arm.config import load_arm_config
    from fwbridge.bridge.ros2.config import load_ros2
    from fwbridge.protocols.errors import ConfigError

    for k, text in enumerate((DEEP, DOTTED)):
        robot = tmp_path / f"r{k}.toml"
        robot.write_text(text)
        for reader in (load_config, load_ros2, load_arm_config):
            with pytest.raises(ConfigError, match="nested more than 32 deep"):
                reader(robot)


def test_a_robot_file_over_a_megabyte_is_one_error_line(tmp_path: Path) -> None:
    robot = tmp_path / "robot.toml"
    robot.write_text("#" * (1 << 20) + "\nuse_sim = true\n")
    err = one_error(run_cli("bridge", str(robot), "--duration", "0.1"))
    assert "more than 1048576 bytes" in err


def test_a_deeply_nested_json_config_is_one_error_line(tmp_path: Path) -> None:
    from fwbridge.bridge.node.config import load_calibration
    from fwbridge.protocols.errors import ConfigError

    calib = tmp_path / "calib.json"
    calib.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ConfigError, match="nested more than 32 deep"):
        load_calibration(calib)
    fish = tmp_path / "fish.json"
    fish.write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    err = one_error(run_cli("fish", "--port", "sim://fish", "config", "set", str(fish)))
    assert "nested more than 32 deep" in err


def test_a_description_nested_by_dotted_keys_is_one_error_line(tmp_path: Path) -> None:
    text = IMU.format(frame="doc" + ".a" * 3000 + " = 1", field="")
    assert "frame.doc" not in refused(text)  # refused before it is read as a doc
    err = gen_error(tmp_path, "c", text)
    assert "d0.toml:4: toml: a dotted key of more than 32 parts" in err


def test_the_nesting_scan_skips_strings_and_comments_and_parses_as_tomllib() -> None:
    import tomllib

    from fwbridge.protocols.config_text import TextLimitError, check_nesting, parse_toml

    quiet = ('a = "[[[[{{{{\\"[[[["\nb = \'[[[[\'\nc = """\n[[[[\\"""\n"""\nd = \'\'\'[[[[\n\'\'\''
             '\n# [[[[[[[[\ne = [[1.5, 2.5], {x.y = [1]}]\n[[t.u]]\n"k.[" = 1\n') * 40
    check_nesting(quiet, "x", limit=4)
    assert parse_toml(quiet[: len(quiet) // 40], "x") == tomllib.loads(quiet[: len(quiet) // 40])
    for toml in sorted(Path(__file__).parent.parent.glob("**/*.toml")):
        if ".venv" in toml.parts or "build" in toml.parts:
            continue
        text = toml.read_text()
        try:
            want = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        assert parse_toml(text, str(toml)) == want, toml
    with pytest.raises(TextLimitError, match=r"^x:3: "):
        check_nesting("a = 1\nb = 2\nc = [[[[[\n", "x", limit=4)
    with pytest.raises(TextLimitError, match=r"^x:1: "):
        check_nesting('{"a": [[[[[1]]]]]}', "x", "json", limit=4)


# -- gen writes its own output again, nothing else ----------------------------------------------
@pytest.mark.parametrize(("verb", "outs"), [
    ("c", ["fwframes.h", "fwframes.c"]), ("wireshark", ["fwbridge.lua"]),
    ("dbc", ["fwbridge_actuators.dbc"])])
def test_gen_writes_its_own_output_again_without_force(tmp_path: Path, verb: str,
                                                       outs: list[str]) -> None:
    spec = "actuator" if verb == "dbc" else "odom"
    out = tmp_path if verb == "c" else tmp_path / outs[0]
    first = run_cli("gen", verb, spec, "-o", str(out))
    assert first.returncode == 0, first.stderr
    before = {n: (tmp_path / n).read_text() for n in outs}
    again = run_cli("gen", verb, spec, "-o", str(out))  # a Makefile rule, run again
    assert again.returncode == 0, again.stderr
    assert {n: (tmp_path / n).read_text() for n in outs} == before
    mine = tmp_path / outs[-1]
    mine.write_text("hand-written, not generated\n")
    err = one_error(run_cli("gen", verb, spec, "-o", str(out)))
    assert "was not generated by fwbridge" in err and "--force" in err
    assert mine.read_text() == "hand-written, not generated\n"
    forced = run_cli("gen", verb, spec, "-o", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert mine.read_text() == before[outs[-1]]


def test_gen_never_writes_through_a_link_to_its_own_output(tmp_path: Path) -> None:
    target = tmp_path / "real.lua"
    assert run_cli("gen", "wireshark", "odom", "-o", str(target)).returncode == 0
    kept = target.read_text()
    link = tmp_path / "link.lua"
    link.symlink_to(target)
    err = one_error(run_cli("gen", "wireshark", "odom", "cmd", "-o", str(link)))
    assert "symbolic link" in err
    assert link.is_symlink() and target.read_text() == kept
    proc = run_cli("gen", "wireshark", "odom", "cmd", "-o", str(link), "--force")
    assert proc.returncode == 0, proc.stderr
    assert not link.is_symlink() and "cmd" in link.read_text()
    assert target.read_text() == kept  # the link was replaced, its target left alone


def test_the_marker_is_the_first_line_each_generator_writes() -> None:
    from fwbridge.codegen import c, dbc, wireshark

    files = c.generate([builtin("odom")], "robot")
    assert files["robot.h"].startswith(c.marker("robot.h"))
    assert files["robot.c"].startswith(c.marker("robot.c"))
    assert wireshark.generate([builtin("odom")]).startswith(wireshark.MARKER)
    assert dbc.generate([builtin("actuator")]).startswith(dbc.MARKER)
