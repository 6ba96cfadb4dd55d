"""``fwbridge decode`` on a large raw odometry capture: the table against ``--json``.

The table streams (one fixed-width line per frame as it is decoded), so it
should cost no more than the JSON lines of the same frames and hold no more
memory. Both modes decode the same capture (generated into a temporary
directory: 1000 distinct frames repeated) in the same run, as the installed
``fwbridge`` command, stdout to a file; the time is wall time of the whole
process (start-up included) and the memory its peak resident set
(``wait4``'s ``ru_maxrss`` of that one child).

Goals: table time <= 1.5 x JSON time; table peak RSS <= 150 MB.

Usage: python -m bench.bench_decode_table [--megabytes N] [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, table
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame

TIME_GOAL = 1.5  # table / json
RSS_GOAL_MB = 150


def fwbridge_argv() -> list[str]:
    script = Path(sys.executable).with_name("fwbridge")
    if script.exists():
        return [str(script)]
    found = shutil.which("fwbridge")
    return [found] if found else [sys.executable, "-m", "fwbridge.cli"]


def make_capture(path: Path, megabytes: int) -> int:
    """A raw odometry stream of about ``megabytes`` MB; returns its frame count."""
    frames = b"".join(odom_frame.encode(OdomFrame(0.001 * k, -0.25 + 0.0005 * k, 0.01 * k,
                                                  (k * 0.37) % 360 - 180))
                      for k in range(1000))
    reps = max(1, (megabytes << 20) // len(frames))
    with path.open("wb") as fh:
        for _ in range(reps):
            fh.write(frames)
    return reps * 1000


def run(args: list[str], out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``fwbridge ARGS`` with stdout to ``out``."""
    with out.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*fwbridge_argv(), *args], stdout=fh, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"fwbridge {' '.join(args)} failed ({proc.returncode}): {err}")
    return seconds, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode; the best counts")
    ap.add_argument("--quick", action="store_true", help="5 MB, one run per mode")
    args = ap.parse_args(argv)
    megabytes, repeat = (5, 1) if args.quick else (args.megabytes, args.repeat)
    print(f"# decode: streaming table vs --json on {megabytes} MB of raw odometry\n{machine()}\n")
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        capture = Path(tmp) / "odom.bin"
        n = make_capture(capture, megabytes)
        size_mb = capture.stat().st_size / 2**20
        results: dict[str, tuple[float, float, int]] = {}
        for mode, extra in (("json (baseline)", ["--json"]), ("table", [])):
            out = Path(tmp) / "out.txt"
            best_t, peak = float("inf"), 0.0
            for _ in range(repeat):
                t, rss = run(["decode", "-p", "odom", *extra, str(capture)], out)
                best_t, peak = min(best_t, t), max(peak, rss)
            lines = sum(1 for _ in out.open("rb"))
            results[mode] = (best_t, peak, lines)
    rows = [[mode, t, size_mb / t, n / t / 1e3, rss, lines]
            for mode, (t, rss, lines) in results.items()]
    print(f"{n:,} frames, {size_mb:.1f} MB; best of {repeat} run(s) per mode\n")
    print(table(["mode", "seconds", "MB/s", "kframes/s", "peak RSS MB", "output lines"], rows))
    t_json, _, _ = results["json (baseline)"]
    t_table, rss_table, _ = results["table"]
    ratio = t_table / t_json
    print(f"\ntable / json time: {ratio:.2f}x (goal <= {TIME_GOAL}x: "
          f"{'met' if ratio <= TIME_GOAL else 'NOT met'})")
    print(f"table peak RSS: {rss_table:.0f} MB (goal <= {RSS_GOAL_MB} MB: "
          f"{'met' if rss_table <= RSS_GOAL_MB else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
