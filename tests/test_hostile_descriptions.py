"""Frame descriptions are untrusted input: what a shared file can make the generators write.

Each case here was once accepted and produced code that did something else than the
description says (C that compiles with a check removed, a DBC with an extra message, a
Lua plugin that does not load) or a process that ran out of memory or time.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import DescriptionError, FrameDescription, loads
from fwbridge.protocols.descriptions.names import C_RESERVED_NAMES, generated_names
from tests.c_harness import CFLAGS, compiler
from tests.description_refusals import description_files, gen_error, imu, refused
from tests.frame_strategies import descriptions
from tests.helpers import run_cli


# -- text that reaches generated code ------------------------------------------------------------
@pytest.mark.parametrize(("frame", "field", "key"), [
    ('doc = "IMU frame */\\n#define memcmp(a, b, n) 0\\n/* "', "", "frame.doc"),
    ("", 'unit = "m */ int injected_by_unit = 42; /* x"', "field[1].unit"),
    ("", 'doc = "a\\nb"', "field[1].doc"),
    ("", 'unit = "m\\"\\nBO_ 2046 x: 8 y"', "field[1].unit"),
])
def test_text_that_would_escape_a_comment_or_string_is_refused(frame: str, field: str,
                                                               key: str) -> None:
    assert f": {key}: " in refused(imu(frame, field))


def test_doc_is_type_checked_one_error_line(tmp_path: Path) -> None:
    assert "x.toml:4: frame.doc: expected a string" in refused(imu("doc = { a = 1 }"))
    err = gen_error(tmp_path, "c", imu("doc = { a = 1 }"))
    assert "frame.doc: expected a string" in err


def test_a_c_comment_terminator_in_text_cannot_reach_the_generated_c(tmp_path: Path) -> None:
    """Even a description built in code (no loader) gets a comment that stays a comment."""
    import dataclasses

    from fwbridge.codegen.c import generate

    desc = loads(imu(), "imu.toml")
    bad = dataclasses.replace(desc, doc="IMU frame */\n#define memcmp(a, b, n) 0\n/* ", fields=(
        dataclasses.replace(desc.fields[0], unit="m */ int injected_by_unit = 42; /* x"),))
    files = generate([bad], "fw")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    harness = tmp_path / "main.c"
    harness.write_text('#include "fw.h"\nint main(void) { const uint8_t z[IMU_SIZE] = {0}; '
                       "return imu_check(z, IMU_SIZE) == -2 ? 0 : 1; }\n")
    proc = subprocess.run([compiler(), *CFLAGS, "-I", str(tmp_path), str(tmp_path / "fw.c"),
                           str(harness), "-o", str(tmp_path / "main")], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    nm = subprocess.run(["nm", str(tmp_path / "main")], capture_output=True, text=True).stdout
    assert "injected_by_unit" not in nm
    assert "#define memcmp" not in "\n".join(
        line for line in files["fw.h"].splitlines() if line.startswith("#"))
    assert subprocess.run([str(tmp_path / "main")], check=False).returncode == 0  # header checked


def test_a_quote_and_newline_in_text_cannot_add_a_dbc_message(tmp_path: Path) -> None:
    import dataclasses

    import cantools

    from fwbridge.codegen.dbc import generate
    from fwbridge.protocols.descriptions.builtin import builtin

    desc = builtin("actuator")
    evil = 'deg"\nBO_ 2046 evil: 8 Vector__XXX\n SG_ x : 0|8@1+ (1,0) [0|255] "'
    bad = dataclasses.replace(desc, doc=evil, fields=(
        dataclasses.replace(desc.fields[0], unit=evil, doc=evil), *desc.fields[1:]))
    out = tmp_path / "x.dbc"
    out.write_text(generate([bad]))
    db = cantools.database.load_file(str(out))
    assert 0x7FE not in [m.frame_id for m in db.messages]
    assert len(db.messages) == len(cantools.database.load_string(generate([desc])).messages)


def test_dbc_sender_must_be_a_node_name(tmp_path: Path) -> None:
    can = ('[frame]\nname = "w"\n[[field]]\nname = "a"\ntype = "u8"\n[can]\n[[can.message]]\n'
           'name = "m"\nid = 0x100\nsender = "x\\"\\nBO_ 2046 evil: 8 y"\n')
    assert "can.message[1].sender" in refused(can)
    assert "can.message[1].sender" in gen_error(tmp_path, "dbc", can)


# -- names the generated code would define twice ----------------------------------------------
def _fields(*fields: str, name: str = "mm", extra: str = "") -> str:
    body = "".join(f"[[field]]\n{f}\n" for f in fields)
    return f'[frame]\nname = "{name}"\nheader = "5A"\n{body}{extra}'


@pytest.mark.parametrize(("text", "where"), [
    (_fields('name = "max"\ntype = "u8"\nenum = { 1 = "size" }'), "x.toml:7: field[1].enum"),
    (_fields('name = "mode"\ntype = "u8"\nenum = { 0 = "idle", 1 = "IDLE" }'),
     "x.toml:7: field[1].enum"),
    (_fields('name = "f"\ntype = "u8"\nflags = { 1 = "ovc", 2 = "OVC" }'),
     "x.toml:7: field[1].flags"),
    (_fields('name = "mode"\ntype = "u8"\nenum = { 1 = "a", 0x01 = "b" }'),
     "x.toml:7: field[1].enum"),
    (_fields('name = "a"\ntype = "u8"\nenum = { 1 = "x_scale" }',
             'name = "a_x"\ntype = "i16"\nscale = 0.5'), "field[2].name"),
    (_fields('name = "n"\ntype = "u8"', 'name = "text"\ntype = "bytes"',
             'name = "text_len"\ntype = "u8"', extra='[length]\nfield = "n"\ndata = "text"\n'),
     "field[3].name"),
    (_fields('name = "linux"\ntype = "u8"'), "x.toml:5: field[1].name"),
    (_fields('name = "unix"\ntype = "u8"'), "x.toml:5: field[1].name"),
    (_fields('name = "i386"\ntype = "u8"'), "x.toml:5: field[1].name"),
    (_fields('name = "a"\ntype = "u8"', name="uint8"), "x.toml:2: frame.name"),
])
def test_names_the_generated_code_would_define_twice_are_refused_at_load(text: str,
                                                                        where: str) -> None:
    assert where in refused(text)


@pytest.mark.parametrize("second", ["a_put", "a_max"])
def test_frames_whose_generated_names_collide_are_refused_by_gen_c(tmp_path: Path,
                                                                   second: str) -> None:
    a = _fields('name = "x"\ntype = "u8"', name="a", extra='[checksum]\nalgorithm = "crc-8"\n')
    b = _fields('name = "x"\ntype = "u8"', name=second,
                extra='[checksum]\nalgorithm = "crc-8"\n')
    err = gen_error(tmp_path, "c", a, b)
    assert "d1.toml" in err and "d0.toml" in err
    assert not (tmp_path / "c").exists()


# -- Lua: what loads, and what install keeps ------------------------------------------------------
def test_install_keeps_a_working_plugin_when_the_new_one_does_not_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from click.testing import CliRunner

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    from fwbridge.cli_verbs.gen import wireshark_group
    from fwbridge.codegen import wireshark

    plugins = tmp_path / "plugins"
    proc = run_cli("wireshark", "install", "--dir", str(plugins))
    assert proc.returncode == 0, proc.stderr
    good = (plugins / "fwbridge.lua").read_text()
    monkeypatch.setattr(wireshark, "generate", lambda descs: good + "\nthis is not lua (\n")
    res = CliRunner().invoke(wireshark_group, ["install", "--dir", str(plugins)])
    assert res.exit_code != 0
    assert "does not load in tshark" in str(res.exception), res.output
    assert "Lua:" in str(res.exception)
    assert (plugins / "fwbridge.lua").read_text() == good
    assert [p.name for p in plugins.iterdir()] == ["fwbridge.lua"]


def test_thirty_descriptions_make_one_plugin_that_loads(tmp_path: Path) -> None:
    import shutil

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    specs = []
    for k in range(30):
        p = tmp_path / f"f{k}.toml"
        p.write_text(_fields('name = "a"\ntype = "u8"\nunit = "m"',
                             'name = "b"\ntype = "u16"\nscale = 0.5', name=f"f{k}",
                             extra='[checksum]\nalgorithm = "crc-16-modbus"\n').replace(
                                 'header = "5A"', f'header = "5A {k:02X}"'))
        specs.append(str(p))
    proc = run_cli("wireshark", "install", *specs, "--dir", str(tmp_path / "plugins"))
    assert proc.returncode == 0, proc.stderr
    from fwbridge.codegen.lua_check import lua_loads

    assert lua_loads(tmp_path / "plugins" / "fwbridge.lua") is None


# -- resource bounds ------------------------------------------------------------------------------
def _child_rss_mb(code: str) -> tuple[int, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest child so far: only a larger one moves it
    return int(proc.stdout.strip() or 0), max(rss, before) / 1024


def test_the_fixed_receiver_scans_a_flood_of_headers_in_bounded_memory() -> None:
    code = """
    from fwbridge.protocols.descriptions.loader import loads
    from fwbridge.protocols.described import Described
    text = '''[frame]
    name = "big"
    header = "AA 55"
    [[field]]
    name = "blob"
    type = "bytes"
    size = 4000
    [checksum]
    algorithm = "crc-16-modbus"
    '''
    d = Described.of(loads(text))
    rx = d.receiver()
    got = rx.feed(b"\\xaa\\x55" * (1 << 19))
    rx.finish()
    assert rx.stats.bytes == 1 << 20 and not got
    import resource
    # VmHWM: this process image's own peak (ru_maxrss keeps the forking parent's across exec)
    print(next(int(l.split()[1]) for l in open("/proc/self/status")
               if l.startswith("VmHWM:")) // 1024)
    """
    self_mb, _ = _child_rss_mb(code)
    assert self_mb < 300, f"{self_mb} MB"


def test_a_large_frame_with_a_wide_crc_is_received_in_bounded_memory() -> None:
    code = """
    import resource
    from fwbridge.protocols.descriptions.loader import loads
    from fwbridge.protocols.described import Described
    text = '''[frame]
    name = "big"
    header = "AA 55"
    [[field]]
    name = "seq"
    type = "u16"
    ''' + "".join(f'[[field]]\\nname = "b{k}"\\ntype = "bytes"\\nsize = 4000\\n'
                    for k in range(15)) + '''
    [checksum]
    algorithm = "crc-64"
    '''
    d = Described.of(loads(text))
    frames = [d.codec.encode(d.codec.make(k, *[bytes([k]) * 4000] * 15)) for k in range(3)]
    bad = bytearray(frames[1])
    bad[100] ^= 1
    rx = d.receiver()
    got = rx.feed(b"\\x00\\xaa\\x55" + frames[0] + bytes(bad) + frames[1] + frames[2])
    rx.finish()
    # rejected: the stray header at offset 1, and the frame with a flipped bit
    assert [r.frame.seq for r in got] == [0, 1, 2] and rx.stats.checksum_errors == 2
    # VmHWM: this process image's own peak (ru_maxrss keeps the forking parent's across exec)
    print(next(int(l.split()[1]) for l in open("/proc/self/status")
               if l.startswith("VmHWM:")) // 1024)
    """
    self_mb, _ = _child_rss_mb(code)
    assert self_mb < 150, f"{self_mb} MB"


def test_a_fixed_frame_is_at_most_64_kib() -> None:
    text = _fields(*[f'name = "b{k}"\ntype = "bytes"\nsize = 4096' for k in range(20)])
    assert "frames are at most 64 KiB" in refused(text)


def test_many_fields_and_deep_nesting_are_one_error_line(tmp_path: Path) -> None:
    many = '[frame]\nname = "a"\nheader = "5A"\nfield = [' + ", ".join(
        f'{{name = "f{k}", type = "u8"}}' for k in range(40000)) + "]\n"
    assert "characters; a description has at most 1048576" in refused(many)
    fewer = "field = [" + ", ".join(f'{{name = "f{k}", type = "u8"}}' for k in range(5000)) + (
        ']\n[frame]\nname = "a"\nheader = "5A"\n')
    assert "x.toml:1: field: 5000 fields; at most 1024" in refused(fewer)
    nodes = '[[can.message]]\nname = "m{k}"\nid = {k}\nnodes = [0, 255]\n'
    flood = _fields('name = "a"\ntype = "u8"', extra="[can]\n" + "".join(
        nodes.format(k=k) for k in range(300))).replace('header = "5A"\n', "")
    assert "can.message" in refused(flood)
    deep = '[frame]\nname = "a"\nheader = "5A"\ndoc = ' + "[" * 5000 + "]" * 5000 + "\n"
    assert "nested" in refused(deep)
    for text in (many, fewer, deep, flood):
        gen_error(tmp_path, "c", text)


def test_alternative_headers_are_bounded_and_every_generator_takes_them(tmp_path: Path) -> None:
    """A flood of alternative headers is one error line; a description naming a few goes
    through gen c (its receiver counts them), gen wireshark and the loader alike."""
    from fwbridge.protocols.descriptions.builtin import builtin_text

    text = builtin_text("action")
    flood = text.replace('alt_headers = ["FE FF"]',
                         "alt_headers = [" + ", ".join(['"FE 00"'] * 100_000) + "]")
    assert "frame.alt_headers: 100000 headers; at most 4" in refused(flood)
    gen_error(tmp_path, "c", flood)
    (path,) = description_files(tmp_path, text.replace('["FE FF"]', '["FE FF", "AB CD"]'))
    for verb, out in (("c", tmp_path / "c"), ("wireshark", tmp_path / "x.lua")):
        proc = run_cli("gen", verb, path, "-o", str(out))
        assert proc.returncode == 0, proc.stderr
    header = (tmp_path / "c" / "fwframes.h").read_text()
    assert "uint32_t header_errors;" in header and "uint32_t relaxed_accepts;" in header


# -- decoding ------------------------------------------------------------------------------------
def test_a_scaled_value_that_decodes_to_infinity_counts_as_nonfinite(tmp_path: Path) -> None:
    from fwbridge.protocols.described import Described
    from tests.c_harness import build, run_receiver

    text = _fields('name = "big"\ntype = "u64"\nscale = 1e300', 'name = "n"\ntype = "u8"',
                   extra='[checksum]\nalgorithm = "sum8"\n')
    d = Described.of(loads(text))
    payload = (1 << 40).to_bytes(8, "little") + b"\x07"
    frame = b"\x5a" + payload + bytes([sum(payload) & 0xFF])  # 1e300 * 2**40: inf
    assert d.codec.decode(frame).big == float("inf")
    lib = build([d.desc], tmp_path)
    for stream in (frame, frame * 300):  # the scalar and the numpy scanners
        rx = d.receiver()
        got = rx.feed(stream)
        rx.finish()
        assert len(got) == rx.stats.nonfinite == len(stream) // len(frame)
        _, stats = run_receiver(lib, "mm", len(rx.stats.as_dict()), stream, [])
        assert dict(zip(rx.stats.as_dict(), stats)) == rx.stats.as_dict()


# -- the declared names are the generated ones ------------------------------------------------
_C_DEFS = [re.compile(p, re.M) for p in (
    r"^#define (\w+)", r"^typedef char (\w+)\[", r"^typedef void \(\*(\w+)\)",
    r"^} (\w+);", r"^static const uint8_t (\w+)\[",
    r"^(?:static )?(?:inline )?(?:FWG_NOINLINE )?(?:const )?\w+ \*?(\w+)\(")]


def _c_defined(text: str) -> set[str]:
    asserts = re.findall(r"^FWG_STATIC_ASSERT\(.*, (\w+)\);$", text, re.M)
    return {m for rx in _C_DEFS for m in rx.findall(text)} | {
        f"fwg_static_assert_{a}" for a in asserts}


def _c_members(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for body, name in re.findall(r"^typedef struct \{\n(.*?)^\} (\w+);", text, re.M | re.S):
        out[name] = set(re.findall(r"^    [\w ]+?\*?(\w+)(?:\[[^\]]*\])?;", body, re.M))
    return out


def _declared(desc: FrameDescription, target: str, prefix: str = "") -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for n in generated_names(desc, prefix, (target,)):
        out.setdefault(n.space, set()).add(n.name)
    return out


NAMED = ["odom", "cmd", "action", "actuator"]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.sampled_from(NAMED).map(builtin), descriptions(max_fields=5)),
       st.sampled_from(("", "fwg_")))
def test_the_names_checked_are_the_names_the_generators_write(desc: FrameDescription,
                                                                prefix: str) -> None:
    from fwbridge.codegen import c, dbc, wireshark

    files = c.generate([desc], "fw", prefix)
    common = _c_defined(c.PRELUDE + c.NOINLINE) | {"FW_H"}
    text = files["fw.h"] + files["fw.c"]
    declared = _declared(desc, "c", prefix)
    assert _c_defined(text) - common == declared["c"]
    assert common - {"FW_H"} <= C_RESERVED_NAMES
    members = _c_members(text)
    p = prefix + desc.name
    for struct in (f"{p}_wire", f"{p}_t"):
        assert members[struct] == declared.get(f"c.member:{struct}", set()), struct
    if desc.header:
        lua = wireshark.generate([desc])
        got = set(re.findall(r'Proto(?:Field\.\w+|Expert\.new)\("([^"]+)"', lua))
        assert got - {"fwbridge.unknown"} == _declared(desc, "lua")["lua"]
    if desc.can:
        text = dbc.generate([desc])
        got_dbc: dict[str, set[str]] = {}
        msg = ""
        for line in text.splitlines():
            m = re.match(r"BO_ \d+ (\w+):", line)
            if m:
                msg = m.group(1)
                got_dbc.setdefault("dbc.message", set()).add(msg)
            s = re.match(r" SG_ (\w+) :", line)
            if s:
                got_dbc.setdefault(f"dbc.signal:{msg}", set()).add(s.group(1))
        assert got_dbc == _declared(desc, "dbc")


def test_quoted_keys_and_long_values_stay_one_short_line(tmp_path: Path) -> None:
    err = refused(_fields('name = "m"\ntype = "u8"\nenum = { "1\\n" = "a" }'))
    assert "\n" not in err and "field[1].enum" in err
    err = refused(imu(f'doc = "{"x" * 100000}"'))
    assert "frame.doc: at most 1000 characters" in err
    err = refused(_fields(f'name = "{"m" * 100000}"\ntype = "u8"'))
    assert len(err) < 700 and "\n" not in err
    err = gen_error(tmp_path, "c", _fields('name = "m"\ntype = [' + "1, " * 100000 + "2]"))
    assert len(err) < 700


def test_an_endless_file_is_read_only_as_far_as_a_description_can_go() -> None:
    from fwbridge.protocols.descriptions.loader import load

    with pytest.raises(DescriptionError, match="description has at most"):
        load("/dev/zero")


def test_the_generated_c_compiles_in_the_default_gnu_dialect_where_linux_is_a_macro(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why ``linux`` is refused: under gcc's default dialect it is the macro 1."""
    import dataclasses

    from fwbridge.codegen import c
    from fwbridge.codegen.c import generate
    from fwbridge.protocols.descriptions.loader import load
    from fwbridge.protocols.errors import ConfigError
    from tests.conftest import FIXTURES

    descs = [builtin(n) for n in NAMED] + [load(FIXTURES / "frames" / "imu.toml")]
    gnu = ["-Wall", "-Wextra", "-Werror", "-c"]

    def compiles(ds: list[FrameDescription], name: str) -> subprocess.CompletedProcess[str]:
        for fname, text in generate(ds, name).items():
            (tmp_path / fname).write_text(text)
        return subprocess.run([compiler(), *gnu, str(tmp_path / f"{name}.c"), "-o",
                               str(tmp_path / f"{name}.o")], capture_output=True, text=True)

    assert compiles(descs, "ok").returncode == 0
    imu = descs[-1]
    renamed = dataclasses.replace(imu, fields=(dataclasses.replace(imu.fields[0], name="linux"),
                                               *imu.fields[1:]))
    with pytest.raises(ConfigError, match="field 'linux' makes the C member linux"):
        generate([renamed], "bad")
    monkeypatch.setattr(c, "clash_error", lambda *args: None)  # what the check prevents:
    assert "expected identifier" in compiles([renamed], "bad").stderr
    assert "linux" in str(refused(_fields('name = "linux"\ntype = "u8"')))
