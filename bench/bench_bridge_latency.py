"""Bridge latency and CPU: the mobile-base node against a raw pty echo, in one run.

1. Round trip over a pty, command out -> odometry answer back, 5,000
   exchanges: the raw baseline (os.write of a command frame, select/os.read
   of the 19-byte answer) next to the node (``BaseNode.send_now()`` to the
   odometry callback: lock, encode, pyserial write, reader thread, receiver,
   integration). The firmware is a separate process that answers every
   15 bytes with an odometry frame, the same process for both.
2. CPU of the node at 100 Hz commands + 200 Hz odometry for 30 s: user+sys
   seconds per second of this process (the firmware runs in another one).

Goals: node p99 within 2x the raw echo p99; node CPU <= 2 % of one core.

Usage: python -m bench.bench_bridge_latency [--exchanges N] [--cpu-seconds S] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import machine, table
from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import parse_config
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.protocols import cmd_frame, odom_frame

ROOT = Path(__file__).resolve().parent.parent
CMD = cmd_frame.encode(cmd_frame.CmdFrame(0.2, 0.0, 0.1))
ODOM = odom_frame.encode(odom_frame.OdomFrame(0.2, 0.0, 0.1, 12.5))


# -- the firmware, in its own process ------------------------------------------------------
def peer_main(mode: str, fd: int, seconds: float) -> None:
    """``answer``: an odometry frame per 15 bytes received; ``stream``: 200 Hz odometry."""
    end = time.monotonic() + seconds
    commands = 0
    if mode == "answer":
        pending = 0
        while time.monotonic() < end:
            if not select.select([fd], [], [], 0.5)[0]:
                continue
            data = os.read(fd, 4096)
            pending += len(data)
            n, pending = divmod(pending, cmd_frame.SIZE)
            if n:
                os.write(fd, ODOM * n)
            commands += n
    else:
        period = 1 / 200
        due = time.monotonic()
        received = 0
        while time.monotonic() < end:
            wait = due - time.monotonic()
            if wait > 0 and select.select([fd], [], [], wait)[0]:
                received += len(os.read(fd, 4096))
                continue
            os.write(fd, ODOM)
            due += period
            if due < time.monotonic() - 0.1:  # starved by the scheduler: resync, no burst
                due = time.monotonic() + period
        commands = received // cmd_frame.SIZE
    print(commands, flush=True)


def start_peer(pair: PtyPair, mode: str, seconds: float) -> subprocess.Popen[bytes]:
    code = f"from bench.bench_bridge_latency import peer_main; peer_main({mode!r}, " \
           f"{pair.master_fd}, {seconds})"
    return subprocess.Popen([sys.executable, "-c", code], pass_fds=(pair.master_fd,), cwd=ROOT,
                            stdout=subprocess.PIPE)


def stop_peer(proc: subprocess.Popen[bytes]) -> int:
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    return int(out.strip() or 0)


# -- 1. latency ------------------------------------------------------------------------
class RawEcho:
    """Round trips with nothing but os.write/select/os.read on the port."""

    def __init__(self, pair: PtyPair) -> None:
        import tty

        self.fd = os.open(pair.slave_name, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)

    def block(self, n: int) -> list[float]:
        fd, out = self.fd, []
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, CMD)
            got = 0
            while got < odom_frame.SIZE:
                select.select([fd], [], [])
                got += len(os.read(fd, 4096))
            out.append(time.perf_counter() - t0)
        return out

    def close(self) -> None:
        os.close(self.fd)


class NodeTrips:
    """Round trips through BaseNode: send_now() -> ... -> the odometry callback.

    The callback sends the next command itself, so the chain runs on the
    node's I/O thread just as the raw echo runs on one thread.
    """

    def __init__(self, pair: PtyPair) -> None:
        # A very slow schedule: only send_now() produces commands while measuring.
        cfg = parse_config({"link": {"url": pair.path}, "control": {"rate_hz": 0.001}})
        self.node = BaseNode(cfg, on_odometry=self._on_odometry, on_event=None)
        self.lat: list[float] = []
        self.left = 0
        self.t0 = 0.0
        self.done = threading.Event()

    def _on_odometry(self, _: Odometry) -> None:
        if self.left <= 0:
            return  # the answers to the activation and first scheduled frame
        self.lat.append(time.perf_counter() - self.t0)
        self.left -= 1
        if self.left == 0:
            self.done.set()
            return
        self.t0 = time.perf_counter()
        self.node.send_now()

    def start(self) -> None:
        self.node.start()
        time.sleep(0.3)  # let the answers to the start-up frames pass

    def block(self, n: int) -> list[float]:
        self.lat, self.left = [], n
        self.done.clear()
        self.t0 = time.perf_counter()
        self.node.send_now()
        if not self.done.wait(60):
            raise RuntimeError(f"only {len(self.lat)} of {n} round trips completed")
        return self.lat

    def close(self) -> None:
        self.node.stop()


def round_trips(n: int, blocks: int = 20) -> tuple[list[float], list[float]]:
    """Raw and node round trips, interleaved in blocks so both see the same machine load."""
    with PtyPair() as raw_pair, PtyPair() as node_pair:
        peers = [start_peer(raw_pair, "answer", 600), start_peer(node_pair, "answer", 600)]
        raw, node = RawEcho(raw_pair), NodeTrips(node_pair)
        try:
            node.start()
            raw.block(200)  # warm-up
            node.block(200)
            raw_lat: list[float] = []
            node_lat: list[float] = []
            for i in range(blocks):
                k = n // blocks + (1 if i < n % blocks else 0)
                raw_lat += raw.block(k)
                node_lat += node.block(k)
        finally:
            raw.close()
            node.close()
            for p in peers:
                stop_peer(p)
    return raw_lat, node_lat


def summary(samples: list[float]) -> dict[str, float]:
    us = sorted(s * 1e6 for s in samples)
    return {
        "p50_us": statistics.median(us),
        "p99_us": us[min(len(us) - 1, int(0.99 * len(us)))],
        "max_us": us[-1],
        "mean_us": statistics.fmean(us),
    }


# -- 2. CPU ------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """user+sys of this process; getrusage has microsecond resolution (os.times: 10 ms)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def node_cpu(pair: PtyPair, seconds: float) -> dict[str, float]:
    cfg = parse_config({"link": {"url": pair.path}, "control": {"rate_hz": 100},
                        "watchdog": {"cmd_timeout": seconds + 10}})
    count = [0]

    def on_odometry(_: Odometry) -> None:
        count[0] += 1

    peer = start_peer(pair, "stream", seconds + 5)
    try:
        node = BaseNode(cfg, on_odometry=on_odometry, on_event=None)
        with node:
            node.request(0.2, 0.0, 0.1)
            time.sleep(0.5)  # settle
            c0, n0, odo0 = cpu_seconds(), node.stats()["commands"], count[0]
            w0 = time.monotonic()
            time.sleep(seconds)
            c1, n1, odo1 = cpu_seconds(), node.stats()["commands"], count[0]
            w1 = time.monotonic()
    finally:
        received = stop_peer(peer)
    wall = w1 - w0
    cpu = c1 - c0
    return {
        "seconds": wall,
        "cpu_per_s": cpu / wall,
        "commands_hz": (n1 - n0) / wall,
        "odometry_hz": (odo1 - odo0) / wall,
        "commands_at_firmware": received,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=5000)
    ap.add_argument("--cpu-seconds", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="1,000 exchanges, 3 s of CPU")
    args = ap.parse_args(argv)
    n = 1000 if args.quick else args.exchanges
    cpu_s = 3.0 if args.quick else args.cpu_seconds
    print(f"# Bridge round-trip latency and CPU\n{machine()}\n")

    raw_lat, node_lat = round_trips(n)
    raw, node = summary(raw_lat), summary(node_lat)
    rows = [
        ["raw pty echo (baseline)", raw["p50_us"], raw["p99_us"], raw["max_us"], 1.0],
        ["BaseNode send_now -> odometry callback", node["p50_us"], node["p99_us"],
         node["max_us"], node["p99_us"] / raw["p99_us"]],
    ]
    print(f"## Round trip, command out -> odometry back, {n:,} exchanges (µs)")
    print(table(["path", "p50", "p99", "max", "p99 x baseline"], rows))
    ratio = node["p99_us"] / raw["p99_us"]
    print(f"\ngoal p99 <= 2x raw echo: {ratio:.2f}x -> {'met' if ratio <= 2 else 'NOT met'}\n")

    with PtyPair() as pair:
        cpu = node_cpu(pair, cpu_s)
    print(f"## BaseNode CPU, 100 Hz commands + 200 Hz odometry, {cpu['seconds']:.1f} s")
    print(table(["user+sys s/s", "% of one core", "commands/s", "odometry/s"],
                [[cpu["cpu_per_s"], cpu["cpu_per_s"] * 100, cpu["commands_hz"],
                  cpu["odometry_hz"]]]))
    pct = cpu["cpu_per_s"] * 100
    print(f"\ngoal CPU <= 2 % of one core: {pct:.2f} % -> "
          f"{'met' if pct <= 2 else f'NOT met, by {pct / 2:.2f}x'}")
    return {"raw": raw, "node": node, "p99_ratio": ratio, "cpu": cpu}


if __name__ == "__main__":
    main(sys.argv[1:])
