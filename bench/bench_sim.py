"""Simulated endpoints: how fast the mecanum world runs, and the link's round-trip latency.

- Real-time factor (simulated seconds per wall second) of one mecanum robot
  at 1 ms steps in ``afap`` pacing: the world alone (a command given once
  on the ether, odometry sent to nobody), the world on a pty with a host
  thread (same process, so it shares the interpreter lock) reading every
  frame and commanding at 50 Hz of simulated time, and the ``sim://`` URL
  read in-process.
- Round trip host -> pty -> simulated firmware -> host, p50/p99: a 15-byte
  command frame written to the pty, echoed by the loopback firmware through
  the Webots serial emulation (``afap`` and ``realtime`` pacing), next to a
  raw pty echo (a process copying the master back to itself) in the same
  run. Every server is its own process, as a firmware would be.

Goals: >= 50x real time without the link; p99 within 2x
the raw echo.

Usage: python -m bench.bench_sim [--quick] [--seconds S] [--trips N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import statistics
import sys
import threading
import time
import tty
from multiprocessing.connection import Connection
from typing import Any

import serial

from bench.common import machine, table
from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.sim import World
from fwbridge.bridge.sim.endpoint import HostPort, SimEndpoint
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.bridge.sim.webots_serial import ROBOT_LINK
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame

CMD = cmd_frame.encode(CmdFrame(0.3, 0.1, 0.5))


# -- real-time factor ------------------------------------------------------------------
def rtf_world(seconds: float) -> tuple[float, dict[str, Any]]:
    """The world alone: mecanum firmware + body, one command, 1 ms steps."""
    world = World(1)
    model = MecanumBase(MecanumParams(cmd_timeout_ms=0))  # one command drives the whole run
    world.add_robot(model)
    host = HostPort(world, "host", ROBOT_LINK)
    world.pre_step.append(host.pre_step)
    host.write(CMD)
    host.receiver.disable()  # nobody listens: odometry frames are sent into the void
    steps = round(seconds * 1000)
    t0 = time.perf_counter()
    step = world.step
    for _ in range(steps):
        step()
    wall = time.perf_counter() - t0
    return seconds / wall, {
        "steps": steps,
        "us_per_step": wall / steps * 1e6,
        "odom_sent": model.counters.odom_sent,
    }


def _pty_host(path: str, frames: int, done: threading.Event, out: dict[str, int]) -> None:
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    got = 0
    buf = b""
    os.write(fd, CMD)
    try:
        while got < frames:
            data = os.read(fd, 4096)
            buf += data
            n = len(buf) // odom_frame.SIZE
            buf = buf[n * odom_frame.SIZE :]
            for _ in range(n):
                got += 1
                os.write(fd, CMD)  # a command per frame: 50 Hz of simulated time
    finally:
        out["frames"] = got
        os.close(fd)
        done.set()


def rtf_pty(seconds: float) -> tuple[float, dict[str, Any]]:
    """The world on a pty in fast pacing, a host thread reading and commanding."""
    endpoint = SimEndpoint("mecanum", pacing="afap")
    link = PtyLink(endpoint, supervisor=False)
    frames = round(seconds * 50)
    done = threading.Event()
    out: dict[str, int] = {}
    host = threading.Thread(target=_pty_host, args=(link.path, frames, done, out), daemon=True)
    host.start()
    assert link.wait_for_host()
    t0 = time.perf_counter()
    endpoint.start()
    done.wait()
    wall = time.perf_counter() - t0
    sim_s = endpoint.clock.millis() / 1000
    endpoint.stop()
    link.close()
    st = endpoint.status()
    return sim_s / wall, {
        "frames_read": out.get("frames", 0),
        "commands": st["firmware"]["cmd_applied"],
    }


def rtf_url(seconds: float) -> tuple[float, dict[str, Any]]:
    """``sim://mecanum?pacing=afap`` read in-process (simulated time advances inside read)."""
    offer_sim()
    port = serial.serial_for_url("sim://mecanum?pacing=afap", timeout=None)
    port.write(CMD)
    frames = round(seconds * 50)
    t0 = time.perf_counter()
    for _ in range(frames):
        port.read(odom_frame.SIZE)
        port.write(CMD)
    wall = time.perf_counter() - t0
    sim_s = port.endpoint.clock.millis() / 1000
    port.close()
    return sim_s / wall, {"frames_read": frames}


# -- latency --------------------------------------------------------------------------
def serve_sim_echo(pacing: str, conn: Connection) -> None:
    """Child process: the loopback firmware on a pty until told to stop."""
    endpoint = SimEndpoint("echo", pacing=pacing)
    link = PtyLink(endpoint, supervisor=False)
    endpoint.start()
    conn.send(link.path)
    conn.recv()
    endpoint.stop()
    link.close()


def serve_raw_echo(conn: Connection) -> None:
    """Child process: a pty whose master echoes every byte straight back."""
    pair = PtyPair()
    conn.send(pair.path)
    fd = pair.master_fd
    stop_fd = conn.fileno()
    while True:
        ready, _, _ = select.select([fd, stop_fd], [], [])
        if stop_fd in ready:
            break
        data = os.read(fd, 4096)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    pair.close()


def round_trips(path: str, trips: int, warmup: int = 50) -> list[float]:
    """Write a command frame, wait for it back; microseconds per round trip."""
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    out = []
    try:
        for i in range(warmup + trips):
            t0 = time.perf_counter_ns()
            os.write(fd, CMD)
            got = 0
            while got < len(CMD):
                got += len(os.read(fd, len(CMD) - got))
            if i >= warmup:
                out.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        os.close(fd)
    return out


def measure(target: Any, args: tuple[Any, ...], trips: int) -> list[float]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    try:
        path = parent.recv()
        return round_trips(path, trips)
    finally:
        parent.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="simulated seconds per RTF run")
    ap.add_argument("--trips", type=int, default=3000, help="round trips per latency run")
    ap.add_argument("--quick", action="store_true", help="5 s runs, 500 round trips")
    args = ap.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    trips = 500 if args.quick else args.trips
    print(f"# Simulated endpoints: mecanum world and link latency\n{machine()}\n")

    rtf: dict[str, Any] = {}
    rows = []
    for label, fn in (
        ("world alone (no link)", rtf_world),
        ("world on a pty, host thread", rtf_pty),
        ("sim:// URL, in-process", rtf_url),
    ):
        factor, extra = fn(seconds)
        rtf[label] = {"rtf": factor, **extra}
        rows.append([label, f"{factor:.1f}x", f"{seconds:g} s", "yes" if factor >= 50 else "no"])
    print(f"## Real-time factor, fast pacing, 1 ms steps ({seconds:g} simulated s each)")
    print(table(["configuration", "real-time factor", "simulated", ">= 50x"], rows))
    us = rtf["world alone (no link)"]["us_per_step"]
    print(f"\nworld alone: {us:.1f} µs per step (one robot: firmware, four motors, ether)\n")

    lat: dict[str, Any] = {}
    runs = (
        ("raw pty echo (baseline)", serve_raw_echo, ()),
        ("sim echo firmware, afap", serve_sim_echo, ("afap",)),
        ("sim echo firmware, realtime 1 ms", serve_sim_echo, ("realtime",)),
    )
    for label, target, extra_args in runs:
        values = measure(target, extra_args, trips)
        lat[label] = {
            "p50_us": pct(values, 0.50),
            "p99_us": pct(values, 0.99),
            "mean_us": statistics.fmean(values),
            "trips": len(values),
        }
    raw = lat["raw pty echo (baseline)"]
    rows = []
    for label, v in lat.items():
        rows.append(
            [
                label,
                f"{v['p50_us']:.0f}",
                f"{v['p99_us']:.0f}",
                f"{v['mean_us']:.0f}",
                f"{v['p99_us'] / raw['p99_us']:.2f}",
            ]
        )
    print(f"## Round trip host -> pty -> firmware -> host, 15-byte frames ({trips} trips)")
    print(table(["path", "p50 µs", "p99 µs", "mean µs", "p99 / raw p99"], rows))
    fast = lat["sim echo firmware, afap"]
    ok = fast["p99_us"] <= 2 * raw["p99_us"]
    world_ok = rtf["world alone (no link)"]["rtf"] >= 50
    print(
        f"\ngoals: world >= 50x real time: {'met' if world_ok else 'NOT met'}; "
        f"afap p99 within 2x raw echo p99: {'met' if ok else 'NOT met'} "
        f"({fast['p99_us'] / raw['p99_us']:.2f}x)"
    )
    print("realtime pacing delivers a packet after the step it was sent in, so its round")
    print("trip is two 1 ms steps plus the pty: it is paced by design, not slow.")
    return {"rtf": rtf, "latency": lat, "goals": {"rtf_50x": world_ok, "p99_2x": ok}}


if __name__ == "__main__":
    main(sys.argv[1:])
