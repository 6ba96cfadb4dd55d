"""SCARA IK throughput and the pick-and-place control loop's worst step.

IK solutions per second over the same 50,000 reachable targets, in one run:
- the seed's ``computeSCARAIK`` transcribed line for line to Python (baseline);
- fwbridge ``inverse()``, one call per target, with limits, the z range,
  NaN checks and the wrapped nearest-solution rule;
- fwbridge ``inverse_path()``, the same solutions for a whole path at once.

Then the pick-and-place task of seed 001 at its 16 ms control period, against
simulated joint modules on the simulated CAN bus: the worst and the
99th-percentile wall time of one control step (the task's share: IK, motion
planning at phase changes, the safe-Z check).

Usage: python -m bench.bench_arm [--quick]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from typing import Any

import numpy as np

from bench.baselines.seed_scara_ik import compute_scara_ik
from bench.common import best_of, machine, table
from fwbridge.bridge.robots.arm.can_arm import run_pick_place
from fwbridge.bridge.robots.arm.kinematics import (
    Joints,
    Pose,
    ScaraGeometry,
    forward,
    inverse,
    inverse_path,
)
from fwbridge.bridge.robots.arm.pick_place import PickPlaceConfig

GEOM = ScaraGeometry()


def targets(n: int, seed: int = 1) -> list[tuple[float, float, float, float]]:
    """Reachable targets (FK of joints inside the limits), as a path would visit them."""
    rnd = random.Random(seed)
    out = []
    while len(out) < n:
        j = Joints(rnd.uniform(-2.9, 2.9), rnd.uniform(-2.9, 2.9), rnd.uniform(0, 0.4),
                   rnd.uniform(-3, 3))
        p = forward(GEOM, j)
        if GEOM.r_min + 1e-6 < math.hypot(p.x, p.y) < GEOM.r_max - 1e-6:
            out.append(tuple(p))
    return out  # type: ignore[return-value]


def run_seed(pts: list[tuple[float, float, float, float]]) -> int:
    c1 = c2 = 0.0
    ok = 0
    for x, y, z, phi in pts:
        res = compute_scara_ik(x, y, z, phi, c1, c2, 0.0, -2.967, 2.967, -2.967, 2.967)
        if res.valid:
            c1, c2 = res.theta1, res.theta2
            ok += 1
    return ok


def run_inverse(pts: list[tuple[float, float, float, float]]) -> int:
    cur = Joints()
    for x, y, z, phi in pts:
        cur = inverse(GEOM, Pose(x, y, z, phi), cur)
    return len(pts)


def run_path(arr: np.ndarray[Any, Any]) -> int:
    return len(inverse_path(GEOM, arr, Joints()))


def control_loop() -> dict[str, float]:
    """The seed's pick and place on the simulated CAN bus; time each control step."""
    run = run_pick_place(PickPlaceConfig(), GEOM)
    arr = np.array(run.step_seconds) * 1e3
    return {"steps": len(arr), "sim_seconds": run.sim_seconds, "max_ms": float(arr.max()),
            "p99_ms": float(np.percentile(arr, 99)), "mean_ms": float(arr.mean()),
            "period_ms": run.task.cfg.period * 1e3, "frames": run.bus_frames,
            "done": run.task.done and run.task.failure is None}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 targets, one repeat")
    args = ap.parse_args(argv)
    n = 5_000 if args.quick else 50_000
    repeat = 1 if args.quick else 5
    pts = targets(n)
    arr = np.array(pts)
    print(f"# SCARA IK and control loop\n{machine()}\n")
    rows = []
    results: dict[str, Any] = {}
    base = 0.0
    for name, fn in (
        ("seed computeSCARAIK, transcribed (baseline)", lambda: run_seed(pts)),
        ("fwbridge inverse(), per target", lambda: run_inverse(pts)),
        ("fwbridge inverse_path(), whole path", lambda: run_path(arr)),
    ):
        dt, solved = best_of(fn, repeat)
        rate = n / dt
        base = base or rate
        rows.append([name, rate, rate / base, f"{solved:,}/{n:,}"])
        results[name] = {"per_s": rate, "ratio": rate / base}
    print(table(["IK", "solutions/s", "x baseline", "solved"], rows))
    loop = control_loop()
    results["control_loop"] = loop
    print(f"\n## Pick-and-place control loop on the CAN bus ({loop['steps']:,} steps, "
          f"{loop['sim_seconds']:.1f} s simulated, {loop['frames']:,} frames, "
          f"{'completed' if loop['done'] else 'FAILED'})")
    print(table(["step time", "ms"], [["mean", loop["mean_ms"]], ["p99", loop["p99_ms"]],
                                       ["worst", loop["max_ms"]],
                                       ["control period", loop["period_ms"]]]))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
