"""The report's optional figures: throughput against garbage rate, a latency histogram.

Usage: python -m bench.plots [--out DIR] [--quick]   (also run by ``bench.report --plots``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.baselines.seed_getonebyte import SeedGetOneByte
from bench.bench_sum8_receiver import chunks, make_stream, recovered
from fwbridge.protocols import odom_frame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

HERE = Path(__file__).resolve().parent
RATES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


def _timed(fn, repeat: int = 3):  # type: ignore[no-untyped-def]
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def throughput_vs_garbage(path: Path, frames: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours, seed, ours_rec, seed_rec = [], [], [], []
    for rate in RATES:
        data, intact = make_stream(frames, rate)
        parts = chunks(data)

        def run_ours(p: list[bytes] = parts) -> list[int]:
            rx = Sum8Receiver(odom_frame.CODEC)
            return [r.offset for part in p for r in rx.feed(part)]

        def run_seed(p: list[bytes] = parts) -> int:
            rx = SeedGetOneByte(odom_frame.SIZE, odom_frame.CODEC.make)
            return sum(len(rx.feed(part)) for part in p)

        dt, offs = _timed(run_ours)
        ours.append(len(offs) / dt / 1e3)
        ours_rec.append(100.0 * recovered(offs, intact) / len(intact))
        dt, n = _timed(run_seed)
        seed.append(n / dt / 1e3)
        seed_rec.append(100.0 * min(n, len(intact)) / len(intact))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    pct = [100 * r for r in RATES]
    ax1.plot(pct, ours, "o-", label="fwbridge Sum8Receiver")
    ax1.plot(pct, seed, "s--", label="seed GetOneByte (Python port)")
    ax1.set(xlabel="garbage inserted before a frame (%)", ylabel="thousand frames/s",
            title="Odometry receiver throughput")
    ax1.legend()
    ax2.plot(pct, ours_rec, "o-", label="fwbridge (matched by offset)")
    ax2.plot(pct, seed_rec, "s--", label="seed (frames decoded)")
    ax2.set(xlabel="garbage inserted before a frame (%)", ylabel="% of intact frames",
            title="Frames recovered")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def latency_histogram(path: Path, n: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.bench_bridge_latency import round_trips

    raw_s, node_s = round_trips(n)
    raw, node = [v * 1e6 for v in raw_s], [v * 1e6 for v in node_s]
    fig, ax = plt.subplots(figsize=(7, 4))
    top = max(sorted(raw)[int(0.995 * len(raw))], sorted(node)[int(0.995 * len(node))])
    bins = [top * k / 60 for k in range(61)]
    ax.hist(raw, bins=bins, alpha=0.6, label="raw pty echo")
    ax.hist(node, bins=bins, alpha=0.6, label="BaseNode command -> odometry")
    ax.set(xlabel="round trip (µs)", ylabel="exchanges", title=f"Round trip over a pty, {n:,} each")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[Path]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "plots")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    made = [args.out / "throughput_vs_garbage.png", args.out / "latency_histogram.png"]
    throughput_vs_garbage(made[0], 5_000 if args.quick else 50_000)
    latency_histogram(made[1], 500 if args.quick else 3_000)
    for p in made:
        print(f"wrote {p}")
    return made


if __name__ == "__main__":
    main(sys.argv[1:])
