"""``decode``'s table streams: bounded memory on a large capture, never cut when piped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.cli_helpers import cli_env, fwbridge_argv, run_cli

#: A peak far below what a table held in memory needs (about 1 GB on 5 MB before).
RSS_LIMIT_MB = 150

_MEASURE = """
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mb(out: Path, *args: str) -> tuple[int, int]:
    """Exit status and peak RSS (MB) of ``fwbridge ARGS``, measured in a process of its own
    (so no other child of the test run counts)."""
    res = subprocess.run([sys.executable, "-c", _MEASURE, str(out), *fwbridge_argv(), *args],
                         capture_output=True, text=True, env=cli_env(), timeout=600, check=True)
    rc, mb = res.stdout.split()
    return int(rc), int(mb)


def test_table_of_a_5mb_capture_streams_in_bounded_memory(tmp_path: Path) -> None:
    frames = [odom_frame.encode(OdomFrame(0.001 * k, -0.5, 0.25, float(k % 360)))
              for k in range(1000)]
    capture = tmp_path / "odom.bin"
    capture.write_bytes(b"".join(frames) * 276)  # 5.2 MB, 276 000 frames
    out = tmp_path / "table.txt"
    rc, mb = _peak_mb(out, "decode", "-p", "odom", str(capture))
    assert rc == 0
    assert mb < RSS_LIMIT_MB, f"decode table mode peaked at {mb} MB"
    with out.open() as f:
        lines = sum(1 for _ in f)
    assert lines == 3 + 276_000  # title, header, rule, one line per frame


def test_piped_table_is_not_cut(tmp_path: Path) -> None:
    enc = run_cli("encode", "action", "--type", "write-pc", "--sub", "query-can-error-rate",
                  "--data", "00112233445566778899aabbccddeeff")
    assert enc.returncode == 0, enc.stderr
    res = run_cli("decode", "-p", "action", "-", input=enc.stdout, env={"COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert "query-can-error-rate" in out and "00112233445566778899aabbccddeeff" in out
    assert "…" not in out


def test_long_hex_text_is_decoded_line_block_by_line_block(tmp_path: Path) -> None:
    frames = [odom_frame.encode(OdomFrame(0.0, 0.0, 0.0, float(k % 360))) for k in range(6000)]
    lines = [f"# odometry, {len(frames)} frames"] + [f.hex(" ") for f in frames]  # > 64 KiB
    text = tmp_path / "odom.txt"
    text.write_text("\n".join(lines) + "\n")
    res = run_cli("decode", "-p", "odom", "--json", str(text))
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 6000 and b"frames=6000 " in res.stderr
    lines[4999] = lines[4999][:-1] + "g"  # a bad digit far past the first block
    text.write_text("\n".join(lines) + "\n")
    bad = run_cli("decode", "-p", "odom", "--json", str(text))
    assert bad.returncode == 2
    assert "line 5000: 'g' is not a hex digit" in bad.stderr.decode()
