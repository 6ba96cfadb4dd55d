"""Fault injection on the UART path between the host and firmware_ref on QEMU's Cortex-M3.

Bytes are dropped and corrupted (seeded) in both directions between the
test, which plays the host, and the emulated board's UART. Host to board:
command frames with action frames between them; the board's receivers must
end with exactly the counters the host's receivers give on the same damaged
stream (every intact frame recovered, every rejection the same). Board to
host: odometry and the board's answers; every frame that crossed untouched
must be decoded by the host.
"""

from __future__ import annotations

import os
import random
import select
import struct
import time
import tty
from collections import Counter

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from tests.qemu_fw import DEADLINE, fw_run

MAX_LEN = 320  # the board build's FW_ACTION_MAX_LEN
DROP, CORRUPT = 0.01, 0.01


def damage(data: bytes, rng: random.Random) -> tuple[bytes, list[bool]]:
    """(delivered bytes, per input byte: passed unchanged)."""
    out = bytearray()
    kept = []
    for b in data:
        r = rng.random()
        if r < DROP:
            kept.append(False)
        elif r < DROP + CORRUPT:
            out.append(b ^ rng.randrange(1, 256))
            kept.append(False)
        else:
            out.append(b)
            kept.append(True)
    return bytes(out), kept


def host_stream(rng: random.Random, n: int) -> bytes:
    parts = []
    for k in range(n):
        parts.append(cmd_frame.encode(cmd_frame.CmdFrame(
            float(struct.unpack("<f", struct.pack("<f", 0.001 * k))[0]), 0.0, 1.0)))
        if k % 4 == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
            sub = 0x21 if k % 8 else 0x99  # an unknown sub-command now and then
            parts.append(action_frame.encode(ActionFrame(k % 3, 0x04, sub, data)))
    return b"".join(parts)


def test_every_intact_frame_recovered_on_both_sides() -> None:
    rng = random.Random(2002)
    original = host_stream(rng, 400)
    sent, sent_kept = damage(original, rng)
    with fw_run() as run:
        fd = os.open(run.port, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        clean = bytearray()  # board -> host, as the board sent it
        delivered = bytearray()  # ... and as the host got it
        mask: list[bool] = []
        try:
            written = 0
            end = time.monotonic() + 3 * DEADLINE
            done: dict[str, object] | None = None
            while time.monotonic() < end:
                if written < len(sent):
                    written += os.write(fd, sent[written:written + 64])
                ready, _, _ = select.select([fd], [], [], 0.01)
                if ready:
                    got = os.read(fd, 4096)
                    out, kept = damage(got, rng)
                    clean += got
                    delivered += out
                    mask += kept
                if written == len(sent) and done is None:
                    run.events.queue.clear()
                    st = run.status()
                    if st["rx_bytes"] >= len(sent):
                        done = st
                if done is not None and len(clean) > 20 * 19:
                    break
            assert done is not None, "the board did not take every byte"
        finally:
            os.close(fd)
        rc, _ = run.stop()
    assert rc == 143
    board = done
    # Host -> board: the board's receivers agree with the host's on the damaged stream.
    py_cmd = Sum8Receiver(cmd_frame.CODEC)
    py_act = ActionReceiver(max_length=MAX_LEN)
    py_cmd.feed(sent)
    py_act.feed(sent)
    assert board["rx_bytes"] == len(sent) and board["rx_overruns"] == 0
    assert board["cmd"] == py_cmd.stats.as_dict()
    assert board["action"] == py_act.stats.as_dict()
    assert board["cmd"]["checksum_errors"] > 0 and board["action"]["checksum_errors"] > 0
    for make_rx, key in ((lambda: Sum8Receiver(cmd_frame.CODEC), "cmd"),
                         (lambda: ActionReceiver(max_length=MAX_LEN), "action")):
        spans = [(r.offset, len(encode(r.frame))) for r in make_rx().feed(original)]
        intact = sum(all(sent_kept[o:o + n]) for o, n in spans)
        assert board[key]["frames"] >= intact > 0.3 * len(spans)
    # Board -> host: every odometry frame and answer that crossed untouched is decoded.
    for make in (lambda: Sum8Receiver(odom_frame.CODEC), lambda: ActionReceiver()):
        before = [(r.offset, r.frame) for r in make().feed(bytes(clean))]
        intact = Counter(f for off, f in before if all(mask[off:off + len(encode(f))]))
        after = Counter(r.frame for r in make().feed(bytes(delivered)))
        assert intact and not intact - after, (sum(intact.values()), sum(after.values()))


def encode(frame: object) -> bytes:
    if isinstance(frame, ActionFrame):
        return action_frame.encode(frame)
    if isinstance(frame, cmd_frame.CmdFrame):
        return cmd_frame.encode(frame)
    assert isinstance(frame, odom_frame.OdomFrame)
    return odom_frame.encode(frame)
