"""bench_frames_kept before and after a change: two trees, runs interleaved, medians.

Each run is ``bench.bench_frames_kept`` in its own tree with that tree's
interpreter (``<tree>/.venv/bin/python``), one tree then the other, the
order alternating; each figure is a ratio to a baseline of the same run, and
the table gives the median over the runs.

Usage: python -m bench.compare_frames_kept --before DIR [--runs N] [--frames N] [--reps R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.bench_frames_kept import verdict
from bench.common import table

_RUN = ("import json; from bench.bench_frames_kept import main; "
        "r = main({argv!r}); print('RESULTS ' + json.dumps(r))")

#: figure -> (how it is computed from one run's medians, the goal)
_FIGURES: dict[str, tuple[str, str]] = {
    "feed x naive": ("naive per-byte loop (baseline)/Sum8Receiver.feed", ">= 3"),
    "feed x pure-Python": ("pure-Python streaming (baseline)/Sum8Receiver.feed", ">= 0.8"),
    "feed_columns x numpy": ("numpy streaming (baseline)/Sum8Receiver.feed_columns", ">= 0.8"),
    "FixedReceiver x naive": (
        "naive per-byte loop (baseline)/FixedReceiver (odom description)", ">= 3"),
    "FixedReceiver x pure-Python": (
        "pure-Python streaming (baseline)/FixedReceiver (odom description)", ">= 0.8"),
    "FixedReceiver x hand receiver": (
        "hand receiver, frozen (baseline)/FixedReceiver (odom description)", ">= 0.95"),
    "feed GC share, 1 - off/on": ("gc_feed", "< 10 %"),
    "FixedReceiver GC share, 1 - off/on": ("gc_fixed", "< 10 %"),
}


def _run(tree: Path, argv: list[str], log: Path | None) -> dict[str, Any]:
    out = subprocess.run([str(tree / ".venv/bin/python"), "-c", _RUN.format(argv=argv)],
                         cwd=tree, capture_output=True, text=True, check=True).stdout
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(out, encoding="utf-8")
    line = next(x for x in out.splitlines() if x.startswith("RESULTS "))
    results: dict[str, Any] = json.loads(line[len("RESULTS "):])
    return results


def _figure(section: dict[str, Any], how: str) -> float:
    if "/" not in how:
        return float(section[how])
    num, den = how.split("/")
    med = section["median_s"]
    return float(med[num] / med[den])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="the tree before the change")
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--log", type=Path, help="a folder for each run's own output")
    args = ap.parse_args(argv)
    bench_argv = ["--frames", str(args.frames), "--reps", str(args.reps)]
    got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for k in range(args.runs):
        order = [("before", args.before), ("after", args.after)]
        for name, tree in order if k % 2 == 0 else order[::-1]:
            got[name].append(_run(tree, bench_argv, args.log and args.log / f"{name}-{k}.txt"))
    print(f"# bench_frames_kept before and after: {args.runs} interleaved runs of "
          f"{args.frames:,} frames, {args.reps} repetitions each; medians over the runs\n"
          f"before: {args.before}\nafter: {args.after}\n")
    summary: dict[str, Any] = {}
    for section in got["after"][0]:
        rows = []
        for fig, (how, goal) in _FIGURES.items():
            vals = {w: statistics.median(_figure(r[section], how) for r in got[w])
                    for w in got}
            share = "share" in fig
            rows.append([fig] + [f"{vals[w]:.0%}" if share else f"{vals[w]:.2f}x"
                                 for w in ("before", "after")] + [goal])
            summary.setdefault(section, {})[fig] = vals
        print(f"## {section}")
        print(table(["figure", "before", "after", "goal"], rows))
        goals = got["after"][0][section].get("goals", {})
        if goals:
            print("\nGoals, after (medians over the runs of bench_frames_kept's verdicts):")
        for g in goals:
            v = statistics.median(r[section]["goals"][g][0] for r in got["after"])
            each = ", ".join(str(r[section]["goals"][g][0]) for r in got["after"])
            print(f"- {g}: {v:.0%}" if "share" in g else f"- {g}: {v:.2f}x", end="")
            print(f": {verdict(g, v)} (runs: {each})")
        print()
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
