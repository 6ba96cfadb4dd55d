"""Soak: the demo robot, the robot fish and the CAN simulator together, with faults, for N minutes.

In one process, all in real time:

- base: the simulated mecanum base (``SimEndpoint`` + ``PtyLink``) with the
  mobile-base node (``BaseNode``) on its pty, driven by a loop that steers
  on fresh odometry; link faults (byte corruption, by default) both ways;
- fish: the simulated robot fish on its own pty, in free mode (its seven
  CAN servos busy on the fish's own bus), queried over the action-frame
  link with acknowledgement and retransmission; the same link faults
  (skipped, with a note, when the fish model is not there);
- can: the CAN simulator in realtime pacing with a main controller and
  four actuator modules (``NodeRunner``), one module with bit errors.

Every ``--every`` seconds one row: elapsed time, frames and error counters
of each link, resident memory (``/proc/self/statm``) and CPU seconds
(``getrusage``). At the end a summary table; the exit status is 0 when no
component died and resident memory grew less than ``--rss-limit`` MB after
the first row (the warm-up), 1 otherwise.

Usage: python -m bench.soak --minutes N [--every S] [--faults SPEC] [--can-ber R]
                            [--rss-limit MB] [--seed N] [--no-fish]

``--minutes 0.2`` is a quick self-check. Not a CI test: a long run is the
point (hours, to see memory and CPU stay flat).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import resource
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common import machine, table
from fwbridge.bridge.node.base_node import BaseNode, NodeEvent
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.models.mecanum import MecanumBase
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import ActuatorModule, Kind, MainController, NodeRunner, Status

MB = 1 << 20


def rss_bytes() -> int:
    """Resident set size now (not the peak)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


# -- the mobile base -------------------------------------------------------------------------
#: (vx, vy, wz) the base cycles through, a few seconds each: circles, strafes, reverse arcs.
PATTERN = ((0.25, 0.0, 0.6), (0.0, 0.2, 0.0), (-0.2, 0.0, -0.5), (0.15, -0.15, 0.3))


class BaseRig:
    """Mecanum firmware on a pty, the base node on it, a driver on the node's odometry."""

    name = "base"

    def __init__(self, faults: FaultSpec, phase: float = 4.0) -> None:
        self.endpoint = SimEndpoint(MecanumBase(), pacing="realtime", faults=faults)
        self.link = PtyLink(self.endpoint, supervisor=False)
        config = RobotConfig(sim_url=self.link.path, use_sim=True, rate_hz=50.0,
                             source="<soak>")
        self.events: Counter[str] = Counter()
        self._latest: Odometry | None = None
        self.node = BaseNode(config, on_odometry=self._on_odometry, on_event=self._on_event)
        self.phase = phase
        self.requests = 0
        self._stop = threading.Event()
        self._driver = threading.Thread(target=self._drive, name="soak-base-driver", daemon=True)
        self.error: BaseException | None = None

    def _on_odometry(self, odom: Odometry) -> None:
        self._latest = odom

    def _on_event(self, ev: NodeEvent) -> None:
        self.events[ev.kind] += 1

    def start(self) -> None:
        self.endpoint.start()
        self.node.start()
        self._driver.start()

    def _drive(self) -> None:
        """Steer on fresh odometry only: if it stops, so do the requests (the watchdog acts)."""
        seq = -1
        t0 = time.monotonic()
        try:
            while not self._stop.wait(0.02):
                odom = self._latest
                if odom is None or odom.seq == seq:
                    continue
                seq = odom.seq
                k = int((time.monotonic() - t0) / self.phase) % len(PATTERN)
                self.node.request(*PATTERN[k])
                self.requests += 1
        except BaseException as exc:  # reported as a dead component
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._driver.join(2.0)
        self.node.stop()
        self.endpoint.stop()
        self.link.close()

    def problem(self) -> str | None:
        if self.error is not None:
            return f"driver failed: {self.error!r}"
        if not self.node.running:
            return f"node stopped: {self.node.error!r}"
        if self.endpoint.error is not None or not self.endpoint.running:
            return f"simulation stopped: {self.endpoint.error!r}"
        return None

    def counters(self) -> dict[str, Any]:
        st = self.node.stats()
        sim = self.endpoint.status()
        faults = sim.get("faults", {})
        injected = sum(v["corrupted"] + v["dropped"] + v["inserted"] for v in faults.values())
        return {"commands": st["commands"], "odometry": st["odometry"],
                "checksum_errors": st["checksum_errors"], "discarded": st["discarded"],
                "dropped": st["odometry_dropped"], "watchdog": self.events["watchdog"],
                "garbage": self.events["garbage"], "reconnects": st["reconnects"],
                "injected": injected, "pending": self.node.core.receiver.pending}


# -- the fish ----------------------------------------------------------------------------------
def fish_available() -> str | None:
    """None when the fish can run here, else why not."""
    for module in ("fwbridge.bridge.sim.models.fish", "fwbridge.bridge.link.action_link"):
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} not found"
        except ImportError as exc:
            return f"{module}: {exc}"
    return None


class FishRig:
    """The robot fish on a pty, in free mode, queried over acknowledged action frames."""

    name = "fish"

    def __init__(self, faults: FaultSpec, seed: int, period: float = 0.25) -> None:
        from fwbridge.bridge.link.action_link import ActionLink
        from fwbridge.bridge.link.transports import open_link
        from fwbridge.bridge.sim.models.fish import FishParams, RobotFish

        self.model = RobotFish(FishParams(seed=seed))
        self.endpoint = SimEndpoint(self.model, pacing="realtime", faults=faults)
        self.link = PtyLink(self.endpoint, supervisor=False)
        self.port = open_link(self.link.path, timeout=0.05)
        self.action = ActionLink(self.port, timeout=0.2, retries=5)
        self.period = period
        self.exchanges = Counter[str]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-fish-host", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self.endpoint.start()
        self._thread.start()

    def _run(self) -> None:
        from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand

        free = ActionFrame(0, InstructionType.CONTROL_PHONE, SubCommand.ENTER_FREE_MODE)
        queries = (SubCommand.QUERY_ROBOT_INFO, SubCommand.QUERY_CAN_ERROR_RATE,
                   SubCommand.QUERY_SERVO_INFO)
        try:
            in_free_mode = False
            k = 0
            while not self._stop.wait(self.period):
                if not in_free_mode:
                    ex = self.action.send(free)
                    in_free_mode = ex.delivered
                    self.exchanges["ok" if ex.delivered else "failed"] += 1
                    continue
                sub = queries[k % len(queries)]
                k += 1
                ex = self.action.send(ActionFrame(0, InstructionType.READ_PC, sub),
                                      want_result=True)
                if ex.delivered and ex.result is not None:
                    self.exchanges["ok"] += 1
                else:
                    self.exchanges["failed"] += 1
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(3.0)
        self.endpoint.stop()
        self.port.close()
        self.model.close()
        self.link.close()

    def problem(self) -> str | None:
        if self.error is not None:
            return f"host failed: {self.error!r}"
        if not self._thread.is_alive():
            return "host thread ended"
        if self.endpoint.error is not None or not self.endpoint.running:
            return f"simulation stopped: {self.endpoint.error!r}"
        return None

    def counters(self) -> dict[str, Any]:
        arq = self.action.stats
        can: dict[str, Any] = {"frames": 0, "error_frames": 0}
        bus = getattr(self.model, "main_bus", None)
        if bus is not None and getattr(self.model, "buses", None):
            with bus.sim.lock:
                can = bus.sim.stats()
        return {"ok": self.exchanges["ok"], "failed": self.exchanges["failed"],
                "retransmitted": arq["retransmitted"], "naks": arq["naks"],
                "missing_results": arq["missing_results"],
                "can_frames": can["frames"], "can_errors": can["error_frames"]}


# -- the CAN simulator -------------------------------------------------------------------------
class CanRig:
    """Controller and four modules on a realtime simulated bus; one module with bit errors."""

    name = "can"

    def __init__(self, ber: float, seed: int, faulty: int = 2) -> None:
        self.channel = f"soak-{os.getpid()}"
        self.buses: list[FwBridgeBus] = []
        ctrl_bus = self._bus("controller")
        self.modules = []
        kinds = (Kind.SERVO, Kind.SERVO_MOTOR, Kind.STEPPER, Kind.SERVO)
        for k, kind in enumerate(kinds, start=1):
            extra = {"bit_error_rate": ber, "fault_seed": seed} if k == faulty and ber else {}
            self.modules.append(ActuatorModule(self._bus(f"module{k}", **extra), k, kind))
        self.faulty = faulty
        self.ctrl = MainController(ctrl_bus, range(1, len(kinds) + 1))
        self.sim = ctrl_bus.sim
        self.runner = NodeRunner([self.ctrl, *self.modules], period=0.002, sim=self.sim,
                                 on_step=self._targets)

    def _bus(self, name: str, **kwargs: Any) -> FwBridgeBus:
        bus = FwBridgeBus(self.channel, pacing="realtime", name=name, **kwargs)
        self.buses.append(bus)
        return bus

    def _targets(self, now: float) -> None:
        for m in self.modules:  # a slow sweep, each module out of phase
            angle = 60 * math.sin(0.5 * now + m.module_id)
            self.ctrl.set_target(m.module_id, int(angle), 50)

    def start(self) -> None:
        self.runner.start()

    def stop(self) -> None:
        self.runner.stop()
        for bus in reversed(self.buses):
            bus.shutdown()

    def problem(self) -> str | None:
        if self.runner.error is not None:
            return f"node runner failed: {self.runner.error!r}"
        if not self.runner.running:
            return "node runner ended"
        return None

    def counters(self) -> dict[str, Any]:
        with self.sim.lock:
            st = self.sim.stats()
        health = Counter(h.status for h in self.ctrl.health.values())
        bad = next(n for n in st["nodes"] if n["name"] == f"module{self.faulty}")
        return {"frames": st["frames"], "error_frames": st["error_frames"],
                "bus_offs": sum(n["bus_offs"] for n in st["nodes"]),
                "faulty_tec": bad["tec"], "faulty_state": bad["state"].lower(),
                "ok": health[Status.OK], "degraded": health[Status.DEGRADED],
                "silent": health[Status.SILENT], "health_events": len(self.ctrl.events)
                + self.ctrl.events_dropped, "feedback": sum(
                    h.frames for h in self.ctrl.health.values())}


# -- the run -----------------------------------------------------------------------------------
@dataclass
class Sample:
    t: float
    rss: int
    cpu: float
    base: dict[str, Any]
    fish: dict[str, Any] | None
    can: dict[str, Any]


@dataclass
class Outcome:
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


HEADER = (f"{'t s':>7} | {'base cmd':>8} {'odom':>7} {'csum':>5} {'disc':>6} {'wdog':>4} | "
          f"{'fish ok':>7} {'fail':>4} {'retx':>5} {'canfr':>7} | "
          f"{'can fr':>8} {'err':>6} {'boff':>4} {'tec':>4} {'health':>10} | "
          f"{'RSS MB':>7} {'CPU s':>7}")


def row(s: Sample) -> str:
    b, f, c = s.base, s.fish, s.can
    fish = (f"{f['ok']:>7} {f['failed']:>4} {f['retransmitted']:>5} {f['can_frames']:>7}"
            if f is not None else f"{'-':>7} {'-':>4} {'-':>5} {'-':>7}")
    health = f"{c['ok']}/{c['degraded']}/{c['silent']}"
    return (f"{s.t:>7.1f} | {b['commands']:>8} {b['odometry']:>7} {b['checksum_errors']:>5} "
            f"{b['discarded']:>6} {b['watchdog']:>4} | {fish} | "
            f"{c['frames']:>8} {c['error_frames']:>6} {c['bus_offs']:>4} {c['faulty_tec']:>4} "
            f"{health:>10} | {s.rss / MB:>7.1f} {s.cpu:>7.2f}")


def soak(seconds: float, every: float, faults: FaultSpec, can_ber: float, seed: int,
         with_fish: bool) -> Outcome:
    out = Outcome()
    rigs: list[Any] = []
    base = BaseRig(faults)
    rigs.append(base)
    fish: FishRig | None = None
    if with_fish:
        fish = FishRig(faults, seed)
        rigs.append(fish)
    can = CanRig(can_ber, seed)
    rigs.append(can)
    cpu0 = cpu_seconds()
    t0 = time.monotonic()
    try:
        for rig in rigs:
            rig.start()
        print(HEADER, flush=True)
        nxt = every
        while True:
            elapsed = time.monotonic() - t0
            end = elapsed >= seconds
            if elapsed >= nxt or end:
                s = Sample(elapsed, rss_bytes(), cpu_seconds() - cpu0, base.counters(),
                           fish.counters() if fish is not None else None, can.counters())
                out.samples.append(s)
                print(row(s), flush=True)
                nxt += every
                for rig in rigs:
                    why = rig.problem()
                    if why is not None and f"{rig.name}: {why}" not in out.problems:
                        out.problems.append(f"{rig.name}: {why}")
                if end:
                    break
            time.sleep(max(0.0, min(nxt, seconds) - (time.monotonic() - t0)))
    finally:
        for rig in reversed(rigs):
            try:
                rig.stop()
            except Exception as exc:  # a failed stop is a finding, not a crash of the soak
                out.problems.append(f"{rig.name}: stop failed: {exc!r}")
    return out


def rate(a: Sample, b: Sample, get: Any) -> float:
    dt = b.t - a.t
    return (get(b) - get(a)) / dt if dt > 0 else 0.0


def summary(out: Outcome, rss_limit: float) -> tuple[str, bool]:
    first, last = out.samples[0], out.samples[-1]
    zero = Sample(0.0, first.rss, 0.0, dict.fromkeys(first.base, 0),
                  dict.fromkeys(first.fish, 0) if first.fish else None,
                  dict.fromkeys(first.can, 0))
    b, f, c = last.base, last.fish, last.can
    rows: list[list[Any]] = [
        ["base link", f"{b['commands']} commands, {b['odometry']} odometry",
         f"{rate(zero, last, lambda s: s.base['odometry']):.1f} odom/s",
         f"{b['checksum_errors']} checksum errors, {b['discarded']} bytes discarded, "
         f"{b['injected']} bytes hit by faults, {b['watchdog']} watchdog trips, "
         f"{b['dropped']} records dropped, {b['reconnects']} reconnects"],
    ]
    if f is not None:
        rows.append(["fish link", f"{f['ok']} exchanges ok, {f['failed']} failed",
                     f"{rate(zero, last, lambda s: s.fish['ok']):.1f} ok/s",
                     f"{f['retransmitted']} retransmissions, {f['naks']} NAKs; fish CAN "
                     f"{f['can_frames']} frames, {f['can_errors']} error frames"])
    rows.append(["CAN bus", f"{c['frames']} frames, {c['feedback']} feedback",
                 f"{rate(zero, last, lambda s: s.can['frames']):.0f} frames/s",
                 f"{c['error_frames']} error frames, {c['bus_offs']} bus-offs, faulty module "
                 f"{c['faulty_state']} (TEC {c['faulty_tec']}), health ok/degraded/silent "
                 f"{c['ok']}/{c['degraded']}/{c['silent']}, {c['health_events']} health changes"])
    growth = (last.rss - first.rss) / MB
    trend = "trend n/a (under 5 min)"
    after = out.samples[1:]
    if len(after) >= 3 and after[-1].t - after[0].t >= 300:
        # least-squares slope after the warm-up: a leak shows as a steady climb
        ts = [s.t for s in after]
        rs = [s.rss / MB for s in after]
        mt, mr = sum(ts) / len(ts), sum(rs) / len(rs)
        den = sum((t - mt) ** 2 for t in ts)
        slope = sum((t - mt) * (r - mr) for t, r in zip(ts, rs)) / den * 3600
        trend = f"trend {slope:+.1f} MB/h"
    res = [["resident memory", f"{first.rss / MB:.1f} MB after warm-up",
            f"{last.rss / MB:.1f} MB at the end",
            f"{growth:+.2f} MB (limit {rss_limit:g} MB), {trend}"],
           ["CPU", f"{last.cpu:.1f} s in {last.t:.0f} s",
            f"{100 * last.cpu / max(last.t, 1e-9):.1f} % of one core", ""]]
    ok = not out.problems and growth < rss_limit
    text = "\n".join([
        table(["component", "traffic", "rate", "errors and counters"], rows),
        "",
        table(["resource", "start", "end", "growth"], res),
    ])
    return text, ok


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--minutes", type=float, required=True, help="how long (0.2: a quick check)")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between rows (10)")
    ap.add_argument("--faults", default="corrupt=1e-4",
                    help="link faults, both ways, both robots: drop=,corrupt=,insert=,delay= "
                         "per byte ('none': off; default corrupt=1e-4)")
    ap.add_argument("--can-ber", type=float, default=1e-3,
                    help="bit-error rate of CAN module 2 (default 1e-3; 0: off)")
    ap.add_argument("--rss-limit", type=float, default=16.0,
                    help="MB resident memory may grow after the first row (16)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-fish", action="store_true", help="leave the robot fish out")
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.every <= 0:
        ap.error("--minutes and --every must be positive")
    try:
        spec = FaultSpec.parse(None if args.faults == "none" else args.faults, args.seed)
    except ValueError as exc:
        ap.error(f"--faults: {exc}")
    seconds = args.minutes * 60.0
    every = min(args.every, seconds)
    with_fish = not args.no_fish
    note = fish_available() if with_fish else "left out (--no-fish)"
    if note is not None:
        with_fish = False

    print(f"# Soak: {seconds:g} s, a row every {every:g} s\n{machine()}")
    print(f"link faults: {spec}; CAN module 2 bit-error rate: {args.can_ber:g}; "
          f"seed {args.seed}")
    if note is not None:
        print(f"note: robot fish skipped: {note}")
    print()
    out = soak(seconds, every, spec, args.can_ber, args.seed, with_fish)
    text, ok = summary(out, args.rss_limit)
    print()
    print(text)
    for p in out.problems:
        print(f"problem: {p}")
    print(f"\nresult: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
