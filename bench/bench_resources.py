"""Resource bounds: a gigabyte of random bytes through each receiver.

Random bytes are the worst realistic input (all garbage, the odd false
header). Checked for each receiver: resident memory grows by less than
2 MB from the first megabyte to the last, and the time per megabyte stays
flat from 1 MB to 1 GB (no quadratic slowdown: the held-back tail is
bounded, so each byte costs the same).

Usage: python -m bench.bench_resources [--megabytes N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common import machine, table
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

CHUNK = 1 << 16
BLOCK = 1 << 24  # 16 MiB of random bytes, read at a shifting offset


def rss_kib() -> int:
    """Current resident set size (not the peak), from /proc."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def run(make: Callable[[], Any], megabytes: int, rnd_block: bytes) -> dict[str, Any]:
    rx = make()
    marks = sorted({m for m in (1, 10, 100, 1000, megabytes) if m <= megabytes})
    per_mb: dict[int, float] = {}
    rss: dict[int, int] = {}
    fed = 0
    t_prev, mb_prev = time.perf_counter(), 0
    offset = 0
    for mark in marks:
        target = mark << 20
        while fed < target:
            if offset + CHUNK > len(rnd_block):
                offset = (offset + 4099) % (len(rnd_block) - CHUNK)  # a new alignment
            rx.feed(rnd_block[offset : offset + CHUNK])
            offset += CHUNK
            fed += CHUNK
        now = time.perf_counter()
        per_mb[mark] = (now - t_prev) / (mark - mb_prev) * 1e3  # ms per MB in this decade
        rss[mark] = rss_kib()
        t_prev, mb_prev = now, mark
    rx.finish()
    first, last = marks[0], marks[-1]
    return {
        "per_mb_ms": per_mb,
        "rss_kib": rss,
        "rss_growth_kib": rss[last] - rss[first],
        "slowdown": per_mb[last] / per_mb[first] if per_mb[first] else float("nan"),
        "pending": rx.pending,
        "stats": rx.stats.as_dict(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="100 MB instead of 1 GB")
    args = ap.parse_args(argv)
    mb = 100 if args.quick else args.megabytes
    block = os.urandom(BLOCK)
    print(f"# Resource bounds: {mb:,} MB of random bytes per receiver, {CHUNK // 1024} KiB "
          f"chunks\n{machine()}\n")
    receivers: list[tuple[str, Callable[[], Any]]] = [
        ("odometry (sum-8)", lambda: Sum8Receiver(odom_frame.CODEC)),
        ("command (sum-8)", lambda: Sum8Receiver(cmd_frame.CODEC)),
        ("action (CRC-16, max 1024)", ActionReceiver),
    ]
    results: dict[str, Any] = {}
    rows = []
    for name, make in receivers:
        res = run(make, mb, block)
        results[name] = res
        per = res["per_mb_ms"]
        rows.append([name, *(f"{per[m]:.2f}" for m in sorted(per)),
                     f"{res['slowdown']:.2f}", f"{res['rss_growth_kib'] / 1024:.2f}",
                     res["pending"]])
    marks = sorted(next(iter(results.values()))["per_mb_ms"])
    print(table(["receiver", *(f"ms/MB to {m} MB" for m in marks), "last/first",
                 "RSS growth MB", "held bytes"], rows))
    print("\nGoals: RSS growth < 2 MB, time per MB flat (last/first near 1).")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
