"""``record`` and ``sniff`` start clean: what a port held back from before it was opened
(a device's or a simulator's buffer, pushed the moment the kernel's queue has room) is
dropped unless ``--keep-backlog``."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwbridge.bridge.capture import read_capture
from fwbridge.bridge.transports import PtyPair
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from fwbridge.protocols.sum8_receiver import Sum8Receiver
from tests.helpers import reaped, spawn_verb

STALE = odom_frame.encode(OdomFrame(9.0, 0.0, 0.0, 0.0))  # sent before the program opened


class BackloggedDevice(threading.Thread):
    """A device nobody read: the kernel's queue full of old frames, 4 KiB more held back in
    its own FIFO (cut mid-frame where it overflowed), pushed as soon as there is room; then
    fresh frames (vx = 1, yaw = 0, 1, 2, ...) every 10 ms."""

    def __init__(self, pair: PtyPair) -> None:
        super().__init__(daemon=True)
        self.port = pair.path
        self.fd = pair.master_fd
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.queued = 0
        while True:  # fill the kernel's queue until it takes no more
            try:
                self.queued += os.write(self.fd, STALE)
            except BlockingIOError:
                break
        self.fifo = bytearray((STALE * 216)[:4096])
        self.halt = threading.Event()

    def _push(self, data: bytes | bytearray) -> None:
        view = memoryview(bytes(data))
        while view and not self.halt.is_set():
            if select.select([], [self.fd], [], 0.1)[1]:
                try:
                    view = view[os.write(self.fd, view):]
                except (BlockingIOError, OSError):
                    continue

    def run(self) -> None:
        self._push(self.fifo)  # the moment the reader's open empties the kernel's queue
        k = 0
        while not self.halt.wait(0.01):
            self._push(odom_frame.encode(OdomFrame(1.0, 0.0, 0.0, float(k))))
            k += 1


@pytest.fixture
def device() -> Iterator[BackloggedDevice]:
    with PtyPair() as pair:
        dev = BackloggedDevice(pair)
        assert dev.queued > 1000  # the kernel held a backlog
        dev.start()
        try:
            yield dev
        finally:
            dev.halt.set()
            dev.join(5)


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

