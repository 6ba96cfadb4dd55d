"""CLI start-up: ``fwbridge --help`` and ``fwbridge encode cmd`` against ``import click``.

Each command runs as a fresh process, ``--runs`` times, interleaved with the
baseline (``python -c "import click"``: the interpreter and the CLI library,
the least any click command can cost) so that load on the machine falls on
both alike. The figure is the median wall time; the goal is at most 3x the
baseline. ``python -X importtime`` shows what a slow command imports.

Usage: python -m bench.bench_cli_startup [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import machine, table

GOAL = 3.0  # at most this many times the baseline


def fwbridge_command() -> list[str]:
    """The installed ``fwbridge`` script next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("fwbridge")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("fwbridge")
    if found:
        return [found]
    return [sys.executable, "-m", "fwbridge.cli"]


def wall(cmd: list[str]) -> float:
    """Seconds from spawn to exit of ``cmd`` (output discarded; must exit 0)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    cli = fwbridge_command()
    cases = {
        'python -c "import click"': [sys.executable, "-c", "import click"],
        "fwbridge --help": [*cli, "--help"],
        "fwbridge encode cmd --vx 0.2 --wz 0.5": [*cli, "encode", "cmd", "--vx", "0.2",
                                                  "--wz", "0.5"],
    }
    for cmd in cases.values():  # warm the page cache and the bytecode caches
        wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            times[name].append(wall(cmd))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    base = medians['python -c "import click"']
    rows = []
    met = True
    for name, med in medians.items():
        ratio = med / base
        if name.startswith("fwbridge"):
            met &= ratio <= GOAL
        rows.append((name, med * 1e3, min(times[name]) * 1e3, f"{ratio:.2f}x"))
    print("# CLI start-up (median of", runs, "runs each, interleaved)")
    print(f"machine: {machine()}\n")
    print(table(("command", "median ms", "min ms", "vs import click"), rows))
    print(f"\ngoal: every fwbridge command at most {GOAL:.0f}x the baseline: "
          f"{'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
