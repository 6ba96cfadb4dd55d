"""Damaged files are announced, never read as complete.

MCAP files carry the CRCs of the spec (checked here by the ``mcap`` package's
own readers) and a damaged or cut summary is read past by scanning the data
section, with one ``warning:`` line; a BLF file with a bad header or container
is one ``error:`` line naming the field; no line, record or block of any log
is read whole into memory past its bound; what other tools make of our MCAP
files (rosbags) is as docs/MCAP.md says."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import can
import pytest

pytest.importorskip("mcap")
pytest.importorskip("rosbags")

from mcap.records import Chunk, DataEnd, Footer
from mcap.stream_reader import CRCValidationError, StreamReader

from fwbridge.bridge.record.can_logs import CaptureReadError, read_messages
from fwbridge.bridge.record.can_mcap import McapCanWriter
from fwbridge.bridge.record.damage import CaptureWarning
from fwbridge.bridge.record.mcap_reader import read_mcap
from fwbridge.bridge.record.mcap_sink import McapSink
from fwbridge.bridge.record.serial_mcap import SerialCapture
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import fwbridge_argv, run_verb

FRAMES = 20


def _serial_mcap(path: Path) -> Path:
    """An indexed serial capture: FRAMES odometry frames, its summary with chunk indexes."""
    cap = SerialCapture([McapSink(path)], port="dev")
    frame = odom_frame.encode(OdomFrame(0.1, 0.0, 0.2, 0.0))
    for i in range(FRAMES):
        cap.write("rx", frame, 1_000_000 * (i + 1))
    cap.recorder.finish(30_000_000)
    cap.streams.close()
    return path


def _can_mcap(path: Path, n: int = 300) -> Path:
    """A compact CAN capture (no chunk indexes) of ``n`` actuator frames."""
    writer = McapCanWriter(path, bitrate=500_000)
    for i in range(n):
        writer.on_message_received(can.Message(
            arbitration_id=0x101 + i % 3, is_extended_id=False, data=bytes([i % 256] * 8),
            timestamp=1_796_161_315 + i * 0.001))
    writer.stop()
    return path


def _records(raw: bytes) -> list[object]:
    """Every record, chunks whole, CRCs checked by the mcap package (data section, chunks)."""
    return list(StreamReader(io.BytesIO(raw), validate_crcs=True, emit_chunks=True).records)


def _footer_at(raw: bytes) -> int:
    return len(raw) - 8 - 29


@pytest.mark.parametrize("make", [_serial_mcap, _can_mcap], ids=["serial-indexed", "can-compact"])
def test_mcap_files_carry_the_crcs_of_the_spec(tmp_path: Path,
                                               make: Callable[[Path], Path]) -> None:
    path = make(tmp_path / "x.mcap")
    raw = path.read_bytes()
    records = _records(raw)  # raises CRCValidationError on a wrong data or chunk CRC
    chunks = [r for r in records if isinstance(r, Chunk)]
    assert chunks and all(c.uncompressed_crc != 0 for c in chunks)
    (data_end,) = [r for r in records if isinstance(r, DataEnd)]
    assert data_end.data_section_crc != 0
    (footer,) = [r for r in records if isinstance(r, Footer)]
    at = _footer_at(raw)
    # the spec: from the summary's start up to the footer's summary_crc field
    assert footer.summary_crc == zlib.crc32(raw[footer.summary_start:at + 1 + 8 + 16])
    assert footer.summary_crc == zlib.crc32(
        struct.pack("<BQQQ", 2, 20, footer.summary_start, footer.summary_offset_start),
        zlib.crc32(raw[footer.summary_start:at]))


def _message_index_at(raw: bytes) -> int:
    pos = 8
    while pos < len(raw) - 8:
        op, length = struct.unpack_from("<BQ", raw, pos)
        if op == 7:  # MessageIndex: outside every chunk
            return pos
        pos += 9 + length
    raise AssertionError("no message index")


def test_damage_between_chunks_breaks_the_data_crc_and_is_said(tmp_path: Path) -> None:
    path = _serial_mcap(tmp_path / "x.mcap")
    raw = bytearray(path.read_bytes())
    raw[_message_index_at(raw) + 9 + 6] ^= 0xFF  # a message's offset in a message index
    bad = tmp_path / "index.mcap"
    bad.write_bytes(bytes(raw))
    with pytest.raises(CRCValidationError):  # the mcap package sees it by our CRC
        _records(bytes(raw))
    r = run_verb("decode", "-p", "odom", str(bad), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == FRAMES  # every chunk held its own CRC
    (warning,) = [w for w in r.stderr.decode().splitlines() if w.startswith("warning:")]
    assert warning.startswith(f"warning: {bad}: data section damaged outside the chunks (crc")


def test_damage_outside_the_chunks_of_a_compact_file_is_said(tmp_path: Path) -> None:
    path = _can_mcap(tmp_path / "bus.mcap")
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"fwbridge", 8)] ^= 0x01  # the header's library name: in no chunk
    bad = tmp_path / "header.mcap"
    bad.write_bytes(bytes(raw))
    r = run_verb("can", "decode", str(bad), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 300
    (warning,) = [w for w in r.stderr.decode().splitlines() if w.startswith(("warning:",
                                                                            "error:"))]
    assert warning.startswith(f"warning: {bad}: data section damaged outside the chunks (crc")


def _flip_in_summary(raw: bytes, needle: bytes) -> bytes:
    """One bit flipped in the summary's copy of ``needle`` (a topic name)."""
    at = raw.rindex(needle)
    footer = Footer.read(_stream(raw, _footer_at(raw) + 9))
    assert at >= footer.summary_start, "not in the summary"
    out = bytearray(raw)
    out[at + 3] ^= 0x01
    return bytes(out)


def _stream(raw: bytes, at: int) -> object:
    from mcap.data_stream import ReadDataStream

    return ReadDataStream(io.BytesIO(raw[at:]))


def _one_warning(err: str, path: Path, what: str) -> None:
    """One line on stderr says it (``what`` starts it), no error."""
    lines = [w for w in err.splitlines() if w.startswith(("warning:", "error:"))]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"warning: {path}: {what}"), err
    assert lines[0].endswith("; read by scanning the data section"), err


def test_a_bit_flipped_in_the_summary_is_said_and_every_frame_read(tmp_path: Path) -> None:
    whole = _serial_mcap(tmp_path / "x.mcap")
    bad = tmp_path / "flip.mcap"
    bad.write_bytes(_flip_in_summary(whole.read_bytes(), b"/fwbridge/serial/rx"))
    r = run_verb("decode", "-p", "odom", str(bad), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == run_verb("decode", "-p", "odom", str(whole),
                                             "--json").stdout.splitlines()
    assert len(r.stdout.splitlines()) == FRAMES
    _one_warning(r.stderr.decode(), bad, "summary damaged (crc mismatch")
    with pytest.warns(CaptureWarning, match="summary damaged"):  # a library caller: a warning
        assert len([m for m in read_mcap(bad) if m.topic == "/fwbridge/serial/rx"]) == FRAMES


def test_a_bit_flipped_in_a_can_summary_is_said(tmp_path: Path) -> None:
    whole = _can_mcap(tmp_path / "bus.mcap")
    bad = tmp_path / "flip.mcap"
    bad.write_bytes(_flip_in_summary(whole.read_bytes(), b"/from_can_bus"))
    r = run_verb("can", "decode", str(bad), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 300
    _one_warning(r.stderr.decode(), bad, "summary damaged (crc mismatch")


@pytest.mark.parametrize("cut", [10, 29 + 8, "summary"])
def test_a_cut_summary_or_footer_loses_no_frame_and_is_said(tmp_path: Path,
                                                            cut: int | str) -> None:
    whole = _serial_mcap(tmp_path / "x.mcap")
    raw = whole.read_bytes()
    footer = Footer.read(_stream(raw, _footer_at(raw) + 9))
    keep = footer.summary_start + 40 if cut == "summary" else len(raw) - int(cut)
    bad = tmp_path / "cut.mcap"
    bad.write_bytes(raw[:keep])
    r = run_verb("decode", "-p", "odom", str(bad), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == FRAMES
    _one_warning(r.stderr.decode(), bad, "summary cut (no footer)")


def test_a_whole_file_says_nothing(tmp_path: Path) -> None:
    whole = _serial_mcap(tmp_path / "x.mcap")
    r = run_verb("decode", "-p", "odom", str(whole), "--json")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == FRAMES
    assert b"warning:" not in r.stderr and b"error:" not in r.stderr, r.stderr


def test_a_chunk_claiming_a_huge_size_is_named_not_allocated(tmp_path: Path) -> None:
    whole = _can_mcap(tmp_path / "bus.mcap")
    raw = bytearray(whole.read_bytes())
    pos = 8
    while True:  # the first chunk: opcode 6; uncompressed size after its two times
        op, length = struct.unpack_from("<BQ", raw, pos)
        if op == 6:
            break
        pos += 9 + length
    struct.pack_into("<Q", raw, pos + 9 + 16, 1 << 40)
    bad = tmp_path / "huge.mcap"
    bad.write_bytes(bytes(raw))
    r = run_verb("can", "decode", str(bad))
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert f"error: {bad}: corrupt MCAP near byte" in err and str(1 << 40) in err, err
    assert "Traceback" not in err


# -- BLF ---------------------------------------------------------------------------------------
def _blf(path: Path, n: int = 906) -> Path:
    writer = can.BLFWriter(str(path))
    for i in range(n):
        writer.on_message_received(can.Message(arbitration_id=0x101 + i % 3, is_extended_id=False,
                                               data=bytes([i % 256] * 8), timestamp=i * 0.001))
    writer.stop()
    return path


@pytest.mark.parametrize("at, value, said", [
    (4, struct.pack("<L", 0xFFFFFFF0), "BLF header size 4294967280 out of bounds (bytes 4-7"),
    (144 + 8, struct.pack("<L", 0x7FFFFFF0),
     "BLF object at byte 144: size 2147483632 out of bounds (bytes 152-155"),
    (144 + 16, struct.pack("<H", 7),
     "BLF container at byte 144: compression method 7 unknown (bytes 160-161"),
    (144, b"XOBJ", "BLF object at byte 144: signature"),
], ids=["header-size", "object-size", "compression", "signature"])
def test_a_damaged_blf_is_one_error_line_naming_the_field(
        tmp_path: Path, at: int, value: bytes, said: str) -> None:
    whole = _blf(tmp_path / "whole.blf")
    assert len(run_verb("can", "decode", str(whole), "--json").stdout.splitlines()) == 906
    raw = bytearray(whole.read_bytes())
    raw[at:at + len(value)] = value
    bad = tmp_path / "bad.blf"
    bad.write_bytes(bytes(raw))
    r = run_verb("can", "decode", str(bad))
    err = r.stderr.decode()
    assert r.returncode == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors and errors[0].startswith(f"error: {bad}: {said}"), err
    assert len(errors) == 1 and "Traceback" not in err
    with pytest.raises(CaptureReadError, match=str(bad)):
        list(read_messages(bad))


# -- bounded lines, records and blocks --------------------------------------------------------
def _peak_rss_kb(*args: str) -> tuple[subprocess.CompletedProcess[bytes], int]:
    """``fwbridge ARGS`` and its peak resident memory (KiB), measured alone in a child."""
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
             "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
             "sys.stderr.buffer.write(r.stderr)\n"
             "sys.exit(r.returncode)\n")
    r = subprocess.run([sys.executable, "-c", probe, *fwbridge_argv(), *args],
                       capture_output=True, timeout=120)
    return r, int(r.stdout or 0)


def _candump(path: Path, long_line: bytes, n: int = 1000) -> Path:
    with open(path, "wb") as f:
        for i in range(n):
            if i == n // 2:
                f.write(long_line)
            f.write(b"(%.6f) can0 %03X#%02X00000000000000\n"
                    % (1_796_161_315 + i / 1000, 0x101 + i % 3, i % 256))
    return path


def test_a_100_mb_candump_line_is_a_named_error_in_bounded_memory(tmp_path: Path) -> None:
    line = b"(1796161316.000000) can0 101#" + b"A" * (100 << 20) + b"\n"
    log = _candump(tmp_path / "big.log", line)
    r, peak = _peak_rss_kb("can", "decode", str(log))
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "counters: structs=1000" in err  # every other line read
    errors = [e for e in err.splitlines() if e.startswith("error:")]
    assert errors == [f"error: {log}: 1 line(s) longer than 65536 bytes skipped "
                      "(the first: line 501, from byte 23000)"], err
    assert peak < 100 * 1024, f"{peak} KiB resident for a 100 MiB line"


@pytest.mark.parametrize("suffix", [".log", ".asc", ".csv", ".trc"])
def test_every_text_log_reader_bounds_its_lines(tmp_path: Path, suffix: str) -> None:
    good = tmp_path / f"good{suffix}"
    writer = can.Logger(str(good))
    for i in range(300):
        writer.on_message_received(can.Message(arbitration_id=0x101 + i % 3, is_extended_id=False,
                                               data=bytes([i % 256] * 8), timestamp=1.0 + i / 1000))
    writer.stop()
    lines = good.read_bytes().splitlines(keepends=True)
    at = len(lines) // 2
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(b"".join([*lines[:at], b"X" * (1 << 20) + b"\n", *lines[at:]]))
    got = []
    with pytest.raises(CaptureReadError, match=rf"{bad}: 1 line\(s\) longer than 65536 bytes "
                                               rf"skipped \(the first: line {at + 1}, from byte "
                                               rf"{sum(map(len, lines[:at]))}\)"):
        got.extend(read_messages(bad))
    assert len(got) == len(list(read_messages(good))) == 300  # the others, all of them


def test_a_classic_pcap_packet_length_is_bounded(tmp_path: Path) -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 227)
    packet = struct.pack("<IIII", 1, 0, 16, 16) + struct.pack("<IB3x", 0x101, 8) + bytes(8)
    huge = struct.pack("<IIII", 2, 0, 0xFFFFFFF0, 0xFFFFFFF0)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(header + packet + huge)
    got = []
    with pytest.raises(ValueError, match=r"offset 56: packet length 4294967280 out of bounds "
                                         r"\(bytes 64-67"):
        got.extend(read_messages(bad))
    assert len(got) == 1


# -- other readers of our MCAP files ----------------------------------------------------------
def test_rosbags_convert_and_our_mcap_as_docs_mcap_says(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    r = run_verb("sim", "mecanum", "--duration", "1", "--pacing", "afap", "--record", str(run))
    assert r.returncode == 0, r.stderr
    tool = Path(sys.executable).with_name("rosbags-convert")
    # straight on the file, JSON channels excluded or not: rosbags reads every channel's
    # schema first and knows no jsonschema (docs/MCAP.md says so, and what to do instead)
    for extra in ((), ("--exclude-topic", "/fwbridge/counters")):
        direct = subprocess.run([str(tool), "--src", str(run), "--dst",
                                 str(tmp_path / f"direct{len(extra)}"), *extra],
                                capture_output=True, timeout=120)
        assert direct.returncode != 0 and b"jsonschema" in direct.stdout + direct.stderr
    docs = (Path(__file__).resolve().parent.parent / "docs" / "MCAP.md").read_text()
    assert "rosbags-convert" in docs and "KeyError('jsonschema')" in docs
    # the way docs/MCAP.md gives: fwbridge convert --to rosbag2, which rosbags then takes
    bag = tmp_path / "run_bag"
    r = run_verb("convert", str(run), str(bag), "--to", "rosbag2")
    assert r.returncode == 0, r.stderr
    back = tmp_path / "back"
    again = subprocess.run([str(tool), "--src", str(bag), "--dst", str(back), "--dst-storage",
                            "mcap"], capture_output=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    from rosbags.rosbag2 import Reader

    with Reader(back) as reader:
        topics = {c.topic for c in reader.connections}
        assert {"/odom", "/tf", "/fwbridge/serial/rx"} <= topics
        assert "/fwbridge/counters" not in topics
        assert sum(1 for _ in reader.messages()) > 0
