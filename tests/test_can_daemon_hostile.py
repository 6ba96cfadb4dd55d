"""The shared bus's daemon against clients that break its protocol, sleep on bus time,
flood it, leave mid-frame, or plant a link where its runtime directory goes."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import can
import pytest

from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.daemon import BusDaemon
from fwbridge.can_bus.daemon_dir import daemon_info, runtime_dir
from fwbridge.can_bus.daemon_nodes import TX_LIMIT
from fwbridge.can_bus.model import BusModel, FrameDelivered
from fwbridge.can_bus.simchannel import SimBusInitError
from fwbridge.protocols.bus_wire import Kind, PacketReader
from tests.helpers import bus_daemon

FWBRIDGE = [sys.executable, "-c", "from fwbridge.cli import main; main()"]


def pk(kind: str, body: bytes = b"") -> bytes:
    return struct.pack(">IB", len(body) + 1, ord(kind)) + body


HELLO = pk("H", json.dumps({"name": "rogue"}).encode())


@pytest.fixture
def afap(rundir: Path) -> Iterator[tuple[BusDaemon, threading.Thread]]:
    yield from bus_daemon("shared", pacing="afap", hold_limit=0.5)


def _answer(sock: socket.socket, timeout: float = 5.0) -> list[tuple[Kind, bytes]]:
    """Every packet the daemon sends until it closes the connection."""
    sock.settimeout(timeout)
    reader, got = PacketReader("node"), []
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return got
        got += list(reader.feed(chunk))


def _exchange(channel: str) -> None:
    """Two well-behaved nodes still pass a frame."""
    a = can.Bus(interface="fwbridge", channel=f"shared:{channel}")
    b = can.Bus(interface="fwbridge", channel=f"shared:{channel}")
    try:
        a.send(can.Message(arbitration_id=0x42, is_extended_id=False, data=b"\x01\x02"))
        got = b.recv(5.0)
        assert got is not None and (got.arbitration_id, bytes(got.data)) == (0x42, b"\x01\x02")
    finally:
        a.shutdown()
        b.shutdown()


HOSTILE = {
    "hello list": pk("H", b"[]"),
    "hello number": pk("H", b"5"),
    "call list": HELLO + pk("R", b"[]"),
    "call string": HELLO + pk("R", b'"x"'),
    "deep nesting": pk("H", b"[" * 30000),
    "bitrate 1e999": pk("H", b'{"bitrate": 1e999}'),
    "wait -1e308": HELLO + pk("W", struct.pack(">d", -1e308)),
    "wait 1e308": HELLO + pk("W", struct.pack(">d", 1e308)),
    "short frame": HELLO + pk("S", b"\x00\x01"),
    "frame before hello": pk("S", struct.pack(">dIBB", 0, 0x123, 0, 1) + b"\x01"),
    "unknown kind": pk("Z", b"zz"),
    "kind for nodes": pk("m", b""),
    "length 0": b"\x00\x00\x00\x00H",
    "too long": b"\xff\xff\xff\xffH",
    "bad filters": HELLO + pk("R", b'{"id": 1, "op": "filters", "filters": [{"can_id": "a"}]}'),
}


@pytest.mark.parametrize("data", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_broken_packet_gets_an_error_and_the_daemon_lives(
        afap: tuple[BusDaemon, threading.Thread], data: bytes) -> None:
    dm, thread = afap
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(dm.path))
        s.sendall(data)
        got = _answer(s)
    assert got and got[-1][0] is Kind.ERROR, got
    assert json.loads(got[-1][1])["error"]
    assert thread.is_alive() and dm.bugs == 0
    _exchange("shared")


def test_a_client_that_sleeps_on_bus_time_does_not_stall_the_bus(
        afap: tuple[BusDaemon, threading.Thread]) -> None:
    dm, _ = afap
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(dm.path))
        s.sendall(HELLO + pk("W", struct.pack(">d", float("inf"))))  # then it sleeps
        a = can.Bus(interface="fwbridge", channel="shared:shared")
        b = can.Bus(interface="fwbridge", channel="shared:shared")
        try:
            for i in range(20):
                a.send(can.Message(arbitration_id=0x100 + i, is_extended_id=False, data=b"\x01"))
            got = [b.recv(10.0) for _ in range(20)]
            assert [m.arbitration_id for m in got if m is not None] == list(range(0x100, 0x114))
        finally:
            a.shutdown()
            b.shutdown()
        deadline = time.monotonic() + 5
        while "not_listening" not in (daemon_info("shared") or {}):
            assert time.monotonic() < deadline, daemon_info("shared")
            time.sleep(0.05)  # polling: a condition, bounded above
        assert (daemon_info("shared") or {})["not_listening"] == ["rogue (node 1)"]
        listing = subprocess.run([*FWBRIDGE, "can", "bus", "list"], capture_output=True,
                                 text=True, timeout=30, check=False)
        assert "not listening: rogue (node 1)" in listing.stdout, listing


@pytest.mark.parametrize("leaver", [1, 2])
def test_a_node_that_leaves_with_its_frame_on_the_wire(leaver: int) -> None:
    model = BusModel(500_000)
    ids = [model.add_node(f"n{i}") for i in range(3)]
    model.submit(ids[0], Frame.make(0x100, b"\x01"))
    if leaver == 2:  # two contenders: the outcome takes the arbitration path
        model.submit(ids[1], Frame.make(0x200, b"\x02"))
    events = model.run_until(5)  # the first frame is on the wire
    assert model.next_event_time() is not None
    model.remove_node(ids[0])
    events += model.run_until_idle()
    delivered = [ev for ev in events if isinstance(ev, FrameDelivered)]
    assert delivered and ids[2] in delivered[0].receivers


def test_a_socketcand_flood_is_bounded_and_counted(rundir: Path) -> None:
    gen = bus_daemon("scd", socketcand=0)
    dm, thread = next(gen)
    try:
        with socket.create_connection(("127.0.0.1", dm.socketcand_port or 0), timeout=5) as s:
            assert s.recv(64) == b"< hi >"
            s.sendall(b"< open scd >< rawmode >")
            flood = b"< send 123 1 11 >" * 20_000
            for _ in range(5):
                s.sendall(flood)
            _ = can.Bus(interface="fwbridge", channel="shared:scd").shutdown()  # a round trip
            deadline = time.monotonic() + 10
            while "dropped" not in (daemon_info("scd") or {}):
                assert time.monotonic() < deadline, daemon_info("scd")
                time.sleep(0.05)  # polling: a condition, bounded above
            with dm.ch.lock:
                held = max(dm.ch.model.outstanding(n.id) for n in dm.ch.model.nodes)
            assert held <= TX_LIMIT
            assert sum((daemon_info("scd") or {})["dropped"].values()) > 0
        assert thread.is_alive()
    finally:
        gen.close()


def test_the_runtime_directory_is_never_a_link(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FWBRIDGE_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    target = tmp_path / "planted"
    target.mkdir(mode=0o700)
    (tmp_path / f"fwbridge-{os.getuid()}").symlink_to(target)
    with pytest.raises(SimBusInitError, match="link"):
        runtime_dir(create=True)
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    up = subprocess.run([*FWBRIDGE, "can", "bus", "up", "x"], capture_output=True, text=True,
                        timeout=30, env=env, check=False)
    assert up.returncode == 2 and "link" in up.stderr and "Traceback" not in up.stderr
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("pacing", ["realtime", "afap"])
def test_nodes_that_exit_with_frames_in_flight_leave_the_daemon_whole(
        rundir: Path, pacing: str, capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    gen = bus_daemon("leave", pacing=pacing)
    dm, thread = next(gen)
    try:
        sniffer = can.Bus(interface="fwbridge", channel="shared:leave")
        try:
            for run in range(3):
                while sniffer.recv(0) is not None:
                    pass  # what the last run left: each run waits for its own frames
                got: list[can.Message | None] = []
                rx = threading.Thread(target=lambda out=got: out.append(sniffer.recv(10.0)))
                rx.start()  # afap: the bus runs while the sniffer waits on it
                deadline = time.monotonic() + 5
                while pacing == "afap" and not any(c.mode == "wait"
                                                   for c in list(dm.clients.values())):
                    assert time.monotonic() < deadline, [c.mode for c in dm.clients.values()]
                    time.sleep(0.01)  # polling: a condition, bounded above
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.connect(str(dm.path))
                    frames = b"".join(
                        pk("S", struct.pack(">dIBB", 0, 0x100 + i, 0, 1) + bytes([run]))
                        for i in range(50))
                    s.sendall(pk("H", b'{"name": "leaver"}') + frames)
                    assert _first(s) is Kind.WELCOME
                # gone with its frames queued and one on the wire
                rx.join(15)
                assert got and got[0] is not None
        finally:
            # afap: the sniffer was handed a frame and has not called since, so it holds bus
            # time (up to the hold limit, as long as the exchange below waits): it goes first
            sniffer.shutdown()
        driver = getattr(dm.ch, "_driver", None)
        assert thread.is_alive() and dm.bugs == 0
        assert driver is None or driver.is_alive()
        _exchange("leave")
    finally:
        gen.close()
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


def _first(sock: socket.socket) -> Kind:
    sock.settimeout(5.0)
    reader = PacketReader("node")
    while True:
        for kind, _ in reader.feed(sock.recv(1 << 16)):
            return kind
