"""``fwbridge decode`` and ``fwbridge can decode`` on large captures, against ten-line scripts.

Three cases, each beside the script a user writes instead (bench/baselines/),
which prints the same lines, measured in the same run:

- ``decode -p odom`` on a raw odometry stream: ``decode_struct.py``; and on one of
  random values (``odom-noisy``: values that barely repeat, so none is formatted
  once for many frames);
- ``decode -p bench/frames/imu19.toml`` (a description: int16 x 0.01 fields,
  a status byte, CRC-16/MODBUS) on a raw imu19 stream: ``decode_struct_imu.py``;
- ``can decode`` on a candump ``.log`` of actuator commands and feedback
  (and other traffic): ``can_decode_struct.py`` (python-can's reader + struct).

Each case runs the table and ``--json`` of both, and fwbridge's table under
``PYTHONUNBUFFERED=1`` too (common in containers; the goal is against the
buffered script). Inputs are generated into a temporary directory (1000,
20000 or 100000 distinct frames repeated), stdout goes to a file; the time is the
whole process's wall time (start-up included), the memory its peak resident
set (``wait4``'s ``ru_maxrss``). Runs are interleaved (script, fwbridge,
script, ...) and the medians compared, so each ratio comes from one run.

Goals, per case: every fwbridge mode <= 0.5 x the script's time in that
mode (the buffered script); peak RSS <= 150 MB whatever the size (memory flat).

Usage: python -m bench.bench_decode_table [--megabytes N] [--repeat N] [--quick]
       [--cases odom,odom-noisy,imu19,can]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import machine, table
from fwbridge.protocols import odom_frame
from fwbridge.protocols.odom_frame import OdomFrame

TIME_GOAL = 0.5  # fwbridge / the script, each mode
RSS_GOAL_MB = 150
HERE = Path(__file__).resolve().parent
BASELINES = HERE / "baselines"
IMU19 = HERE / "frames" / "imu19.toml"


def fwbridge_argv() -> list[str]:
    script = Path(sys.executable).with_name("fwbridge")
    if script.exists():
        return [str(script)]
    found = shutil.which("fwbridge")
    return [found] if found else [sys.executable, "-m", "fwbridge.cli"]


def _repeat(path: Path, blob: bytes, megabytes: float) -> int:
    """``blob`` written to ``path`` as many times as fit ``megabytes``; the repeat count."""
    reps = max(1, int(megabytes * 2**20) // len(blob))
    with path.open("wb") as fh:
        for _ in range(reps):
            fh.write(blob)
    return reps


def make_capture(path: Path, megabytes: float) -> int:
    """A raw odometry stream of about ``megabytes`` MB; returns its frame count."""
    frames = b"".join(odom_frame.encode(OdomFrame(0.001 * k, -0.25 + 0.0005 * k, 0.01 * k,
                                                  (k * 0.37) % 360 - 180))
                      for k in range(1000))
    return _repeat(path, frames, megabytes) * 1000


def make_noisy_capture(path: Path, megabytes: float) -> int:
    """A raw odometry stream whose values barely repeat (100,000 distinct frames of random
    float32 values, as a noisy sensor's): no value is formatted once for many frames."""
    rnd = random.Random(7)
    frames = b"".join(odom_frame.encode(OdomFrame(*(rnd.uniform(-3, 3) for _ in range(4))))
                      for _ in range(100_000))
    return _repeat(path, frames, megabytes) * 100_000


def make_imu_capture(path: Path, megabytes: float) -> int:
    """A raw imu19 stream (bench/frames/imu19.toml) of about ``megabytes`` MB; frames."""
    from fwbridge.protocols.described import Described

    d = Described.from_spec(str(IMU19))
    frames = b"".join(bytes(d.codec.encode(d.codec.from_mapping({
        "ax": 0.01 * ((k * 37) % 2000 - 1000), "ay": 0.01 * ((k * 11) % 700), "az": 9.81,
        "gx": 0.01 * (k % 300 - 150), "gy": 0.0, "gz": -0.01 * (k % 50), "temp": 25.5,
        "status": k % 4}))) for k in range(1000))
    return _repeat(path, frames, megabytes) * 1000


def make_can_log(path: Path, megabytes: float) -> int:
    """A candump log of about ``megabytes`` MB: commands and feedback of 11 modules, some
    with a module byte that is not theirs, and 10 % other traffic; returns its lines."""
    rnd = random.Random(3)
    lines = []
    t = 1_700_000_000.0
    for _ in range(20_000):
        t += 0.0005
        r = rnd.random()
        if r < 0.1:
            lines.append(f"({t:.6f}) can0 080#{rnd.getrandbits(16):04X}\n")
            continue
        module = rnd.randrange(1, 12)
        data = bytes([rnd.randrange(256), rnd.randrange(100), rnd.randrange(40),
                      module if rnd.random() > 0.05 else 7, rnd.choice((0x21, 0x38, 0x12, 0x99)),
                      rnd.choice((0, 0, 0, 1, 4, 0x21, 0x80)), rnd.randrange(256),
                      rnd.randrange(256)])
        can_id = (0x100 if r < 0.55 else 0x200) + module
        lines.append(f"({t:.6f}) can0 {can_id:03X}#{data.hex().upper()}\n")
    return _repeat(path, "".join(lines).encode(), megabytes) * len(lines)


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


UNBUFFERED = {"PYTHONUNBUFFERED": "1"}
Mode = tuple[str, list[str], "dict[str, str] | None"]


def modes(fw: list[str], script: list[str], capture: str) -> list[Mode]:
    """The five runs of a case: script and fwbridge, table and JSON, and the unbuffered table."""
    return [
        ("script, table (baseline)", [*script, capture], None),
        ("fwbridge, table", [*fw, capture], None),
        ("fwbridge, table, PYTHONUNBUFFERED=1", [*fw, capture], UNBUFFERED),
        ("script, json (baseline)", [*script, capture, "--json"], None),
        ("fwbridge --json", [*fw, "--json", capture], None),
    ]


CASES: dict[str, tuple[str, str, Callable[[Path, float], int], list[str], Path]] = {
    # name: (what, file name, generator, fwbridge arguments, baseline script)
    "odom": ("decode -p odom, raw odometry", "odom.bin", make_capture,
             ["decode", "-p", "odom"], BASELINES / "decode_struct.py"),
    "odom-noisy": ("decode -p odom, raw odometry of random values", "noisy.bin",
                   make_noisy_capture, ["decode", "-p", "odom"], BASELINES / "decode_struct.py"),
    "imu19": ("decode -p imu19.toml (a description), raw imu19", "imu19.bin", make_imu_capture,
              ["decode", "-p", str(IMU19)], BASELINES / "decode_struct_imu.py"),
    "can": ("can decode, candump .log", "bus.log", make_can_log, ["can", "decode"],
            BASELINES / "can_decode_struct.py"),
}


def measure(name: str, megabytes: float, repeat: int, tmp: Path) -> list[str]:
    """Run one case; print its table; return its verdict lines."""
    what, file_name, make, args, script = CASES[name]
    capture = tmp / file_name
    n = make(capture, megabytes)
    size_mb = capture.stat().st_size / 2**20
    runs = modes([*fwbridge_argv(), *args], [sys.executable, str(script)], str(capture))
    times: dict[str, list[float]] = {m: [] for m, _, _ in runs}
    peak: dict[str, float] = dict.fromkeys(times, 0.0)
    lines: dict[str, int] = {}
    for _ in range(repeat):
        for mode, cmd, env in runs:
            out = tmp / "out.txt"
            t, rss = run(cmd, out, env)
            times[mode].append(t)
            peak[mode] = max(peak[mode], rss)
            with out.open("rb") as fh:
                lines[mode] = sum(1 for _ in fh)
    capture.unlink()
    med = {m: statistics.median(v) for m, v in times.items()}
    base = {"table": med["script, table (baseline)"], "json": med["script, json (baseline)"]}
    rows = []
    for mode, _, _ in runs:
        b = base["json" if "json" in mode else "table"]
        rows.append([mode, med[mode], size_mb / med[mode], n / med[mode] / 1e3, peak[mode],
                     lines[mode], f"{med[mode] / b:.2f}"])
    print(f"## {name}: {what}; {n:,} frames, {size_mb:.1f} MB; medians of {repeat} "
          f"interleaved run(s)\n")
    print(table(["command", "seconds", "MB/s", "kframes/s", "peak RSS MB", "output lines",
                 "x script"], rows))
    print()
    verdicts = []
    for mode in ("fwbridge, table", "fwbridge, table, PYTHONUNBUFFERED=1", "fwbridge --json"):
        ratio = med[mode] / base["json" if "json" in mode else "table"]
        verdict = "met" if ratio <= TIME_GOAL else f"NOT met, by {ratio / TIME_GOAL:.2f}x"
        verdicts.append(f"{name}: {mode}: {ratio:.2f}x the script (goal <= {TIME_GOAL}x: "
                        f"{verdict})")
    worst = max(peak[m] for m in peak if m.startswith("fwbridge"))
    verdicts.append(f"{name}: fwbridge peak RSS {worst:.0f} MB (goal <= {RSS_GOAL_MB} MB: "
                    f"{'met' if worst <= RSS_GOAL_MB else 'NOT met'})")
    return verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, default=50)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs per mode (median)")
    ap.add_argument("--quick", action="store_true", help="5 MB, one run per mode")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: "
                    + ", ".join(CASES))
    args = ap.parse_args(argv)
    megabytes, repeat = (5.0, 1) if args.quick else (args.megabytes, args.repeat)
    names = [c for c in args.cases.split(",") if c]
    unknown = set(names) - set(CASES)
    if unknown:
        ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    print(f"# decode on {megabytes:g} MB captures: fwbridge vs ten-line scripts\n{machine()}\n")
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        for name in names:
            verdicts += measure(name, megabytes, repeat, Path(tmp))
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
