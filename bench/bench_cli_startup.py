"""CLI start-up: ``fwbridge --help`` and ``fwbridge encode cmd`` against ``import click``.

Each command runs as a fresh process, ``--runs`` times, interleaved with the
baseline (``python -c "import click"``: the interpreter and the CLI library,
the least any click command can cost) so that load on the machine falls on
both alike. The figure is the median wall time. fwbridge runs from a wheel
of this tree installed into a temporary directory (an editable install
costs import time of its own); if no wheel can be built, from the installed
command, and the report says so. Goals: ``encode cmd`` at most 2x the
baseline, ``--help`` at most 1.5x. ``python -X importtime`` shows what a
slow command imports. ``--against TREE`` adds the same two commands from a
wheel of another checkout (an older commit, say), interleaved in the same run.

Usage: python -m bench.bench_cli_startup [--runs N] [--quick] [--against TREE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, table

GOALS = {"fwbridge --help": 1.5, "fwbridge encode cmd --vx 0.2 --wz 0.5": 2.0}
ROOT = Path(__file__).resolve().parent.parent


def fwbridge_command() -> list[str]:
    """The installed ``fwbridge`` script next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("fwbridge")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("fwbridge")
    if found:
        return [found]
    return [sys.executable, "-m", "fwbridge.cli"]


def wheel_install(tmp: Path, tree: Path = ROOT) -> Path | None:
    """``tree`` built as a wheel and installed (no dependencies) under ``tmp``."""
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    try:
        subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "wheel"), str(tree)],
                       check=True, capture_output=True, timeout=300)
        wheel = next((tmp / "wheel").glob("fwbridge-*.whl"))
        subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)],
                       check=True, capture_output=True, timeout=300)
    except (subprocess.SubprocessError, StopIteration, OSError):
        return None
    return tmp / "site"


ENV: dict[str, str] = {}
MAIN = "import sys; from fwbridge.cli import main; sys.exit(main())"


def wall(cmd: list[str], extra: dict[str, str] | None = None) -> float:
    """Seconds from spawn to exit of ``cmd`` (output discarded; must exit 0)."""
    env = {**os.environ, **ENV, **(extra or {})}
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=env)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    ap.add_argument("--against", type=Path, metavar="TREE",
                    help="also time a wheel of this checkout (rows marked 'TREE:')")
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        site = wheel_install(Path(tmp) / "this")
        if site is not None:  # what the console script runs, from the wheel's files
            ENV["PYTHONPATH"] = str(site)
            cli = [sys.executable, "-c", MAIN]
            where = "fwbridge from a wheel of this tree"
        else:
            cli = fwbridge_command()
            where = f"fwbridge as installed ({cli[0]}): no wheel could be built"
        other = None
        if args.against is not None:
            other = wheel_install(Path(tmp) / "other", args.against.resolve())
            if other is None:
                print(f"error: no wheel could be built from {args.against}", file=sys.stderr)
                return 2
            where += f"; rows 'TREE:' from a wheel of {args.against}"
        return _measure(cli, runs, where, other)


def _measure(cli: list[str], runs: int, where: str, other: Path | None = None) -> int:
    verbs = {"fwbridge --help": ["--help"],
             "fwbridge encode cmd --vx 0.2 --wz 0.5": ["encode", "cmd", "--vx", "0.2",
                                                       "--wz", "0.5"]}
    cases = {'python -c "import click"': [sys.executable, "-c", "import click"]}
    cases.update({name: [*cli, *args] for name, args in verbs.items()})
    envs: dict[str, dict[str, str]] = {}
    if other is not None:
        for name, args in verbs.items():
            cases[f"TREE: {name}"] = [sys.executable, "-c", MAIN, *args]
            envs[f"TREE: {name}"] = {"PYTHONPATH": str(other)}
    for name, cmd in cases.items():  # warm the page cache and the bytecode caches
        wall(cmd, envs.get(name))
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            times[name].append(wall(cmd, envs.get(name)))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    base = medians['python -c "import click"']
    rows = []
    met = True
    verdicts = []
    for name, med in medians.items():
        ratio = med / base
        goal = GOALS.get(name)
        if goal is not None:
            ok = ratio <= goal
            met &= ok
            verdicts.append(f"{name}: {ratio:.2f}x (goal <= {goal}x: "
                            f"{'met' if ok else f'NOT met, by {ratio / goal:.2f}x'})")
        rows.append((name, med * 1e3, min(times[name]) * 1e3, f"{ratio:.2f}x"))
    print("# CLI start-up (median of", runs, "runs each, interleaved)")
    print(f"machine: {machine()}\n{where}\n")
    print(table(("command", "median ms", "min ms", "vs import click"), rows))
    print("\n" + "\n".join(verdicts))
    print(f"all start-up goals: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
