"""Errors a user can cause: one ``error:`` line, exit 2, no exception class names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_cli

#: An exception class name as Python prints it ("ValueError:", "BLFParseError:", ...).
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Warning)\b")


def one_error_line(proc: subprocess.CompletedProcess[bytes], status: int = 2) -> str:
    text = proc.stderr.decode()
    lines = text.strip().splitlines()
    assert proc.returncode == status, text
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not CLASS_NAME.search(lines[0]), lines[0]
    assert "Traceback" not in text
    return lines[0]


@pytest.mark.parametrize("content", [bytes(range(256)) * 2, b"LOGG\x90\x00\x00\x00garbage"])
@pytest.mark.parametrize("verb", ["decode", "replay"])
def test_a_corrupt_blf_is_one_line(tmp_path: Path, content: bytes, verb: str) -> None:
    path = tmp_path / "bad.blf"
    path.write_bytes(content)
    line = one_error_line(run_cli("can", verb, str(path)))
    assert f"{path}: not a BLF file (signature 00 01 02 03 is not LOGG, bytes 0-3)" in line or (
        f"{path}: cut at byte 15, inside the 72-byte BLF file header" in line), line


def test_mf4_without_asammdf_is_refused_clearly(tmp_path: Path) -> None:
    pytest.importorskip("can")
    import importlib.util

    if importlib.util.find_spec("asammdf") is not None:
        pytest.skip("asammdf is installed here: .mf4 is writable")
    target = tmp_path / "x.mf4"
    line = one_error_line(run_cli("can", "record", str(target), "--duration", "0.2"))
    assert "writing .mf4 needs the asammdf package" in line and ".blf" in line
    assert not target.exists()
    help_text = run_cli("can", "record", "--help").stdout.decode()
    assert ".mf4" not in help_text


def test_the_cli_names_its_flag_not_a_keyword_argument() -> None:
    line = one_error_line(run_cli("encode", "odom", "--yaw", "nan"))
    assert "--allow-nonfinite" in line and "allow_nonfinite=True" not in line
    ok = run_cli("encode", "odom", "--yaw", "nan", "--allow-nonfinite")
    assert ok.returncode == 0 and ok.stdout.strip()


_FAULTY = """
import sys, click
import fwbridge.cli as cli

@click.command()
def boom() -> None:
    raise ValueError("the widget is 3 sizes too small")

cli.load_command = lambda module, attribute: boom
cli.COMMANDS["boom"] = ("x", "y", "raises")
cli.main(sys.argv[1:])
"""


def test_an_unforeseen_error_has_no_class_name_and_debug_keeps_the_traceback() -> None:
    import sys

    proc = subprocess.run([sys.executable, "-c", _FAULTY, "boom"], capture_output=True,
                          timeout=60, check=False)
    line = one_error_line(proc, status=1)  # a bug: exit 1 (README's exit statuses)
    assert line == ("error: the widget is 3 sizes too small (--debug shows the traceback)")
    debug = subprocess.run([sys.executable, "-c", _FAULTY, "--debug", "boom"],
                           capture_output=True, timeout=60, check=False)
    assert debug.returncode != 0 and b"Traceback" in debug.stderr
    assert b"ValueError: the widget" in debug.stderr


def test_main_describes_exceptions_without_their_class() -> None:
    from fwbridge.cli import describe

    assert describe(ValueError("bad  value\n here")) == "bad value here"
    assert describe(OverflowError("int too large")) == "int too large"
    assert describe(FileNotFoundError(2, "No such file or directory", "/x")) == (
        "/x: No such file or directory")
    assert describe(KeyError(99)) == "unknown key 99"
    assert describe(RuntimeError()) == "unexpected failure"


@pytest.mark.parametrize("args", [[], ["can"], ["arm"], ["encode"], ["send"], ["can", "send"]])
def test_a_group_alone_prints_its_help_on_stdout_exit_2(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2, proc.stderr
    out = proc.stdout.decode()
    assert out.startswith("Usage: fwbridge") and "\nCommands:\n" in out
    assert proc.stderr == b""


def test_click_exceptions_are_one_error_line_exit_2() -> None:
    import sys

    script = _FAULTY.replace('raise ValueError("the widget is 3 sizes too small")',
                             'raise click.FileError("/x/y", "it is locked")')
    proc = subprocess.run([sys.executable, "-c", script, "boom"], capture_output=True,
                          timeout=60, check=False)
    line = one_error_line(proc)
    assert line.startswith("error: Could not open file") and "it is locked" in line


def test_an_error_raised_on_purpose_is_the_users_exit_2() -> None:
    import sys

    raise_it = 'import fwbridge\n    raise fwbridge.ConfigError("x.toml: rate_hz: too fast")'
    script = _FAULTY.replace('raise ValueError("the widget is 3 sizes too small")', raise_it)
    proc = subprocess.run([sys.executable, "-c", script, "boom"], capture_output=True,
                          timeout=60, check=False)
    assert one_error_line(proc) == "error: x.toml: rate_hz: too fast"
