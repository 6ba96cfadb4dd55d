"""``fwbridge can sim N``: N actuator modules and a main controller on one bus.

The controller swims them like the patent's robot fish (module 1 the tail at
±60° and speed 80, 2 the body at ±50° and 60, 3 the head at ±20° and 30, as in
the patent's worked example and the fish model; each module a little later
than the one before); the status line shows each module's health as the
controller sees it. On the simulated bus (``fwbridge``) faults can be
injected on a schedule with ``--fault``; on ``virtual``/``socketcan`` the same
nodes run unchanged.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

import can
import click
from rich.table import Table

from fwbridge.bridge.record.can_logs import open_writer
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import ActuatorModule, Kind, MainController, NodeRunner
from fwbridge.cli_verbs.can_common import open_bus, options, target
from fwbridge.cli_verbs.common import FORCE, Renamed, console, fail, json_line, writable
from fwbridge.cli_verbs.link import until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE
from fwbridge.cli_verbs.params import DURATION, Finite
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.cli_verbs.stopping import silence_stdout, stdout_closed
from fwbridge.protocols.actuator import Fault
from fwbridge.protocols.errors import ConfigError

__all__ = ["sim_cmd"]

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


@click.command("sim")
@click.argument("count", type=click.IntRange(1, 255), metavar="N")
@click.option("--duration", type=DURATION, default=None,
              metavar="S", help="Stop after S seconds of bus time (default: until Ctrl-C).")
@click.option("--pacing", type=click.Choice(["realtime", "afap"]), default=None,
              help="fwbridge only: bus time follows the wall clock (realtime, default) or runs "
                   "as fast as the CPU allows (afap).")
@click.option("--feedback-period", type=Finite(0.001, 10, unit="s"), default=0.02,
              show_default=True, metavar="S", help="Modules' feedback period.")
@click.option("--fault", "faults", multiple=True, metavar="K:KIND[@T]",
              help="Inject on module K at bus time T: stuck (dominant), disconnected, "
                   "ber=RATE, clear, or a sensor fault (over-temperature, ...). Repeatable.")
@click.option("--no-auto-recovery", is_flag=True,
              help="fwbridge: a bus-off module stays off (ISO recovery on request only).")
@click.option("--record", "--capture", "capture", cls=Renamed, type=click.Path(dir_okay=False),
              default=None, metavar="FILE",
              help="Record every frame (.log, .asc, .blf, .pcapng, ...; .mcap adds bus load, "
                   "error states, joint_states and module health). Created once the bus is "
                   "open; an existing FILE is refused unless --force.")
@FORCE
@click.option("--json", "as_json", is_flag=True, help="The final report as one JSON object.")
@FOXGLOVE
@click.pass_context
def sim_cmd(ctx: click.Context, count: int, duration: float | None, pacing: str | None,
            feedback_period: float, faults: tuple[str, ...], no_auto_recovery: bool,
            capture: str | None, force: bool, as_json: bool, foxglove: bool,
            foxglove_host: str, foxglove_port: int) -> None:
    """Run N actuator modules and a main controller on the bus.

    The modules are servos, servo motors and steppers in turn.
    """
    opts = options(ctx)
    interface, _ = target(opts)
    fw = interface == "fwbridge"
    try:
        plan = [parse_fault(f) for f in faults]
    except ValueError as exc:
        fail(str(exc))
    if not fw and (pacing or no_auto_recovery
                   or any(p.what not in SENSOR_FAULTS for p in plan)):
        fail("--pacing, --no-auto-recovery and bus faults need the simulated bus (-i fwbridge)")
    for p in plan:
        if not 1 <= p.module <= count:
            fail(f"--fault: no module {p.module} (modules are 1..{count})")
    if capture:
        writable(capture, "--record", force=force)
    mcap = (capture or "").lower().endswith(".mcap") or foxglove
    if foxglove and capture and not _mcap_name(capture):
        fail("--foxglove records CAN to .mcap files only (or to none)")
    extra: dict[str, Any] = {"name": "controller"} if fw else {}
    if fw and pacing:
        extra["pacing"] = pacing
    buses: list[can.BusABC] = []
    writer = notifier = cap_bus = mcap_writer = None
    try:
        ctrl_bus = open_bus(opts, **extra)
        buses.append(ctrl_bus)
        # The bus works: only now is the capture created (a failed start leaves a file as it
        # was). On a channel of this process the simulator's own tap records synchronously,
        # any pacing; a shared bus (its daemon elsewhere) and other buses through a listener.
        tap = isinstance(ctrl_bus, FwBridgeBus) and not ctrl_bus.shared
        # MCAP and the live view: one writer (frames, load, state changes, joint_states),
        # and the modules' health as /diagnostics from the controller's report.
        if mcap:
            mcap_writer = _mcap_writer(capture, ctrl_bus, opts, foxglove, foxglove_host,
                                       foxglove_port)
        for k in range(1, count + 1):
            mod_extra: dict[str, Any] = (
                {"name": f"module{k}", "auto_recovery": not no_auto_recovery} if fw else {})
            if k == 1 and tap and (capture or mcap_writer):
                # a writer of ours, not a path for python-can to open: safe_output's rules
                mod_extra["capture"] = mcap_writer or _open_writer(str(capture))
            buses.append(open_bus(opts, **mod_extra))
        if (capture or mcap_writer) and not tap:
            writer = mcap_writer or _open_writer(str(capture))
            cap_bus = open_bus(opts)
            notifier = can.Notifier(cap_bus, [writer], timeout=0.05)
        modules = [ActuatorModule(bus, k, KINDS[(k - 1) % 3], feedback_period=feedback_period)
                   for k, bus in enumerate(buses[1:count + 1], start=1)]
        ctrl = MainController(ctrl_bus, range(1, count + 1),
                              silence_timeout=max(5 * feedback_period, 0.05),
                              command_period=feedback_period)
        sim = ctrl_bus.sim if isinstance(ctrl_bus, FwBridgeBus) else None
        by_module = dict(zip(range(1, count + 1), buses[1:count + 1]))
        t_start = sim.bus_time() if sim is not None else time.monotonic()

        def on_step(now: float) -> None:
            t = now - t_start
            for k in range(1, count + 1):
                amp, speed = SWIM[min(k - 1, 2) if count <= 3 else (k - 1) * 3 // count]
                ctrl.set_target(k, round(amp * math.sin(2 * math.pi * t - 0.6 * k)), speed)
            for p in plan:
                if not p.done and t >= p.at:
                    p.done = True
                    _inject(p, modules[p.module - 1], by_module[p.module])

        runner = NodeRunner([ctrl, *modules], period=min(0.005, feedback_period / 4), sim=sim,
                            on_step=on_step,
                            until=None if duration is None else t_start + duration)
        runner.start()
        label = f"{interface}:{buses[0].channel_info}"
        # Said at once, as `fwbridge sim` says its port: the report comes at the end.
        click.echo(f"{count} actuator module{'s' if count != 1 else ''} and a controller on "
                   f"{label}; {'Ctrl-C stops' if duration is None else 'until --duration'}",
                   err=True)
        health = _Health(mcap_writer)
        with StatusLine() as status, until_interrupted():
            click.echo(f"simulating {count} module(s) on {label}", err=True)  # running: ready
            while runner.running:
                time.sleep(0.05)  # the status line's period
                if stdout_closed():  # the reader went away (| head): end as the other verbs
                    silence_stdout()  # the summary still goes to stderr; no broken pipe
                    break
                now = runner.now()
                status.update(_status(ctrl, now, now - t_start, sim))
                health.update(ctrl, now, sim)
        runner.stop()
        if runner.error is not None:
            fail(f"simulation stopped: {type(runner.error).__name__}: {runner.error}")
        now = runner.now()
        _final(ctrl, modules, now, now - t_start, sim, label, as_json)
    finally:
        if notifier is not None and cap_bus is not None and writer is not None:
            notifier.stop()
            while (msg := cap_bus.recv(0)) is not None:  # what arrived after the last read
                writer.on_message_received(msg)
            cap_bus.shutdown()
            writer.stop()
        for bus in buses:
            bus.shutdown()
        if mcap_writer is not None:
            mcap_writer.stop()


def _mcap_name(path: str) -> bool:
    return path.lower().endswith(".mcap")


def _open_writer(path: str) -> Any:
    """A capture in the format of ``path``'s extension; one error line if there is none."""
    from fwbridge.protocols.errors import CaptureError

    try:
        return open_writer(path)
    except (CaptureError, OSError, ValueError) as exc:
        fail(f"--record {exc}")


def _mcap_writer(capture: str | None, bus: can.BusABC, opts: Any, foxglove: bool, host: str,
                 port: int) -> Any:
    from fwbridge.bridge.record.mcap_io import McapError
    from fwbridge.bridge.record.serial_mcap import can_writer
    from fwbridge.cli_verbs.live import live_sink

    path = capture if capture and _mcap_name(capture) else None
    live = live_sink(foxglove, host, port)
    # the simulator's rate (a shared bus's own), else what -b says
    bitrate = bus.sim.bitrate if isinstance(bus, FwBridgeBus) else opts.bitrate
    try:
        return can_writer(path, bitrate=bitrate, live=live, channel=target(opts)[1] or "can0")
    except (ValueError, OSError, McapError) as exc:
        if live is not None:
            live.close()
        fail(str(exc))


class _Health:
    """The modules' health (the controller's report) as /diagnostics, once a second."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.due = 0.0
        self.channel: int | None = None

    def update(self, ctrl: MainController, now: float, sim: Any) -> None:
        if self.writer is None or now < self.due:
            return
        self.due = now + 1.0
        from fwbridge.bridge.node import topics
        from fwbridge.bridge.record.serial_mcap import ros_spec

        streams = self.writer.streams
        if self.channel is None:
            self.channel = streams.channel(ros_spec("diagnostics"))
        stamp = (sim.epoch + now) if sim is not None else time.time()
        msg = topics.diagnostics_message(topics.module_health_statuses(ctrl.report(now)),
                                         stamp=stamp)
        streams.log(self.channel, topics.serialize(msg, "diagnostic_msgs/msg/DiagnosticArray"),
                    round(stamp * 1e9))


def _inject(p: Injection, module: ActuatorModule, bus: can.BusABC) -> None:
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


def _status(ctrl: MainController, now: float, t: float, sim: Any) -> str:
    mods = " ".join(f"{h['module']}:{h['status']}" for h in ctrl.report(now))
    if sim is not None:
        with sim.lock:
            st = sim.stats()
        return (f"t={t:7.2f}s frames={st['frames']} errors={st['error_frames']} "
                f"load={100 * st['load']:.0f}% | {mods}")
    return f"t={t:7.2f}s | {mods}"


def _final(ctrl: MainController, modules: list[ActuatorModule], now: float, t: float,
           sim: Any, label: str, as_json: bool) -> None:
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
    if as_json:
        json_line({"bus": label, "duration": t, "stats": {k: v for k, v in (stats or {}).items()
                                                           if k != "nodes"},
                   "modules": rows, "events": events})
        return
    table = Table("module", "kind", "status", "frames", "angle", "current mA", "fault",
                  "bus state", "TEC", "REC", title=f"{label} after {t:.2f} s",
                  title_justify="left")
    for r in rows:
        table.add_row(str(r["module"]), r.get("kind", ""), r["status"], str(r["frames"]),
                      str(r["angle"]), str(r["current_ma"]), str(r["fault"] or "-"),
                      r.get("bus_state", "-"), str(r.get("tec", "-")), str(r.get("rec", "-")))
    console.print(table)
    if stats is not None:
        console.print(f"bus: {stats['frames']} frames, {stats['error_frames']} error frames, "
                      f"load {100 * stats['load']:.1f} %")
    for e in events:
        console.print(f"  t={e['t']:8.3f}s module {e['module']}: {e['from']} -> {e['to']} "
                      f"({e['reason']})")
