"""Rows fit the terminal: ``decode``, ``sniff``, ``can decode`` and ``can sniff`` on real ptys.

A frame of ten fields printed whole is wider than a 120-column terminal, and
any frame is wider than 60: on a terminal each row is fitted (floats to fewer
digits, text elided with ``…``, trailing fields dropped behind ``+N`` with one
hint naming ``--wide``) and never wraps, and what it shows is true: each
number a rounding of the real value, each text a prefix of it. Piped, or with
``--wide``, the rows are the whole ones.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import struct
import termios
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.protocols.described import Described
from tests.helpers import run_cli
from tests.terminal import Terminal
from tests.tty_run import run_on_pty

TEN_TOML = """
[frame]
name = "ten"
header = "AA 55"

[[field]]
name = "seq"
type = "u32"

[[field]]
name = "mode"
type = "u8"
enum = { 0 = "idle", 1 = "running", 2 = "calibrating_sensors" }

[[field]]
name = "ax"
type = "f32"

[[field]]
name = "ay"
type = "f32"

[[field]]
name = "az"
type = "f32"

[[field]]
name = "temperature"
type = "f64"

[[field]]
name = "pressure"
type = "f64"

[[field]]
name = "gz"
type = "i16"
scale = 0.001

[[field]]
name = "tag"
type = "bytes"
size = 8

[[field]]
name = "status"
type = "u8"
flags = { 0x01 = "over_current", 0x02 = "stall", 0x04 = "overheated" }

[checksum]
algorithm = "sum8"
span = "payload"
"""
FIELDS = ["seq", "mode", "ax", "ay", "az", "temperature", "pressure", "gz", "tag", "status"]
TEXT = {"mode", "tag", "status"}
F32 = {"ax", "ay", "az"}

VALUES: list[dict[str, Any]] = [
    {"seq": 4_000_000_000, "mode": 2, "ax": -1234567.5, "ay": 0.000123456789,
     "az": 3.14159265, "temperature": -273.15123456789, "pressure": 101325.123456,
     "gz": -32768, "tag": bytes.fromhex("0011223344556677"), "status": 0x07},
    {"seq": 7, "mode": 0, "ax": 0.5, "ay": -1e-30, "az": 1e30,
     "temperature": 1.2345678901234e300, "pressure": -0.0,
     "gz": 1234, "tag": bytes(8), "status": 0},
    {"seq": 123456, "mode": 1, "ax": 9.87654321, "ay": -98765.4321, "az": 12.5,
     "temperature": 21.5, "pressure": 99999.99999, "gz": -1,
     "tag": b"abcdefgh", "status": 0x02},
]


@pytest.fixture
def ten(tmp_path: Path) -> str:
    path = tmp_path / "ten.toml"
    path.write_text(TEN_TOML)
    return str(path)


def frames(desc: str, values: list[dict[str, Any]]) -> bytes:
    """The frames of ``values`` (raw field values: scaled fields as their wire integers)."""
    codec = Described.from_spec(desc).codec
    out = b""
    for v in values:
        frame = codec.from_mapping({**v, "gz": v["gz"] * 0.001})
        out += bytes(codec.encode(frame))
    return out


def truth(desc: str, stream: bytes) -> list[dict[str, Any]]:
    """Each frame's fields as JSON says (piped): the real values; a float32's as the double
    the table formats."""
    res = run_cli("decode", "-p", desc, "--format", "raw", "--json", "-", input=stream)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    for row in rows:
        for name in F32:
            row[name] = struct.unpack("<f", struct.pack("<f", row[name]))[0]
    return rows


def cells(text: str) -> int:
    """Display width: a wide (CJK) character takes two cells."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def true_shown(name: str, shown: str, real: Any) -> bool:
    """``shown`` is the real value, a rounding of it (a float) or a prefix of it ending in
    ``…`` (text)."""
    if isinstance(real, float):
        return any(shown == f"{real:.{p}g}" for p in range(1, 7))
    full = str(real)
    if name in TEXT and shown.endswith("…"):
        return len(shown) > 1 and full.startswith(shown[:-1])
    return shown == full


def table(out: str) -> tuple[list[tuple[int, int]], list[str], list[list[str]]]:
    """(column spans, header cells, rows' cells) of a streamed table's last layout."""
    lines = out.splitlines()
    rule = max(i for i, line in enumerate(lines) if line and set(line) <= {"-", " "})
    spans = [(m.start(), m.end()) for m in re.finditer("-+", lines[rule])]

    def cut(line: str) -> list[str]:
        bounds = [0, *(end for _, end in spans[:-1]), None]
        return [line[a:b].strip() for a, b in itertools.pairwise(bounds)]

    rows = [cut(line) for line in lines[rule + 1:] if re.match(r"\s*\d+ ", line)]
    return spans, cut(lines[rule - 1]), rows


def check_table(out: str, columns: int, real: list[dict[str, Any]]) -> int:
    """Every line fits ``columns``; the header names the fields in order (a prefix of
    them, then ``+N``); each cell is true. Returns how many fields are hidden."""
    assert out.splitlines(), out
    for line in out.splitlines():
        assert cells(line) <= columns, f"wraps at {columns}: {line!r}"
    _, header, rows = table(out)
    hidden = 0
    if header[-1].startswith("+"):
        hidden = int(header.pop()[1:])
        assert all(row.pop() == "…" for row in rows)
    assert header[0] == "offset"
    shown = FIELDS[:len(header) - 1]
    assert len(shown) + hidden == len(FIELDS), header
    for name, head in zip(shown, header[1:]):
        assert head == name or (head.endswith("…") and name.startswith(head[:-1])), header
    assert len(rows) == len(real)
    for row, want in zip(rows, real):
        for name, text in zip(shown, row[1:]):
            assert true_shown(name, text, want[name]), (name, text, want[name])
    return hidden


# -- decode ------------------------------------------------------------------------------
@pytest.mark.parametrize("columns", [120, 60])
def test_decode_rows_of_ten_fields_fit_the_terminal(ten: str, columns: int) -> None:
    stream = frames(ten, VALUES)
    piped = run_cli("decode", "-p", ten, "--format", "raw", "-", input=stream)
    assert max(len(line) for line in piped.stdout.decode().splitlines()) > 120  # whole
    out, err, rc = run_on_pty("decode", "-p", ten, "--format", "raw", "-", columns=columns,
                              input=stream)
    assert rc == 0, err
    hidden = check_table(out, columns, truth(ten, stream))
    if columns == 120:
        assert hidden == 0 and "--wide" not in err  # narrowed, every field there
    else:
        assert hidden > 0
        assert err.count("--wide") == 1, err  # the hint, once
        assert f"decode: {hidden} field(s) hidden to fit; --wide shows all" in err


def test_decode_wide_on_a_terminal_prints_the_piped_rows(ten: str) -> None:
    stream = frames(ten, VALUES)
    piped = run_cli("decode", "-p", ten, "--format", "raw", "-", input=stream)
    out, err, rc = run_on_pty("decode", "-p", ten, "--format", "raw", "--wide", "-",
                              columns=60, input=stream)
    assert rc == 0, err
    assert out == piped.stdout.decode()
    assert "--wide" not in err


def test_decode_of_a_builtin_frame_fits_a_narrow_terminal() -> None:
    """odom's columns path (numpy blocks) fits as the per-frame rows do."""
    from fwbridge.protocols import odom_frame

    stream = b"".join(odom_frame.encode(odom_frame.OdomFrame(-1234.5678 * k, 1e-7, 3.0, 359.9))
                      for k in range(100))
    out, err, rc = run_on_pty("decode", "-p", "odom", "--format", "raw", "-", columns=40,
                              input=stream)
    assert rc == 0, err
    lines = out.splitlines()
    assert all(cells(line) <= 40 for line in lines), out
    rows = [line.split() for line in lines if re.match(r"\s*\d+ ", line)]
    assert len(rows) == 100
    real = [json.loads(line) for line in run_cli(
        "decode", "-p", "odom", "--format", "raw", "--json", "-", input=stream
    ).stdout.splitlines()]
    header = table(out)[1]
    shown = [name for name in ("vx", "vy", "wz", "yaw_deg") if name in header]
    assert shown and shown == ["vx", "vy", "wz", "yaw_deg"][:len(shown)]
    for row, want in zip(rows, real):
        for name, text in zip(shown, row[1:]):
            value = struct.unpack("<f", struct.pack("<f", want[name]))[0]
            assert true_shown(name, text, value), (name, text, value)


def _resize(term: Terminal, columns: int) -> None:
    # The window's new size; the kernel sends SIGWINCH to the verb, as a dragged window does.
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))


def _screen_lines(text: str) -> Iterator[str]:
    """The screen's lines: what is left of each after the last carriage return (a live
    status line is drawn and erased in place)."""
    for line in text.split("\n"):
        yield line.rsplit("\r", 1)[-1]


def test_decode_follows_a_resized_window(ten: str, tmp_path: Path) -> None:
    fifo = tmp_path / "frames"
    os.mkfifo(fifo)
    size = len(frames(ten, VALUES[:1]))
    first = 65536 // size + 2  # more than decode's first read
    with Terminal("decode", "-p", ten, "--format", "raw", str(fifo), cols=120) as term:
        deadline = time.monotonic() + 30
        while True:  # the reader is there once the open no longer fails
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                assert time.monotonic() < deadline, term.text
                time.sleep(0.05)  # polling: the open, within the deadline
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(frames(ten, [{**VALUES[0], "seq": 1}] * first))
            pipe.flush()
            term.expect(rf"\n\s+{(65536 // size - 1) * size}\s+1 ")  # the first read's rows
            _resize(term, 60)
            pipe.write(frames(ten, [{**VALUES[0], "seq": 2}] * 5))
        assert term.wait() == 0, term.text
        lines = list(_screen_lines(term.text))
    rows = [line for line in lines if re.match(r"\s*\d+\s+[12]\s", line)]
    assert len(rows) == first + 5
    assert all(cells(line) <= 120 for line in rows)
    after = [line for line in rows if re.match(r"\s*\d+\s+2\s", line)]
    assert len(after) == 5 and all(cells(line) <= 60 for line in after), after
    assert max(map(cells, rows)) > 60  # it did use the wide window before
    headers = [line for line in lines if line.lstrip().startswith("offset")]
    assert len(headers) == 2 and cells(headers[-1]) <= 60  # a new header for the new layout


# -- sniff -------------------------------------------------------------------------------
def _sniffed(term: Terminal, pair: PtyPair, frame: bytes, seq: int) -> list[str]:
    """Write ``frame`` until sniff shows its row; its rows on the screen so far."""
    pattern = re.compile(rf"^\s*\d+\.\d{{3}}\s+\d+ seq={seq} ")
    deadline = time.monotonic() + 30
    while True:
        pair.write(frame)  # again until the sniffer has the port open and reads it
        rows = [line for line in _screen_lines(term.text) if pattern.match(line)]
        if rows:
            return rows
        assert time.monotonic() < deadline and term.proc.poll() is None, term.text
        time.sleep(0.05)  # polling: the rows, within the deadline


def _check_pairs(line: str, columns: int, real: dict[str, Any]) -> int:
    """A ``key=value`` row fits and tells the truth; returns how many fields it hides."""
    assert cells(line) <= columns, f"wraps at {columns}: {line!r}"
    tokens = line.split()[2:]
    hidden = int(tokens.pop()[1:]) if tokens[-1].startswith("+") else 0
    names = [t.split("=", 1)[0] for t in tokens]
    assert names == FIELDS[:len(names)] and len(names) + hidden == len(FIELDS), line
    for token in tokens:
        name, text = token.split("=", 1)
        assert true_shown(name, text, real[name]), (name, text, real[name])
    return hidden


def test_sniff_rows_fit_the_terminal_and_follow_a_resize(ten: str, tmp_path: Path) -> None:
    one, two = frames(ten, [{**VALUES[0], "seq": 1}]), frames(ten, [{**VALUES[0], "seq": 2}])
    real = truth(ten, one)[0]
    with PtyPair(tmp_path / "tty") as pair, Terminal("sniff", pair.path, "-p", ten,
                                                     cols=120) as term:
        term.expect(r"sniffing .* for ten frames")
        wide = _sniffed(term, pair, one, 1)
        # key=value lines are wider than a table's: these long values lose one field at 120
        hidden = {_check_pairs(line, 120, {**real, "seq": 1}) for line in wide}
        assert hidden <= {0, 1}
        _resize(term, 60)
        narrow = _sniffed(term, pair, two, 2)
        assert min(_check_pairs(line, 60, {**real, "seq": 2}) for line in narrow) > max(hidden)
        term.expect(r"sniff: \d+ field\(s\) hidden to fit; --wide shows all")
        term.interrupt()
        assert term.wait() == 130
        assert term.text.count("--wide shows") == 1  # once per run, and it fits the window
        assert all(cells(line) <= 60 for line in _screen_lines(term.text) if "--wide" in line)


# -- CAN ---------------------------------------------------------------------------------
CANDUMP = "".join(
    f"({1700000000 + k * 0.01:.6f}) can0 {0x200 + m:03X}#{data} R\n"
    for k, (m, data) in enumerate([(1, "EC3212FF3827FFAA"), (2, "7F00019038000000"),
                                   (3, "80FF0004FF330102")] * 4))


@pytest.mark.parametrize("columns", [60, 40])
def test_can_decode_rows_fit_the_terminal(tmp_path: Path, columns: int) -> None:
    log = tmp_path / "bus.log"
    log.write_text(CANDUMP)
    piped = run_cli("can", "decode", str(log)).stdout.decode().splitlines()
    assert len(piped) == 12 and max(map(len, piped)) > 100  # whole, and wider than 60
    out, err, rc = run_on_pty("can", "decode", str(log), columns=columns)
    assert rc == 0, err
    rows = out.splitlines()
    assert len(rows) == 12
    for row, whole in zip(rows, piped):
        assert cells(row) <= columns, f"wraps at {columns}: {row!r}"
        full = dict(t.split("=", 1) for t in re.split(r" (?=[a-z_]+=)", whole)[1:])
        tokens = re.split(r" (?=[a-z_]+=|\+\d+$)", row)
        assert whole.split()[:5] == tokens[0].split()  # time, arrow, module, direction
        for token in tokens[1:]:
            if token.startswith("+"):
                assert token == tokens[-1]
                continue
            name, text = token.split("=", 1)
            value = full[name].strip()
            assert text == value or (text.endswith("…") and value.startswith(text[:-1]))
    assert err.count("--wide") == 1, err
    wide, err, rc = run_on_pty("can", "decode", "--wide", str(log), columns=columns)
    assert rc == 0 and wide.splitlines() == piped


def test_can_sniff_rows_fit_the_terminal() -> None:
    out, err, rc = run_on_pty("can", "-c", f"fit{os.getpid()}", "--modules", "3", "sniff",
                              "--count", "12", columns=50)
    assert rc == 0, err
    rows = [line.rsplit("\r", 1)[-1] for line in out.splitlines() if "module" in line]
    assert len(rows) == 12, out
    assert all(cells(line) <= 50 for line in rows), out
    assert all(re.search(r" \+\d+$", line) for line in rows)  # fields dropped, and said so
