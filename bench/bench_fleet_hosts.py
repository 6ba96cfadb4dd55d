"""A fleet across hosts (network namespaces, as tests/test_fleet_hosts.py): CPU, latency, loss.

1. CPU per robot of ``fwbridge fleet N`` (one process) at 1, 4, 16, 64 robots,
   against N processes of ``fwbridge fleet 1`` (1, 4, 16), each robot with
   20 Hz cmd_vel from an operator process and its 50 Hz odometry (the fleet's
   command rate; the simulated firmware answers each command) published;
   CPU is user+sys from /proc over a window after a warm-up. One host, one
   router. Goal: <= 1.5 % of a core per robot from 4 robots up, linear.
2. Latency across the namespace link (host A: a router and ``fleet 4``; host
   B: a router and the probes): odometry published on A -> its sample at a
   subscriber on B, and cmd_vel published on B -> its sample at a subscriber
   on A (the path the robots' subscriptions take), each from the attachment's
   source timestamp (one clock: the hosts are namespaces of one machine);
   baseline in the same run: raw Zenoh puts of the same size between the
   same hosts through the same routers. Goal: p99 <= 2x raw.
3. Loss (``--soak-minutes M``, default 10; ``--quick``: 1): a run of M minutes
   with one 5 s partition of A-B and one restart of A's router: odometry
   messages missing at B per robot (gaps in the attachments' sequence
   numbers) outside the windows of the faults (the fault plus 3 s).
   Goal: 0 outside the windows. Also the fleet's peak RSS at the start and
   the end, for a host that stays away.

Needs root (network namespaces); without, it says so and measures nothing.

Usage: python -m bench.bench_fleet_hosts [--quick] [--soak-minutes M]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import machine, table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import fwbridge_argv  # noqa: E402
from tests.netns import Hosts, Lines, unavailable  # noqa: E402

FW = fwbridge_argv()
OPERATOR = [sys.executable, str(ROOT / "tests" / "fleet_operator.py")]
ME = [sys.executable, "-m", "bench.bench_fleet_hosts", "--child"]
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """user + sys seconds of a process and its reaped children."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICK


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# -- children ----------------------------------------------------------------------------
def child_probe(endpoint: str, key: str, seconds: float) -> None:
    """Ages (ms, from the attachment's source timestamp) and sequence gaps per key."""
    import zenoh

    from fwbridge.bridge.ros2.participant import zenoh_config

    s = zenoh.open(zenoh_config([endpoint], mode="peer"))
    ages: list[float] = []
    seqs: dict[str, list[tuple[float, int]]] = {}
    lock = threading.Lock()

    def on_sample(sample: Any) -> None:
        now = time.time_ns()
        att = sample.attachment.to_bytes() if sample.attachment is not None else b""
        if len(att) < 16:
            return
        seq, stamp = struct.unpack_from("<qq", att)
        k = str(sample.key_expr).split("/")[1]
        with lock:
            ages.append((now - stamp) / 1e6)
            seqs.setdefault(k, []).append((time.monotonic(), seq))

    sub = s.declare_subscriber(key, on_sample)
    print("ready", file=sys.stderr, flush=True)
    time.sleep(seconds)
    sub.undeclare()
    s.close()
    with lock:
        print(json.dumps({"ages": ages, "seqs": seqs}), flush=True)


def child_raw(endpoint: str, key: str, size: int, rate: float, seconds: float) -> None:
    """Raw Zenoh puts of ``size`` bytes with an rmw_zenoh-like attachment."""
    import zenoh

    from fwbridge.bridge.ros2.participant import zenoh_config

    s = zenoh.open(zenoh_config([endpoint], mode="peer"))
    pub = s.declare_publisher(key)
    print("ready", file=sys.stderr, flush=True)
    payload = bytes(size)
    end = time.monotonic() + seconds
    seq = 0
    next_at = time.monotonic()
    while time.monotonic() < end:
        seq += 1
        pub.put(payload, attachment=struct.pack("<qqB16s", seq, time.time_ns(), 16, bytes(16)))
        next_at += 1 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
    s.close()


# -- 1. CPU --------------------------------------------------------------------------------
def _start(net: Hosts, host: str, argv: list[str], ready: str, **kw: Any) -> Any:
    proc = net.popen(host, argv, stderr=subprocess.PIPE, cwd=ROOT, **kw)
    Lines(proc.stderr).wait_for(ready, 120)
    return proc


def cpu_scaling(counts: list[int], per_process: list[int], warm: float,
                window: float) -> list[list[Any]]:
    rows = []
    with Hosts("a") as net:
        router = "tcp/127.0.0.1:7447"
        _start(net, "a", [*FW, "ros2", "router"], "router: listening")
        for mode, sizes in (("one process", counts), ("a process each", per_process)):
            for n in sizes:
                if mode == "one process":
                    fleets = [_start(net, "a", [*FW, "fleet", str(n), "--connect", router,
                                                "--duration", "600"], "simulated bases")]
                else:
                    fleets = [_start(net, "a", [*FW, "fleet", "1", "--first", str(k),
                                                "--connect", router, "--duration", "600"],
                                     "simulated bases") for k in range(1, n + 1)]
                op = net.popen("a", [*OPERATOR, router, "1", str(n), "600"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
                assert op.stdin is not None and op.stdout is not None
                op.stdin.write("scale 1\n")
                op.stdin.flush()
                time.sleep(warm)
                c0 = sum(_cpu(f.pid) for f in fleets)
                t0 = time.monotonic()
                first = json.loads(op.stdout.readline())
                time.sleep(window)
                c1 = sum(_cpu(f.pid) for f in fleets)
                t1 = time.monotonic()
                op.stdin.write("quit\n")
                op.stdin.flush()
                lines = [json.loads(line) for line in op.stdout.read().splitlines() if line]
                last = lines[-1] if lines else first
                odom_hz = (sum(last["n"].values()) - sum(first["n"].values())) / max(
                    1e-9, last["t"] - first["t"]) / n
                core = 100 * (c1 - c0) / (t1 - t0)
                rows.append([mode, n, round(core, 1), round(core / n, 2), round(odom_hz, 1)])
                print(f"  {mode}, {n} robots: {core / n:.2f} % of a core per robot",
                      file=sys.stderr, flush=True)
                for f in fleets:
                    f.terminate()
                for f in fleets:
                    f.wait(60)
                op.wait(30)
    return rows


# -- 2. latency, 3. loss -------------------------------------------------------------------
class TwoHosts:
    """Host A: a router and ``fleet N``; host B: a router and the operator, 20 Hz cmd_vel."""

    def __init__(self, net: Hosts, robots: int, lifetime: float) -> None:
        self.net, self.robots = net, robots
        self.ab = net.link("a", "b")
        self.b_ep = f"tcp/{self.ab.addr_b}:7447"
        self.a_ep = "tcp/127.0.0.1:7447"
        self.lifetime = lifetime
        self.router_b = _start(net, "b", [*FW, "ros2", "router", "--listen", self.b_ep],
                               "router: listening")
        self.router_a = self.start_router_a()
        self.fleet = _start(net, "a", [*FW, "fleet", str(robots), "--connect", self.a_ep,
                                       "--duration", str(lifetime)], "simulated bases")
        self.op = net.popen("b", [*OPERATOR, self.b_ep, "1", str(robots), str(lifetime)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert self.op.stdin is not None
        self.op.stdin.write("scale 1\n")
        self.op.stdin.flush()

    def start_router_a(self) -> Any:
        return _start(self.net, "a", [*FW, "ros2", "router", "--listen", self.a_ep,
                                      "--connect", self.b_ep], "router: listening")

    def probe(self, host: str, key: str, seconds: float) -> Any:
        ep = self.b_ep if host == "b" else self.a_ep
        return _start(self.net, host, [*ME, "probe", ep, key, str(seconds)], "ready",
                      stdout=subprocess.PIPE, text=True)

    def raw(self, host: str, key: str, size: int, rate: float, seconds: float) -> Any:
        ep = self.b_ep if host == "b" else self.a_ep
        return _start(self.net, host, [*ME, "raw", ep, key, str(size), str(rate), str(seconds)],
                      "ready")


def _collect(proc: Any) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=120)
    return dict(json.loads(out.splitlines()[-1]))


def latency(seconds: float) -> list[list[Any]]:
    rows = []
    with Hosts("a", "b") as net:
        w = TwoHosts(net, 4, seconds + 60)
        time.sleep(3)  # the routes settle (figures, not a readiness wait)
        probes = {
            "odometry A -> B": w.probe("b", "0/*/odom/**", seconds),
            "raw put A -> B": w.probe("b", "bench/*/raw", seconds),
            "cmd_vel B -> A": w.probe("a", "0/*/cmd_vel/**", seconds),
            "raw put B -> A": w.probe("a", "bench/*/back", seconds),
        }
        w.raw("a", "bench/a/raw", 760, 200.0, seconds)  # an Odometry's CDR size, 4 x 50 Hz
        w.raw("b", "bench/b/back", 52, 80.0, seconds)  # a Twist's, 4 x 20 Hz
        results = {name: _collect(p) for name, p in probes.items()}
    for name, res in results.items():
        ages = res["ages"]
        rows.append([name, len(ages), round(_pct(ages, 0.5), 2), round(_pct(ages, 0.99), 2)])
    return rows


def soak(minutes: float) -> tuple[list[list[Any]], list[str]]:
    seconds = minutes * 60
    notes = []
    with Hosts("a", "b") as net:
        w = TwoHosts(net, 4, seconds + 60)
        time.sleep(3)
        probe = w.probe("b", "0/*/odom/**", seconds)
        t0 = time.monotonic()
        rss0 = _rss_kb(w.fleet.pid)
        windows = []
        time.sleep(seconds / 3)
        start = time.monotonic()
        net.set_link(w.ab, up=False)
        time.sleep(5)
        net.set_link(w.ab, up=True)
        windows.append((start, time.monotonic() + 3))
        time.sleep(seconds / 3 - 5)
        start = time.monotonic()
        w.router_a.terminate()
        w.router_a.wait(30)
        w.router_a = w.start_router_a()
        windows.append((start, time.monotonic() + 3))
        time.sleep(max(0.0, t0 + seconds - time.monotonic()))
        rss1 = _rss_kb(w.fleet.pid)
        alive = w.fleet.poll() is None
        res = _collect(probe)
    rows = []
    for robot, seqs in sorted(res["seqs"].items(), key=lambda kv: int(kv[0][5:])):
        lost_in = lost_out = 0
        for (_t0, s0), (t1, s1) in itertools.pairwise(seqs):
            gap = max(0, s1 - s0 - 1)
            inside = any(a <= t1 <= b for a, b in windows)
            lost_in += gap if inside else 0
            lost_out += 0 if inside else gap
        rows.append([robot, len(seqs), lost_in, lost_out])
    notes.append(f"fleet RSS {rss0 / 1024:.1f} MB at the start, {rss1 / 1024:.1f} MB after "
                 f"{minutes:g} min; the fleet process {'survived' if alive else 'DIED'}")
    return rows, notes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--soak-minutes", type=float, default=None)
    ap.add_argument("--child", nargs="+", default=None)
    args = ap.parse_args()
    if args.child:
        role, *rest = args.child
        if role == "probe":
            child_probe(rest[0], rest[1], float(rest[2]))
        elif role == "raw":
            child_raw(rest[0], rest[1], int(rest[2]), float(rest[3]), float(rest[4]))
        return
    print("A fleet across hosts (network namespaces): CPU, latency, loss")
    print(machine())
    why = unavailable()
    if why is not None:
        print(f"not measured: {why}")
        return
    quick = args.quick
    counts, each = ([1, 4, 16], [1, 4]) if quick else ([1, 4, 16, 64], [1, 4, 16])
    rows = cpu_scaling(counts, each, warm=3 if quick else 5, window=5 if quick else 15)
    print("\n1. CPU per robot, 20 Hz cmd_vel and odometry each, one host\n")
    print(table(["processes", "robots", "% of a core", "% per robot", "odom Hz each at B"],
                rows))
    print("\n2. Latency across the A-B link, ms from the source timestamp\n")
    lat = latency(10 if quick else 30)
    print(table(["path", "samples", "p50 ms", "p99 ms"], lat))
    by = {r[0]: r for r in lat}
    for msg, raw in (("odometry A -> B", "raw put A -> B"), ("cmd_vel B -> A", "raw put B -> A")):
        ratio = by[msg][3] / by[raw][3] if by[raw][3] else float("nan")
        print(f"{msg}: p99 {ratio:.2f}x raw (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'})")
    minutes = args.soak_minutes if args.soak_minutes is not None else (1 if quick else 10)
    print(f"\n3. Loss over {minutes:g} min with a 5 s partition and a restart of A's router\n")
    loss, notes = soak(minutes)
    print(table(["robot", "odometry at B", "lost in fault windows", "lost outside"], loss))
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
