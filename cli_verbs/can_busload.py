"""``fwbridge can busload``: bus load and frames/s per ID in intervals, as ``canbusload -e``,
from each frame's exact bits (stuffing included; an FD data phase at its own rate).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import can
import click

from fwbridge.can_bus.bits import Frame, frame_length
from fwbridge.can_bus.ids import classify
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.can_common import DURATION, bus_label, open_bus, options
from fwbridge.cli_verbs.common import console, fail, json_line
from fwbridge.cli_verbs.link import Deadline, until_interrupted
from fwbridge.cli_verbs.params import Finite

__all__ = ["bus_bits", "busload_cmd"]


@click.command("busload")
@click.option("--interval", type=Finite(0, 3600, lo_open=True, unit="s"), default=1.0,
              show_default=True, metavar="S", help="Seconds per report.")
@click.option("--ids/--no-ids", "per_id", default=True, show_default=True,
              help="Per-ID rows under each report.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per interval.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Stop after this many intervals.")
@DURATION
@click.pass_context
def busload_cmd(ctx: click.Context, interval: float, per_id: bool, as_json: bool,
                count: int | None, duration: float | None) -> None:
    """Bus load and frames/s per ID, as canbusload -e.

    Exact frame bits, stuffing included.
    """
    opts = options(ctx)
    bus = open_bus(opts)
    bitrate = opts.bitrate or (bus.sim.bitrate if isinstance(bus, FwBridgeBus) else None)
    if bitrate is None:
        bus.shutdown()
        fail("give the bit rate with -b: the load is a share of it")

    sim = isinstance(bus, FwBridgeBus)
    data_bitrate = bus.sim.data_bitrate if isinstance(bus, FwBridgeBus) else None

    def clock() -> float:  # the time base of the messages' timestamps
        return bus.sim.epoch + bus.time if isinstance(bus, FwBridgeBus) else time.time()

    deadline = Deadline(duration)
    reports = 0
    frames: Counter[tuple[int, bool]] = Counter()
    bits: Counter[tuple[int, bool]] = Counter()
    end = clock() + interval

    def close() -> None:
        nonlocal end, reports
        _report(bus_label(bus), bitrate, interval, frames, bits, per_id, as_json)
        frames.clear()
        bits.clear()
        end += interval
        reports += 1

    try:
        with until_interrupted():
            while not deadline.expired and (count is None or reports < count):
                msg = bus.recv(timeout=deadline.left(0.05))
                if msg is None:
                    if clock() >= end:  # a quiet interval still gets its report
                        close()
                    continue
                if msg.is_error_frame:
                    continue
                # Windows follow the frames' timestamps (bus time on the simulator, which
                # an afap bus runs ahead of the wall); a foreign clock base falls back to ours.
                ts = msg.timestamp if sim or abs(msg.timestamp - clock()) < 10 else clock()
                if not reports and not frames and ts < end - interval:
                    end = ts + interval  # traffic older than the first window: start there
                while ts >= end and (count is None or reports < count):
                    close()
                if count is not None and reports >= count:
                    break
                key = (msg.arbitration_id, msg.is_extended_id)
                frames[key] += 1
                bits[key] += bus_bits(msg, bitrate, data_bitrate)
    finally:
        bus.shutdown()


def bus_bits(msg: can.Message, bitrate: int, data_bitrate: int | None) -> int:
    """The nominal bit times a frame occupies the bus (an FD data phase at its own rate)."""
    if msg.is_fd:
        from fwbridge.can_bus.fd import frame_seconds

        f = Frame.make(msg.arbitration_id, bytes(msg.data), extended=msg.is_extended_id,
                       fd=True, brs=msg.bitrate_switch, esi=msg.error_state_indicator)
        return round(frame_seconds(f, bitrate, data_bitrate if msg.bitrate_switch else None)
                     * bitrate)
    return frame_length(Frame(msg.arbitration_id, msg.is_extended_id, msg.is_remote_frame,
                              msg.dlc, b"" if msg.is_remote_frame else bytes(msg.data)))


def _report(label: str, bitrate: int, interval: float, frames: Counter[tuple[int, bool]],
            bits: Counter[tuple[int, bool]], per_id: bool, as_json: bool) -> None:
    total_bits = sum(bits.values())
    load = 100.0 * total_bits / (bitrate * interval)
    keys = sorted(frames, key=lambda k: (k[1], k[0]))
    rows: list[dict[str, Any]] = [
        {"id": f"{i:08X}" if ext else f"{i:03X}", "frames": frames[(i, ext)],
         "fps": frames[(i, ext)] / interval, "bits": bits[(i, ext)],
         "load": 100.0 * bits[(i, ext)] / (bitrate * interval)} for i, ext in keys]
    if as_json:
        json_line({"channel": label, "bitrate": bitrate, "interval": interval,
                   "frames": sum(frames.values()), "bits": total_bits, "load": load,
                   "ids": rows if per_id else []})
        return
    console.print(f"{label}@{bitrate} {sum(frames.values()):6d} frames {total_bits:9d} bits "
                  f"{load:6.2f} %")
    if per_id:
        for (i, ext), r in zip(keys, rows):
            module = classify(i, ext)
            who = f"  {module[0].value} {module[1]}" if module else ""
            console.print(f"  {r['id']:>8} {r['frames']:6d} frames {r['fps']:9.1f}/s "
                          f"{r['load']:6.2f} %{who}")
