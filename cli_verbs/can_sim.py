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

import time
from typing import Any

import can
import click
from rich.table import Table

from fwbridge.bridge.record.can_logs import open_writer
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import MainController
from fwbridge.can_bus.sim.swim import (
    SENSOR_FAULTS,
    SwimConfig,
    SwimHooks,
    SwimResult,
    parse_fault,
    run_swim,
)
from fwbridge.cli_verbs.can_common import open_bus, options, target
from fwbridge.cli_verbs.common import FORCE, Renamed, console, fail, json_line, writable
from fwbridge.cli_verbs.link import until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE
from fwbridge.cli_verbs.params import DURATION, Finite
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.cli_verbs.stopping import silence_stdout, stdout_closed

__all__ = ["sim_cmd"]

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
    try:
        cfg = SwimConfig(count, interface, duration, feedback_period,
                         tuple(parse_fault(f) for f in faults), pacing, not no_auto_recovery)
    except ValueError as exc:
        fail(str(exc))
    _check(cfg, no_auto_recovery)
    if capture:
        writable(capture, "--record", force=force)
    if foxglove and capture and not _mcap_name(capture):
        fail("--foxglove records CAN to .mcap files only (or to none)")
    mcap = (capture or "").lower().endswith(".mcap") or foxglove
    health = _Health()

    def tick(ctrl: MainController, now: float, sim: Any) -> None:
        health.update(ctrl, now, sim)

    def mcap_writer(bus: can.BusABC) -> Any:
        health.writer = _mcap_writer(capture, bus, opts, foxglove, foxglove_host, foxglove_port)
        return health.writer

    hooks = SwimHooks(
        open_bus=lambda **kw: open_bus(opts, **kw),
        open_writer=(lambda: _open_writer(str(capture))) if capture else None,
        open_mcap=mcap_writer if mcap else None,
        # Said at once, as `fwbridge sim` says its port: the report comes at the end.
        on_started=lambda label: click.echo(
            f"{count} actuator module{'s' if count != 1 else ''} and a controller on "
            f"{label}; {'Ctrl-C stops' if duration is None else 'until --duration'}",
            err=True),
        status=StatusLine, interruptible=until_interrupted,
        on_ready=lambda label: click.echo(f"simulating {count} module(s) on {label}",
                                          err=True),
        on_tick=tick, reader_gone=_reader_gone)
    result = run_swim(cfg, hooks)
    if result.error is not None:
        fail(f"simulation stopped: {type(result.error).__name__}: {result.error}")
    _final(result, as_json)


def _check(cfg: SwimConfig, no_auto_recovery: bool) -> None:
    """One error line for options that do not go together."""
    if not cfg.simulated and (cfg.pacing or no_auto_recovery
                              or any(p.what not in SENSOR_FAULTS for p in cfg.faults)):
        fail("--pacing, --no-auto-recovery and bus faults need the simulated bus (-i fwbridge)")
    for p in cfg.faults:
        if not 1 <= p.module <= cfg.count:
            fail(f"--fault: no module {p.module} (modules are 1..{cfg.count})")


def _reader_gone() -> bool:
    if stdout_closed():  # the reader went away (| head): end as the other verbs
        silence_stdout()  # the summary still goes to stderr; no broken pipe
        return True
    return False


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
    from fwbridge.bridge.record.can_joint_states import can_writer
    from fwbridge.bridge.record.mcap_sink import McapError
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

    def __init__(self, writer: Any = None) -> None:
        self.writer = writer
        self.due = 0.0
        self.channel: int | None = None

    def update(self, ctrl: MainController, now: float, sim: Any) -> None:
        if self.writer is None or now < self.due:
            return
        self.due = now + 1.0
        from fwbridge.bridge.record.serial_channels import ros_spec
        from fwbridge.bridge.rosmsg import cdr, diagnostics

        streams = self.writer.streams
        if self.channel is None:
            self.channel = streams.channel(ros_spec("diagnostics"))
        stamp = (sim.epoch + now) if sim is not None else time.time()
        msg = diagnostics.diagnostics_message(diagnostics.module_health_statuses(ctrl.report(now)),
                                         stamp=stamp)
        streams.log(self.channel, cdr.serialize(msg, "diagnostic_msgs/msg/DiagnosticArray"),
                    round(stamp * 1e9))


def _final(res: SwimResult, as_json: bool) -> None:
    label, t, stats, rows, events = res.label, res.duration, res.stats, res.modules, res.events
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
