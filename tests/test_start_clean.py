"""``record`` and ``sniff`` start clean: what a port held back from before it was opened
(a device's or a simulator's buffer, pushed the moment the kernel's queue has room) is
dropped unless ``--keep-backlog``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import subprocess
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.protocols import odom_frame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import reaped, spawn_verb

STALE = odom_frame.encode(OdomFrame(9.0, 0.0, 0.0, 0.0))  # sent before the program opened


class BackloggedDevice(threading.Thread):
    """A device nobody reads, as the simulator's pty link is: a frame a millisecond, the
    kernel's queue full, 4 KiB more held back in its own FIFO (the newest bytes lost when it
    overflows, so a frame is cut), pushed whenever there is room. The frames it makes once
    the port was opened (the opener's flush empties the queue) are fresh: vx = 1."""

    def __init__(self, pair: PtyPair) -> None:
        super().__init__(daemon=True)
        self.port = pair.path
        self.fd = pair.master_fd
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        # how full the port's input queue is, seen from a second descriptor of the port
        self.probe = os.open(pair.slave_name, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        while True:  # the old frames that filled the queue
            try:
                os.write(self.fd, STALE)
            except BlockingIOError:
                break
        self.high = 0  # the queue's level once full (the kernel moves the bytes in a moment)
        self.fifo = bytearray()
        self.full = threading.Event()
        self.opened = threading.Event()
        self.halt = threading.Event()

    def queued(self) -> int:
        return int(struct.unpack("i", fcntl.ioctl(self.probe, termios.FIONREAD, b"\0" * 4))[0])

    def run(self) -> None:
        k = 0
        while not self.halt.wait(0.001):
            level = self.queued()
            if not self.opened.is_set() and self.full.is_set() and level < self.high // 4:
                self.opened.set()  # a reader opened the port and flushed its queue
            self.high = max(self.high, level)
            if self.opened.is_set():
                self.fifo += odom_frame.encode(OdomFrame(1.0, 0.0, 0.0, float(k)))
                k += 1
            else:
                self.fifo += STALE
            if len(self.fifo) >= 4096:
                del self.fifo[4096:]
                if self.high > 2048:
                    self.full.set()
            with contextlib.suppress(BlockingIOError, OSError):
                del self.fifo[:os.write(self.fd, self.fifo)]

    def close(self) -> None:
        self.halt.set()
        self.join(5)
        os.close(self.probe)


@pytest.fixture
def device() -> Iterator[BackloggedDevice]:
    with PtyPair() as pair:
        dev = BackloggedDevice(pair)
        dev.start()
        try:
            assert dev.full.wait(10)  # the kernel's queue and the device's FIFO are full
            yield dev
        finally:
            dev.close()


def _frames(data: bytes) -> list[OdomFrame]:
    rx = Sum8Receiver(odom_frame.CODEC)
    return [item.frame for item in rx.feed(data)]


def _run(verb: str, port: str, out: Path, *extra: str) -> tuple[list[float], str]:
    """The vx of each frame the verb got, in order, and its stderr."""
    if verb == "record":
        args = ["record", port, str(out), "--duration", "1.5", *extra]
    else:
        args = ["sniff", port, "-p", "odom", "--json", "--duration", "1.5", *extra]
    proc = spawn_verb(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with reaped(proc):
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    if verb == "record":
        data = b"".join(p.data for p in read_capture(out))
        return [f.vx for f in _frames(data)], stderr.decode()
    return [json.loads(line)["vx"] for line in stdout.splitlines()], stderr.decode()


@pytest.mark.parametrize("verb", ["record", "sniff"])
def test_the_backlog_is_dropped_on_open(device: BackloggedDevice, tmp_path: Path,
                                        verb: str) -> None:
    vx, err = _run(verb, device.port, tmp_path / "run.pcapng")
    assert vx and set(vx) == {1.0}, vx[:5]  # fresh frames only, from the first on
    assert "--keep-backlog keeps them" in err and "dropped" in err


@pytest.mark.parametrize("verb", ["record", "sniff"])
def test_keep_backlog_keeps_it(device: BackloggedDevice, tmp_path: Path, verb: str) -> None:
    vx, err = _run(verb, device.port, tmp_path / "run.pcapng", "--keep-backlog")
    assert vx[0] == 9.0 and 1.0 in vx  # the held-back frames first, then the fresh ones
    assert "dropped" not in err

