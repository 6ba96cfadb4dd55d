"""``fwbridge bridge`` CPU at 100 Hz commands + 200 Hz odometry, against a plain pyserial loop.

A firmware process streams 200 Hz odometry on a pty and reads the commands;
``fwbridge bridge CONFIG --duration S`` (JSON lines to a file) and
``bench/baselines/pyserial_bridge.py`` (the loop a user writes: commands at
100 Hz, odometry decoded, integrated and printed as JSON lines) run against
it in turn, interleaved over several repetitions. The figure is each
process's user+sys CPU per second of its run (``wait4``), start-up included
for both; the medians are compared.

Goal: bridge CPU <= 1.0x the plain loop's.

``--before PYTHON`` also runs another tree's bridge (that tree's venv python,
e.g. the tree before a change) in the same rounds, and ``--mcap`` each bridge
again recording the link to MCAP (``--record x.mcap``): before and after
figures from one run, CPU per odometry record beside CPU per second.

Usage: python -m bench.bench_bridge_cli [--seconds S] [--repeat N] [--quick]
       [--before PYTHON] [--mcap]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_bridge_latency import start_peer, stop_peer
from bench.common import machine, table
from fwbridge.bridge.link.transports import PtyPair

GOAL = 1.0
ROOT = Path(__file__).resolve().parent.parent
LOOP = ROOT / "bench" / "baselines" / "pyserial_bridge.py"


def fwbridge(python: str = sys.executable) -> list[str]:
    beside = Path(python).with_name("fwbridge")
    return [str(beside)] if beside.exists() else [python, "-m", "fwbridge.cli"]


def cpu_of(argv: list[str], out: Path, seconds: float) -> tuple[float, int]:
    """CPU seconds per second of ``argv`` (stdout to ``out``) and the lines it printed
    (the odometry records of a bridge)."""
    err = out.with_suffix(".err")
    with out.open("wb") as fh, err.open("wb") as eh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=eh, cwd=ROOT)
        _, status, use = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        tail = err.read_text(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}: "
                         + " / ".join(tail))
    lines = sum(1 for _ in out.open("rb"))
    return (use.ru_utime + use.ru_stime) / max(wall, seconds), lines


def _wait_streaming(path: str, timeout: float = 30.0) -> None:
    """Until the firmware process sends (its start-up must not fall on the first run)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.5)[0] and os.read(fd, 4096):
                return
        raise SystemExit("the firmware process sent nothing")
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 s, one run each")
    ap.add_argument("--before", metavar="PYTHON", default=None,
                    help="also run the bridge of the tree whose venv python this is")
    ap.add_argument("--mcap", action="store_true",
                    help="also run each bridge recording the link to MCAP")
    args = ap.parse_args(argv)
    seconds, repeat = (3.0, 1) if args.quick else (args.seconds, args.repeat)
    print(f"# fwbridge bridge vs a plain pyserial loop, 100 Hz commands + 200 Hz odometry\n"
          f"{machine()}\n")
    lines: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp, PtyPair() as pair:
        config = Path(tmp) / "robot.toml"
        config.write_text(f'use_sim = false\n[link]\nurl = "{pair.path}"\nbaud = 115200\n'
                          f'[control]\nrate_hz = 100\n[watchdog]\ncmd_timeout = 0.5\n')
        runs = {"plain pyserial loop (baseline)": [sys.executable, str(LOOP), pair.path,
                                                   str(seconds)]}
        trees = {"": sys.executable}
        if args.before:
            trees[" (before)"] = args.before
        variants = {"": []} | ({" --record .mcap": ["--record", str(Path(tmp) / "rec.mcap"),
                                                     "--force"]} if args.mcap else {})
        for variant, extra in variants.items():  # each tree's run beside the other's
            for tag, python in trees.items():
                runs[f"fwbridge bridge{variant}{tag}"] = [
                    *fwbridge(python), "bridge", str(config), "--duration", str(seconds),
                    *extra]
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        # the firmware streams for as long as every run may take
        peer = start_peer(pair, "stream", repeat * len(runs) * (seconds + 5) + 30)
        try:
            _wait_streaming(pair.path)
            for _ in range(repeat):
                for name, cmd in runs.items():
                    c, n = cpu_of(cmd, Path(tmp) / "out.jsonl", seconds)
                    cpu[name].append(c)
                    lines[name] = n
        finally:
            stop_peer(peer)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    base = med["plain pyserial loop (baseline)"]
    # CPU per record: per second of the run, over the records it printed per second
    rows = [[k, 100 * v, lines[k], f"{1e6 * v * seconds / max(lines[k], 1):.0f}",
             f"{v / base:.2f}"] for k, v in med.items()]
    print(f"{seconds:g} s per run, medians of {repeat} interleaved run(s)\n")
    print(table(["process", "% of one core", "JSON lines (last run)", "CPU us per record",
                 "x baseline"], rows))
    for name in med:
        before = name + " (before)"
        if before in med:
            print(f"{name}: {med[name] / med[before]:.3f}x the tree before "
                  f"({100 * med[before]:.2f} -> {100 * med[name]:.2f} % of one core)")
    ratio = med["fwbridge bridge"] / base
    print(f"\nbridge CPU / plain loop CPU = {ratio:.2f} (goal <= {GOAL}: "
          f"{'met' if ratio <= GOAL else f'NOT met, by {ratio / GOAL:.2f}x'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
