"""What people read: JSON numbers, flag names, times, tables that fit and stay aligned."""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import re
import select
import signal
import struct
import subprocess
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.sim.fish.body import FishBody
from fwbridge.cli_verbs.common import Float32, json_line, json_lines
from fwbridge.cli_verbs.sim import status_text
from fwbridge.protocols import action_frame, odom_frame
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from tests.helpers import FIXTURES, reaped, run_cli, spawn_verb
from tests.tty_run import run_on_pty

F32 = struct.Struct("<f")


def _bits(x: float) -> bytes:
    return F32.pack(x)


@settings(max_examples=2000, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.booleans())
def test_json_float32_is_the_shortest_decimal_that_reads_back_bit_for_bit(
        f: float, batch: bool) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        obj = {"v": Float32(f), "d": f}
        if batch:  # decode's path: a chunk's rows at once
            json_lines([{"v": Float32(0.5), "d": 0.0}, obj])
        else:
            json_line(obj)
    text = buf.getvalue().splitlines()[-1]
    printed = text.split('"v":')[1].split(",")[0]
    back = json.loads(text)
    assert _bits(back["v"]) == _bits(f)  # float32(parse(printed)) == f, bit for bit (-0.0 too)
    assert back["d"] == f  # a double stays exact
    # shortest: the nearest decimal of one significant digit fewer is another float32
    digits = len(printed.lstrip("-").split("e")[0].replace(".", "").strip("0"))
    if digits > 1:
        assert _bits(float(f"{f:.{digits - 2}e}")) != _bits(f), printed


def test_json_float32_nonfinite_stays_a_string() -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        json_line({"a": Float32(math.inf), "b": Float32(math.nan)})
        json_lines([{"a": Float32(-math.inf), "b": Float32(math.nan)}])
    assert [json.loads(line) for line in buf.getvalue().splitlines()] == [
        {"a": "inf", "b": "nan"}, {"a": "-inf", "b": "nan"}]


def test_decode_json_prints_odometry_floats_as_float32_decimals() -> None:
    frame = odom_frame.encode(odom_frame.OdomFrame(0.1, -3.3, 1e-7, 33.7))
    res = run_cli("decode", "-p", "odom", "--json", "-", input=frame)
    assert res.returncode == 0, res.stderr
    line = res.stdout.decode().strip()
    assert '"vx":0.1,' in line and '"vy":-3.3,' in line and '"wz":1e-07,' in line
    assert '"yaw_deg":33.7}' in line


STATUS_TOML = """
[frame]
name = "status"
header = "C3 3C"

[[field]]
name = "state"
type = "u8"
flags = { 0x01 = "over_current", 0x02 = "stall", 0x04 = "hot" }

[[field]]
name = "temp"
type = "f32"

[checksum]
algorithm = "sum8"
span = "payload"
"""


def _status_desc(tmp_path: Path) -> str:
    path = tmp_path / "status.toml"
    path.write_text(STATUS_TOML)
    return str(path)


def test_flags_encode_by_name_and_decode_to_the_names_of_the_set_bits(tmp_path: Path) -> None:
    desc = _status_desc(tmp_path)
    enc = run_cli("encode", desc, "state=over_current|HOT", "temp=0.1")
    assert enc.returncode == 0, enc.stderr
    frame = bytes.fromhex(enc.stdout.decode())
    assert frame[2] == 0x05
    odd = bytearray(frame)  # a bit without a name, too: shown in hex, taken back the same way
    odd[2] |= 0x80
    odd[-1] = sum(odd[2:-1]) & 0xFF
    stream = frame + bytes(odd)
    dec = run_cli("decode", "-p", desc, "--json", "-", input=stream)
    assert dec.returncode == 0, dec.stderr
    rows = [json.loads(line) for line in dec.stdout.decode().splitlines()]
    assert [r["state"] for r in rows] == ["over_current|hot", "over_current|hot|0x80"]
    assert rows[0]["temp"] == 0.1
    table = run_cli("decode", "-p", desc, "-", input=stream).stdout.decode()
    assert "over_current|hot|0x80" in table
    again = run_cli("encode", desc, f"state={rows[1]['state']}", "temp=0.1")
    assert bytes.fromhex(again.stdout.decode()) == bytes(odd)  # what decode prints, encode takes
    none = run_cli("decode", "-p", desc, "--json", "-",
                   input=bytes.fromhex(run_cli("encode", desc).stdout.decode()))
    assert json.loads(none.stdout)["state"] == "0"


def test_a_flag_name_that_does_not_exist_is_one_error_line(tmp_path: Path) -> None:
    res = run_cli("encode", _status_desc(tmp_path), "state=stall|cold")
    assert res.returncode == 2
    err = res.stderr.decode()
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "'cold'" in err and "over_current, stall, hot" in err


# -- times and headings ---------------------------------------------------------------
def _candump(tmp_path: Path) -> Path:
    """A candump log of actuator feedback 20 ms apart, stamped in 2026."""
    log = tmp_path / "bus.log"
    log.write_text("".join(f"({1_780_000_000.5 + 0.02 * k:.6f}) can0 201#0A00010100000000\n"
                           for k in range(3)))
    return log


def test_can_decode_prints_times_since_the_first_frame_or_absolute(tmp_path: Path) -> None:
    log = str(_candump(tmp_path))
    rel = run_cli("can", "decode", log)
    assert rel.returncode == 0, rel.stderr
    stamps = [float(line.split()[0]) for line in rel.stdout.decode().splitlines()]
    assert stamps == [0.0, 0.02, 0.04]
    out = run_cli("can", "decode", log, "--json").stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["t"] for r in rows] == [0.0, 0.02, 0.04]
    absolute = run_cli("can", "decode", log, "--json", "--absolute").stdout.splitlines()
    assert json.loads(absolute[0])["t"] == 1_780_000_000.5
    via_decode = run_cli("decode", "-p", "actuator", log).stdout.decode().splitlines()
    assert float(via_decode[-1].split()[0]) == 0.04


def test_can_sniff_prints_times_since_the_first_frame_like_serial_sniff() -> None:
    bus = ("can", "-c", f"times{os.getpid()}", "--modules", "1", "sniff", "--count", "3")
    lines = run_cli(*bus).stdout.decode().splitlines()
    stamps = [float(line.split()[0]) for line in lines]
    assert stamps[0] == 0.0 and 0 < stamps[1] < stamps[2] < 10
    raw = run_cli(*bus, "--raw").stdout.decode().splitlines()
    assert raw[0].startswith("(0.000000) ")
    rows = [json.loads(x) for x in run_cli(*bus, "--json", "--absolute").stdout.splitlines()]
    assert all(r["t"] > 1e9 for r in rows) and list(rows[0])[:2] == ["t", "id"]


@pytest.mark.parametrize(("yaw", "shown"), [
    (3 * math.pi, "+180.0°"), (-3 * math.pi, "+180.0°"), (math.radians(-179.96), "+180.0°"),
    (math.radians(725), "+5.0°"), (math.radians(-190), "+170.0°"),
])
def test_the_status_line_heading_is_wrapped_to_plus_minus_180(yaw: float, shown: str) -> None:
    st = {"t": 1000, "rtf": 1.0, "pose": [0.0, 0.0, yaw],
          "link": {"bytes_in": 0, "bytes_out": 0, "overruns": 0}}
    pose = status_text(st).split("pose=(")[1].split(")")[0]
    assert pose.split(",")[2].strip() == shown.strip()


@pytest.mark.parametrize("degrees", [-179.996, 180.0, -180.0, 539.999, -900.0])
def test_the_fish_heading_stays_in_plus_minus_180_after_rounding(degrees: float) -> None:
    body = FishBody()
    body.yaw = math.radians(degrees)
    heading = body.heading_rounded(2)
    assert -180.0 < heading <= 180.0
    assert -18000 < round(heading * 100) <= 18000


# -- tables -----------------------------------------------------------------------------
def _action_frames() -> bytes:
    """Action frames whose names and data are longer than a number's 12 characters."""
    frames = [ActionFrame(0, InstructionType.WRITE_PC, SubCommand.QUERY_ROBOT_INFO,
                          bytes(range(40))),
              ActionFrame(7, 0x77, SubCommand.IAP_UPGRADE, b"\x01"),
              ActionFrame(255, InstructionType.WRITE_PC, SubCommand.ENTER_FREE_MODE, b"")]
    return b"".join(action_frame.encode(f) for f in frames)


def _check_aligned(text: str, last_may_grow: bool) -> int:
    """Every row of a streamed table lines up under the header above it: the gaps between
    the columns (as the dashes line draws them) are blank. Returns the rows seen."""
    spans: list[tuple[int, int]] = []
    rows = 0
    for line in text.splitlines():
        if line and set(line) <= {"-", " "}:
            spans = [(m.start(), m.end()) for m in re.finditer("-+", line)]
            continue
        if not spans or not line.split()[:1] or not line.split()[0].isdigit():
            continue  # the title, a header line or what follows the table
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert line[end:start].strip() == "", f"not aligned: {line!r}"
        limit = len(line) if last_may_grow else spans[-1][1]
        assert len(line) <= limit, line
        rows += 1
    return rows


def test_decode_table_piped_keeps_long_values_aligned_and_whole() -> None:
    res = run_cli("decode", "-p", "action", "-", input=_action_frames())
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert _check_aligned(out, last_may_grow=True) == 3
    assert "query-robot-info" in out and "enter-free-mode" in out
    assert bytes(range(40)).hex() in out  # never cut in a pipe


def test_decode_table_on_a_narrow_terminal_fits_and_stays_aligned() -> None:
    out, err, rc = run_on_pty("decode", "-p", "action", "-", columns=70, input=_action_frames())
    assert rc == 0, err
    lines = [line for line in out.splitlines() if line]
    assert max(len(line) for line in lines) <= 70, out
    assert _check_aligned(out, last_may_grow=False) == 3
    assert "…" in out  # the long data elided, not wrapped onto the next line


def test_a_value_wider_than_its_column_widens_it_under_a_new_header(tmp_path: Path) -> None:
    desc = _status_desc(tmp_path)
    frames = b"".join(bytes.fromhex(run_cli("encode", desc, f"state={s}", "temp=1.5")
                                    .stdout.decode()) for s in ("hot", "stall|hot|0x80", "hot"))
    out = run_cli("decode", "-p", desc, "-", input=frames).stdout.decode()
    assert _check_aligned(out, last_may_grow=True) == 3
    assert out.count("offset") == 2  # the header again above the wider rows
    assert "stall|hot|0x80" in out


def test_frames_piped_is_whole_and_not_wider_than_its_longest_item() -> None:
    res = run_cli("frames", str(FIXTURES / "frames" / "imu.toml"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.decode().splitlines()
    assert max(len(line) for line in lines) <= 140  # was 274 (and 300 with this file)
    text = "\n".join(lines)
    for item in ("yaw_deg:f32 deg", "gz:i16*0.001 rad/s (BE)", "crc-ccitt-false over payload",
                 "length counts data (max 1024)", "tests/fixtures/frames/imu.toml"):
        assert item in text  # nothing cut


def test_frames_on_a_terminal_fits_its_width() -> None:
    out, err, rc = run_on_pty("frames", columns=72)
    assert rc == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 72, out
    assert "11..1035" in out and "(CAN)" in out  # sizes and headers are never cut


@pytest.mark.parametrize("absolute", [False, True])
def test_serial_sniff_times_from_the_start_or_the_wall_clock(tmp_path: Path,
                                                             absolute: bool) -> None:
    frame = odom_frame.encode(odom_frame.OdomFrame(0.1, 0.0, 0.0, 0.0))
    with PtyPair(tmp_path / "tty") as pair:
        args = ["sniff", pair.path, "-p", "odom", "--json", *(["--absolute"] if absolute else [])]
        proc = spawn_verb(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        with reaped(proc):
            assert proc.stdout is not None
            before = time.time()
            line = b""
            deadline = time.monotonic() + 30
            while not line and time.monotonic() < deadline:
                pair.write(frame)  # again until the sniffer has the port open and answers
                if select.select([proc.stdout], [], [], 0.1)[0]:
                    line = proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    row = json.loads(line)
    assert row["vx"] == 0.1
    if absolute:
        assert before - 1 <= row["t"] <= time.time()
    else:
        assert 0 <= row["t"] < 30


def test_can_send_actuator_takes_fault_flags_by_name(tmp_path: Path) -> None:
    log = tmp_path / "sent.log"
    res = run_cli("can", "-c", f"flags{os.getpid()}", "--bus-kwarg", f"capture={log}", "send",
                  "actuator", "--module", "2", "--fault", "over_current|STALL_TIMEOUT")
    assert res.returncode == 0, res.stderr
    data = bytes.fromhex(log.read_text().split()[2].split("#")[1])
    assert data[5] == 0x21
    shown = run_cli("can", "decode", str(log)).stdout.decode()
    assert "fault=over_current|stall_timeout" in shown
    bad = run_cli("can", "send", "actuator", "--module", "2", "--fault", "stall|cold")
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
