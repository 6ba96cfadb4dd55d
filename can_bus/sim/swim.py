"""N actuator modules and a main controller on one bus, swimming like the patent's robot
fish, as ``fwbridge can sim N`` runs them: the buses, the capture, faults on a schedule,
the node runner, the loop and the teardown on every way out.

Module 1 is the tail at ±60° and speed 80, 2 the body at ±50° and 60, 3 the head at ±20°
and 30 (the patent's worked example and the fish model), each a little later than the
one before. The caller opens buses and captures (``SwimHooks``) and prints; nothing here
prints or imports the record room.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import can

from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import ActuatorModule, Kind, MainController, NodeRunner
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.families.actuator import Fault

__all__ = ["KINDS", "SENSOR_FAULTS", "SWIM", "Injection", "SwimConfig", "SwimHooks",
           "SwimResult", "parse_fault", "run_swim"]

SWIM = ((60, 80), (50, 60), (20, 30))  # (amplitude deg, speed) of tail, body, head
KINDS = (Kind.SERVO, Kind.SERVO_MOTOR, Kind.STEPPER)
_FAULT = re.compile(r"^(?P<k>\d+):(?P<what>[a-z-]+)(?:=(?P<value>[0-9.eE+-]+))?"
                    r"(?:@(?P<t>[0-9.]+))?$")
SENSOR_FAULTS = {f.name.lower().replace("_", "-"): f for f in Fault
                 if f.name and f not in (Fault.NONE, Fault.RESERVED)}


@dataclass
class Injection:
    module: int
    what: str  # stuck, disconnected, ber, clear, or a sensor fault name
    value: float
    at: float
    done: bool = False


def parse_fault(text: str) -> Injection:
    m = _FAULT.match(text.strip().lower())
    kinds = ["stuck", "disconnected", "ber=RATE", "clear", *SENSOR_FAULTS]
    if m is None or (m["what"] not in ("stuck", "disconnected", "ber", "clear")
                     and m["what"] not in SENSOR_FAULTS):
        raise ConfigError(f"--fault {text!r}: expected K:KIND[@T] with KIND one of "
                         + ", ".join(kinds))
    if m["what"] == "ber" and m["value"] is None:
        raise ConfigError(f"--fault {text!r}: ber needs a rate, e.g. 3:ber=1e-3@0.5")
    return Injection(int(m["k"]), m["what"], float(m["value"] or 0), float(m["t"] or 0))


@dataclass(frozen=True)
class SwimConfig:
    count: int  # modules, 1..255
    interface: str = "fwbridge"  # python-can's; fwbridge: the simulator
    duration: float | None = None  # seconds of bus time; None: until a stop
    feedback_period: float = 0.02
    faults: tuple[Injection, ...] = ()
    pacing: str | None = None  # realtime or afap (the simulator only)
    auto_recovery: bool = True

    @property
    def simulated(self) -> bool:
        """The fwbridge simulator: node names, pacing, recovery and bus faults."""
        return self.interface == "fwbridge"


def _no_status() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


@dataclass
class SwimHooks:
    """What the caller supplies: the buses, the capture and what the run says."""

    open_bus: Callable[..., can.BusABC]  # keyword extras for the simulator's node
    open_writer: Callable[[], Any] | None = None  # a frame capture (a can.Listener)
    open_mcap: Callable[[can.BusABC], Any] | None = None  # the MCAP/live writer, given the bus
    on_started: Callable[[str], None] = lambda label: None  # the runner runs
    # the loop's context: yields a thing with update(text) (a status line), or None
    status: Callable[[], contextlib.AbstractContextManager[Any]] = _no_status
    interruptible: Callable[[], contextlib.AbstractContextManager[Any]] = (
        contextlib.nullcontext)
    on_ready: Callable[[str], None] = lambda label: None  # inside the loop's context
    on_tick: Callable[[MainController, float, Any], None] = lambda ctrl, now, sim: None
    reader_gone: Callable[[], bool] = lambda: False  # True ends the run normally


@dataclass
class SwimResult:
    label: str = ""  # interface:channel
    duration: float = 0.0  # bus time run
    error: BaseException | None = None  # what stopped the runner
    stats: dict[str, Any] | None = None  # the simulator's (None on another bus)
    modules: list[dict[str, Any]] = field(default_factory=list)  # the controller's report
    events: list[dict[str, Any]] = field(default_factory=list)  # health changes


class _Buses:
    """Every bus and capture the run opened, closed in one place."""

    def __init__(self) -> None:
        self.buses: list[can.BusABC] = []
        self.writer: Any = None
        self.notifier: Any = None
        self.cap_bus: can.BusABC | None = None
        self.mcap: Any = None

    def close(self) -> None:
        if self.notifier is not None and self.cap_bus is not None and self.writer is not None:
            self.notifier.stop()
            while (msg := self.cap_bus.recv(0)) is not None:  # what came after the last read
                self.writer.on_message_received(msg)
            self.cap_bus.shutdown()
            self.writer.stop()
        for bus in self.buses:
            bus.shutdown()
        if self.mcap is not None:
            self.mcap.stop()


def _open(cfg: SwimConfig, hooks: SwimHooks, b: _Buses) -> None:
    fw = cfg.simulated
    extra: dict[str, Any] = {"name": "controller"} if fw else {}
    if fw and cfg.pacing:
        extra["pacing"] = cfg.pacing
    ctrl_bus = hooks.open_bus(**extra)
    b.buses.append(ctrl_bus)
    # The bus works: only now is the capture created (a failed start leaves a file as it
    # was). On a channel of this process the simulator's own tap records synchronously,
    # any pacing; a shared bus (its daemon elsewhere) and other buses through a listener.
    tap = isinstance(ctrl_bus, FwBridgeBus) and not ctrl_bus.shared
    # MCAP and the live view: one writer (frames, load, state changes, joint_states).
    if hooks.open_mcap is not None:
        b.mcap = hooks.open_mcap(ctrl_bus)
    capture = hooks.open_writer is not None or b.mcap is not None
    for k in range(1, cfg.count + 1):
        mod_extra: dict[str, Any] = (
            {"name": f"module{k}", "auto_recovery": cfg.auto_recovery} if fw else {})
        if k == 1 and tap and capture:
            # a writer of the caller's, not a path for python-can to open
            mod_extra["capture"] = b.mcap or _writer(hooks)
        b.buses.append(hooks.open_bus(**mod_extra))
    if capture and not tap:
        b.writer = b.mcap or _writer(hooks)
        b.cap_bus = hooks.open_bus()
        b.notifier = can.Notifier(b.cap_bus, [b.writer], timeout=0.05)


def _writer(hooks: SwimHooks) -> Any:
    assert hooks.open_writer is not None
    return hooks.open_writer()


def run_swim(cfg: SwimConfig, hooks: SwimHooks) -> SwimResult:
    """Run the modules and the controller until ``duration`` of bus time, a stop (inside
    ``hooks.interruptible``) or the reader gone; every bus and capture closed on every way
    out. The report is taken before the buses close."""
    b = _Buses()
    try:
        _open(cfg, hooks, b)
        return _run(cfg, hooks, b.buses)
    finally:
        b.close()


def _run(cfg: SwimConfig, hooks: SwimHooks, buses: list[can.BusABC]) -> SwimResult:
    count = cfg.count
    modules = [ActuatorModule(bus, k, KINDS[(k - 1) % 3], feedback_period=cfg.feedback_period)
               for k, bus in enumerate(buses[1:count + 1], start=1)]
    ctrl = MainController(buses[0], range(1, count + 1),
                          silence_timeout=max(5 * cfg.feedback_period, 0.05),
                          command_period=cfg.feedback_period)
    sim = buses[0].sim if isinstance(buses[0], FwBridgeBus) else None
    by_module = dict(zip(range(1, count + 1), buses[1:count + 1]))
    t_start = sim.bus_time() if sim is not None else time.monotonic()
    plan = [Injection(p.module, p.what, p.value, p.at) for p in cfg.faults]  # ours to mark

    def on_step(now: float) -> None:
        t = now - t_start
        for k in range(1, count + 1):
            amp, speed = SWIM[min(k - 1, 2) if count <= 3 else (k - 1) * 3 // count]
            ctrl.set_target(k, round(amp * math.sin(2 * math.pi * t - 0.6 * k)), speed)
        for p in plan:
            if not p.done and t >= p.at:
                p.done = True
                inject(p, modules[p.module - 1], by_module[p.module])

    runner = NodeRunner([ctrl, *modules], period=min(0.005, cfg.feedback_period / 4), sim=sim,
                        on_step=on_step,
                        until=None if cfg.duration is None else t_start + cfg.duration)
    runner.start()
    label = f"{cfg.interface}:{buses[0].channel_info}"
    try:  # stopped on every way out (a stop the status lets through too), before the buses
        hooks.on_started(label)
        with hooks.status() as status, hooks.interruptible():
            hooks.on_ready(label)  # running: ready
            while runner.running:
                time.sleep(0.05)  # the status line's period
                if hooks.reader_gone():  # the reader went away (| head): end as the others
                    break
                now = runner.now()
                if status is not None:
                    status.update(status_text(ctrl, now, now - t_start, sim))
                hooks.on_tick(ctrl, now, sim)
    finally:
        runner.stop()
    if runner.error is not None:
        return SwimResult(label, error=runner.error)
    now = runner.now()
    return report(ctrl, modules, now, now - t_start, sim, label)


def inject(p: Injection, module: ActuatorModule, bus: can.BusABC) -> None:
    if p.what in SENSOR_FAULTS:
        module.faults |= SENSOR_FAULTS[p.what]
        return
    assert isinstance(bus, FwBridgeBus)
    if p.what == "clear":
        module.faults = Fault.NONE
        bus.inject(bit_error_rate=0.0, stuck_dominant=False, disconnected=False)
    elif p.what == "ber":
        bus.inject(bit_error_rate=p.value, seed=p.module)
    elif p.what == "stuck":
        bus.inject(stuck_dominant=True)
    else:
        bus.inject(disconnected=True)


def status_text(ctrl: MainController, now: float, t: float, sim: Any) -> str:
    mods = " ".join(f"{h['module']}:{h['status']}" for h in ctrl.report(now))
    if sim is not None:
        with sim.lock:
            st = sim.stats()
        return (f"t={t:7.2f}s frames={st['frames']} errors={st['error_frames']} "
                f"load={100 * st['load']:.0f}% | {mods}")
    return f"t={t:7.2f}s | {mods}"


def report(ctrl: MainController, modules: list[ActuatorModule], now: float, t: float,
           sim: Any, label: str) -> SwimResult:
    """The controller's report of each module, with its bus state on the simulator."""
    rows = ctrl.report(now)
    nodes: dict[str, dict[str, Any]] = {}
    stats = None
    if sim is not None:
        with sim.lock:
            stats = sim.stats()
        nodes = {n["name"]: n for n in stats["nodes"]}
    for row, mod in zip(rows, modules):
        row["kind"] = mod.kind.value
        node = nodes.get(f"module{mod.module_id}")
        if node is not None:
            row.update(bus_state=node["state"].lower(), tec=node["tec"], rec=node["rec"],
                       bus_offs=node["bus_offs"])
    events = [{"t": round(e.time - (now - t), 6), "module": e.module, "from": e.old.value,
               "to": e.new.value, "reason": e.reason} for e in ctrl.events]
    return SwimResult(label, t, None, stats, rows, events)
