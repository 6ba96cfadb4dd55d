"""One pcapng reader, both byte orders: a capture written big-endian (by hand, per the
pcapng spec, here) reads as its little-endian twin does, in every verb that looks at a
pcapng's header (``convert``, ``decode``'s capture sniffing) and in the packet reader.
tshark reading the hand-written file is the independent check of the writer."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fwbridge.bridge.record.serial_pcapng_reader import capture_kind as sniff_kind
from fwbridge.bridge.record.serial_pcapng_reader import read_packets
from fwbridge.cli_verbs.convert import capture_kind, to_mcap
from fwbridge.protocols.pcapng import first_link_type, iter_packets
from tests.helpers import run_cli

SHB, IDB, EPB, BOM = 0x0A0D0D0A, 1, 6, 0x1A2B3C4D
TS = 1_700_000_000_123_456_789  # ns
CAN_FRAME = struct.pack(">IB3x", 0x123, 4) + b"\xde\xad\xbe\xef" + bytes(4)  # SocketCAN


def _opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def _block(e: str, kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack(e + "II", kind, total) + body + struct.pack(e + "I", total)


def pcapng(e: str, linktype: int, name: str, packets: list[tuple[int, int, bytes]]) -> bytes:
    """A one-interface pcapng in byte order ``e`` (``<`` or ``>``): every multi-byte field
    of every block in that order, as the spec has a writer do; packets are
    (ns timestamp, epb_flags, data)."""
    out = _block(e, SHB, struct.pack(e + "IHHq", BOM, 1, 0, -1) + _opt(e, 4, b"by hand")
                 + _opt(e, 0, b""))
    out += _block(e, IDB, struct.pack(e + "HHI", linktype, 0, 65535)
                  + _opt(e, 2, name.encode()) + _opt(e, 9, b"\x09") + _opt(e, 0, b""))
    for ts, flags, data in packets:
        body = struct.pack(e + "IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        body += data + bytes(-len(data) % 4)
        body += _opt(e, 2, struct.pack(e + "I", flags)) + _opt(e, 0, b"")
        out += _block(e, EPB, body)
    return out


CAN_PACKETS = [(TS, 1, CAN_FRAME), (TS + 1_000_000, 2, CAN_FRAME)]
SERIAL_PACKETS = [(TS, 1, b"\xaa\x55\x01\x02\x03"), (TS + 5_000, 2, b"\x10\x20")]


@pytest.fixture
def captures(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for order, e in (("be", ">"), ("le", "<")):
        for kind, linktype, packets in (("can", 227, CAN_PACKETS), ("serial", 147,
                                                                     SERIAL_PACKETS)):
            path = tmp_path / f"{kind}_{order}.pcapng"
            path.write_bytes(pcapng(e, linktype, f"{kind}0", packets))
            out[f"{kind}_{order}"] = path
    assert out["can_be"].read_bytes()[8:12] == b"\x1a\x2b\x3c\x4d"  # big-endian on disk
    assert out["can_le"].read_bytes()[8:12] == b"\x4d\x3c\x2b\x1a"
    return out


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_the_hand_written_big_endian_capture(captures: dict[str, Path]) -> None:
    proc = subprocess.run(["tshark", "-r", str(captures["can_be"]), "-T", "fields",
                           "-e", "frame.time_epoch", "-e", "frame.interface_name",
                           "-e", "can.id", "-e", "data.data", "-e", "frame.p2p_dir"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.splitlines() == ["1700000000.123456789\tcan0\t291\tdeadbeef\t1",
                                        "1700000000.124456789\tcan0\t291\tdeadbeef\t0"]


def test_the_reader_reads_both_byte_orders_alike(captures: dict[str, Path]) -> None:
    for kind, linktype in (("can", 227), ("serial", 147)):
        read = {}
        for order in ("be", "le"):
            with captures[f"{kind}_{order}"].open("rb") as f:
                assert first_link_type(f.read) == linktype
            with captures[f"{kind}_{order}"].open("rb") as f:
                read[order] = list(iter_packets(f.read))
        assert read["be"] == read["le"]
        assert [(p.ts_ns, p.flags, p.name) for p in read["be"]] == [
            (TS, 1, f"{kind}0"), (TS + (1_000_000 if kind == "can" else 5_000), 2, f"{kind}0")]


def test_convert_and_the_capture_sniffer_see_a_big_endian_can_capture(
        captures: dict[str, Path], tmp_path: Path) -> None:
    for order in ("be", "le"):
        assert capture_kind(captures[f"can_{order}"]) == "can"
        assert capture_kind(captures[f"serial_{order}"]) == "serial"
        head = captures[f"can_{order}"].read_bytes()[:4096]
        assert sniff_kind(head) == "CAN capture (pcapng, SocketCAN frames)"
        assert to_mcap(captures[f"can_{order}"], tmp_path / f"can_{order}.mcap") == 2
    serial = [(p.direction, p.data) for p in read_packets(captures["serial_be"])]
    assert serial == [("rx", b"\xaa\x55\x01\x02\x03"), ("tx", b"\x10\x20")]


def test_convert_verb_on_a_big_endian_can_capture(captures: dict[str, Path],
                                                   tmp_path: Path) -> None:
    out = tmp_path / "out.mcap"
    res = run_cli("convert", str(captures["can_be"]), str(out), timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert "(2 packets/frames)" in res.stderr.decode() and out.stat().st_size > 0


@pytest.mark.parametrize("head", [b"\x0a\x0d\x0d\x0a\x1c\x00",  # cut inside the header
                                  pcapng(">", 227, "c", [])[:20]])  # inside the SHB
def test_a_cut_pcapng_header_is_sniffed_not_a_traceback(tmp_path: Path, head: bytes) -> None:
    path = tmp_path / "cut.pcapng"
    path.write_bytes(head)
    assert capture_kind(path) == "serial"  # then the serial reader names the cut
    assert sniff_kind(head) == "serial capture (pcapng)"
