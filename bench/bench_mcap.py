"""Recording CAN to MCAP against python-can's BLF writer, on one saturated bus, in one run.

The simulated bus at 1 Mbit/s with real-time pacing carries 100 % load: one
node always has frames queued (8-byte actuator feedback, IDs cycling), so
arbitration leaves no idle bit. Two capture taps on that one bus record
every frame at the same time: fwbridge's MCAP writer (``.mcap``: CDR
``can_msgs/msg/Frame``, load per ID, zstd chunks, the default compact
layout) and python-can's ``BLFWriter`` (``.blf``, zlib), each wrapped to
count the CPU time its calls take (thread CPU time, so other processes on
the machine do not count; closing the file included). Afterwards both
files are read back: frames lost = frames the bus delivered minus frames
in the file. Where the MCAP bytes go is printed too (records by kind; in
the chunks, uncompressed, messages by topic).

Goals: 0 frames lost; MCAP bytes per frame <= 1.5x BLF's; MCAP CPU per
frame <= 1.0x BLF's.

Then the serial recorder's odometry (``SerialRecorder``, a base node's MCAP sink):
the thread CPU per record of writing its ``/odom`` and ``/tf`` through the one
encoder the ROS 2 sink publishes with (``bridge/rosmsg/odometry_cdr``), beside the
same recorder encoding each record as rosbags messages (the baseline, same run).

Usage: python -m bench.bench_mcap [--seconds S] [--quick] [--records N]
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
from fwbridge.bridge.node.odometry import Odometry, quaternion_from_yaw
from fwbridge.bridge.record.can_mcap import McapCanWriter, read_mcap_messages
from fwbridge.bridge.record.channel_streams import Streams
from fwbridge.bridge.record.mcap_sink import McapSink
from fwbridge.bridge.record.serial_mcap import SerialRecorder
from fwbridge.bridge.rosmsg import odometry_cdr
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


CPU_GOAL = 1.0  # MCAP CPU per frame / BLF's
SIZE_GOAL = 1.5  # MCAP bytes per frame / BLF's
_NAMES = {6: "chunks", 7: "message indexes", 8: "chunk indexes"}


def mcap_bytes(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes of the file by record kind, and of the chunks' messages by topic (uncompressed)."""
    import struct

    from mcap.records import Channel, Chunk, Message
    from mcap.stream_reader import StreamReader, breakup_chunk

    raw = path.read_bytes()
    kinds: dict[str, int] = {}
    pos = 8
    while pos + 9 <= len(raw):
        op, length = struct.unpack_from("<BQ", raw, pos)
        name = _NAMES.get(op, "header, summary, other")
        kinds[name] = kinds.get(name, 0) + 9 + length
        pos += 9 + length
    kinds["header, summary, other"] = kinds.get("header, summary, other", 0) + len(raw) - pos + 8
    topics: dict[int, str] = {}
    per_topic: dict[str, int] = {}
    for rec in StreamReader(str(path), emit_chunks=True).records:
        if isinstance(rec, Chunk):
            for inner in breakup_chunk(rec):
                if isinstance(inner, Channel):
                    topics[inner.id] = inner.topic
                elif isinstance(inner, Message):
                    topic = topics.get(inner.channel_id, "?")
                    per_topic[topic] = per_topic.get(topic, 0) + 9 + 22 + len(inner.data)
    return kinds, per_topic


def serial_odometry(records: int, folder: Path) -> dict[str, float]:
    """Thread CPU ns per odometry record of the serial recorder into an MCAP file, with
    the one encoder and with rosbags messages (the baseline), closing included."""
    odoms = [Odometry(seq=i, stamp=i * 0.02, dt=0.02, x=1e-3 * i, y=-1e-3 * i, yaw=1e-3 * i,
                      orientation=quaternion_from_yaw(1e-3 * i), vx=0.3, vy=0.0, wz=0.1)
             for i in range(records)]
    out: dict[str, float] = {}
    for name in ("one encoder", "rosbags messages"):
        streams = Streams([McapSink(folder / f"odom {name}.mcap")])
        rec = SerialRecorder(streams, raw=False)
        if name == "rosbags messages":
            rec._odometry = odometry_cdr.RosbagsOdometry("odom", "base_link", "jazzy")
        rec.odometry(odoms[0], 0)  # warm: rosbags' classes, the first chunk
        t0 = time.thread_time_ns()
        for i, odom in enumerate(odoms):
            rec.odometry(odom, 1_700_000_000_000_000_000 + 20_000_000 * i)
        streams.close()
        out[name] = (time.thread_time_ns() - t0) / records
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="5 s instead of 30")
    ap.add_argument("--records", type=int, default=20_000,
                    help="odometry records for the serial recorder's part")
    args = ap.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    print(f"# CAN recording at 1 Mbit/s, 100 % load, {seconds:g} s real time\n")
    print(machine() + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        r = run(seconds, Path(tmp))
        kinds, per_topic = mcap_bytes(Path(tmp) / "bus.mcap")
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
        cpu_ns = timed.cpu_ns + timed.stop_cpu_ns
        rows.append([name, timed.frames, got, frames - got, 100 * cpu_ns / 1e9 / wall,
                     cpu_ns / max(timed.frames, 1), size / max(got, 1)])
    print(table(["recorder", "frames seen", "frames in file", "lost", "CPU % of a core",
                 "CPU ns per frame", "bytes per frame"], rows))
    n = max(r["in_mcap"], 1)
    print("\nMCAP bytes per frame by record: " + ", ".join(
        f"{k} {v / n:.2f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    total = sum(per_topic.values()) or 1
    print("in the chunks (uncompressed), by topic: " + ", ".join(
        f"{t} {100 * v / total:.2f} %" for t, v in sorted(per_topic.items(),
                                                          key=lambda kv: -kv[1])))
    mcap, blf = rows
    size_ratio = mcap[6] / blf[6] if blf[6] else float("inf")
    cpu_ratio = mcap[5] / blf[5] if blf[5] else float("inf")

    def verdict(value: float, goal: float) -> str:
        return "MET" if value <= goal else f"MISSED (by {value / goal:.2f}x)"

    lost = mcap[3] + blf[3]
    print(f"\nbytes per frame: MCAP {mcap[6]:.2f} vs BLF {blf[6]:.2f} = {size_ratio:.2f}x "
          f"(goal <= {SIZE_GOAL}x: {verdict(size_ratio, SIZE_GOAL)})")
    print(f"CPU per frame: MCAP {mcap[5]:,.0f} ns vs BLF {blf[5]:,.0f} ns = {cpu_ratio:.2f}x "
          f"(goal <= {CPU_GOAL}x: {verdict(cpu_ratio, CPU_GOAL)})")
    print(f"frames lost: MCAP {mcap[3]}, BLF {blf[3]} (goal 0: {'MET' if lost == 0 else 'MISSED'})")
    with tempfile.TemporaryDirectory() as tmp:
        odom = serial_odometry(max(args.records, 1), Path(tmp))
    one, generic = odom["one encoder"], odom["rosbags messages"]
    print(f"\n# serial recorder, {args.records:,} odometry records (/odom + /tf) to MCAP\n")
    print(table(["encoding", "CPU ns per record"],
                [[name, round(ns)] for name, ns in odom.items()]))
    print(f"\nCPU per record: one encoder {one:,.0f} ns vs rosbags messages {generic:,.0f} ns"
          f" = {one / generic:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
