"""Test parts for the bridge: a firmware played on a pty's master side, and the CLI."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.base_core import NodeEvent
from fwbridge.bridge.config import RobotConfig, parse_config
from fwbridge.bridge.odometry import Odometry
from fwbridge.bridge.transports import PtyPair
from fwbridge.protocols import cmd_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.sum8_receiver import Sum8Receiver
from tests.cli_helpers import ROOT, run_cli


@dataclass(frozen=True)
class Arrival:
    t: float  # time.monotonic() when the peer read it
    frame: CmdFrame
    raw: bytes


class FirmwarePeer(threading.Thread):
    """Plays the STM32 on ``pair``'s master side.

    Collects the command frames the host sends (with arrival times and their
    exact bytes) and all raw bytes; ``answer`` may return bytes to send back
    for each command (an odometry frame, say). Survives the pair being
    unplugged and plugged again.
    """

    def __init__(
        self, pair: PtyPair, answer: Callable[[CmdFrame], bytes | None] | None = None
    ) -> None:
        super().__init__(name="firmware-peer", daemon=True)
        self.pair = pair
        self.answer = answer
        self.rx = Sum8Receiver(cmd_frame.CODEC)
        self.arrivals: list[Arrival] = []
        self.raw = bytearray()
        self._cond = threading.Condition()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            fd = self.pair.master_fd
            if fd < 0:
                time.sleep(0.005)
                continue
            try:
                data = self.pair.read(timeout=0.02)
            except (OSError, ValueError):  # unplugged under our feet
                time.sleep(0.005)
                continue
            if not data:
                continue
            now = time.monotonic()
            with self._cond:
                self.raw += data
                for item in self.rx.feed(data):
                    raw = bytes(self.raw[item.offset : item.offset + cmd_frame.SIZE])
                    self.arrivals.append(Arrival(now, item.frame, raw))
                    if self.answer is not None:
                        reply = self.answer(item.frame)
                        if reply:
                            self.send(reply)
                self._cond.notify_all()

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # unplugged: the bytes are lost, as on a real cable
            self.pair.write(data)

    def wait_for(self, predicate: Callable[[list[Arrival]], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate(arrivals)`` holds; False after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.arrivals):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def frames(self) -> list[CmdFrame]:
        with self._cond:
            return [a.frame for a in self.arrivals]

    def stop(self) -> None:
        self._halt.set()
        self.join(2.0)


def run_verb(
    *args: str, input: bytes | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    """``fwbridge ARGS`` as a subprocess, to completion."""
    return run_cli(*args, input=input, timeout=timeout)


def spawn_verb(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``fwbridge ARGS`` started in the background (stdin/stdout/stderr as given)."""
    from tests.cli_helpers import cli_env, fwbridge_argv

    proc: subprocess.Popen[bytes] = subprocess.Popen(
        [*fwbridge_argv(), *args], env=cli_env(), cwd=ROOT, **kwargs
    )
    return proc


class Recorder:
    """Odometry records and events the node hands out, waitable; optionally a slow subscriber."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.records: list[Odometry] = []
        self.events: list[NodeEvent] = []
        self.cond = threading.Condition()

    def odometry(self, rec: Odometry) -> None:
        if self.delay:
            time.sleep(self.delay)  # a subscriber doing slow work (I/O, a plot, a lock)
        with self.cond:
            self.records.append(rec)
            self.cond.notify_all()

    def event(self, ev: NodeEvent) -> None:
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()

    def wait(self, pred: Any, timeout: float = 5.0) -> bool:
        with self.cond:
            return bool(self.cond.wait_for(lambda: pred(self), timeout))

    def kinds(self) -> list[str]:
        with self.cond:
            return [e.kind for e in self.events]

    def count(self) -> int:
        with self.cond:
            return len(self.records)


def config(url: str, **sections: dict[str, Any]) -> RobotConfig:
    """A robot config for ``url`` with the given sections (as parsed from TOML)."""
    data: dict[str, Any] = {"link": {"url": url}, **sections}
    return parse_config(data)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[PtyPair]:
    """A pty pair; its slave also answers at a stable symlink path (for replugs)."""
    with PtyPair(tmp_path / "ttyBASE") as p:
        yield p


@pytest.fixture
def peer(pair: PtyPair) -> Iterator[FirmwarePeer]:
    """A thread playing the firmware on the pty's master side."""
    p = FirmwarePeer(pair)
    p.start()
    yield p
    p.stop()
