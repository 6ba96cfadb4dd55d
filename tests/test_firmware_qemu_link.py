"""The board's link port (``fwbridge fw run``): answers as soon as a program opens it.

QEMU's own pty reads a newly opened port only at its once-a-second reconnect
check, so the first ``send action --ack`` after an open waited up to a second
and was retransmitted (or failed). The port is now a relay of QEMU's socket
chardev (``bridge/link/pty_relay.py``); here it is driven by hand against a
socket peer standing for QEMU, and end to end against the board.
"""

from __future__ import annotations

import json
import os
import socket
import tty
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from fwbridge.bridge.link.pty_relay import BUFFER, PtyRelay
from tests.helpers import run_verb
from tests.qemu_fw import fw_run


@contextmanager
def relay() -> Iterator[tuple[PtyRelay, socket.socket]]:
    """A relay and the device's end of its socket (what QEMU would hold)."""
    r = PtyRelay()
    device = socket.socket(fileno=os.dup(r.far_fd))
    r.handed()
    try:
        yield r, device
    finally:
        device.close()
        r.close()


@contextmanager
def opened(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    tty.setraw(fd)
    try:
        yield fd
    finally:
        os.close(fd)


def pump_until(r: PtyRelay, done: object, rounds: int = 200) -> None:
    """Pump rounds (each waits at most 10 ms) until ``done()`` is true."""
    for _ in range(rounds):
        if done():  # type: ignore[operator]
            return
        assert r.pump(0.01)
    raise AssertionError("the relay did not get there")


def read_all(fd: int) -> bytes:
    out = b""
    with suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            out += chunk
    return out


def test_bytes_flow_both_ways_once_a_program_opens_the_port() -> None:
    with relay() as (r, device):
        assert r.pump(0.0) and not r.connected
        with opened(r.path) as fd:
            os.write(fd, b"request")
            got = bytearray()
            device.setblocking(False)

            def arrived() -> bool:
                with suppress(BlockingIOError):
                    got.extend(device.recv(4096))
                return bytes(got) == b"request"

            pump_until(r, arrived)  # within rounds of the open: no reconnect timer
            assert r.connected
            device.sendall(b"answer")
            seen = bytearray()
            pump_until(r, lambda: seen.extend(read_all(fd)) or bytes(seen) == b"answer")


def test_device_bytes_without_a_reader_are_dropped_not_kept_for_the_next_opener() -> None:
    with relay() as (r, device):
        device.sendall(b"stale odometry" * 10)
        pump_until(r, lambda: r.dropped == 140)
        with opened(r.path) as fd:
            r.pump(0.0)
            device.sendall(b"fresh")
            seen = bytearray()
            pump_until(r, lambda: seen.extend(read_all(fd)) or len(seen) >= 5)
            assert bytes(seen) == b"fresh"


def test_a_reader_that_does_not_read_holds_the_device_back() -> None:
    """Bounded: the relay stops taking the device's bytes (its transmitter waits)."""
    with relay() as (r, device), opened(r.path):
        device.setblocking(False)
        sent = 0
        for _ in range(2000):
            try:
                sent += device.send(b"x" * 1024)
            except BlockingIOError:
                r.pump(0.0)
                try:
                    sent += device.send(b"x" * 1024)
                except BlockingIOError:
                    break
            r.pump(0.0)
        else:
            raise AssertionError(f"the device was never held back ({sent} bytes)")
        # Held in the relay's queue and the sockets (the rest is in the pty): a few buffers.
        assert sent - r.to_port <= 6 * BUFFER and r.dropped == 0, (sent, r.stats())


def test_first_acknowledged_action_after_opening_needs_no_retransmit() -> None:
    """Each send opens the port anew: its first frame is answered, not retransmitted."""
    with fw_run() as run:
        run.status(lambda st: st["ms"] > 0)  # the board is up
        for _ in range(3):
            proc = run_verb("send", run.port, "action", "--machine", "1", "--type", "4",
                            "--sub", "0x21", "--data", "01 50 3c 00", "--ack", "--json")
            assert proc.returncode == 0, proc.stderr.decode()
            out = json.loads(proc.stdout.decode().splitlines()[-1])
            assert out["event"] == "delivered" and out["status"] == "ok", out
            assert out["sender"]["retransmitted"] == 0 and out["attempts"] == 1, out
        run.stop()
