"""pcapng captures: round trips, directions, nanosecond stamps, damaged files, tshark."""

from __future__ import annotations

import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from fwbridge.bridge.record.serial_captures import read_capture, read_payloads
from fwbridge.bridge.record.serial_pcapng import (
    INBOUND,
    LINKTYPE_USER0,
    OUTBOUND,
    SNAPLEN,
    CaptureError,
    CaptureWriter,
    looks_like_pcapng,
)
from fwbridge.bridge.record.serial_pcapng_reader import CaptureTruncated

# python-pcapng's own option table triggers this on every block; serial_pcapng hides it
# outside tests, pytest shows every DeprecationWarning again.
pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

T0 = 1_700_000_000_123_456_789  # ns: every digit must survive


def sample(path: Path) -> list[tuple[str, bytes, int]]:
    packets = [("tx", b"\xaa\x55" + bytes(13), T0), ("rx", b"\xaa\x55" + bytes(range(17)), T0 + 1),
               ("rx", b"\x00\xff", T0 + 2_500_000_001), ("tx", b"\n\r\x03", T0 + 3_000_000_000)]
    with CaptureWriter(path, port="/dev/ttyUSB0", description="115200 baud") as cap:
        for direction, data, ts in packets:
            cap.write(direction, data, ts_ns=ts)
        cap.write("rx", b"")  # nothing to record
        assert (cap.packets, cap.bytes) == (4, sum(len(d) for _, d, _ in packets))
    return packets


def test_round_trip_keeps_bytes_directions_and_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "link.pcapng"
    packets = sample(path)
    got = list(read_capture(path))
    assert [(p.direction, p.data, p.ts_ns) for p in got] == packets
    assert {p.interface for p in got} == {"/dev/ttyUSB0"}
    assert looks_like_pcapng(path.read_bytes()[:4])
    assert list(read_payloads(path, "tx")) == [d for k, d, _ in packets if k == "tx"]
    assert b"".join(read_payloads(path)) == b"".join(d for _, d, _ in packets)
    with pytest.raises(ValueError, match="direction"):
        list(read_payloads(path, "up"))


def test_file_layout_is_linktype_user0_with_epb_direction_flags(tmp_path: Path) -> None:
    path = tmp_path / "link.pcapng"
    sample(path)
    raw = path.read_bytes()
    # walk the blocks by hand: the layout must not depend on our own reader
    pos, idb, flags = 0, None, []
    while pos < len(raw):
        btype, blen = struct.unpack_from("<II", raw, pos)
        body = raw[pos + 8 : pos + blen - 4]
        if btype == 1:  # IDB: link type, then options
            idb = struct.unpack_from("<H", body)[0], body
        elif btype == 6:  # EPB: options after the padded packet data
            caplen = struct.unpack_from("<I", body, 12)[0]
            opts = body[20 + (caplen + 3) // 4 * 4 :]
            code, olen = struct.unpack_from("<HH", opts)
            assert (code, olen) == (2, 4)
            flags.append(struct.unpack_from("<I", opts, 4)[0])
        pos += blen
    assert idb is not None and idb[0] == LINKTYPE_USER0
    assert b"\x09\x00\x01\x00\x09" in idb[1]  # option if_tsresol (9), length 1, value 9
    assert flags == [OUTBOUND, INBOUND, INBOUND, OUTBOUND]


def test_large_writes_are_split_at_the_snap_length(tmp_path: Path) -> None:
    path = tmp_path / "big.pcapng"
    data = bytes(range(256)) * 600
    with CaptureWriter(path) as cap:
        cap.write("rx", data)
    got = list(read_capture(path))
    assert all(len(p.data) <= SNAPLEN for p in got) and len(got) == 3
    assert b"".join(p.data for p in got) == data


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "threads.pcapng"
    with CaptureWriter(path) as cap:
        def work(direction: str) -> None:
            for i in range(300):
                cap.write(direction, i.to_bytes(2, "little"))
        threads = [threading.Thread(target=work, args=(d,)) for d in ("rx", "tx")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got = list(read_capture(path))
    for d in ("rx", "tx"):
        assert [int.from_bytes(p.data, "little") for p in got if p.direction == d] == list(
            range(300)
        )


def test_a_capture_cut_short_reads_up_to_its_last_whole_packet(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcapng"
    packets = sample(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:-5])  # the recorder died inside the last block
    got = []
    with pytest.raises(CaptureTruncated, match=r"truncated or corrupt at offset \d+"):
        for packet in read_capture(path):  # the whole packets first, then where it was cut
            got.append(packet.data)
    assert got == [d for _, d, _ in packets[:-1]]


def test_unreadable_inputs_are_clear_errors(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("aa 55 00")
    with pytest.raises(CaptureError, match="not a pcapng file"):
        list(read_capture(text))
    with pytest.raises(CaptureError, match="no such capture file"):
        list(read_capture(tmp_path / "missing.pcapng"))
    bad = tmp_path / "bad.pcapng"
    sample(bad)
    raw = bytearray(bad.read_bytes())
    raw[-4:] = b"\xff\xff\xff\xff"  # trailing length of the last block no longer matches
    bad.write_bytes(bytes(raw))
    with pytest.raises(CaptureError, match="corrupt pcapng"):
        list(read_capture(bad))


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_our_captures(tmp_path: Path) -> None:
    path = tmp_path / "link.pcapng"
    packets = sample(path)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=;",
         "-e", "frame.encap_type", "-e", "frame.packet_flags_direction",
         "-e", "frame.time_epoch", "-e", "data.data", "-e", "frame.interface_name"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    rows = [line.split(";") for line in out.stdout.splitlines()]
    assert len(rows) == len(packets)
    for row, (direction, data, ts) in zip(rows, packets):
        encap, flags, epoch, hexdata, iface = row
        assert encap == "45"  # Wireshark's WTAP_ENCAP_USER0, from LINKTYPE_USER0 (147)
        assert int(flags, 16) == (INBOUND if direction == "rx" else OUTBOUND)
        sec, frac = epoch.split(".")
        assert int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]) == ts
        assert bytes.fromhex(hexdata) == data and iface == "/dev/ttyUSB0"
