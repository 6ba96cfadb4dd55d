"""Descriptions on the command line: encode, decode, frames, send, sniff, record, replay."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.bridge.record.serial_pcapng import FRAMES_INTERFACE, LINKTYPE_USER1
from fwbridge.protocols.descriptions.loader import load
from fwbridge.protocols.engine.codec import FrameCodec
from tests.conftest import FIXTURES
from tests.helpers import FirmwarePeer, run_verb, spawn_verb, wait_for_line, wait_until

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

IMU = str(FIXTURES / "frames" / "imu.toml")
LOG = str(FIXTURES / "frames" / "log.toml")


def _imu(**values: object) -> bytes:
    codec = FrameCodec(load(IMU))
    return codec.encode(codec.from_mapping(values))


def test_encode_a_described_frame_and_decode_it_back() -> None:
    enc = run_verb("encode", IMU, "ax=0.5", "ay=-1", "mode=run", "temp=25.5", "--sep", "")
    assert enc.returncode == 0, enc.stderr
    raw = bytes.fromhex(enc.stdout.decode())
    assert raw == _imu(ax=0.5, ay=-1.0, mode=1, temp=25.5)
    dec = run_verb("decode", "-p", IMU, "--json", "-", input=b"\x5a" + raw + b"\x00\x5a\xa5" + raw)
    assert dec.returncode == 0, dec.stderr
    rows = [json.loads(line) for line in dec.stdout.decode().splitlines()]
    assert [r["offset"] for r in rows] == [1, 24]
    assert rows[0] == {"offset": 1, "protocol": "imu", "seq": 0, "mode": "run", "ax": 0.5,
                       "ay": -1.0, "az": 0.0, "gz": 0.0, "temp": 25.5, "status": 0}
    assert "frames=2" in dec.stderr.decode() and "discarded=4" in dec.stderr.decode()


def test_encode_a_length_directed_frame_and_a_builtin_by_name() -> None:
    enc = run_verb("encode", LOG, "level=warn", "text=68:69", "tick=7", "--sep", "")
    assert enc.returncode == 0, enc.stderr
    assert bytes.fromhex(enc.stdout.decode())[:5] == b"\x24\x4c\x0b\x02hi"[:5]
    act = run_verb("encode", "actuator", "angle=-5", "command=REALTIME_SERVO_CONTROL", "fault=3")
    assert act.stdout.decode().strip() == "fb 00 00 00 21 03 00 00"


@pytest.mark.parametrize(("args", "message"), [
    (("encode", IMU, "ax=900"), "error: imu frame: ax: 900.0 is out of range"),
    (("encode", IMU, "speed=1"), "error: imu: no field 'speed'; fields: seq, mode"),
    (("encode", IMU, "mode=fly"), "error: imu: mode='fly' is not an integer or one of idle"),
    (("encode", LOG, "len=3"), "error: log: no field 'len' (it is computed from the data)"),
    (("encode", "nope.toml", "a=1"), "error: nope.toml: no such file"),
    (("decode", "-p", "nope.toml", "-"), "error: nope.toml: no such file"),
    (("decode", "-p", IMU, "--crc", "xmodem", "-"), "error: --crc applies to --protocol action"),
])
def test_bad_input_is_one_error_line(args: tuple[str, ...], message: str) -> None:
    proc = run_verb(*args, input=b"")
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(message), lines[0]


def test_a_bad_description_names_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(IMU).read_text().replace('type = "u32"', 'type = "u24"'))
    for args in (("decode", "-p", str(bad), "-"), ("encode", str(bad), "ax=1"),
                 ("frames", str(bad))):
        proc = run_verb(*args, input=b"")
        assert proc.returncode == 2
        assert proc.stderr.decode().strip() == (
            f"error: {bad}:50: field[8].type: unknown type 'u24'; choose one of u8 i8 u16 i16 "
            "u32 i32 u64 i64 f32 f64 bytes"), proc.stderr


def test_frames_lists_builtins_and_given_descriptions() -> None:
    proc = run_verb("frames", IMU, LOG, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in map(json.loads, proc.stdout.decode().splitlines())}
    assert set(rows) == {"odom", "cmd", "action", "actuator", "imu", "log"}
    assert rows["odom"]["size"] == "19" and rows["action"]["size"] == "11..1035"
    assert rows["imu"]["fields"][2] == "ax:i16*0.01 m/s^2 (BE)"
    assert rows["log"]["size"] == "9..200" and rows["actuator"]["can_ids"][0] == "0x101"


def test_send_a_described_frame(tmp_path: Path) -> None:
    with PtyPair(tmp_path / "tty") as pair:
        peer = FirmwarePeer(pair)
        peer.start()
        try:
            proc = run_verb("send", pair.path, IMU, "ax=1.5", "seq=9", "--count", "3",
                            "--rate", "100")
            assert proc.returncode == 0, proc.stderr
            assert peer.wait_for(lambda a: len(bytes(peer.raw)) >= 60)
        finally:
            peer.stop()
    assert b"sent 3 imu frames" in proc.stderr
    assert bytes(peer.raw) == _imu(ax=1.5, seq=9) * 3


def _read_rows(proc: subprocess.Popen[bytes], want: int, timeout: float = 10) -> list[dict[
        str, object]]:
    assert proc.stdout is not None
    rows: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    while len(rows) < want and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.1)[0]:
            rows.append(json.loads(proc.stdout.readline()))
    return rows


def test_sniff_and_record_a_described_frame_split_across_reads(tmp_path: Path) -> None:
    capture = tmp_path / "imu.pcapng"
    with PtyPair(tmp_path / "tty") as pair:
        proc = spawn_verb("sniff", pair.path, "-p", IMU, "--json", "--record", str(capture),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        wait_for_line(proc, "^sniffing ")  # the port is open
        sent = [_imu(seq=k, ax=k / 10, mode=k % 3) for k in range(1, 9)]
        for frame in sent:  # each frame in two writes, a pause between: two reads
            pair.write(b"\x5a" + frame[:7])
            time.sleep(0.03)  # pacing: the pause that splits the frame across two reads
            pair.write(frame[7:])
            time.sleep(0.01)  # pacing: as above, before the next frame
        rows = _read_rows(proc, 8)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGINT, err  # stopped by a signal
    seqs = [r["seq"] for r in rows]
    assert seqs[-8:] == list(range(1, 9)) and rows[-1]["protocol"] == "imu"
    packets = list(read_capture(capture))
    frames = [p for p in packets if p.link_type == LINKTYPE_USER1]
    assert all(p.interface == FRAMES_INTERFACE for p in frames)
    assert [p.data for p in frames][-8:] == sent  # whole, though the reads split them
    # decode reads the raw reads only: each frame once
    dec = run_verb("decode", "-p", IMU, "--json", str(capture))
    got = [json.loads(line)["seq"] for line in dec.stdout.decode().splitlines()]
    assert got[-8:] == list(range(1, 9)) and len(got) == len(seqs)


def test_record_with_a_description_then_replay_plays_the_reads_only(tmp_path: Path) -> None:
    capture = tmp_path / "rec.pcapng"
    frames = [_imu(seq=k) for k in range(5)]
    with PtyPair(tmp_path / "src") as src:
        rec = spawn_verb("record", src.path, str(capture), "-p", IMU, stderr=subprocess.PIPE)
        wait_for_line(rec, "^recording ")  # port and file open: it is reading
        for f in frames:
            src.write(f[:5])
            time.sleep(0.02)  # pacing: the pause that splits the frame across two reads
            src.write(f[5:])
            time.sleep(0.02)  # pacing: as above, before the next frame
        wait_until(lambda: sum(p.link_type == LINKTYPE_USER1 for p in read_capture(capture)) >= 5,
                   10, "5 frames in the capture")
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=10)
    assert rec.returncode == 128 + signal.SIGINT and b"5 imu frames" in err, err
    with PtyPair(tmp_path / "dst") as dst:
        peer = FirmwarePeer(dst)
        peer.start()
        try:
            proc = run_verb("replay", str(capture), dst.path, "-p", IMU, "--speed", "5")
            assert proc.returncode == 0, proc.stderr
            assert peer.wait_for(lambda a: bytes(peer.raw).lstrip(b"\x00") == b"".join(frames))
            peer.settle()  # the replay has exited: everything it wrote is here
        finally:
            peer.stop()
    assert bytes(peer.raw).lstrip(b"\x00") == b"".join(frames)  # no frame played twice
    assert os.path.getsize(capture) > 0
