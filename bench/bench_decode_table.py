"""``fwbridge decode`` on a large raw odometry capture, against a ten-line ``struct`` script.

Both output modes (the streaming table and ``--json``) of the installed
``fwbridge`` command and of ``bench/baselines/decode_struct.py`` (the loop a
user writes instead) decode the same capture (1000 distinct frames repeated,
generated into a temporary directory), stdout to a file; the time is the
whole process's wall time (start-up included), the memory its peak resident
set (``wait4``'s ``ru_maxrss``). Runs are interleaved (script, fwbridge,
script, ...) and the medians compared, so each ratio comes from one run.
The table is also timed under ``PYTHONUNBUFFERED=1`` (common in containers).

Goals: fwbridge <= 0.5 x the script's time in each mode; peak RSS <= 150 MB.

Usage: python -m bench.bench_decode_table [--megabytes N] [--repeat N] [--quick]
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
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame

TIME_GOAL = 0.5  # fwbridge / struct script, each mode
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


SCRIPT = Path(__file__).resolve().parent / "baselines" / "decode_struct.py"


def run(argv: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``argv`` with stdout to ``out``."""
    with out.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.PIPE,
                                env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err}")
    return seconds, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs per mode (median)")
    ap.add_argument("--quick", action="store_true", help="5 MB, one run per mode")
    args = ap.parse_args(argv)
    megabytes, repeat = (5, 1) if args.quick else (args.megabytes, args.repeat)
    print(f"# decode on {megabytes} MB of raw odometry: fwbridge vs a ten-line struct script\n"
          f"{machine()}\n")
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        capture = Path(tmp) / "odom.bin"
        n = make_capture(capture, megabytes)
        size_mb = capture.stat().st_size / 2**20
        fw = [*fwbridge_argv(), "decode", "-p", "odom"]
        script = [sys.executable, str(SCRIPT), str(capture)]
        modes: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("struct script, table (baseline)", script, None),
            ("fwbridge decode, table", [*fw, str(capture)], None),
            ("fwbridge decode, table, PYTHONUNBUFFERED=1", [*fw, str(capture)],
             {"PYTHONUNBUFFERED": "1"}),
            ("struct script, json (baseline)", [*script, "--json"], None),
            ("fwbridge decode --json", [*fw, "--json", str(capture)], None),
        ]
        times: dict[str, list[float]] = {m: [] for m, _, _ in modes}
        peak: dict[str, float] = dict.fromkeys(times, 0.0)
        lines: dict[str, int] = {}
        for _ in range(repeat):
            for mode, cmd, env in modes:
                out = Path(tmp) / "out.txt"
                t, rss = run(cmd, out, env)
                times[mode].append(t)
                peak[mode] = max(peak[mode], rss)
                lines[mode] = sum(1 for _ in out.open("rb"))
    med = {m: statistics.median(v) for m, v in times.items()}
    base = {"table": med["struct script, table (baseline)"],
            "json": med["struct script, json (baseline)"]}
    rows = []
    for mode, _, _ in modes:
        b = base["json" if "json" in mode else "table"]
        rows.append([mode, med[mode], size_mb / med[mode], n / med[mode] / 1e3, peak[mode],
                     lines[mode], f"{med[mode] / b:.2f}"])
    print(f"{n:,} frames, {size_mb:.1f} MB; medians of {repeat} interleaved run(s)\n")
    print(table(["command", "seconds", "MB/s", "kframes/s", "peak RSS MB", "output lines",
                 "x script"], rows))
    for mode in ("fwbridge decode, table", "fwbridge decode, table, PYTHONUNBUFFERED=1",
                 "fwbridge decode --json"):
        ratio = med[mode] / base["json" if "json" in mode else "table"]
        print(f"\n{mode}: {ratio:.2f}x the script (goal <= {TIME_GOAL}x: "
              f"{'met' if ratio <= TIME_GOAL else f'NOT met, by {ratio / TIME_GOAL:.2f}x'})",
              end="")
    worst = max(peak[m] for m in peak if m.startswith("fwbridge"))
    print(f"\nfwbridge peak RSS: {worst:.0f} MB (goal <= {RSS_GOAL_MB} MB: "
          f"{'met' if worst <= RSS_GOAL_MB else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
