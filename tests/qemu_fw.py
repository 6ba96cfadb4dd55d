"""firmware_ref on QEMU's Cortex-M3 (``fwbridge fw run``) for the tests.

``qemu_build()`` runs ``make -C firmware_ref qemu qemu-unit`` once per
session; without qemu-system-arm, arm-none-eabi-gcc or newlib the tests
that need it are skipped with the reason. ``fw_run()`` starts ``fwbridge fw
run --json`` and gives the port it printed and the firmware's counter
lines (stamped with the firmware's SysTick milliseconds) as they come.
"""

from __future__ import annotations

import functools
import json
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.fwref import FIRMWARE
from tests.helpers import reaped, spawn_verb

QEMU_BUILD = FIRMWARE / "build" / "qemu"
DEADLINE = 30.0  # seconds; only a hung run gets near it


@functools.cache
def _build() -> str | None:
    """None when built, else why it cannot be."""
    for tool, package in (("qemu-system-arm", "qemu-system-arm"),
                          ("arm-none-eabi-gcc", "gcc-arm-none-eabi"), ("make", "make")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {package})"
    probe = subprocess.run(["arm-none-eabi-gcc", "-print-file-name=librdimon.a"],
                           capture_output=True, text=True)
    if probe.stdout.strip() == "librdimon.a":  # gcc echoes the name when it finds no file
        return "newlib for arm-none-eabi is not installed (apt-get install libnewlib-arm-none-eabi)"
    proc = subprocess.run(["make", "-s", "-C", str(FIRMWARE), "qemu", "qemu-unit"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"firmware_ref QEMU build failed:\n{proc.stdout}\n{proc.stderr}")
    return None


def qemu_build() -> None:
    """Build once; skip the test (with the reason) when the tools are missing."""
    reason = _build()
    if reason is not None:
        pytest.skip(reason)


@dataclass
class FwRun:
    proc: subprocess.Popen[bytes]
    ready: dict[str, Any]
    events: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)

    @property
    def port(self) -> str:
        return str(self.ready["port"])

    def status(self, want: Callable[[dict[str, Any]], bool] = lambda st: True) -> dict[str, Any]:
        """The next counters line of the firmware that satisfies ``want``."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            try:
                ev = self.events.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, "fw run exited"
                continue
            if ev.get("event") == "status" and want(ev["firmware"]):
                return dict(ev["firmware"])
        raise AssertionError("no such counters line from the firmware")

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, dict[str, Any]]:
        """Signal ``fw run``; its exit status and its end event."""
        self.proc.send_signal(sig)
        rc = self.proc.wait(DEADLINE)
        end: dict[str, Any] = {}
        while not self.events.empty():
            ev = self.events.get()
            if ev.get("event") == "end":
                end = ev
        return rc, end


@contextmanager
def fw_run(*args: str) -> Iterator[FwRun]:
    """``fwbridge fw run --json ARGS``: waits for its ready line."""
    qemu_build()
    proc = spawn_verb("fw", "run", "--json", *args, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert proc.stdout is not None
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
    stdout = proc.stdout

    def pump() -> None:
        for raw in stdout:
            try:
                lines.put(json.loads(raw))
            except ValueError:
                continue
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    with reaped(proc):
        try:
            first = lines.get(timeout=DEADLINE)
        except queue.Empty:
            first = None
        if first is None or first.get("event") != "ready":
            proc.kill()
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"fw run printed no ready line: {first} {err}")
        run = FwRun(proc, first)

        def forward() -> None:
            while (ev := lines.get()) is not None:
                run.events.put(ev)

        threading.Thread(target=forward, daemon=True).start()
        yield run
