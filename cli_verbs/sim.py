"""``fwbridge sim MODEL`` (a simulated endpoint on a pty) and ``fwbridge demo`` (the square)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.robots.demo import SquareConfig, run_square_demo
from fwbridge.bridge.robots.square import Pose, SquareDriver, SquareResult
from fwbridge.bridge.sim.endpoint import PACINGS
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.kinematics import wrap_deg
from fwbridge.bridge.sim.models import model_names
from fwbridge.bridge.sim.session import SimHooks, SimRunConfig, SimStartError, run_sim
from fwbridge.cli_verbs.common import FORCE, console, fail, json_line, print_counters, writable
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.params import DURATION, SPEED, Baud, Finite
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.cli_verbs.stopping import silence_stdout, stdout_closed

FAULTS = click.option(
    "--faults", default="", metavar="NAME=RATE,...",
    help="Inject byte faults on the robot link, e.g. drop=0.01,corrupt=0.01 "
    "(also insert=, delay= and delay_ms=; default: none).",
)
SEED = click.option("--seed", type=int, default=0, show_default=True,
                    help="Seed of the fault injection (same seed, same faults).")


#: What afap means with a host on the port (said at the start of such a run).
AFAP_WITH_A_HOST = (
    "afap: simulated time runs as fast as the CPU allows and never waits for the host (only "
    "for room on the port): a host that talks in real time sees all of --duration pass in a "
    "moment; drive it with --pacing realtime (--speed N to go faster)")


def _faults(text: str, seed: int) -> FaultSpec:
    try:
        return FaultSpec.parse(text, seed=seed)
    except ValueError as exc:
        fail(f"--faults: {exc}")


def _fault_hits(stats: dict[str, int]) -> int:
    return sum(stats[n] for n in ("dropped", "corrupted", "inserted", "delayed"))


def _heading(yaw: float) -> float:
    """A model's unwrapped yaw (rad) as the heading shown, degrees in (-180, 180] after
    rounding to the 0.1° printed (-179.96 shows as +180.0, never -180.0)."""
    d = round(wrap_deg(math.degrees(yaw)), 1)
    return 180.0 if d <= -180.0 else d


def status_text(st: dict[str, Any]) -> str:
    """The status line of a simulation: time, pose (yaw in (-180, 180]), link, faults."""
    x, y, yaw = st["pose"]
    link = st["link"]
    fw = st.get("firmware", {})
    rx = st.get("firmware_rx", {})
    parts = [
        f"t={st['t'] / 1000:8.2f}s",
        f"x{st['rtf']:.1f}",
        f"pose=({x:+.3f},{y:+.3f},{_heading(yaw):+7.1f}°)",
        f"in={link['bytes_in']}B out={link['bytes_out']}B",
    ]
    if fw:
        parts.append(f"cmds={fw['cmd_applied']} odom={fw['odom_sent']}")
    if rx.get("checksum_errors"):
        parts.append(f"rx_errors={rx['checksum_errors']}")
    if link["overruns"]:
        parts.append(f"overruns={link['overruns']}")
    faults = st.get("faults")
    if faults:
        hit = sum(_fault_hits(v) for v in faults.values())
        parts.append(f"faults={hit}")
    return "  ".join(parts)


@click.command("sim")
@click.argument("model", type=click.Choice([*model_names(), "scara"], case_sensitive=False))
@FAULTS
@SEED
@click.option("--duration", type=DURATION, default=None,
              metavar="S", help="Stop after S seconds of simulated time (default: Ctrl-C).")
@click.option("--pacing", type=click.Choice(PACINGS), default="realtime", show_default=True,
              help="realtime: simulated time follows the clock; afap: as fast as the CPU "
              "allows (deterministic). afap never waits for the host, only for room on the "
              "port: a host that talks in real time sees all of --duration pass in a moment "
              "(drive it with realtime, --speed to go faster).")
@click.option("--speed", type=SPEED, default=1.0,
              show_default=True, help="realtime: simulated seconds per wall-clock second.")
@click.option("--step-ms", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Basic time step of the world, ms.")
@click.option("--baud", type=Baud(none=-1), default=-1, show_default=True,
              help="Emulate this line rate (8N1); -1: none, as in Webots.")
@click.option("--link", "link_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also make PATH a symlink to the port.")
@click.option("--wait-for-host", is_flag=True,
              help="Do not start the clock before the first byte from the host. With "
              "--pacing afap a run then repeats byte for byte if the host's bytes do not "
              "depend on its clock (a script, a replay); afap still does not wait for the "
              "host after that byte.")
@click.option("--watchdog", "watchdog_ms", type=click.IntRange(min=0), default=None,
              metavar="MS", help="mecanum: stop the motors after MS ms without a command "
              "(default 500; 0: never, as the seed firmware).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: ready, status each second, end.")
@click.option("--record", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Capture the robot link (both directions, as the host sees them): pcapng, "
                   "or MCAP with the decoded messages for a .mcap name; an existing FILE only "
                   "with --force.")
@FORCE
@FOXGLOVE
@click.option("--flash", "flash_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="fish: keep its flash (user configuration, stored actions, "
              "firmware banks) in FILE across restarts (created when missing).")
def sim_cmd(model: str, faults: str, seed: int, duration: float | None, pacing: str,
            speed: float, step_ms: int, baud: int, link_path: str | None,
            wait_for_host: bool, watchdog_ms: int | None, as_json: bool, record: str | None,
            force: bool, foxglove: bool, foxglove_host: str, foxglove_port: int,
            flash_path: str | None) -> None:
    """Run a simulated MODEL firmware on a new pty and print the port to open.

    The robot link speaks the seed-002 frames (velocity commands in,
    odometry out) on the printed port; the supervisor port carries one JSON
    status line per 100 ms (and takes JSON commands). Runs until Ctrl-C or
    --duration, with a status line on a terminal.

    'scara' is the CAN arm instead: its five actuator modules on the bus of
    python-can's configuration (CAN_INTERFACE, CAN_CHANNEL; default the
    fwbridge simulator). On a shared bus ('fwbridge can bus up NAME',
    CAN_INTERFACE=fwbridge CAN_CHANNEL=shared:NAME) 'fwbridge arm pick-place -i
    fwbridge -c shared:NAME' drives them from another process.
    """
    if model == "scara":
        from fwbridge.cli_verbs.arm import scara_sim

        scara_sim(duration, as_json)
        return
    spec = _faults(faults, seed)
    if flash_path is not None and model != "fish":
        fail("--flash is for the fish (its main controller's flash)")
    if record:
        writable(record, "--record", force=force)
    config = SimRunConfig(
        model=model, faults=spec, pacing=pacing, speed=speed, step_ms=step_ms, baud=baud,
        link_path=link_path, wait_for_host=wait_for_host, watchdog_ms=watchdog_ms,
        flash_path=flash_path, duration_ms=None if duration is None else round(duration * 1000))
    hooks = _sim_hooks(config, as_json, lambda _link: _capture(
        record, foxglove, foxglove_host, foxglove_port, f"sim://{model}"))
    try:
        res = run_sim(config, hooks)
    except SimStartError as exc:
        fail(str(exc))
    st = res.status
    if res.error is not None:
        fail(f"simulation stopped: {type(res.error).__name__}: {res.error}")
    if as_json:
        json_line({"event": "end", "interrupted": res.interrupted, **st})
        return
    click.echo(status_text(st), err=True)
    if pacing == "afap":
        click.echo(f"afap: {st['t'] / 1000:.2f} s simulated in {res.wall_s:.2f} s", err=True)
    print_counters(st["link"], "host port")
    if "firmware" in st:
        print_counters(st["firmware"], "firmware")
        print_counters(st["firmware_rx"], "firmware receiver")
    for direction, stats in st.get("faults", {}).items():
        print_counters(stats, f"faults {direction}")


def _sim_hooks(config: SimRunConfig, as_json: bool, open_tap: Any) -> SimHooks:
    """What ``sim`` shows of a run: the ready lines, the status line, a JSON status a second."""

    def on_ready(ready: dict[str, Any]) -> None:
        port, sup = ready["port"], ready["supervisor_port"]
        if as_json:
            json_line(ready)
        else:
            click.echo(f"{config.model} firmware on {port} (supervisor: {sup}), "
                       f"{config.pacing}, step {config.step_ms} ms, faults: {config.faults}")
            click.echo(f"open {port} with any serial program (no baud rate needed); "
                       "Ctrl-C stops", err=True)
        if config.pacing == "afap":
            click.echo(AFAP_WITH_A_HOST, err=True)

    @contextlib.contextmanager
    def status_view() -> Iterator[Callable[[dict[str, Any]], None]]:
        last_json = time.monotonic()
        with StatusLine() as line:
            def update(st: dict[str, Any]) -> None:
                nonlocal last_json
                line.update(status_text(st))
                if as_json and time.monotonic() - last_json >= 1.0:
                    last_json = time.monotonic()
                    json_line({"event": "status", **st})
            yield update

    def stop_requested() -> bool:
        if stdout_closed():  # the reader went away (| head): end as the other verbs
            silence_stdout()  # the summary still goes to stderr; no broken pipe
            return True
        return False

    return SimHooks(on_ready=on_ready, status_view=status_view, stop_requested=stop_requested,
                    open_tap=open_tap)


def _capture(record: str | None, foxglove: bool, host: str, port: int, name: str,
             decode: bool = True) -> Any:
    """The capture of the robot link (file and/or live view); None without either.
    ``decode`` False: a node's sink, fed the node's records."""
    if not record and not foxglove:
        return None
    from fwbridge.bridge.record.serial_mcap import open_capture
    from fwbridge.bridge.record.serial_pcapng import CaptureError

    live = live_sink(foxglove, host, port)
    try:
        return open_capture(record, port=name, live=live, decode=decode)
    except CaptureError as exc:  # the caller closes what it opened (run_sim: the link)
        if live is not None:
            live.close()
        fail(str(exc))


# -- demo -----------------------------------------------------------------------------


def _pose_text(driver: SquareDriver, odom: Odometry | None, truth: Pose, t: float) -> str:
    phase = "done" if driver.done else f"side {driver.leg + 1}/4 {driver.phase:5}"
    if odom is None:
        return f"t={t:5.1f}s  {phase}  waiting for odometry"
    return (f"t={t:5.1f}s  {phase}  odom x={odom.x:+.3f} y={odom.y:+.3f} "
            f"yaw={math.degrees(odom.yaw):+7.2f}°  v=({odom.vx:+.2f},{odom.vy:+.2f},"
            f"{odom.wz:+.2f})  truth x={truth[0]:+.3f} y={truth[1]:+.3f}")


def _summary(res: SquareResult, side: float) -> Table:
    table = Table(title=f"{side:g} m square", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()

    def pose(p: tuple[float, float, float]) -> str:
        yaw = math.degrees(math.atan2(math.sin(p[2]), math.cos(p[2])))
        return f"x={p[0]:+.4f} m  y={p[1]:+.4f} m  yaw={yaw:+.2f}°"

    table.add_row("completed", f"{'yes' if res.completed else 'no'} in {res.seconds:.1f} s")
    table.add_row("end pose (odometry)", pose(res.odom_end))
    table.add_row("end pose (truth)", pose(res.truth_end))
    table.add_row("closing error (odometry)", f"{res.odom_closing * 1000:.2f} mm")
    table.add_row("closing error (truth)", f"{res.truth_closing * 1000:.2f} mm "
                  f"(model tolerance {res.tolerance * 1000:.1f} mm)")
    table.add_row("odometry vs truth", f"{res.odom_error * 1000:.2f} mm")
    ns = res.node_stats
    table.add_row("bridge", f"{ns.get('commands', 0)} commands, {ns.get('frames', 0)} odometry "
                  f"frames, {ns.get('checksum_errors', 0)} checksum errors, "
                  f"{ns.get('watchdog_trips', 0)} watchdog trips")
    if "cmd_vel_received" in ns:
        table.add_row("ROS 2", f"{ns['cmd_vel_received']} cmd_vel received, "
                      f"{ns['odometry_published']} odom published, "
                      f"{ns.get('odom_received_by_driver', 0)} odom received by the driver")
    st = res.sim_status
    fw = st.get("firmware", {})
    table.add_row("firmware", f"{fw.get('cmd_applied', 0)} commands applied, "
                  f"{st.get('firmware_rx', {}).get('checksum_errors', 0)} checksum errors, "
                  f"{fw.get('odom_sent', 0)} odometry frames sent")
    if "faults" in st:
        hits = {k: _fault_hits(v) for k, v in st["faults"].items()}
        table.add_row("faults injected", ", ".join(f"{k}: {n}" for k, n in hits.items()))
    table.add_row("simulation", f"{st.get('t', 0) / 1000:.1f} s simulated, real-time factor "
                  f"{st.get('rtf', 0):.2f}, {st.get('lag_resets', 0)} lag resets")
    return table


@click.command("demo")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also draw the path (odometry and truth) to a PNG file; an existing FILE "
                   "only with --force.")
@click.option("--side", type=Finite(0.2, 5.0, unit="m"), default=1.0, show_default=True,
              help="Side of the square, m.")
@FAULTS
@SEED
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of the live display.")
@click.option("--ros2", "ros2", is_flag=True,
              help="Drive through ROS 2: cmd_vel out, odom back, over Zenoh (fwbridge[ros2]).")
@click.option("--connect", "connect", multiple=True, metavar="ENDPOINT",
              help="With --ros2: also join the Zenoh router here (default: in-process only).")
@click.option("--record", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Capture the link: pcapng, or MCAP (raw bytes, ROS 2 messages) for .mcap; "
                   "an existing FILE only with --force.")
@FORCE
@FOXGLOVE
def demo_cmd(plot: str | None, side: float, faults: str, seed: int, as_json: bool,
             ros2: bool, connect: tuple[str, ...], record: str | None, force: bool, foxglove: bool,
             foxglove_host: str, foxglove_port: int) -> None:
    """Drive a simulated mecanum base around a square through the bridge.

    Starts the mecanum firmware simulation on a pty, runs the mobile-base
    node on that pty, and drives a square on the node's odometry, printing
    it live; ends with the link statistics and how well the square closed.
    No hardware and no network; about 30 seconds. With --ros2 the driver is
    a ROS 2 node on /robot1/cmd_vel and /robot1/odom.
    """
    spec = _faults(faults, seed)
    if connect and not ros2:
        fail("--connect goes with --ros2")
    if record:
        writable(record, "--record", force=force)
    if plot:  # checked now, not after the 30 s run
        writable(plot, "--plot", force=force)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            fail("--plot needs matplotlib: pip install 'fwbridge[plot]'")
    if ros2:
        _ros2_ready()
    config = SquareConfig(side=side, faults=spec, ros2=ros2, connect=connect)
    if not as_json:
        click.echo(f"fwbridge demo: simulated mecanum base, bridge node on a pty, "
                   f"{side:g} m square (faults: {spec})")
    # the node decodes the link and hands the capture its records: decoded once
    capture = _capture(record, foxglove, foxglove_host, foxglove_port, "demo",
                       decode=False)
    view = _DemoView(as_json, live=console.is_terminal and not as_json)
    try:
        with view:
            if ros2:
                click.echo("through ROS 2: square_driver -> /robot1/cmd_vel -> base_bridge -> "
                           "/robot1/odom -> square_driver", err=True)
            res = run_square_demo(config, on_tick=view.on_tick,
                                  sinks=[capture] if capture is not None else [])
    except KeyboardInterrupt:  # a stop signal: the run's own clean-up stopped the base
        click.echo("demo: stopped before the square was done", err=True)
        return
    finally:
        if capture is not None:
            capture.close()
    _demo_end(res, side, plot, as_json)


def _demo_end(res: SquareResult, side: float, plot: str | None, as_json: bool) -> None:
    """The plot, the summary (a table or the end's JSON line) and the exit status."""
    if plot:
        from fwbridge.cli_verbs.plot import draw_square

        draw_square(res, Path(plot), side)
    if as_json:
        json_line({"event": "end", "completed": res.completed, "seconds": res.seconds,
                   "odom_closing_m": res.odom_closing, "truth_closing_m": res.truth_closing,
                   "odom_error_m": res.odom_error, "tolerance_m": res.tolerance,
                   "odom_end": list(res.odom_end), "truth_end": list(res.truth_end),
                   "bridge": res.node_stats, "simulation": res.sim_status, "plot": plot})
    else:
        console.print(_summary(res, side))
        if plot:
            click.echo(f"path plot written to {plot}")
    if not res.completed:
        fail("the square was not completed (see the statistics above)")


class _DemoView:
    """What ``demo`` shows while it drives: the pose on one live line on a terminal
    (fitted to the window, cleared at the end), a line a second otherwise, or JSON
    odometry lines five times a second."""

    def __init__(self, as_json: bool, live: bool) -> None:
        self.as_json = as_json
        self.t0 = time.monotonic()
        self.last_print = 0.0
        self.every = 0.1 if live else 1.0
        self.status = StatusLine() if live else None

    def __enter__(self) -> _DemoView:
        if self.status is not None:
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)

    def on_tick(self, drv: SquareDriver, odom: Odometry | None, truth: Pose) -> None:
        now = time.monotonic() - self.t0
        if self.as_json:
            if odom is not None and now - self.last_print >= 0.2:
                self.last_print = now
                json_line({"event": "odometry", "t": round(now, 3), "side": drv.leg + 1,
                           "phase": drv.phase, "x": odom.x, "y": odom.y, "yaw": odom.yaw,
                           "truth": list(truth)})
            return
        if now - self.last_print < self.every:
            return
        self.last_print = now
        text = _pose_text(drv, odom, truth, now)
        if self.status is not None:
            self.status.update(text, force=True)
        else:
            click.echo(text)


def _ros2_ready() -> None:
    """--ros2's libraries are there (one line naming the extra otherwise)."""
    try:
        import rosbags  # noqa: F401
        import zenoh  # noqa: F401
    except ImportError:
        fail("--ros2 needs the ros2 extra: pip install 'fwbridge[ros2]'")
