"""CAN bus simulator throughput: the arbitrating model against python-can's ``virtual``, in one run.

- The sans-I/O model (``can_bus.model``) with 16 nodes at 1 Mbit/s, each
  sending 8-byte actuator feedback frames: offered load 100 % of the bus
  (periodic), saturated (every node always has a backlog), and 100 % with
  one node misreading bits at 1e-4 (the bit-level slow path). Frames per
  second of wall time, and bus seconds per wall second (x real time).
- python-can's API, the same number of frames sent by one bus and received
  by another: ``virtual`` (no arbitration, no timing: the baseline) and
  ``fwbridge`` paced as fast as possible (arbitration, exact timing).

Goals: >= 5x real time at 1 Mbit/s with 16 nodes; simulated frames/s >= the
``virtual`` interface's.

Usage: python -m bench.bench_can_sim [--seconds S] [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import can

from bench.common import best_of, machine, table
from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.model import BusModel, FrameDelivered

BITRATE = 1_000_000
NODES = 16
NOMINAL_BITS = 120  # a typical 8-byte standard frame with its stuff bits


def _frame(node: int, i: int) -> Frame:
    # actuator feedback: angle sweeps, speed and current vary a little
    data = bytes((i * 7 & 0xFF, 30 + (i & 15), 5 + (i & 3), node + 1, 0x38, 0, 0, 0))
    return Frame(0x201 + node, False, False, 8, data)


def run_periodic(seconds: float, load: float = 1.0, ber: float = 0.0) -> dict[str, float]:
    """16 nodes, each one frame per period; the periods add up to ``load`` of the bus."""
    m = BusModel(BITRATE, seed=1)
    ids = [m.add_node(f"n{k}") for k in range(NODES)]
    if ber:
        m.set_faults(ids[-1], bit_error_rate=ber, seed=2)
    period = NODES * NOMINAL_BITS / load
    nxt = [(int(k * period / NODES), k) for k in range(NODES)]
    end = int(seconds * BITRATE)
    count = [0] * NODES
    frames = 0
    t0 = time.perf_counter()
    while nxt[0][0] < end:
        t, k = heapq.heappop(nxt)
        frames += sum(1 for e in m.run_until(t) if type(e) is FrameDelivered)
        m.submit(ids[k], _frame(k, count[k]))
        count[k] += 1
        heapq.heappush(nxt, (t + int(period), k))
    frames += sum(1 for e in m.run_until(end) if type(e) is FrameDelivered)
    wall = time.perf_counter() - t0
    return {"frames": frames, "bus_s": seconds, "wall_s": wall, "load": m.busy_bits / end,
            "errors": m.error_frames}


def run_saturated(seconds: float, backlog: int = 4) -> dict[str, float]:
    """Every node keeps ``backlog`` frames queued: the bus never idles."""
    m = BusModel(BITRATE, seed=1)
    ids = [m.add_node(f"n{k}") for k in range(NODES)]
    by_id = {nid: k for k, nid in enumerate(ids)}
    count = [0] * NODES
    for k, nid in enumerate(ids):
        for _ in range(backlog):
            m.submit(nid, _frame(k, count[k]))
            count[k] += 1
    end = int(seconds * BITRATE)
    frames = 0
    t0 = time.perf_counter()
    while m.now < end:
        t = m.next_event_time()
        assert t is not None
        for e in m.run_until(min(t, end)):
            if type(e) is FrameDelivered:
                frames += 1
                k = by_id[e.transmitters[0]]
                m.submit(e.transmitters[0], _frame(k, count[k]))  # refill the backlog
                count[k] += 1
    wall = time.perf_counter() - t0
    return {"frames": frames, "bus_s": seconds, "wall_s": wall, "load": m.busy_bits / end,
            "errors": m.error_frames}


def api_throughput(make: Callable[[], tuple[can.BusABC, can.BusABC]], n: int) -> float:
    """Frames per second: ``n`` frames sent on one bus, then received on the other."""
    tx, rx = make()
    msgs = [can.Message(arbitration_id=0x201 + (i & 15), is_extended_id=False,
                        data=_frame(i & 15, i).data) for i in range(n)]
    try:
        t0 = time.perf_counter()
        for msg in msgs:
            tx.send(msg)
        got = 0
        while got < n:
            if rx.recv(1.0) is None:
                raise RuntimeError(f"only {got} of {n} frames arrived")
            got += 1
        return n / (time.perf_counter() - t0)
    finally:
        tx.shutdown()
        rx.shutdown()


_channel = iter(range(1_000_000))


def _virtual() -> tuple[can.BusABC, can.BusABC]:
    ch = f"bench-virtual-{next(_channel)}"
    return can.Bus(interface="virtual", channel=ch), can.Bus(interface="virtual", channel=ch)


def _fwbridge() -> tuple[can.BusABC, can.BusABC]:
    ch = f"bench-fw-{next(_channel)}"
    return (FwBridgeBus(ch, bitrate=BITRATE, pacing="afap", tx_queue_size=1 << 20),
            FwBridgeBus(ch))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="bus seconds per model run")
    ap.add_argument("--quick", action="store_true", help="0.5 bus seconds, one repeat")
    args = ap.parse_args(argv)
    seconds = 0.5 if args.quick else args.seconds
    repeat = 1 if args.quick else 3
    print(f"# CAN simulator, {NODES} nodes at {BITRATE // 1000} kbit/s, {seconds:g} bus s per run"
          f"\n{machine()}\n")
    results: dict[str, Any] = {"model": {}}
    rows = []
    runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("periodic, offered load 100 %", lambda: run_periodic(seconds)),
        ("saturated (backlog on every node)", lambda: run_saturated(seconds)),
        ("periodic 100 %, one node at BER 1e-4", lambda: run_periodic(seconds, ber=1e-4)),
    ]
    for name, fn in runs:
        _, r = best_of(fn, repeat)
        fps = r["frames"] / r["wall_s"]
        rtf = r["bus_s"] / r["wall_s"]
        rows.append([name, int(r["frames"]), f"{100 * r['load']:.1f} %", int(r["errors"]),
                     r["wall_s"], fps, rtf])
        results["model"][name] = {**r, "fps": fps, "realtime_factor": rtf}
    print("## Model (sans-I/O), 16 nodes")
    print(table(["workload", "frames", "bus load", "error frames", "wall s", "frames/s",
                 "x real time"], rows))
    print()

    periodic = results["model"][runs[0][0]]
    n = int(periodic["frames"])
    api: dict[str, float] = {}
    makers: list[tuple[str, Callable[[], tuple[can.BusABC, can.BusABC]]]] = [
        ("python-can virtual (baseline)", _virtual), ("fwbridge, afap", _fwbridge)]
    for name, make in makers:
        _, api[name] = best_of(partial(api_throughput, make, n), repeat)
    base = api["python-can virtual (baseline)"]
    model_fps = periodic["fps"]
    print(f"## python-can API, {n:,} frames: send on one bus, receive on another")
    print(table(["interface", "frames/s", "x virtual"],
                [[k, v, v / base] for k, v in api.items()]
                + [["model alone, periodic 100 % (above)", model_fps, model_fps / base]]))
    print()
    results["api"] = api
    rtf = periodic["realtime_factor"]
    goals = {
        "realtime_factor_ge_5": rtf >= 5.0,
        "model_fps_ge_virtual": model_fps >= base,
        "fwbridge_api_fps_ge_virtual": api["fwbridge, afap"] >= base,
    }
    results["goals"] = goals
    print(f"Goal >= 5x real time at 1 Mbit/s with 16 nodes: {rtf:.1f}x "
          f"({'met' if goals['realtime_factor_ge_5'] else 'NOT met'}).")
    verdict = {True: "met", False: "NOT met"}
    print(f"Goal simulated frames/s >= virtual: the model {model_fps / base:.2f}x "
          f"({verdict[goals['model_fps_ge_virtual']]}); through the python-can API "
          f"{api['fwbridge, afap'] / base:.2f}x "
          f"({verdict[goals['fwbridge_api_fps_ge_virtual']]}).")
    print("virtual delivers without arbitration or timing; fwbridge arbitrates every frame,")
    print("computes its exact stuffed length and stamps it with its end-of-frame bus time.")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
