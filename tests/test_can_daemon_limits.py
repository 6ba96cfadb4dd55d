"""The shared bus daemon's limits over all its clients (socketcand clients at once, bytes
queued for all of them), and what a node says when the daemon is killed under it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import can
import pytest

from fwbridge.can_bus.daemon_client import DaemonGone
from fwbridge.can_bus.daemon_dir import daemon_info
from fwbridge.can_bus.daemon_nodes import FAIR_SHARE, OUT_LIMIT
from tests.helpers import bus_daemon, wait_until

FWBRIDGE = [sys.executable, "-c", "from fwbridge.cli import main; main()"]


def _connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:  # a small window: the daemon's bytes queue in it, not the kernel
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def _read_until_closed(s: socket.socket) -> bytes:
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk


def _report(name: str) -> dict[str, Any]:
    return daemon_info(name) or {}


def test_socketcand_clients_past_the_limit_are_refused(rundir: Path) -> None:
    gen = bus_daemon("lim", socketcand=0, max_clients=3)
    dm, _ = next(gen)
    port = dm.socketcand_port or 0
    served: list[socket.socket] = []
    try:
        for _ in range(3):
            s = _connect(port)
            served.append(s)
            assert s.recv(64) == b"< hi >"
            s.sendall(b"< open lim >< rawmode >")
        extra = _connect(port)
        assert _read_until_closed(extra) == b"< error too many clients: 3 served, at most 3 >"
        extra.close()
        report = wait_until(lambda: _report("lim").get("refused") == 1 and _report("lim"),
                            what="the refusal in the bus's report")
        assert report["max_clients"] == 3
        served.pop().close()  # one goes: one more is served

        def served_again() -> bool:
            s = _connect(port)
            hello = s.recv(64)
            served.append(s) if hello == b"< hi >" else s.close()
            return hello == b"< hi >"

        wait_until(served_again, what="a client served once one left")
    finally:
        for s in served:
            s.close()
        gen.close()


def test_idle_clients_stay_within_the_queue_budget(rundir: Path) -> None:
    """Ten socketcand clients that never read, a client flooding the bus: the bytes the
    daemon queues for them all stay within its budget (each would hold OUT_LIMIT), and the
    frames beyond are dropped and counted."""
    budget, idle = 1 << 20, 10
    gen = bus_daemon("idle", socketcand=0, bitrate=1_000_000, queue_budget=budget,
                     max_clients=idle + 2)
    dm, _ = next(gen)
    port = dm.socketcand_port or 0
    socks: list[socket.socket] = []
    try:
        for _ in range(idle + 1):
            s = _connect(port, rcvbuf=4096)
            socks.append(s)
            assert s.recv(64) == b"< hi >"
            s.sendall(b"< open idle >< rawmode >")
        flood = b"< send 123 1 11 >" * 4000
        stop = threading.Event()

        def send() -> None:
            while not stop.is_set():
                try:
                    socks[-1].sendall(flood)
                except OSError:
                    return

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        # the budget is spent: frames drop for each idle client (its 8 MiB limit is far off)
        wait_until(lambda: len(_report("idle").get("dropped", {})) >= idle, timeout=60,
                   what="frames dropped for every idle client")
        stop.set()
        sender.join(10)

        def settled() -> bool:  # the flood's frames are all on the bus: the queue stands
            with dm.ch.lock:
                return dm.ch.model.next_event_time() is None

        wait_until(settled, what="the bus idle")
        with dm.ch.lock:
            queued = dm.queued
            assert sum(len(c.out) for c in dm.clients.values()) == queued
        report = wait_until(lambda: _report("idle").get("queued") == queued and _report("idle"),
                            what="the bus's report up to date")
        bound = budget + (idle + 1) * (FAIR_SHARE + 64)
        assert budget < report["queued_peak"] <= bound < (idle + 1) * OUT_LIMIT
        assert budget - FAIR_SHARE < report["queued"] <= bound
        assert report["queue_budget"] == budget
        # another socketcand client now is refused: the budget is spent
        late = _connect(port)
        assert _read_until_closed(late).startswith(b"< error busy: ")
        late.close()
        for s in socks:  # they go: what was queued for them goes too
            s.close()
        socks.clear()
        wait_until(lambda: dm.queued == 0 and not dm.clients, what="the queue emptied")
    finally:
        for s in socks:
            s.close()
        gen.close()


@pytest.fixture
def killed_bus(rundir: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([*FWBRIDGE, "can", "bus", "up", "doomed"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_until(lambda: daemon_info("doomed") is not None or proc.poll() is not None,
                   what="the bus daemon up")
        assert proc.poll() is None
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


GONE = "shared bus 'doomed': daemon gone (connection closed)"


def test_a_killed_daemon_is_named_gone(killed_bus: subprocess.Popen[str]) -> None:
    a = can.Bus(interface="fwbridge", channel="shared:doomed")
    b = can.Bus(interface="fwbridge", channel="shared:doomed")
    try:
        msg = can.Message(arbitration_id=0x123, data=b"\x01\x02", is_extended_id=False)
        for _ in range(300):  # a transmit buffer that fills faster than the bus empties it
            a.send(msg, timeout=5)
        killed_bus.send_signal(signal.SIGKILL)
        killed_bus.wait(10)
        with pytest.raises(DaemonGone) as err:
            for _ in range(1000):  # the first send that is not taken from the buffer
                a.send(msg, timeout=5)
        assert str(err.value) == GONE
        assert isinstance(err.value, can.CanOperationError)
        with pytest.raises(DaemonGone, match="daemon gone"):
            while b.recv(5) is not None:  # what arrived before the end, then the end
                pass
        with pytest.raises(DaemonGone, match="daemon gone"):
            a.send(msg, timeout=5)  # and every send after
    finally:
        a.shutdown()
        b.shutdown()


def test_the_cli_says_the_daemon_is_gone(killed_bus: subprocess.Popen[str],
                                         tmp_path: Path) -> None:
    rec = subprocess.Popen([*FWBRIDGE, "can", "-c", "shared:doomed", "record",
                            str(tmp_path / "bus.log")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "COLUMNS": "200"})
    try:
        wait_until(_attached, what="the recorder attached")
        killed_bus.send_signal(signal.SIGKILL)
        err = rec.communicate(timeout=30)[1]
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait(10)
    assert rec.returncode == 2, err
    assert f"error: {GONE}" in err and "Traceback" not in err, err


def _attached() -> bool:
    """Some node is on the bus ``doomed`` (asked of the daemon itself)."""
    with can.Bus(interface="fwbridge", channel="shared:doomed") as probe:
        return len(probe.sim.endpoints) >= 2  # type: ignore[attr-defined]
