"""C receiver throughput: firmware_ref's sum-8 receiver against the seed's, in one run.

The same noisy streams as bench_sum8_receiver (200,000 frames, clean and
with 5 % random garbage rich in AA, AA 55 and truncated frames), through
native code built with the same flags (``-std=c99 -O2``, firmware_ref's
Makefile):

- the seed's receivers transcribed verbatim (bench/baselines/seed_getonebyte.c):
  the STM32's ``GetOneByte`` on command frames, its ROS-side twin on odometry
  frames (baseline);
- ``fw_sum8_rx_byte``: firmware_ref's receiver called once per byte, as a
  UART interrupt calls it;
- ``fw_sum8_rx_feed``: the same receiver fed 4 KiB chunks (DMA buffers).

Frames are matched with the intact ones by offset. Timing is done inside
the C program (best of N runs), so Python's overhead is not in the figures.

Usage: python -m bench.bench_c_receivers [--frames N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_sum8_receiver import CHUNK, make_stream
from bench.common import machine, table
from fwbridge.protocols import cmd_frame

ROOT = Path(__file__).resolve().parent.parent
FIRMWARE = ROOT / "firmware_ref"
BENCH_BIN = FIRMWARE / "build" / "fw_bench"


def make_cmd_stream(n: int, garbage: float, seed: int = 1) -> tuple[bytes, list[int]]:
    """:func:`make_stream`'s recipe with 15-byte command frames."""
    return make_stream(n, garbage, seed, cmd_frame.CODEC)


def build() -> Path:
    """Build the benchmark binary with firmware_ref's Makefile."""
    if shutil.which("make") is None:
        raise SystemExit("error: make is needed to build firmware_ref/build/fw_bench")
    subprocess.run(["make", "-s", "-C", str(FIRMWARE), "bench"], check=True)
    return BENCH_BIN


def run_bench(binary: Path, data: bytes, kind: str, repeat: int) -> dict[str, Any]:
    """Run fw_bench on ``data``; add each receiver's frame offsets to its entry."""
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "stream.bin"
        stream.write_bytes(data)
        out = subprocess.run(
            [str(binary), "--kind", kind, "--repeat", str(repeat), "--chunk", str(CHUNK),
             "--out", tmp, str(stream)],
            check=True, capture_output=True, text=True,
        ).stdout
        result: dict[str, Any] = json.loads(out)
        for rx in result["receivers"]:
            raw = (Path(tmp) / f"{rx['name']}.offsets").read_bytes()
            rx["offsets"] = list(struct.unpack(f"={len(raw) // 4}I", raw))  # native order
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="20,000 frames, one repeat")
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else args.frames
    repeat = 1 if args.quick else 7
    binary = build()
    print(f"# C receivers, {n:,} frames, best of {repeat}\n{machine()}\n")
    results: dict[str, Any] = {}
    streams = (("odometry", "odom", make_stream), ("command", "cmd", make_cmd_stream))
    for family, kind, maker in streams:
        for label, garbage in (("clean", 0.0), ("5% garbage", 0.05)):
            data, intact = maker(n, garbage)
            wanted = set(intact)
            mb = len(data) / 1e6
            res = run_bench(binary, data, kind, repeat)
            rows = []
            base = 0.0
            for rx in res["receivers"]:
                secs = max(rx["seconds"], 1e-9)
                got = sum(1 for off in rx["offsets"] if off in wanted)
                extra = len(rx["offsets"]) - got
                if not base:
                    base = secs
                rows.append([rx["name"], mb / secs, rx["frames"] / secs,
                             f"{got:,}/{len(intact):,}", extra, base / secs])
                results[(family, label, rx["name"])] = {
                    "mbps": mb / secs, "fps": rx["frames"] / secs, "recovered": got,
                    "intact": len(intact), "extra": extra, "ratio": base / secs,
                }
            print(f"## {family} frames, {label} ({mb:.1f} MB)")
            print(table(["receiver", "MB/s", "frames/s", "intact frames recovered",
                         "other frames", "x baseline"], rows))
            print()
    print("Baseline: the seed's receiver for that frame family. 'other frames' are")
    print("frames at offsets where no intact frame starts: checksum coincidences in")
    print("noise (1 in 256 per false header), which every sum-8 receiver reports; the")
    print("seed's can also lose the intact frame behind one.")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
