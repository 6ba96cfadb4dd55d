"""Run every benchmark of the project and write ``bench/REPORT.md``.

Each benchmark runs as a child process of this one (one process tree), one
after the other so they do not compete for the CPU; each prints its
figures next to the baselines it measured in the same run. The report
gathers those outputs under a header naming the machine and the commit.

Usage: python -m bench.report [--quick] [--only NAME ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

from bench.common import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: (module, what it measures). Listed in the order the report shows them.
BENCHMARKS: list[tuple[str, str]] = [
    ("bench_sum8_receiver", "odometry receiver vs the seed's GetOneByte"),
    ("bench_frames_kept", "odometry receivers with every frame kept vs hand-written decoders"),
    ("bench_action_receiver", "action-frame receiver vs the patent's receiver"),
    ("bench_hostile_streams", "every receiver shape on clean and hostile streams (false-header "
     "floods) vs a naive per-byte parser"),
    ("bench_c_receivers", "C firmware receivers vs the seed's C GetOneByte"),
    ("bench_qemu_uart_echo", "polled UART echo on QEMU's mps2-an385 and netduinoplus2"),
    ("bench_firmware_qemu", "firmware_ref on a Cortex-M3 (QEMU): flash, RAM, stack, instructions "
     "per byte"),
    ("bench_codegen", "receivers from descriptions (Python, generated C) vs hand-written ones"),
    ("bench_bridge_latency", "serial round trip and base-node CPU"),
    ("bench_bridge_cli", "`fwbridge bridge` CPU vs a plain pyserial loop, 100/200 Hz"),
    ("bench_sim", "simulated world speed and round trip"),
    ("bench_can_sim", "CAN bus simulator vs python-can's virtual bus"),
    ("bench_mcap", "recording CAN to MCAP vs python-can's BLF writer, 1 Mbit/s, 100 % load"),
    ("bench_can_shared", "Shared CAN bus across processes vs virtual; CAN FD model speed"),
    ("bench_can_shared_scaling", "the shared bus at 2 and 8 processes vs python-can "
     "udp_multicast"),
    ("bench_arm", "SCARA IK and the pick-and-place control loop"),
    ("fault_suite", "fault injection: recovery, false accepts, resync distance"),
    ("bench_resources", "a gigabyte of random bytes: memory and time per MB"),
    ("bench_ros2", "ROS 2 over Zenoh: odometry latency, fleet CPU scaling"),
    ("bench_decode_table", "decode on 50 MB captures (odometry, a description, a CAN log) vs "
     "ten-line scripts"),
    ("bench_cli_startup", "CLI start-up vs a bare `import click`"),
]


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=False, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_one(module: str, quick: bool, timeout: float) -> tuple[str, float, int]:
    """Run ``python -m bench.<module>``; return its output, seconds, exit code."""
    cmd = [sys.executable, "-m", f"bench.{module}"] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        return f"(stopped after {timeout:.0f} s)", time.perf_counter() - t0, -1
    out = res.stdout
    if res.returncode:
        out += f"\n[stderr]\n{res.stderr}"
    return out.rstrip(), time.perf_counter() - t0, res.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--only", nargs="*", default=None, help="benchmark modules to run")
    ap.add_argument("--out", type=Path, default=HERE / "REPORT.md")
    ap.add_argument("--timeout", type=float, default=1800.0, help="per benchmark, seconds")
    ap.add_argument("--plots", action="store_true",
                    help="also draw bench/plots/*.png (throughput vs garbage, latency histogram)")
    args = ap.parse_args(argv)
    chosen = [(m, d) for m, d in BENCHMARKS if args.only is None or m in args.only]
    sections = []
    failed = 0
    for module, desc in chosen:
        if not (HERE / f"{module}.py").exists():
            sections.append(f"## {module}\n\n{desc}: not present in this tree.\n")
            continue
        print(f"running {module} …", file=sys.stderr, flush=True)
        out, secs, code = run_one(module, args.quick, args.timeout)
        failed += code != 0
        status = "" if code == 0 else f" (exit code {code})"
        body = out.replace("\n# ", "\n### ").removeprefix("# ")
        sections.append(f"## {module}: {desc}{status}\n\n_{secs:.0f} s_\n\n```\n{body}\n```\n")
    if args.plots:
        print("drawing plots …", file=sys.stderr, flush=True)
        out, _, code = run_one("plots", args.quick, args.timeout)
        failed += code != 0
        pngs = sorted((HERE / "plots").glob("*.png")) if code == 0 else []
        figures = "\n".join(f"![{p.stem}](plots/{p.name})" for p in pngs) or f"```\n{out}\n```"
        sections.append(f"## Figures\n\n{figures}\n")
    head = (
        "# fwbridge benchmark report\n\n"
        f"- generated: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC} "
        f"by `python -m bench.report{' --quick' if args.quick else ''}`\n"
        f"- commit: {_commit()}\n- machine: {machine()}\n\n"
        "Every figure below comes with the baseline measured in the same run, on the\n"
        "same machine, one benchmark at a time.\n\n"
    )
    args.out.write_text(head + "\n".join(sections))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
