"""firmware_ref against every class of float in every field of a velocity command.

One checksum-valid command with wz = 1e30, inf or -8e9 used to hang the
firmware: its yaw normalisation stepped by 360 degrees and, past 2^33 or for
a value that is not finite, never finished, so the main loop (and the
watchdog in it) never ran again with the last command applied. Here the
compiled harness (host build) and the firmware on QEMU's Cortex-M3 get nan,
+-inf, +-FLT_MAX, subnormals, 2^33, 1e30 and -8e9 in vx, vy and wz, and must
keep sending odometry, never report a refused value, count what they refuse
(``cmd_rejected``) and stop the base when only refused commands come (the
watchdog is not fed by them).
"""

from __future__ import annotations

import json
import math
import os
import signal
import struct
import subprocess
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Protocol

from fwbridge.bridge.sim.kinematics import wrap_deg
from fwbridge.protocols.odom_frame import OdomFrame
from tests.fwref import Firmware
from tests.fwref import firmware as firmware  # the session fixture
from tests.helpers import Lines, OdometryReader, reaped
from tests.qemu_fw import FwRun, fw_run

DEADLINE = 20.0  # seconds; only a hung run gets near it
MAX_SPEED, MAX_TURN = 5.0, 20.0  # FW_CMD_MAX_SPEED, FW_CMD_MAX_TURN

#: float32 bit patterns of every class; subnormals are valid (tiny) speeds.
HOSTILE = {
    "nan": 0x7FC00000, "-nan": 0xFFFFFFFF, "snan": 0x7F800001, "inf": 0x7F800000,
    "-inf": 0xFF800000, "FLT_MAX": 0x7F7FFFFF, "-FLT_MAX": 0xFF7FFFFF,
    "2^33": 0x50000000, "1e30": 0x7149F2CA, "-8e9": 0xCF0E1AC0,
}
SUBNORMAL = {"min-subnormal": 0x00000001, "-min-subnormal": 0x80000001,
             "max-subnormal": 0x007FFFFF}
FIELDS = ("vx", "vy", "wz")


def bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def value(b: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", b))[0])


def cmd_bytes(vx: int, vy: int, wz: int) -> bytes:
    """A command frame from three float32 bit patterns (exact: NaN payloads, FLT_MAX)."""
    payload = struct.pack("<3I", vx, vy, wz)
    return b"\xaa\x55" + payload + bytes([sum(payload) & 0xFF])


GOOD = (bits(0.3), bits(-0.1), bits(0.5))


def odom_bits(f: OdomFrame) -> tuple[int, int, int]:
    return bits(f.vx), bits(f.vy), bits(f.wz)


class Board(Protocol):
    timeout_ms: int

    def write(self, data: bytes) -> None: ...

    def counters(self) -> dict[str, Any]: ...


def check_never_reported(frames: list[OdomFrame]) -> None:
    """No refused value reached the motors or the odometry; the yaw stayed wrapped."""
    for f in frames:
        assert abs(f.vx) <= MAX_SPEED and abs(f.vy) <= MAX_SPEED and abs(f.wz) <= MAX_TURN, f
        assert -180.0 <= f.yaw_deg < 180.0, f


def drive_hostile(board: Board, odom: OdometryReader) -> dict[str, int]:
    """Every hostile value in every field, each after a good command; then refused
    commands alone (the watchdog must stop the base); then refused commands from
    standstill. Returns how many frames of each kind went out."""
    sent = {"good": 0, "refused": 0, "subnormal": 0}

    def send(frame: bytes, kind: str) -> None:
        board.write(frame)
        sent[kind] += 1

    def reports(want: tuple[int, int, int]) -> Callable[[list[OdomFrame]], bool]:
        return lambda fs: any(odom_bits(f) == want for f in fs)

    send(cmd_bytes(*GOOD), "good")
    odom.wait("odometry reporting the good command", reports(GOOD), 0)
    for name, b in {**HOSTILE, **SUBNORMAL}.items():
        for i, field in enumerate(FIELDS):
            cmd = list(GOOD)
            cmd[i] = b
            send(cmd_bytes(*GOOD), "good")  # feeds the watchdog: the base is moving
            odom.wait("the good command", reports(GOOD), odom.count - 1)
            start = odom.count
            send(cmd_bytes(*cmd), "subnormal" if name in SUBNORMAL else "refused")
            if name in SUBNORMAL:  # a valid speed: applied unchanged
                odom.wait(f"{field} = {name} applied", reports((cmd[0], cmd[1], cmd[2])), start)
                continue
            # Odometry keeps flowing (the main loop runs) and still reports the good command.
            frames = odom.wait(f"odometry after {field} = {name}", lambda fs: len(fs) >= 5,
                               start, deadline=5.0)
            assert all(odom_bits(f) == GOOD for f in frames), (field, name, frames)
    check_never_reported(odom.since(0))

    # Refused commands alone do not feed the watchdog: the base stops after its timeout.
    send(cmd_bytes(*GOOD), "good")
    start = odom.count
    odom.wait("the good command again", reports(GOOD), start)
    stream = [cmd_bytes(*(b if k == i else GOOD[k] for k in range(3)))
              for b in HOSTILE.values() for i in range(3)]
    stop_at = time.monotonic() + DEADLINE
    k = 0
    while time.monotonic() < stop_at:
        send(stream[k % len(stream)], "refused")
        k += 1
        if reports((0, 0, 0))(odom.since(start)):
            break
        time.sleep(0.02)  # pacing: a refused command every 20 ms until the watchdog trips
    odom.wait("the watchdog to stop the base", reports((0, 0, 0)), start)

    # From standstill, refused commands do not move it.
    start = odom.count
    for frame in stream:
        send(frame, "refused")
    frames = odom.wait("odometry at standstill", lambda fs: len(fs) >= 10, start)
    assert all(odom_bits(f) == (0, 0, 0) for f in frames), frames[-1]
    check_never_reported(odom.since(0))
    return sent


def test_simulated_firmware_wraps_every_float_class() -> None:
    """The Python bases' heading wrap: constant time, in range, NaN for no heading (it
    raised on infinity, which would have ended the simulation's loop)."""
    for b in (*HOSTILE.values(), *SUBNORMAL.values()):
        w = wrap_deg(value(b))
        assert math.isnan(w) if not math.isfinite(value(b)) else -180.0 < w <= 180.0
    assert wrap_deg(540.0) == 180.0 and wrap_deg(-180.0) == 180.0 and wrap_deg(-8e9) == -80.0


# -- the host build (firmware_ref/build/fw_harness on a pty) ---------------------------------
class Harness:
    def __init__(self, proc: subprocess.Popen[str], master: int, timeout_ms: int) -> None:
        self.proc = proc
        self.master = master
        self.timeout_ms = timeout_ms
        assert proc.stderr is not None
        self.lines = Lines(proc.stderr)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.master, view):]

    def counters(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGUSR1)
        return dict(json.loads(self.lines.next_line("{", DEADLINE)))


@contextmanager
def harness(fw: Firmware, timeout_ms: int) -> Iterator[Harness]:
    master, slave = os.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen([str(fw.harness), "--rate", "100", "--no-action", "--cmd-timeout",
                             str(timeout_ms), os.ttyname(slave)], stderr=subprocess.PIPE,
                            text=True)
    h = Harness(proc, master, timeout_ms)
    try:
        with reaped(proc):
            yield h
    finally:
        for fd in (master, slave):
            with suppress(OSError):
                os.close(fd)


def test_harness_survives_every_float_class_and_its_watchdog_stops_the_base(
        firmware: Firmware) -> None:
    with harness(firmware, timeout_ms=500) as h:
        odom = OdometryReader(h.master)
        odom.start()
        try:
            sent = drive_hostile(h, odom)
            total = sum(sent.values())
            end = time.monotonic() + DEADLINE
            final = h.counters()
            while final["cmd"]["frames"] < total and time.monotonic() < end:
                final = h.counters()
        finally:
            odom.stop()
    assert final["cmd_rejected"] == sent["refused"]
    assert final["cmd_applied"] == sent["good"] + sent["subnormal"]
    assert final["cmd"]["frames"] == total and final["cmd"]["checksum_errors"] == 0
    assert final["watchdog_trips"] >= 1
    assert final["last_cmd"] == [0.0, 0.0, 0.0]


# -- the firmware on QEMU's Cortex-M3 (fwbridge fw run) --------------------------------------
class Qemu:
    timeout_ms = 500  # FW_CMD_TIMEOUT_MS

    def __init__(self, run: FwRun, fd: int) -> None:
        self.run = run
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def counters(self) -> dict[str, Any]:
        return self.run.status()


def test_board_survives_every_float_class_and_its_watchdog_stops_the_base() -> None:
    with fw_run() as run:
        fd = os.open(run.port, os.O_RDWR | os.O_NOCTTY)
        try:
            tty.setraw(fd)
            board = Qemu(run, fd)
            odom = OdometryReader(fd)
            odom.start()
            try:
                sent = drive_hostile(board, odom)
                total = sum(sent.values())
                st = run.status(lambda s: s["cmd"]["frames"] >= total)
            finally:
                odom.stop()
        finally:
            os.close(fd)
        run.stop()
    assert st["cmd"]["frames"] == total and st["cmd"]["checksum_errors"] == 0
    assert st["cmd_rejected"] == sent["refused"]
    assert st["cmd_applied"] == sent["good"] + sent["subnormal"]
    assert st["watchdog_trips"] >= 1
    assert st["velocity_bits"] == {"vx": 0, "vy": 0, "wz": 0}
    assert st["last_cmd_bits"] == dict(zip(FIELDS, GOOD))  # refused ones never applied
