"""Recording CAN to MCAP against python-can's BLF writer, on one saturated bus, in one run.

The simulated bus at 1 Mbit/s with real-time pacing carries 100 % load: one
node always has frames queued (8-byte actuator feedback, IDs cycling), so
arbitration leaves no idle bit. Two capture taps on that one bus record
every frame at the same time: fwbridge's MCAP writer (``.mcap``: CDR
``can_msgs/msg/Frame``, load per ID, zstd chunks) and python-can's
``BLFWriter`` (``.blf``, zlib), each wrapped to count the CPU time its
calls take (thread CPU time, so other processes on the machine do not
count). Afterwards both files are read back: frames lost = frames the bus
delivered minus frames in the file.

Goal: 0 frames lost; MCAP CPU <= 1.2x the BLF writer's.

Usage: python -m bench.bench_mcap [--seconds S] [--quick]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import can

from bench.common import machine, table
from fwbridge.bridge.record.can_mcap import McapCanWriter, read_mcap_messages
from fwbridge.can_bus.interface import FwBridgeBus

BITRATE = 1_000_000


class Timed(can.Listener):
    """A writer whose calls are timed in thread CPU time (the recorder's own cost)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.cpu_ns = 0
        self.frames = 0
        self.stop_cpu_ns = 0

    def on_message_received(self, msg: can.Message) -> None:
        t0 = time.thread_time_ns()
        self.writer.on_message_received(msg)
        self.cpu_ns += time.thread_time_ns() - t0
        self.frames += 1

    def stop(self) -> None:
        t0 = time.thread_time_ns()
        self.writer.stop()
        self.stop_cpu_ns = time.thread_time_ns() - t0


def run(seconds: float, folder: Path) -> dict[str, Any]:
    channel = f"bench-mcap-{os.getpid()}"
    mcap = Timed(McapCanWriter(folder / "bus.mcap", bitrate=BITRATE, channel=channel))
    blf = Timed(can.BLFWriter(folder / "bus.blf", channel=1))
    sender = FwBridgeBus(channel, bitrate=BITRATE, pacing="realtime", name="sender",
                         capture=mcap, tx_queue_size=256)
    listener = FwBridgeBus(channel, name="blf", capture=blf)
    stop = threading.Event()
    sent = [0]

    def send() -> None:
        i = 0
        while not stop.is_set():
            data = bytes((i & 0xFF, 30 + (i & 15), 5, 1 + (i & 7), 0x38, 0, 0, 0))
            try:
                sender.send(can.Message(arbitration_id=0x201 + (i & 7), data=data,
                                        is_extended_id=False), timeout=0.5)
            except can.CanError:
                continue
            sent[0] += 1
            i += 1

    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join(5)
    sender.wait_sent(2.0)
    with sender.sim.lock:
        stats = sender.sim.stats()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    sender.shutdown()  # closes the MCAP tap (finalised)
    listener.shutdown()  # closes the BLF tap
    in_mcap = sum(1 for _ in read_mcap_messages(folder / "bus.mcap"))
    with can.BLFReader(folder / "bus.blf") as reader:
        in_blf = sum(1 for _ in reader)
    return {"seconds": wall, "bus_seconds": stats["bus_time"], "frames": stats["frames"],
            "load": stats["load"], "process_cpu": cpu, "sent": sent[0],
            "mcap": mcap, "blf": blf, "in_mcap": in_mcap, "in_blf": in_blf,
            "mcap_size": (folder / "bus.mcap").stat().st_size,
            "blf_size": (folder / "bus.blf").stat().st_size}


CPU_GOAL = 1.0  # MCAP CPU / BLF CPU
SIZE_GOAL = 1.5  # MCAP bytes per frame / BLF's


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="5 s instead of 30")
    args = ap.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    print(f"# CAN recording at 1 Mbit/s, 100 % load, {seconds:g} s real time\n")
    print(machine() + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        r = run(seconds, Path(tmp))
    frames, wall = r["frames"], r["seconds"]
    print(f"bus: {frames:,} frames in {r['bus_seconds']:.2f} s of bus time "
          f"({frames / r['bus_seconds']:,.0f} frames/s, load {100 * r['load']:.1f} %), "
          f"{wall:.2f} s wall; whole process {100 * r['process_cpu'] / wall:.1f} % of a core "
          "(simulator, sender and both recorders)\n")
    rows = []
    for name, timed, got, size in (("MCAP (fwbridge, zstd)", r["mcap"], r["in_mcap"],
                                    r["mcap_size"]),
                                   ("BLF (python-can, zlib)", r["blf"], r["in_blf"],
                                    r["blf_size"])):
        cpu = (timed.cpu_ns + timed.stop_cpu_ns) / 1e9
        rows.append([name, timed.frames, got, frames - got, 100 * cpu / wall,
                     timed.cpu_ns / max(timed.frames, 1), size / max(got, 1)])
    print(table(["recorder", "frames seen", "frames in file", "lost", "CPU % of a core",
                 "ns per frame", "bytes per frame"], rows))
    ratio = rows[0][4] / rows[1][4] if rows[1][4] else float("inf")
    size_ratio = rows[0][6] / rows[1][6] if rows[1][6] else float("inf")

    def verdict(value: float, goal: float) -> str:
        return "met" if value <= goal else f"NOT met, by {value / goal:.2f}x"

    print(f"\nMCAP CPU / BLF CPU = {ratio:.2f} (goal <= {CPU_GOAL}: {verdict(ratio, CPU_GOAL)}); "
          f"bytes per frame MCAP / BLF = {size_ratio:.2f} (goal <= {SIZE_GOAL}: "
          f"{verdict(size_ratio, SIZE_GOAL)}); lost: MCAP {rows[0][3]}, BLF {rows[1][3]} "
          f"(goal 0: {'met' if rows[0][3] == rows[1][3] == 0 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
