"""``fwbridge encode`` / ``decode`` as a subprocess: round trips and error lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbridge.protocols import cmd_frame, odom_frame
from tests.conftest import FIXTURES
from tests.helpers import run_cli


def test_encode_cmd_prints_frame_hex() -> None:
    res = run_cli("encode", "cmd", "--vx", "0.2", "--vy", "0", "--wz", "0.5")
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().strip() == "aa 55 cd cc 4c 3e 00 00 00 00 00 00 00 3f 62"


def test_encode_decode_round_trip_through_a_pipe() -> None:
    enc = run_cli("encode", "odom", "--vx", "0.5", "--vy", "-0.25", "--wz", "1", "--yaw", "90")
    assert enc.returncode == 0, enc.stderr
    dec = run_cli("decode", "--protocol", "odom", "--json", "-", input=enc.stdout * 3)
    assert dec.returncode == 0, dec.stderr
    rows = [json.loads(line) for line in dec.stdout.decode().splitlines()]
    assert [r["offset"] for r in rows] == [0, 19, 38]
    assert rows[0] == {"offset": 0, "protocol": "odom", "vx": 0.5, "vy": -0.25, "wz": 1.0,
                       "yaw_deg": 90.0}
    assert "frames=3" in dec.stderr.decode()


def test_decode_raw_binary_capture_table(tmp_path: Path) -> None:
    res = run_cli("decode", "-p", "odom", str(FIXTURES / "odom_noisy.bin"))
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert "odom frames" in out and "yaw_deg" in out
    assert "frames=300" in res.stderr.decode()
    assert "checksum_errors=" in res.stderr.decode()


def test_decode_hex_with_separators_and_comments(tmp_path: Path) -> None:
    raw = cmd_frame.encode(cmd_frame.CmdFrame(0.2, 0.0, 0.5))
    text = "# captured on ttyUSB0\n" + ", ".join(f"0x{b:02X}" for b in raw) + "\n"
    path = tmp_path / "cmd.txt"
    path.write_text(text)
    res = run_cli("decode", "-p", "cmd", "--json", str(path))
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout)
    assert row["vx"] == pytest.approx(0.2) and row["wz"] == 0.5


def test_decode_forced_raw_format_reads_hex_text_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text(odom_frame.encode(odom_frame.OdomFrame(0, 0, 0, 0)).hex())
    res = run_cli("decode", "-p", "odom", "--format", "raw", "--json", str(path))
    assert res.returncode == 0 and res.stdout == b""
    assert "frames=0" in res.stderr.decode()


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["decode", "-p", "odom", "/nonexistent/capture.bin"], None, "no such file"),
        (["decode", "-p", "odom", "-"], b"aa 55 c", "odd number of hex digits"),
        (["decode", "-p", "nope", "-"], b"", "'nope' is not one of"),
        (["decode", "-p", "odom", "--format", "hex", "-"], b"zz", "'z' is not a hex digit"),
        (["encode", "cmd", "--vx", "nan"], None, "--vx not finite (add --allow-nonfinite"),
        (["encode", "odom", "--yaw", "1e39"], None, "'--yaw': must be >= -3.40282e+38"),
    ],
)
def test_bad_input_is_one_error_line(args: list[str], stdin: bytes | None, message: str) -> None:
    res = run_cli(*args, input=stdin)
    assert res.returncode != 0
    err = res.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and message in err[0]
    assert "Traceback" not in res.stderr.decode()


def test_directory_is_not_a_capture(tmp_path: Path) -> None:
    res = run_cli("decode", "-p", "odom", str(tmp_path))
    assert res.returncode != 0 and b"is a directory" in res.stderr
