"""The shared bus across processes, and CAN FD timing, against baselines in the same run.

- Cross-process: a sender process sends N frames through a ``fwbridge can bus
  up`` daemon (afap) to a receiver process; frames/s end to end, and the
  latency from ``send`` to ``recv`` (p50, p99; a second run with one frame in
  flight at a time). Baseline: python-can ``virtual`` between two buses in one
  process. Goal >= 0.5x virtual.
- CAN FD in the model: 16 nodes at 1 Mbit/s nominal, 5 Mbit/s data, 64-byte
  frames with BRS, offered load 100 %. Goal >= 5x real time.

Usage: python -m bench.bench_can_shared [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

import can

from bench.common import machine, table
from fwbridge.can_bus import fd
from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.model import BusModel, FrameDelivered

NODES = 16


def run_fd(seconds: float) -> dict[str, float]:
    m = BusModel(1_000_000, data_bitrate=5_000_000, seed=1)
    ids = [m.add_node(f"n{k}") for k in range(NODES)]
    noise = random.Random(1).randbytes(1 << 16)
    sizes = [fd.frame_ticks(Frame(0x201, False, False, 15, noise[i:i + 64], True, True), m.nt,
                            m.dt) for i in range(0, 64 * 256, 64)]
    period = NODES * sum(sizes) // len(sizes)  # each node's share: 100 % offered in all
    nxt = [(k * period // NODES, k) for k in range(NODES)]
    end = m.bits(seconds)
    count = [0] * NODES
    frames = 0
    # every frame's data differs (no cached lengths): 64-byte windows of a random buffer
    t0 = time.perf_counter()
    while nxt[0][0] < end:
        t, k = heapq.heappop(nxt)
        frames += sum(1 for e in m.run_until(t) if type(e) is FrameDelivered)
        i = (count[k] * NODES + k) & 0xFFBF
        m.submit(ids[k], Frame(0x201 + k, False, False, 15, noise[i:i + 64], True, True))
        count[k] += 1
        heapq.heappush(nxt, (t + period, k))
    frames += sum(1 for e in m.run_until(end) if type(e) is FrameDelivered)
    wall = time.perf_counter() - t0
    return {"frames": frames, "bus_s": seconds, "wall_s": wall, "load": m.busy_bits / end}


def virtual(n: int) -> float:
    ch = f"bench-shared-{os.getpid()}"
    tx, rx = can.Bus(interface="virtual", channel=ch), can.Bus(interface="virtual", channel=ch)
    msgs = [can.Message(arbitration_id=0x200 + (i & 15), is_extended_id=False,
                        data=bytes([i & 255] * 8)) for i in range(n)]
    try:
        t0 = time.perf_counter()
        for msg in msgs:
            tx.send(msg)
        for _ in range(n):
            assert rx.recv(1.0) is not None
        return n / (time.perf_counter() - t0)
    finally:
        tx.shutdown()
        rx.shutdown()


_RECEIVER = textwrap.dedent("""
    import sys, time, json, can
    n, lockstep = int(sys.argv[1]), sys.argv[2] == "1"
    rx = can.Bus(interface="fwbridge", channel="shared:benchbus", rx_queue_size=0)
    print("ready", flush=True)
    for i in range(n):
        if rx.recv(10.0) is None:
            sys.exit(f"only {i} frames")
    print(json.dumps({"last": time.perf_counter()}), flush=True)
    rx.shutdown()
""")


def cross_process(n: int, rundir: str) -> dict[str, float]:
    env = {**os.environ, "FWBRIDGE_RUNTIME_DIR": rundir}
    rx = subprocess.Popen([sys.executable, "-c", _RECEIVER, str(n), "0"], env=env,
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    os.environ["FWBRIDGE_RUNTIME_DIR"] = rundir
    tx = can.Bus(interface="fwbridge", channel="shared:benchbus", tx_queue_size=4096)
    msgs = [can.Message(arbitration_id=0x200 + (i & 15), is_extended_id=False,
                        data=bytes([i & 255] * 8)) for i in range(n)]
    t0 = time.perf_counter()
    for msg in msgs:
        tx.send(msg)
    tx.wait_sent(60)
    rx.communicate(timeout=120)
    wall = time.perf_counter() - t0
    tx.shutdown()
    return {"fps": n / wall, "wall": wall}


def latency(n: int, rundir: str) -> list[float]:
    """One frame in flight: send, the other process echoes it, receive: round trip / 2."""
    env = {**os.environ, "FWBRIDGE_RUNTIME_DIR": rundir}
    echo = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, can
        b = can.Bus(interface="fwbridge", channel="shared:benchbus")
        print("ready", flush=True)
        for _ in range(int(sys.argv[1])):
            m = b.recv(10.0)
            b.send(can.Message(arbitration_id=m.arbitration_id + 1, is_extended_id=False,
                               data=m.data))
        b.shutdown()
    """), str(n)], env=env, stdout=subprocess.PIPE, text=True)
    assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
    bus = can.Bus(interface="fwbridge", channel="shared:benchbus")
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        bus.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=bytes([i & 255])))
        while True:
            m = bus.recv(10.0)
            assert m is not None
            if m.arbitration_id == 0x101:
                break
        out.append((time.perf_counter() - t0) / 2)
    echo.communicate(timeout=30)
    bus.shutdown()
    return sorted(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    n = 2000 if args.quick else 20000
    seconds = 0.2 if args.quick else 2.0
    print(f"# Shared CAN bus across processes, and CAN FD\n{machine()}\n")
    results: dict[str, Any] = {}
    rundir = tempfile.mkdtemp(prefix="fwbridge-bench-")
    os.chmod(rundir, 0o700)
    daemon = subprocess.Popen(
        [sys.executable, "-c", "from fwbridge.cli import main; main()", "can", "bus", "up",
         "benchbus", "--bitrate", "1000000", "--pacing", "afap"],
        env={**os.environ, "FWBRIDGE_RUNTIME_DIR": rundir}, stderr=subprocess.PIPE, text=True)
    try:
        os.environ["FWBRIDGE_RUNTIME_DIR"] = rundir
        from fwbridge.can_bus.daemon_dir import daemon_info

        while daemon_info("benchbus") is None:
            time.sleep(0.05)
        base = virtual(n)
        cp = cross_process(n, rundir)
        lat = latency(200 if args.quick else 1000, rundir)
    finally:
        daemon.terminate()
        daemon.communicate(timeout=10)
    p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99) - 1]
    print(f"## {n:,} frames, sender process -> daemon (afap, 1 Mbit/s) -> receiver process")
    print(table(["path", "frames/s", "x virtual"],
                [["python-can virtual, one process (baseline)", base, 1.0],
                 ["fwbridge shared bus, two processes", cp["fps"], cp["fps"] / base]]))
    print(f"\none frame in flight (echo between processes): latency p50 {p50 * 1e6:.0f} us, "
          f"p99 {p99 * 1e6:.0f} us")
    fdr = run_fd(seconds)
    rtf = fdr["bus_s"] / fdr["wall_s"]
    print(f"\n## CAN FD model: {NODES} nodes, 1 Mbit/s / 5 Mbit/s, 64-byte frames, BRS")
    print(table(["frames", "bus load", "wall s", "frames/s", "x real time"],
                [[int(fdr["frames"]), f"{100 * fdr['load']:.1f} %", fdr["wall_s"],
                  fdr["frames"] / fdr["wall_s"], rtf]]))
    goals = {"cross_process_ge_half_virtual": cp["fps"] >= 0.5 * base,
             "fd_realtime_factor_ge_5": rtf >= 5.0}
    verdict = {True: "met", False: "NOT met"}
    print(f"\nGoal cross-process >= 0.5x virtual: {cp['fps'] / base:.2f}x "
          f"({verdict[goals['cross_process_ge_half_virtual']]}).")
    print(f"Goal FD >= 5x real time: {rtf:.1f}x ({verdict[goals['fd_realtime_factor_ge_5']]}).")
    results.update(virtual_fps=base, cross_process=cp, latency_p50=p50, latency_p99=p99,
                   fd=fdr, goals=goals)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
