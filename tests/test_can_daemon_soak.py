"""A soak of the shared bus's daemon (``fwbridge can bus up``, a real process): eight
well-behaved nodes exchange numbered frames while one misbehaving client breaks the
protocol, floods the bus, and never reads. The others' frames arrive exact (every one,
in order, once) and the daemon's memory stays flat (its RSS, read from /proc)."""

from __future__ import annotations

import json
import os
import random
import signal
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

from fwbridge.can_bus.daemon_dir import daemon_info

FWBRIDGE = [sys.executable, "-c", "from fwbridge.cli import main; main()"]
SECONDS = float(os.environ.get("FWBRIDGE_SOAK_SECONDS", "20"))
NODES = 8
ROGUE_ID = 0x7FF  # the flood's ID: it loses arbitration to every well-behaved node
RSS_GROWTH_MB = 48  # generous: one unread client alone may hold OUT_LIMIT (8 MiB)


def pk(kind: str, body: bytes = b"") -> bytes:
    return struct.pack(">IB", len(body) + 1, ord(kind)) + body


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("FWBRIDGE_RUNTIME_DIR", str(d))
    proc = subprocess.Popen([*FWBRIDGE, "can", "bus", "up", "soak", "--socketcand", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while daemon_info("soak") is None:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the daemon did not come up"
        time.sleep(0.05)  # polling: a condition, bounded above
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)


def _rogue(path: str, tcp_port: int, stop: threading.Event, rng: random.Random) -> int:
    """Misbehave until ``stop``: garbage, deep JSON, absurd numbers, a frame flood, a
    socketcand flood, and a node that never reads. Returns how many attacks it made."""
    hello = pk("H", json.dumps({"name": "rogue"}).encode())
    flood = b"".join(pk("S", struct.pack(">dIBB", 0, ROGUE_ID, 0, 1) + b"\xee")
                     for _ in range(5000))
    attacks = [
        lambda: bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300))),
        lambda: pk("H", b"[" * 30000),
        lambda: pk("H", b'{"bitrate": 1e999}'),
        lambda: hello + pk("W", struct.pack(">d", -1e308)),
        lambda: hello + pk("R", b'"x"'),
        lambda: hello + flood,
    ]
    deaf = None  # a node that reads nothing: the daemon's queue for it must stay bounded
    n = 0
    while not stop.is_set():
        n += 1
        if n % 10 == 0:
            if deaf is not None:
                deaf.close()
            deaf = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            deaf.connect(path)
            deaf.sendall(hello)
            continue
        if n % 10 == 5:
            with socket.create_connection(("127.0.0.1", tcp_port), timeout=5) as s:
                s.sendall(b"< open soak >< rawmode >" + b"< send 7FF 1 EE >" * 20_000)
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            try:
                s.sendall(attacks[n % len(attacks)]())
                s.shutdown(socket.SHUT_WR)
                while s.recv(1 << 16):
                    pass
            except OSError:
                pass  # dropped mid-write: what the daemon does to a broken client
        stop.wait(0.01)  # pacing the attacks
    if deaf is not None:
        deaf.close()
    return n


@pytest.mark.slow
def test_a_misbehaving_client_among_eight_keeps_frames_exact_and_memory_flat(
        daemon: subprocess.Popen[str]) -> None:
    info = daemon_info("soak") or {}
    port = int(str(info["socketcand"]).rsplit(":", 1)[1])
    per_node = int(SECONDS * 25)  # a frame each 40 ms per node: well under the bus's rate
    buses = [can.Bus(interface="fwbridge", channel="shared:soak", name=f"good{i}")
             for i in range(NODES)]
    got: list[dict[int, list[int]]] = [{} for _ in range(NODES)]

    def send(i: int) -> None:
        for seq in range(per_node):
            buses[i].send(can.Message(arbitration_id=0x100 + i, is_extended_id=False,
                                      data=struct.pack(">I", seq)))
            time.sleep(SECONDS / per_node)  # pacing: frames spread over the soak

    def receive(i: int) -> None:
        want = per_node * (NODES - 1)
        have = 0
        deadline = time.monotonic() + SECONDS * 4 + 30
        while have < want and time.monotonic() < deadline:
            msg = buses[i].recv(1.0)
            if msg is None or msg.arbitration_id == ROGUE_ID:
                continue
            got[i].setdefault(msg.arbitration_id - 0x100, []).append(
                struct.unpack(">I", msg.data)[0])
            have += 1

    stop = threading.Event()
    attacks: list[int] = []
    rogue = threading.Thread(target=lambda: attacks.append(
        _rogue(str(info["socket"]), port, stop, random.Random(7))), daemon=True)
    threads = [threading.Thread(target=send, args=(i,)) for i in range(NODES)]
    threads += [threading.Thread(target=receive, args=(i,)) for i in range(NODES)]
    rogue.start()
    for t in threads:
        t.start()
    time.sleep(min(3.0, SECONDS / 4))  # not a readiness wait: warm-up before the RSS baseline
    base = _rss_mb(daemon.pid)
    peak = base
    while any(t.is_alive() for t in threads[:NODES]):
        peak = max(peak, _rss_mb(daemon.pid))
        time.sleep(0.5)  # polling: RSS sampled while the soak runs
    stop.set()
    rogue.join(30)
    for t in threads:
        t.join(SECONDS * 4 + 60)
    peak = max(peak, _rss_mb(daemon.pid))
    try:
        assert daemon.poll() is None, daemon.communicate()
        assert attacks and attacks[0] > 20
        for i in range(NODES):
            for j in range(NODES):
                if j != i:
                    assert got[i].get(j) == list(range(per_node)), (
                        f"node {i} from node {j}: {len(got[i].get(j, []))} of {per_node}")
        assert peak - base < RSS_GROWTH_MB, f"daemon RSS {base:.0f} -> {peak:.0f} MB"
    finally:
        for b in buses:
            b.shutdown()
    daemon.send_signal(signal.SIGTERM)
    _, err = daemon.communicate(timeout=10)
    assert "Traceback" not in err, err
    print(f"soak: {attacks[0]} attacks, RSS {base:.1f} -> peak {peak:.1f} MB")
