"""Fault injection on the serial receivers, with figures rather than pass/fail.

For each fault kind (bit flip, dropped byte, inserted byte, truncated frame)
and each rate from 1e-5 to 1e-2 per byte, a stream of frames is damaged with
a seeded RNG and fed through the receiver in 4 KiB chunks. Reported:

- intact recovered: the frames no fault touched that the receiver returned
  at their (shifted) offset; must be 100 %;
- corrupted, false accepts: frames the faults touched, and how many of the
  receiver's outputs were not intact frames (a corrupted candidate that
  passed the check); sum-8 lets through about 1 in 256 of the random-looking
  candidates that a drop or insert makes (none of the single bit flips, which
  sum-8 always detects), CRC-16 about 1 in 65,536;
- resync bytes: from each fault to the start of the next frame returned,
  mean and worst.

``python -m bench.fault_suite`` prints the table (and ``--out`` writes it);
tests/test_fault_injection.py runs the same code on smaller streams.
"""

from __future__ import annotations

import argparse
import bisect
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common import machine, table
from fwbridge.protocols import action_frame as af
from fwbridge.protocols import odom_frame
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

KINDS = ("bitflip", "drop", "insert", "truncate")
RATES = (1e-5, 1e-4, 1e-3, 1e-2)
CHUNK = 4096


@dataclass
class Outcome:
    kind: str
    rate: float
    faults: int
    intact: int
    recovered: int
    corrupted: int
    false_accepts: int
    resync_mean: float
    resync_max: int

    @property
    def recovered_pct(self) -> float:
        return 100.0 * self.recovered / self.intact if self.intact else 100.0


def odom_frames(n: int, rnd: random.Random) -> list[bytes]:
    return [odom_frame.encode(odom_frame.OdomFrame(*(rnd.uniform(-2, 2) for _ in range(4))))
            for _ in range(n)]


def action_frames(n: int, rnd: random.Random) -> list[bytes]:
    return [af.encode(af.ActionFrame(rnd.randrange(4), af.InstructionType.WRITE_PC,
                                     af.SubCommand.REALTIME_SERVO_CONTROL,
                                     rnd.randbytes(rnd.randrange(8, 65))))
            for _ in range(n)]


def damage(frames: list[bytes], kind: str, rate: float, rnd: random.Random
           ) -> tuple[bytes, list[int], list[int], int]:
    """The damaged stream, offsets of intact frames, fault positions, corrupted count."""
    out = bytearray()
    intact: list[int] = []
    faults: list[int] = []
    corrupted = 0
    for frame in frames:
        start = len(out)
        for byte in frame:
            if rnd.random() >= rate:
                out.append(byte)
                continue
            faults.append(len(out))
            if kind == "bitflip":
                out.append(byte ^ (1 << rnd.randrange(8)))
            elif kind == "insert":
                out.append(rnd.randrange(256))
                out.append(byte)
            elif kind == "truncate":
                break  # the rest of this frame never arrives
            # "drop": the byte is simply not appended
        # Intact means its bytes arrived whole and in order: an insert before the
        # first byte, or one equal to the bytes it shifts, leaves the frame whole.
        found = out.find(frame, start)
        if found >= 0:
            intact.append(found)
        else:
            corrupted += 1
    return bytes(out), intact, faults, corrupted


def run_receiver(make: Callable[[], Any], data: bytes) -> list[int]:
    rx = make()
    offsets: list[int] = []
    for i in range(0, len(data), CHUNK):
        offsets.extend(r.offset for r in rx.feed(data[i : i + CHUNK]))
    offsets.extend(r.offset for r in rx.finish())
    return offsets


def measure(protocol: str, kind: str, rate: float, n: int, seed: int = 0) -> Outcome:
    rnd = random.Random(f"{protocol}/{kind}/{rate}/{seed}")
    if protocol == "odom":
        frames, make = odom_frames(n, rnd), lambda: Sum8Receiver(odom_frame.CODEC)
    else:
        frames, make = action_frames(n, rnd), ActionReceiver
    data, intact, faults, corrupted = damage(frames, kind, rate, rnd)
    got = sorted(run_receiver(make, data))
    got_set = set(got)
    recovered = sum(1 for off in intact if off in got_set)
    intact_set = set(intact)
    false_accepts = sum(1 for off in got if off not in intact_set)
    gaps = []
    for f in faults:
        k = bisect.bisect_right(got, f)
        if k < len(got):
            gaps.append(got[k] - f)
    return Outcome(kind, rate, len(faults), len(intact), recovered, corrupted, false_accepts,
                   sum(gaps) / len(gaps) if gaps else 0.0, max(gaps, default=0))


def suite(n: int, protocols: tuple[str, ...] = ("odom", "action")) -> dict[str, list[Outcome]]:
    return {p: [measure(p, k, r, n) for k in KINDS for r in RATES] for p in protocols}


def render(results: dict[str, list[Outcome]], n: int) -> str:
    parts = [f"# Fault injection, {n:,} frames per cell\n\n{machine()}\n"]
    names = {"odom": "odometry frames (sum-8, 19 bytes)",
             "action": "action frames (CRC-16, 19..75 bytes)"}
    for proto, outs in results.items():
        rows = [[o.kind, f"{o.rate:g}", o.faults, f"{o.recovered:,}/{o.intact:,}",
                 f"{o.recovered_pct:.2f} %", o.corrupted, o.false_accepts,
                 f"{o.resync_mean:.1f}", o.resync_max] for o in outs]
        parts.append(f"## {names[proto]}\n")
        parts.append(table(["fault", "rate/byte", "faults", "intact recovered", "%",
                            "corrupted frames", "false accepts", "resync mean B",
                            "resync max B"], rows))
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, list[Outcome]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="10,000 frames per cell")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    n = 10_000 if args.quick else args.frames
    results = suite(n)
    text = render(results, n)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
