"""End to end over ptys: the compiled firmware harness on one side, the host's
protocol layer on the other.

The harness (firmware_ref/harness/fw_harness.c, built from the firmware's
own sources) plays the STM32 base on one pty and the action-frame main
controller on another. No wall-clock assertions: every wait is a poll loop
with a generous deadline that only bounds a hung run.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.families.arq import (
    Delivered,
    Retransmit,
    Status,
    StopAndWaitSender,
    parse_answer,
)
from tests.fwref import Firmware
from tests.fwref import firmware as firmware  # the session fixture
from tests.helpers import Lines, reaped

DEADLINE = 20.0  # seconds; only a hung run gets near it
T = TypeVar("T")


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


@dataclass
class Link:
    master: int
    slave: int
    path: str

    @classmethod
    def open(cls) -> Link:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline: a byte pipe like a UART
        return cls(master, slave, os.ttyname(slave))

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def read(self, timeout: float = 0.05) -> bytes:
        ready, _, _ = select.select([self.master], [], [], timeout)
        return os.read(self.master, 65536) if ready else b""

    def close(self) -> None:
        for fd in (self.master, self.slave):
            with suppress(OSError):
                os.close(fd)


@dataclass
class Harness:
    proc: subprocess.Popen[str]
    base: Link
    action: Link
    lines: Lines

    def report(self) -> dict[str, Any]:
        """Ask for the counters (SIGUSR1) and return them."""
        self.proc.send_signal(signal.SIGUSR1)
        return dict(json.loads(self.lines.next_line("{", DEADLINE)))

    def stop(self) -> dict[str, Any]:
        """SIGTERM: the harness prints its counters and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=DEADLINE) == 0
        return dict(json.loads(self.lines.next_line("{", DEADLINE)))


def until(fn: Callable[[], T | None], what: str) -> T:
    """Poll ``fn`` until it returns something; fail after DEADLINE."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        got = fn()
        if got is not None:
            return got
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def harness(fw: Firmware, *args: str) -> Iterator[Harness]:
    base, action = Link.open(), Link.open()
    proc = subprocess.Popen(
        [str(fw.harness), "--rate", "100", "--cmd-timeout", "0", "--action", action.path, *args,
         base.path], stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    h = Harness(proc, base, action, Lines(proc.stderr))
    with reaped(proc):
        h.lines.wait_for("ready", DEADLINE)
        yield h
        base.close()
        action.close()


def test_command_in_odometry_out(firmware: Firmware) -> None:
    with harness(firmware) as h:
        rx = Sum8Receiver(odom_frame.CODEC)
        cmd = cmd_frame.CmdFrame(f32(0.2), f32(-0.1), f32(0.5))
        h.base.write(cmd_frame.encode(cmd))

        def commanded() -> list[odom_frame.OdomFrame] | None:
            got = [r.frame for r in rx.feed(h.base.read()) if r.frame.vx == cmd.vx]
            return got or None

        first = until(commanded, "odometry that reports the command")[0]
        assert (first.vy, first.wz) == (cmd.vy, cmd.wz)
        # The yaw is integrated from wz: later frames report a different yaw.
        later = until(lambda: [f for f in (commanded() or []) if f.yaw_deg != first.yaw_deg]
                      or None, "the yaw to move")
        assert later[0].wz == cmd.wz
        # A zero command stops the base.
        h.base.write(cmd_frame.encode(cmd_frame.ZERO))
        until(lambda: [r for r in rx.feed(h.base.read()) if r.frame.vx == 0.0 and
                       r.frame.wz == 0.0] or None, "the base to stop")
        final = h.stop()
    assert final["cmd"]["frames"] == 2
    assert final["cmd"]["checksum_errors"] == 0 and final["cmd"]["discarded"] == 0
    assert final["odom_sent"] > 0 and final["tx_dropped"] == 0
    assert rx.stats.checksum_errors == 0


def test_action_frame_is_acknowledged(firmware: Firmware) -> None:
    with harness(firmware, "--rate", "0") as h:
        rx = ActionReceiver()
        sender = StopAndWaitSender(timeout=2.0, retries=5)
        request = ActionFrame(0x01, 0x04, 0x21, bytes([1, 80, 60, 0]))
        data, _ = sender.send(request, time.monotonic())
        h.action.write(data)

        def delivered() -> Delivered | None:
            now = time.monotonic()
            events = [e for f in rx.feed(h.action.read()) for e in sender.on_answer(f.frame, now)]
            events += sender.poll(now)
            for e in events:
                if isinstance(e, Retransmit):
                    h.action.write(e.data)
            return next((e for e in events if isinstance(e, Delivered)), None)

        done = until(delivered, "the acknowledgement")
        assert done.frame == request
        # Unknown sub-command and a damaged frame get negative answers.
        h.action.write(action_frame.encode(ActionFrame(0x01, 0x05, 0x99, b"")))
        bad = bytearray(action_frame.encode(ActionFrame(0x02, 0x03, 0x36, b"\x01\x02")))
        bad[-4] ^= 0xFF
        h.action.write(bytes(bad))
        answers: list[Any] = []

        def two_answers() -> list[Any] | None:
            answers.extend(parse_answer(f.frame) for f in rx.feed(h.action.read()))
            return answers if len(answers) >= 2 else None

        first, second = until(two_answers, "two negative answers")
        assert (first.machine, first.sub, first.status) == (0x01, 0x99, Status.UNKNOWN_SUB)
        assert (second.machine, second.sub, second.status) == (0x02, 0x36, Status.CRC_ERROR)
        final = h.stop()
    assert final["action"]["frames"] == 2 and final["action"]["checksum_errors"] == 1
    assert final["responder"] == {"answered": 3, "acks": 1, "naks": 2,
                                  "duplicates": sender.stats.retransmitted}
    assert rx.stats.checksum_errors == 0 and rx.stats.discarded == 0


def test_corrupted_bytes_are_counted_on_both_ends(firmware: Firmware) -> None:
    """Noise into the firmware, noise into the host: each side counts the same as the
    reference receiver on the same bytes (the pty loses nothing)."""
    with harness(firmware) as h:
        # Host -> firmware: commands in noise that defeats the seed's receiver.
        parts: list[bytes] = []
        intact: list[int] = []
        pos = 0
        for k in range(40):
            frame = cmd_frame.encode(cmd_frame.CmdFrame(f32(k / 10), 0.0, 0.0))
            for part in (b"\xaa", frame, b"\xaa\x55\x01\x02", frame[:7],
                         frame[:-1] + bytes([frame[-1] ^ 0x10])):
                if part is frame:
                    intact.append(pos)
                parts.append(part)
                pos += len(part)
        sent = b"".join(parts)
        act = b"".join(
            [b"\xfe\xef\x01\x04\x03\x00", action_frame.encode(ActionFrame(3, 0x07, 0x02, b""))]
            * 5)
        for i in range(0, len(sent), 100):
            h.base.write(sent[i:i + 100])
        h.action.write(act)
        want_cmd = Sum8Receiver(cmd_frame.CODEC)
        assert {r.offset for r in want_cmd.feed(sent)} >= set(intact)  # no intact frame lost
        want_act = ActionReceiver()
        want_act.feed(act)

        def caught_up() -> dict[str, Any] | None:
            rep = h.report()
            done = rep["cmd"]["bytes"] == len(sent) and rep["action"]["bytes"] == len(act)
            return rep if done else None

        rep = until(caught_up, "the harness to read everything")
        assert rep["cmd"] == want_cmd.stats.as_dict()
        assert rep["cmd"]["checksum_errors"] >= 40 and rep["cmd"]["frames"] >= 40
        assert rep["action"] == want_act.stats.as_dict()
        assert rep["action"]["frames"] == 5
        assert [f32(v) for v in rep["last_cmd"]] == [f32(3.9), 0.0, 0.0]  # %.9g round-trips

        # Firmware -> host: flip one byte in every third odometry frame on the way.
        rx = Sum8Receiver(odom_frame.CODEC)
        clean = Sum8Receiver(odom_frame.CODEC)
        received = bytearray()
        end = time.monotonic() + DEADLINE
        while len(received) < 19 * 60 and time.monotonic() < end:
            received += h.base.read()
        assert len(received) >= 19 * 60
        good = [r.offset for r in clean.feed(bytes(received))]
        noisy = bytearray(received)
        damaged = set(good[::3])
        for off in damaged:
            noisy[off + 5] ^= 0x5A
        got = [r.offset for r in rx.feed(bytes(noisy))]
        assert set(got) >= set(good) - damaged  # no undamaged frame lost
        assert rx.stats.checksum_errors >= len(damaged)
        assert clean.stats.checksum_errors == 0
        h.stop()
