"""Every capture writer goes through bridge/record/safe_output.py: a symbolic link at the
output is refused like any existing file (a dangling one too), and with --force the link
is replaced, never its target; a full disk is one ``error: FILE: disk full`` line, exit 2,
the file closed and readable up to the cut, nothing left beside it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.can_logs import read_messages
from fwbridge.bridge.record.damage import failures
from fwbridge.bridge.record.safe_output import (
    OutputError,
    OutputFile,
    check_writable,
    open_output,
)
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.protocols.errors import CaptureTruncated
from tests.helpers import FirmwarePeer, run_verb

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

PRECIOUS = b"the target of a link: the user's file\n"

# Each writer: its arguments ({out}: the output, named with its extension), and the
# arguments that end a run that writes (the --force run).
WRITERS: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("record", "{port}", "{out}.pcapng"), ("--duration", "0.3")),
    (("sniff", "{port}", "-p", "odom", "--record", "{out}.pcapng"), ("--duration", "0.3")),
    (("can", "--modules", "1", "record", "{out}.log"), ("--count", "3")),
    (("can", "--modules", "1", "record", "{out}.blf"), ("--count", "3")),
    (("can", "--modules", "1", "record", "{out}.pcapng"), ("--count", "3")),
    (("can", "--modules", "1", "record", "{out}.asc"), ("--count", "3")),
    (("can", "--modules", "1", "record", "{out}.trc"), ("--count", "3")),
    (("can", "sim", "2", "--capture", "{out}.mcap"), ("--duration", "0.3")),
    (("can", "sim", "2", "--capture", "{out}.log"), ("--duration", "0.3")),
    (("bridge", "{cfg}", "--record", "{out}.pcapng"), ("--duration", "0.3")),
    (("bridge", "{cfg}", "--record", "{out}.mcap"), ("--duration", "0.3")),
    (("sim", "echo", "--record", "{out}.pcapng"), ("--duration", "0.2")),
    (("sim", "echo", "--record", "{out}.mcap"), ("--duration", "0.2")),
    (("plot", "{capture}", "-o", "{out}.png"), ()),
    (("gen", "dbc", "-o", "{out}.dbc"), ()),
    (("gen", "wireshark", "odom", "-o", "{out}.lua"), ()),
    (("gen", "c", "odom", "-o", "{dir}", "--name", "keep"), ()),
    (("convert", "{capture}", "{out}.mcap"), ()),
]


def _id(writer: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    args = writer[0]
    ext = next((a.rsplit(".", 1)[1] for a in args if a.startswith("{out}.")), "")
    return "-".join([*(a for a in args[:3] if not a.startswith(("{", "-"))), ext]).strip("-")


def _args(args: tuple[str, ...], tmp_path: Path, pair: PtyPair) -> tuple[list[str], Path]:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[control]\nrate_hz = 50\n')
    capture = tmp_path / "some.log"
    capture.write_text("".join(f"({1796161315 + i / 100:.6f}) sim0 {0x101 + i % 2:03X}#"
                               "0000000000000000\n" for i in range(20)))
    out = next(a for a in args if "{out}" in a or "{dir}" in a)
    name = out.format(out="keep", dir="keep.h")
    full = [a.format(port=pair.path, out=tmp_path / "keep", cfg=cfg, capture=capture,
                     dir=tmp_path) for a in args]
    return full, tmp_path / name


def _no_litter(where: Path) -> None:
    left = [p.name for p in where.iterdir() if p.name.startswith(".") or ".partial" in p.name]
    assert not left, f"left beside the output: {left}"


@pytest.mark.parametrize("writer", WRITERS, ids=_id)
def test_a_link_at_the_output_is_refused_without_force_even_dangling(
        pair: PtyPair, tmp_path: Path, writer: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    args, out = _args(writer[0], tmp_path, pair)
    out.symlink_to(tmp_path / "nowhere")  # dangling: following it would create the file
    res = run_verb(*args, *writer[1], timeout=60)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and out.name in lines[0], err
    assert "exists already" in lines[0] and "symbolic link" in lines[0], err
    assert os.readlink(out) == str(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    _no_litter(tmp_path)


FORCED = [w for w in WRITERS if w[0][0] != "convert"]  # convert never replaces anything


@pytest.mark.parametrize("writer", FORCED, ids=_id)
def test_force_replaces_the_link_never_its_target(
        pair: PtyPair, peer: FirmwarePeer, tmp_path: Path,
        writer: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    args, out = _args(writer[0], tmp_path, pair)
    target = tmp_path / "precious.bin"
    target.write_bytes(PRECIOUS)
    out.symlink_to(target)
    res = run_verb(*args, *writer[1], "--force", timeout=90)
    assert res.returncode == 0, res.stderr.decode()
    assert target.read_bytes() == PRECIOUS, "written through the link"
    assert not out.is_symlink() and out.is_file() and out.stat().st_size > 0
    _no_litter(tmp_path)


# -- the module itself ------------------------------------------------------------------------
def test_check_writable_refuses_links_unless_replacing(tmp_path: Path) -> None:
    dangling = tmp_path / "a.log"
    dangling.symlink_to(tmp_path / "missing")
    with pytest.raises(OutputError, match="symbolic link"):
        check_writable(dangling, replace=False)
    assert check_writable(dangling, replace=True) == dangling
    with open_output(dangling) as f:
        f.write(b"new")
    assert not dangling.is_symlink() and dangling.read_bytes() == b"new"
    assert not (tmp_path / "missing").exists()


# -- a full disk ------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: writes fail with ENOSPC, as on a full disk."""
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {r.stderr.strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_output_file_cuts_back_to_its_last_whole_write_on_a_full_disk(small_disk: Path) -> None:
    out = small_disk / "x.bin"
    before = len(failures())
    f = open_output(out)
    assert isinstance(f, OutputFile)
    record = bytes(range(256)) * 4  # 1 KiB records
    for _ in range(200):  # 200 KiB into 64: the disk fills on the way
        f.write(record)
    f.flush()
    f.write(record)  # dropped: never a write past the cut
    f.close()
    said = failures()[before:]
    assert [str(e) for e in said] == [f"{out}: disk full"]
    assert f.failed is said[0]
    size = out.stat().st_size
    assert size > 0 and size % len(record) == 0, size  # whole records only
    assert out.read_bytes() == record * (size // len(record))


def _fill(where: Path, leave: int) -> None:
    """Fill the tmpfs but ``leave`` bytes (more or less: its blocks are pages)."""
    filler = where / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * (64 * 1024))
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))


@pytest.mark.parametrize("verb, ext, end", [
    (("sim", "mecanum", "--pacing", "afap", "--duration", "120", "--record"), "pcapng", ()),
    (("sim", "mecanum", "--pacing", "afap", "--duration", "120", "--record"), "mcap", ()),
    (("can", "sim", "3", "--pacing", "afap", "--duration", "200", "--capture"), "mcap", ()),
    (("demo", "--json", "--record"), "pcapng", ()),
    (("demo", "--json", "--record"), "mcap", ()),
    (("can", "--modules", "3", "record"), "log", ("--count", "100000")),
    (("can", "--modules", "3", "record"), "pcapng", ("--count", "100000")),
    (("bridge", "{cfg}", "--duration", "120", "--record"), "pcapng", ()),
], ids=lambda v: v if isinstance(v, str) else "-".join(v[:2]) if v else "")
def test_a_full_disk_is_one_error_line_and_a_readable_file(
        small_disk: Path, pair: PtyPair, peer: FirmwarePeer, verb: tuple[str, ...], ext: str,
        end: tuple[str, ...], tmp_path: Path) -> None:
    out = small_disk / f"cap{uuid.uuid4().hex[:6]}.{ext}"
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{pair.path}"\n[control]\nrate_hz = 200\n')
    _fill(small_disk, (8 if verb[0] == "bridge" else 24) * 1024)
    res = run_verb(*(a.format(cfg=cfg) for a in verb), str(out), *end, timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {out}: disk full"], err
    assert [p.name for p in small_disk.iterdir()] == ["filler", out.name] or sorted(
        p.name for p in small_disk.iterdir()) == sorted(["filler", out.name])
    assert out.stat().st_size > 0
    (small_disk / "filler").unlink()  # room for what the reader needs
    got: list[object] = []
    reader = read_messages if verb[0] == "can" else read_capture
    with contextlib.suppress(CaptureTruncated):  # an MCAP file is cut: it says so, after
        got.extend(reader(out))
    assert got  # read up to the cut: its whole records first


def test_convert_on_a_full_disk_leaves_nothing(small_disk: Path, tmp_path: Path) -> None:
    log = tmp_path / "bus.log"
    with open(log, "w") as f:
        for i in range(30_000):
            f.write(f"({1_796_161_315 + i / 1000:.6f}) can0 {0x101 + i % 7:03X}#"
                    f"{os.urandom(8).hex().upper()}\n")
    _fill(small_disk, 24 * 1024)
    out = small_disk / "bus.mcap"
    res = run_verb("convert", str(log), str(out), timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: {out}: disk full"], err
    assert "Traceback" not in err
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no output, no temporary


def test_a_bus_capture_is_always_a_new_file(tmp_path: Path) -> None:
    link = tmp_path / "tap.log"
    link.symlink_to(tmp_path / "nowhere.log")
    mine = tmp_path / "mine.log"
    mine.write_bytes(PRECIOUS)
    for path in (link, mine):
        res = run_verb("can", "--bus-kwarg", f"capture={path}", "send", "123#00")
        err = res.stderr.decode()
        assert res.returncode == 2 and err.startswith(f"error: --bus-kwarg capture={path}: "
                                                      "exists already"), err
    assert not (tmp_path / "nowhere.log").exists() and mine.read_bytes() == PRECIOUS
    new = tmp_path / "new.log"
    assert run_verb("can", "--bus-kwarg", f"capture={new}", "send", "123#00").returncode == 0
    assert new.read_text().strip().endswith("123#00 R")
