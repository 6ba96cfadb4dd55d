"""Action-frame receiver throughput: fwbridge against the patent's receiver, in one run.

100,000 action frames of 8..200 random data bytes in 4 KiB chunks, clean and
with 5 % garbage (bytes rich in FE, EF, FD, DF, truncated frames and false
headers) inserted between frames, through:

- fwbridge ``ActionReceiver`` (length-directed, backtracking);
- the patent's receiver ported to Python (ends a packet at the first
  ``FD DF``, then compares lengths) as the baseline.

Timed runs count the frames and drop them, as a streaming consumer does;
an untimed run of each receiver then keeps its output to match it against
what was sent (by offset and content for fwbridge, by content for the
baseline: every frame in the stream is distinct). Keeping 100,000 frames
alive inside the timed runs would time the cyclic GC rescanning them, i.e.
the benchmark's bookkeeping rather than the receivers. Random data holds ``FD DF``
now and then, in the data or in the CRC: the baseline loses those frames.

Usage: python -m bench.bench_action_receiver [--frames N] [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.baselines.patent_receiver import PatentReceiver
from bench.common import best_of, machine, table
from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceived, ActionReceiver

CHUNK = 4096
GOAL = 3.0


def make_stream(
    n: int, garbage: float, seed: int = 1
) -> tuple[bytes, list[int], list[ActionFrame]]:
    """``n`` frames; before each, with probability ``garbage``, some junk.

    Returns the stream, the offsets of the intact frames and the frames.
    """
    rnd = random.Random(seed)
    parts: list[bytes] = []
    offsets: list[int] = []
    sent: list[ActionFrame] = []
    pos = 0
    for k in range(n):
        if rnd.random() < garbage:
            kind = rnd.random()
            if kind < 0.3:  # a truncated frame
                raw = af.encode(_random_frame(rnd, k))
                junk = raw[: rnd.randrange(2, len(raw))]
            elif kind < 0.4:  # a false header with a length field
                junk = b"\xfe\xef" + rnd.randbytes(4)
            else:  # bytes rich in the header's and trailer's values
                junk = bytes(
                    rnd.choice((0xFE, 0xEF, 0xFD, 0xDF, rnd.randrange(256), rnd.randrange(256)))
                    for _ in range(rnd.randrange(1, 30))
                )
            parts.append(junk)
            pos += len(junk)
        frame = _random_frame(rnd, k)
        raw = af.encode(frame)
        parts.append(raw)
        offsets.append(pos)
        sent.append(frame)
        pos += len(raw)
    return b"".join(parts), offsets, sent


def _random_frame(rnd: random.Random, k: int) -> ActionFrame:
    data = rnd.randbytes(rnd.randrange(8, 201))
    return ActionFrame(k & 0xFF, InstructionType.WRITE_PC, SubCommand.TEST_ACTION_GROUP, data)


def chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def count_ours(parts: list[bytes]) -> int:
    """Timed: frames out of :class:`ActionReceiver`, dropped as a streaming consumer does."""
    rx = ActionReceiver()
    n = 0
    for part in parts:
        n += len(rx.feed(part))
    return n + len(rx.finish())


def count_patent(parts: list[bytes]) -> int:
    """Timed: frames out of the patent's receiver, dropped likewise."""
    rx = PatentReceiver()
    n = 0
    for part in parts:
        n += len(rx.feed(part))
    return n


def collect_ours(parts: list[bytes]) -> list[ActionReceived]:
    rx = ActionReceiver()
    out: list[ActionReceived] = []
    for part in parts:
        out.extend(rx.feed(part))
    out.extend(rx.finish())
    return out


def collect_patent(parts: list[bytes]) -> list[ActionFrame]:
    rx = PatentReceiver()
    out: list[ActionFrame] = []
    for part in parts:
        out.extend(rx.feed(part))
    return out


def recovered_ours(found: list[ActionReceived], offsets: list[int], sent: list[ActionFrame]) -> int:
    got = {r.offset: r.frame for r in found}
    return sum(1 for off, f in zip(offsets, sent) if got.get(off) == f)


def recovered_patent(found: list[ActionFrame], sent: list[ActionFrame]) -> int:
    got = set(found)
    return sum(1 for f in sent if f in got)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="20,000 frames, one repeat")
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else args.frames
    repeat = 1 if args.quick else 3
    print(f"# Action-frame receiver, {n:,} frames of 8..200 data bytes in {CHUNK} B chunks")
    print(machine() + "\n")
    results: dict[str, Any] = {}
    for label, garbage in (("clean", 0.0), ("5% garbage", 0.05)):
        data, offsets, sent = make_stream(n, garbage)
        parts = chunks(data)
        mb = len(data) / 1e6
        with_trailer = sum(1 for f in sent if b"\xfd\xdf" in af.encode(f)[2:-2])
        runs: list[tuple[str, Callable[[], int], Callable[[], int]]] = [
            ("patent receiver (baseline)", partial(count_patent, parts),
             lambda: recovered_patent(collect_patent(parts), sent)),  # noqa: B023 - called now
            ("fwbridge ActionReceiver", partial(count_ours, parts),
             lambda: recovered_ours(collect_ours(parts), offsets, sent)),  # noqa: B023
        ]
        rows = []
        base_fps = 0.0
        for name, timed, check in runs:
            dt, frames = best_of(timed, repeat)
            got = check()
            fps = frames / dt
            if not base_fps:
                base_fps = fps
            rows.append([name, fps, mb / dt, f"{got:,}/{len(sent):,}", fps / base_fps])
            results[f"{label}: {name}"] = {
                "fps": fps, "mbps": mb / dt, "recovered": got, "intact": len(sent),
                "ratio": fps / base_fps,
            }
        print(f"## {label} ({mb:.1f} MB; {with_trailer} frames hold FD DF after the header)")
        print(table(["receiver", "frames/s", "MB/s", "intact frames recovered", "x baseline"],
                    rows))
        ours = results[f"{label}: fwbridge ActionReceiver"]
        met = ours["ratio"] >= GOAL and ours["recovered"] == ours["intact"]
        print(f"\ngoal (>= {GOAL:.0f}x the baseline, no intact frame lost): "
              f"{'met' if met else 'NOT met'}\n")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
