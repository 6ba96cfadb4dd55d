"""ROS 2 over Zenoh: odometry latency to a subscriber process, and fleet CPU scaling.

1. Latency: an odometry frame written to the pty -> the ``nav_msgs/Odometry``
   sample at a Zenoh subscriber in another process (through a Zenoh router in
   a third process, as with rmw_zenoh), against the sum of two baselines
   measured in the same run, interleaved in blocks: the raw pty (os.write of
   the 19 bytes on the master, select/os.read on the slave) and a raw Zenoh
   put -> the same subscriber, of the same payload size. Times are
   CLOCK_MONOTONIC, one clock for every process of the machine.
   Goal: p99 <= 2x the baseline's p99 sum.
2. Fleet scaling: CPU (user+sys) of one process bridging 1, 4 and 16
   simulated mecanum bases (their firmware in another process, 50 Hz
   odometry each, all published as odom and /tf), with 20 Hz cmd_vel to each
   robot from a third process; baseline: one base node without ROS 2.
   Goals: 16 robots <= 18x one robot; <= 1.5 % of a core per robot.

Usage: python -m bench.bench_ros2 [--samples N] [--cpu-seconds S] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import machine, table

ROOT = Path(__file__).resolve().parent.parent


def _free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def _child(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.bench_ros2", "--child", *args],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "ready" (or the sims' JSON)
    if not line:
        raise RuntimeError(f"child {args[0]} failed to start")
    proc.ready_line = line  # type: ignore[attr-defined]
    return proc


def _finish(proc: subprocess.Popen[str]) -> str:
    """Close the child's stdin (its signal to stop) and collect what it prints."""
    assert proc.stdin is not None and proc.stdout is not None
    if not proc.stdin.closed:
        proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(60)
    return out


def _quiet(_text: str) -> None:
    """The bench prints figures, not the node's connection messages."""


# -- children --------------------------------------------------------------------------------
def child_router(endpoint: str) -> None:
    import zenoh

    from fwbridge.bridge.ros2.participant import zenoh_config

    session = zenoh.open(zenoh_config([], [endpoint], mode="router"))
    print("ready", flush=True)
    sys.stdin.read()
    session.close()


def child_subscriber(endpoint: str) -> None:
    """Arrival times (monotonic ns) by attachment sequence number, per key kind."""
    import zenoh

    from fwbridge.bridge.ros2.participant import zenoh_config

    session = zenoh.open(zenoh_config([endpoint]))
    arrivals: dict[str, list[tuple[int, int]]] = {"raw": [], "odom": []}

    def on_sample(sample: Any) -> None:
        t = time.monotonic_ns()
        att = sample.attachment.to_bytes() if sample.attachment is not None else b"\0" * 8
        kind = "raw" if str(sample.key_expr).startswith("bench/") else "odom"
        arrivals[kind].append((struct.unpack_from("<q", att)[0], t))

    subs = [session.declare_subscriber("bench/raw", on_sample),
            session.declare_subscriber("0/robot1/odom/**", on_sample)]
    print("ready", flush=True)
    sys.stdin.read()
    for sub in subs:
        sub.undeclare()
    session.close()
    print(json.dumps(arrivals), flush=True)


def child_sims(count: int) -> None:
    """``count`` mecanum firmwares on ptys, in this one process."""
    from fwbridge.bridge.sim.endpoint import SimEndpoint
    from fwbridge.bridge.sim.pty_link import PtyLink

    endpoints, links = [], []
    for _ in range(count):
        ep = SimEndpoint("mecanum", pacing="realtime", step_ms=2)
        link = PtyLink(ep, supervisor=False)
        ep.start()
        endpoints.append(ep)
        links.append(link)
    print(json.dumps([link.path for link in links]), flush=True)
    sys.stdin.read()
    for ep, link in zip(endpoints, links):
        ep.stop()
        link.close()


def child_cmd_vel(endpoint: str, count: int) -> None:
    """20 Hz geometry_msgs/Twist to /robot1..N/cmd_vel, as a ROS 2 node would."""
    from fwbridge.bridge.ros2.participant import Participant
    from fwbridge.bridge.rosmsg import cdr, plain_data

    p = Participant(connect=[endpoint], wait=10)
    node = p.node("teleop")
    pubs = [node.publisher(f"/robot{k}/cmd_vel", "geometry_msgs/msg/Twist")
            for k in range(1, count + 1)]
    twist = plain_data.message_from_dict("geometry_msgs/msg/Twist",
                                     {"linear": {"x": 0.05}, "angular": {"z": 0.1}})
    data = cdr.serialize(twist, "geometry_msgs/msg/Twist")
    print("ready", flush=True)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    due = time.monotonic()
    while not stop.is_set():
        for pub in pubs:
            pub.publish_cdr(data)
        due += 0.05
        stop.wait(max(0.0, due - time.monotonic()))
    p.close()


# -- 1. latency ------------------------------------------------------------------------------
def _percentiles(ns: list[int]) -> dict[str, float]:
    us = sorted(v / 1000 for v in ns)
    return {"p50_us": statistics.median(us), "p99_us": us[min(len(us) - 1, int(0.99 * len(us)))],
            "max_us": us[-1], "n": len(us)}


def latency(samples: int, blocks: int = 20, gap: float = 0.002) -> dict[str, dict[str, float]]:
    import tty

    import zenoh

    from fwbridge.bridge.link.transports import PtyPair
    from fwbridge.bridge.node.base_node import BaseNode
    from fwbridge.bridge.node.config import parse_config
    from fwbridge.bridge.node.odometry import OdometryIntegrator
    from fwbridge.bridge.ros2.base import Ros2Base
    from fwbridge.bridge.ros2.config import Ros2Settings
    from fwbridge.bridge.ros2.participant import zenoh_config
    from fwbridge.bridge.rosmsg import cdr, topics
    from fwbridge.protocols import odom_frame

    frame = odom_frame.encode(odom_frame.OdomFrame(0.2, 0.0, 0.1, 12.5))
    rec = OdometryIntegrator().update(odom_frame.decode(frame), 0.0)
    assert rec is not None
    payload = cdr.serialize(topics.odometry_message(rec, stamp=time.time()),
                               "nav_msgs/msg/Odometry")
    endpoint = _free_endpoint()
    router = _child("router", endpoint)
    sub = _child("subscriber", endpoint)
    raw_pair, node_pair = PtyPair(), PtyPair()
    slave = os.open(raw_pair.slave_name, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(slave)
    raw_session = zenoh.open(zenoh_config([endpoint]))
    raw_pub = raw_session.declare_publisher("bench/raw")
    cfg = parse_config({"link": {"url": node_pair.path}, "control": {"rate_hz": 0.001},
                        "watchdog": {"garbage_timeout": 0}})
    node = BaseNode(cfg, on_event=None)
    node.start()
    bridge = Ros2Base(node, Ros2Settings(namespace="/robot1", connect=(endpoint,)), say=_quiet)
    bridge.start()
    assert bridge.participant is not None and bridge.participant.wait_open(10)
    time.sleep(1.0)  # routes settle
    pty_lat: list[int] = []
    raw_sent: dict[int, int] = {}
    node_sent: dict[int, int] = {}
    raw_seq = 0
    try:
        per = max(1, samples // blocks)
        for _block in range(blocks):
            for _ in range(per):  # raw pty: write on the master, read on the slave
                t0 = time.monotonic_ns()
                os.write(raw_pair.master_fd, frame)
                got = 0
                while got < len(frame):
                    select.select([slave], [], [])
                    got += len(os.read(slave, 4096))
                pty_lat.append(time.monotonic_ns() - t0)
                time.sleep(gap)
            for _ in range(per):  # raw zenoh: put -> the subscriber process
                raw_seq += 1
                raw_sent[raw_seq] = time.monotonic_ns()
                raw_pub.put(payload, attachment=struct.pack("<qqB16s", raw_seq, 0, 16, bytes(16)))
                time.sleep(gap)
            base = bridge.odom_pub.sequence  # the k-th frame written is published as base + k
            for k in range(1, per + 1):  # the bridge: pty -> node -> Odometry -> the subscriber
                node_sent[base + k] = time.monotonic_ns()
                os.write(node_pair.master_fd, frame)
                time.sleep(gap)
            end = time.monotonic() + 5.0
            while bridge.odom_pub.sequence < base + per and time.monotonic() < end:
                time.sleep(0.005)
            if bridge.odom_pub.sequence != base + per:
                raise RuntimeError("the node published a different number of samples than "
                                   "frames were written")
        time.sleep(1.0)
    finally:
        bridge.stop()
        node.stop()
        raw_pub.undeclare()
        raw_session.close()
        arrivals = json.loads(_finish(sub).strip().splitlines()[-1])
        _finish(router)
        os.close(slave)
        raw_pair.close()
        node_pair.close()
    zen = [t - raw_sent[s] for s, t in arrivals["raw"] if s in raw_sent]
    brd = [t - node_sent[s] for s, t in arrivals["odom"] if s in node_sent]
    return {"pty": _percentiles(pty_lat), "zenoh": _percentiles(zen),
            "bridge": _percentiles(brd), "lost": {"raw": len(raw_sent) - len(zen),
                                                  "bridge": len(node_sent) - len(brd)}}


# -- 2. fleet CPU ----------------------------------------------------------------------------
def cpu_seconds() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def fleet_cpu(count: int, seconds: float, ros: bool = True) -> dict[str, float]:
    from fwbridge.bridge.node.base_node import BaseNode
    from fwbridge.bridge.node.config import RobotConfig
    from fwbridge.bridge.ros2.base import Ros2Base
    from fwbridge.bridge.ros2.config import Ros2Settings
    from fwbridge.bridge.ros2.participant import Participant

    endpoint = _free_endpoint()
    router = _child("router", endpoint)
    sims = _child("sims", str(count))
    paths = json.loads(sims.ready_line)  # type: ignore[attr-defined]
    cmd = _child("cmd_vel", endpoint, str(count)) if ros else None
    participant = Participant(connect=[endpoint], wait=10) if ros else None
    nodes, bridges = [], []
    try:
        for k, path in enumerate(paths, 1):
            node = BaseNode(RobotConfig(url=path, rate_hz=50.0, source="bench"), on_event=None)
            node.start()
            nodes.append(node)
            if participant is not None:
                b = Ros2Base(node, Ros2Settings(namespace=f"/robot{k}", connect=(endpoint,)),
                             participant=participant, say=_quiet)
                b.start()
                bridges.append(b)
        time.sleep(2.0)  # warm-up: routes, first frames
        frames0 = sum(n.stats()["frames"] for n in nodes)
        cmd0 = sum(b.cmd_sub.received for b in bridges)
        c0, t0 = cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(), time.monotonic()
        frames = sum(n.stats()["frames"] for n in nodes) - frames0
        cmds = sum(b.cmd_sub.received for b in bridges) - cmd0
        published = sum(b.published for b in bridges)
    finally:
        for b in bridges:
            b.stop()
        for n in nodes:
            n.stop()
        if participant is not None:
            participant.close()
        for proc in (cmd, sims, router):
            if proc is not None:
                _finish(proc)
    wall = t1 - t0
    core = (c1 - c0) / wall
    return {"robots": count, "core_pct": 100 * core, "per_robot_pct": 100 * core / count,
            "odom_hz_each": frames / wall / count, "cmd_vel_hz_each": cmds / wall / count,
            "published": published}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--cpu-seconds", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", nargs="+", default=None)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        {"router": lambda: child_router(rest[0]),
         "subscriber": lambda: child_subscriber(rest[0]),
         "sims": lambda: child_sims(int(rest[0])),
         "cmd_vel": lambda: child_cmd_vel(rest[0], int(rest[1]))}[kind]()
        return
    if args.quick:
        args.samples, args.cpu_seconds = 1000, 5.0
    print("# ROS 2 over Zenoh: odometry latency and fleet CPU\n")
    print(machine() + "\n")
    lat = latency(args.samples)
    base_p99 = lat["pty"]["p99_us"] + lat["zenoh"]["p99_us"]
    base_p50 = lat["pty"]["p50_us"] + lat["zenoh"]["p50_us"]
    print(f"## Latency: odometry frame on the pty -> Odometry at a subscriber process "
          f"({lat['bridge']['n']} samples)\n")
    print(table(["path", "p50 µs", "p99 µs", "max µs", "samples"], [
        ["raw pty write -> read (baseline a)", lat["pty"]["p50_us"], lat["pty"]["p99_us"],
         lat["pty"]["max_us"], lat["pty"]["n"]],
        ["raw Zenoh put -> subscriber, same size (baseline b)", lat["zenoh"]["p50_us"],
         lat["zenoh"]["p99_us"], lat["zenoh"]["max_us"], lat["zenoh"]["n"]],
        ["baseline a + b", base_p50, base_p99, "", ""],
        ["bridge: pty -> node -> Odometry -> subscriber", lat["bridge"]["p50_us"],
         lat["bridge"]["p99_us"], lat["bridge"]["max_us"], lat["bridge"]["n"]],
    ]))
    ratio = lat["bridge"]["p99_us"] / base_p99
    print(f"\nbridge p99 / baseline p99 = {ratio:.2f}x (goal <= 2x: "
          f"{'met' if ratio <= 2 else 'NOT met'}); lost: {lat['lost']}\n")
    print(f"## Fleet CPU: one process bridging N simulated bases ({args.cpu_seconds:g} s each)\n")
    rows = [fleet_cpu(1, args.cpu_seconds, ros=False)]
    rows += [fleet_cpu(n, args.cpu_seconds) for n in (1, 4, 16)]
    print(table(["robots", "ROS 2", "% of a core", "% per robot", "odom Hz each",
                 "cmd_vel Hz each"],
                [[r["robots"], "no (baseline)" if i == 0 else "yes", r["core_pct"],
                  r["per_robot_pct"], r["odom_hz_each"], r["cmd_vel_hz_each"]]
                 for i, r in enumerate(rows)]))
    one, sixteen = rows[1]["core_pct"], rows[3]["core_pct"]
    scale = sixteen / one if one else float("inf")
    per = rows[3]["per_robot_pct"]
    marginal = (sixteen - one) / 15
    print(f"\n16 robots / 1 robot = {scale:.1f}x (goal <= 18x: "
          f"{'met' if scale <= 18 else 'NOT met'}); {per:.2f} % of a core per robot at 16 "
          f"(goal <= 1.5 %: {'met' if per <= 1.5 else 'NOT met'}); each robot past the first "
          f"adds {marginal:.2f} %; the session's fixed cost shows at 1 robot: ROS 2 adds "
          f"{rows[1]['core_pct'] - rows[0]['core_pct']:.2f} % of a core to one base node")


if __name__ == "__main__":
    main()
