"""Damaged captures say so: a cut or corrupt MCAP or BLF gives its whole frames first, then
one line naming the file and where, and a non-zero exit; never rc 0 with half the data.
A capture of the other kind (serial for CAN, CAN for serial) is a wrong-kind error."""

from __future__ import annotations

import json
from pathlib import Path

import can
import pytest

pytest.importorskip("mcap")
pytest.importorskip("rosbags")

from fwbridge.bridge.record.mcap_reader import McapTruncated, read_mcap
from fwbridge.bridge.record.mcap_sink import McapError, McapSink
from fwbridge.bridge.record.serial_mcap import SerialCapture
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import run_verb


@pytest.fixture(scope="module")
def can_mcap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole CAN capture of several chunks (a chunk closes each second of bus time)."""
    out = tmp_path_factory.mktemp("can") / "bus.mcap"
    r = run_verb("can", "-c", f"dmg{id(out)}", "sim", "3", "--duration", "4", "--pacing",
                 "afap", "--capture", str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    return out


def _cut(src: Path, dst: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[:int(len(data) * fraction)])
    return dst


def _flip(src: Path, dst: Path) -> Path:
    data = bytearray(src.read_bytes())
    for i in range(200, len(data) - 200, 997):
        data[i] ^= 0x55
    dst.write_bytes(bytes(data))
    return dst


def _decode(path: Path) -> tuple[int, list[dict[str, object]], str]:
    r = run_verb("can", "decode", str(path), "--json")
    rows = [json.loads(line) for line in r.stdout.decode().splitlines()]
    return r.returncode, rows, r.stderr.decode()


def test_a_cut_mcap_gives_its_whole_frames_then_says_where_it_was_cut(
        can_mcap: Path, tmp_path: Path) -> None:
    rc, whole, _ = _decode(can_mcap)
    assert rc == 0 and len(whole) > 300
    cut = _cut(can_mcap, tmp_path / "cut.mcap", 0.6)
    rc, rows, err = _decode(cut)
    assert rc == 2
    assert 0 < len(rows) < len(whole) and rows == whole[:len(rows)]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: {cut}: cut at byte "), err
    assert "Traceback" not in err and err.count("error:") == 1
    with pytest.raises(McapTruncated, match=f"{cut}: cut at byte"):
        for _ in read_mcap(cut):
            pass
    why: list[str] = []  # a library caller may ask to be told instead
    assert list(read_mcap(cut, on_error=why.append)) and why


def test_a_bit_flipped_mcap_is_corrupt_and_named(can_mcap: Path, tmp_path: Path) -> None:
    flip = _flip(can_mcap, tmp_path / "flip.mcap")
    rc, _, err = _decode(flip)
    assert rc == 2, err
    assert f"error: {flip}: corrupt MCAP" in err and "decompression error" in err, err
    with pytest.raises(McapError, match=str(flip)):
        list(read_mcap(flip))


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_convert_and_plot_refuse_a_damaged_mcap(can_mcap: Path, tmp_path: Path,
                                                damage: str) -> None:
    bad = (_cut(can_mcap, tmp_path / "bad.mcap", 0.6) if damage == "cut"
           else _flip(can_mcap, tmp_path / "bad.mcap"))
    for out, extra in ((tmp_path / "copy.mcap", ()), (tmp_path / "bag", ("--to", "rosbag2"))):
        r = run_verb("convert", str(bad), str(out), *extra)
        err = r.stderr.decode()
        assert r.returncode == 2 and "converted" not in err and f"{bad}:" in err, err
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary left"
    png = tmp_path / "plot.png"
    r = run_verb("plot", str(bad), "-o", str(png))
    assert r.returncode == 2 and "plot written" not in r.stderr.decode(), r.stderr
    assert not png.exists()


def _blf(path: Path, n: int) -> Path:
    writer = can.BLFWriter(str(path))
    for i in range(n):
        writer.on_message_received(can.Message(arbitration_id=0x100 + i % 50,
                                               is_extended_id=False, data=bytes([i % 256] * 8),
                                               timestamp=i * 0.001))
    writer.stop()
    return path


def test_a_cut_blf_replays_its_whole_frames_then_says_so(tmp_path: Path) -> None:
    whole = _blf(tmp_path / "whole.blf", 3000)
    cut = _cut(whole, tmp_path / "cut.blf", 0.66)
    r = run_verb("can", "-c", f"blf{id(cut)}", "--modules", "1", "--bus-kwarg",
                 "pacing=afap", "replay", str(cut), "--speed", "0", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    lines = err.strip().splitlines()
    assert lines[-2].startswith("replayed ") and " 0 frames" not in lines[-2], err
    assert lines[-1].startswith(f"error: {cut}: cut at byte "), err
    assert run_verb("can", "decode", str(whole)).returncode == 0
    assert run_verb("can", "decode", str(cut)).returncode == 2


def _serial_mcap(path: Path) -> Path:
    cap = SerialCapture([McapSink(path)], port="dev")
    frame = odom_frame.encode(OdomFrame(0.1, 0.0, 0.2, 0.0))
    for i in range(20):
        cap.write("rx", frame, 1_000_000 * (i + 1))
    cap.recorder.finish(30_000_000)
    cap.streams.close()
    return path


def test_a_serial_mcap_is_the_wrong_kind_for_can_verbs_and_the_reverse(
        can_mcap: Path, tmp_path: Path) -> None:
    serial = _serial_mcap(tmp_path / "serial.mcap")
    assert run_verb("decode", "-p", "odom", str(serial)).returncode == 0
    r = run_verb("can", "decode", str(serial))
    assert r.returncode == 2 and b"wrong kind of capture: a serial capture" in r.stderr, r.stderr
    r = run_verb("decode", "-p", "odom", str(can_mcap))
    assert r.returncode == 2 and b"wrong kind of capture: a CAN capture" in r.stderr, r.stderr


def test_a_cut_asc_log_says_so(tmp_path: Path) -> None:
    whole = tmp_path / "whole.asc"
    writer = can.ASCWriter(str(whole))
    for i in range(200):
        writer.on_message_received(can.Message(arbitration_id=0x100 + i % 50,
                                               is_extended_id=False, data=bytes([i % 256] * 8),
                                               timestamp=i * 0.001))
    writer.stop()
    assert run_verb("can", "decode", str(whole)).returncode == 0
    text = whole.read_text()
    cut = tmp_path / "cut.asc"
    cut.write_text(text[:text.rindex("\n", 0, len(text) // 2) + 1])  # at a line's end
    r = run_verb("can", "decode", str(cut))
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().splitlines()[-1].startswith(f"error: {cut}: cut at byte "), r.stderr
