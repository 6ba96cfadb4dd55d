"""``fwbridge arm``: the SCARA arm (IK, pick and place) and ``fwbridge sim scara``."""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from fwbridge.bridge.robots.arm.arm_runs import (
    PickPlaceJob,
    PickPlaceProgress,
    ScaraBus,
    afap_refusal,
    open_scara,
    pick_place,
    scara_bus,
    serve_scara,
)
from fwbridge.bridge.robots.arm.can_arm import PickPlaceRun, arm_specs
from fwbridge.bridge.robots.arm.config import ArmConfigError, load_arm_config
from fwbridge.bridge.robots.arm.kinematics import (
    Joints,
    Pose,
    ScaraGeometry,
    UnreachableError,
    forward,
    inverse,
)
from fwbridge.bridge.robots.arm.pick_place import PickAndPlace, PickPlaceConfig, Reached
from fwbridge.cli_verbs.common import Group, console, fail, json_line
from fwbridge.cli_verbs.params import BITRATE, NEGATIVE_ARGS, Finite
from fwbridge.protocols.errors import ArmError

#: A coordinate in metres (an arm reaches a metre or so).
COORD = Finite(-100, 100, unit="m")

XYZ = click.Tuple([COORD, COORD, COORD])


def _geometry(config: str | None) -> tuple[ScaraGeometry, PickPlaceConfig]:
    try:
        return load_arm_config(Path(config)) if config else (ScaraGeometry(), PickPlaceConfig())
    except ArmConfigError as exc:
        fail(str(exc))


_CONFIG = click.option("--config", type=click.Path(dir_okay=False), default=None,
                       help="Robot TOML file; its [arm] table sets link lengths and limits "
                            "(default: seed 001's arm, 0.55 m + 0.4 m).")


@click.group("arm", cls=Group)
def arm_group() -> None:
    """The SCARA arm: inverse kinematics and pick and place over CAN."""


@arm_group.command("ik", context_settings=NEGATIVE_ARGS)
@click.argument("x", type=COORD)
@click.argument("y", type=COORD)
@click.argument("z", type=COORD)
@click.option("--phi", type=Finite(-360, 360, unit="degrees"), default=0.0, show_default=True,
              help="Tool yaw, degrees.")
@_CONFIG
@click.option("--json", "as_json", is_flag=True, help="One JSON object per solution.")
def ik_cmd(x: float, y: float, z: float, phi: float, config: str | None, as_json: bool) -> None:
    """Joint solutions for the tool at X Y Z (m).

    The first is the one the arm takes.
    """
    geom, _ = _geometry(config)
    pose = Pose(x, y, z, math.radians(phi))
    try:
        best = inverse(geom, pose)
    except UnreachableError as exc:
        fail(str(exc))
    from fwbridge.bridge.robots.arm.kinematics import inverse_all

    sols = [best, *(j for j in inverse_all(geom, pose) if j != best)]
    for k, j in enumerate(sols):
        row = {"solution": k, "theta1_deg": math.degrees(j.theta1),
               "theta2_deg": math.degrees(j.theta2), "d3_m": j.d3,
               "theta4_deg": math.degrees(j.theta4),
               "fk_error_m": forward(geom, j).distance(pose)}
        if as_json:
            json_line(row)
        else:
            click.echo(f"{'*' if k == 0 else ' '} theta1={row['theta1_deg']:+9.4f}°  "
                       f"theta2={row['theta2_deg']:+9.4f}°  d3={j.d3:.4f} m  "
                       f"theta4={row['theta4_deg']:+9.4f}°")


def _bus_kwargs(interface: str | None, channel: str | None, bitrate: int | None
                ) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if interface:
        kw["interface"] = interface
    if channel:
        kw["channel"] = channel
    if bitrate:
        kw["bitrate"] = bitrate
    return kw


@arm_group.command("pick-place")
@click.option("--pick", type=XYZ, default=(0.45, 0.15, 0.12), show_default=True,
              metavar="X Y Z", help="Where to pick, m.")
@click.option("--place", type=XYZ, default=(0.2, -0.25, 0.15), show_default=True,
              metavar="X Y Z", help="Where to place, m.")
@click.option("-i", "--interface", default=None,
              help="python-can interface of the arm's bus; default (and -i fwbridge without "
                   "-c): a simulated arm on the fwbridge simulator, in this process.")
@click.option("-c", "--channel", default=None,
              help="Channel (vcan0, can0, ...); with fwbridge, a shared bus ('fwbridge can bus "
                   "up NAME') where 'fwbridge sim scara' runs the arm.")
@click.option("-b", "--bitrate", type=BITRATE, default=None,
              help="Bit rate (default 1000000; a shared bus: its own).")
@click.option("--realtime", is_flag=True,
              help="Simulated arm: pace the run by the wall clock (default: as fast as "
                   "possible).")
@_CONFIG
@click.option("--json", "as_json", is_flag=True,
              help="JSON lines: one per waypoint, then a summary.")
@click.option("--ros2", "ros2", multiple=True, metavar="ENDPOINT",
              help="Also publish the measured joints as ROS 2 joint_states via the Zenoh "
              "router at ENDPOINT (fwbridge[ros2]).")
def pick_place_cmd(pick: tuple[float, float, float], place: tuple[float, float, float],
                   interface: str | None, channel: str | None, bitrate: int | None,
                   realtime: bool, config: str | None, as_json: bool,
                   ros2: tuple[str, ...]) -> None:
    """One pick-and-place cycle of the SCARA arm over CAN.

    As seed 001 does it: XY moves at the safe height, straight descents.
    """
    geom, base = _geometry(config)
    cfg = PickPlaceConfig(**{**base.__dict__, "pick": pick, "place": place})
    try:
        task = PickAndPlace(geom, cfg)
    except (ValueError, UnreachableError) as exc:
        fail(str(exc))
    # No channel on the simulator: the arm is simulated here. A channel must name a shared
    # bus (shared:NAME, the arm of 'sim scara' on it), never a new, empty bus of this process.
    in_process = interface in (None, "fwbridge") and not channel
    if interface is None and channel:  # python-can's configuration names it, else fwbridge
        from fwbridge.cli_verbs.can_common import BusOptions, target

        interface = target(BusOptions(None, channel))[0]
    if interface == "fwbridge" and channel:
        _shared_arm_bus(channel)
    job = PickPlaceJob(task, geom, bitrate=bitrate or 1_000_000, realtime=realtime,
                       open_bus=None if in_process
                       else lambda: _open_arm_bus(interface, channel, bitrate),
                       ros_arm=_ros2_arm(ros2) if ros2 else None)

    def on_reached(r: Reached, fb: Joints) -> None:
        if as_json:
            json_line({"waypoint": r.phase.value, "time_s": round(r.time, 4),
                       "error_mm": round(r.error_m * 1000, 3)})
        else:
            p = forward(geom, fb)
            click.echo(f"t={r.time:6.2f}s  {r.phase.value:<14} reached, error "
                       f"{r.error_m * 1000:.2f} mm   tool ({p.x:+.3f}, {p.y:+.3f}, "
                       f"{p.z:.3f}) m")

    progress = PickPlaceProgress()
    try:
        run = pick_place(job, on_reached, progress)
    except KeyboardInterrupt:  # a stop signal: what was done, then the entry point's 128 + N
        with contextlib.suppress(OSError):
            click.echo(f"pick and place: stopped, {progress.reported} waypoints reached",
                       err=True)
        raise
    _summary(run, as_json)
    if run.task.failure:
        sys.exit(1)


def _shared_arm_bus(channel: str) -> None:
    """A fwbridge channel named for the arm must be a shared bus that is up."""
    from fwbridge.can_bus.bus_node import SHARED, split_channel
    from fwbridge.can_bus.daemon_dir import attachable, runtime_dir
    from fwbridge.protocols.errors import CanError

    name, shared = split_channel(channel)
    if not shared:
        fail(f"-c {channel} would be a bus of this process, with no arm on it: the arm of "
             f"another process is on a shared bus, -c {SHARED}{channel}; or leave out -c for "
             "an arm simulated in this process")
    if not attachable(name):
        try:
            runtime_dir()  # raises the reason there is none here (no Unix-domain sockets)
        except CanError as exc:
            fail(f"-c {channel}: {exc}")
        fail(f"-c {channel}: no shared bus {name} is up, so no arm is on it: start one "
             f"('fwbridge can bus up {name} --bitrate 1000000') and the arm on it "
             f"('CAN_INTERFACE=fwbridge CAN_CHANNEL={channel} fwbridge sim scara'), or leave "
             "out -c for an arm simulated in this process")


def _open_arm_bus(interface: str | None, channel: str | None, bitrate: int | None) -> Any:
    """The arm's bus (a real one, vcan, or a shared simulated bus); one error line if not."""
    import can

    from fwbridge.can_bus.interface import FwBridgeBus
    from fwbridge.cli_verbs.can_common import open_error

    try:
        bus = can.Bus(**_bus_kwargs(interface, channel, bitrate))
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        fail(f"cannot open the CAN bus: {open_error(interface, channel, exc)}")
    if isinstance(bus, FwBridgeBus) and bus.sim.afap:
        bus.shutdown()
        name = bus.channel_name
        fail(afap_refusal(name))
    return bus


def _ros2_arm(connect: tuple[str, ...]) -> Any:
    try:
        import rosbags  # noqa: F401
        import zenoh  # noqa: F401
    except ImportError:
        fail("--ros2 needs the ros2 extra: pip install 'fwbridge[ros2]'")
    from fwbridge.bridge.ros2.arm import Ros2Arm
    from fwbridge.bridge.ros2.participant import Participant
    from fwbridge.bridge.rosmsg import cdr

    cdr.typestore()  # loaded now, not inside the first control step
    participant = Participant(connect=connect, wait=3.0)
    if not participant.is_open:
        participant.close()
        fail(f"no Zenoh router reachable at {', '.join(connect)} "
             "(start one: fwbridge ros2 router)")
    return Ros2Arm(participant)


def _summary(run: PickPlaceRun, as_json: bool) -> None:
    task = run.task
    worst = max((r.error_m for r in task.reached), default=float("nan"))
    step_ms = [s * 1e3 for s in run.step_seconds] or [0.0]
    row = {"done": task.failure is None and task.done, "failure": task.failure,
           "waypoints": len(task.reached), "worst_error_mm": round(worst * 1000, 3),
           "grip": task.grip.result if task.grip else None,
           "seconds": round(run.sim_seconds, 3), "frames": run.bus_frames,
           "worst_step_ms": round(max(step_ms), 3)}
    if as_json:
        json_line(row)
        return
    table = Table(show_header=False, title="pick and place", title_justify="left")
    table.add_row("result", "done" if row["done"] else f"FAILED: {task.failure}")
    table.add_row("waypoints", f"{row['waypoints']} (worst error {row['worst_error_mm']} mm)")
    if task.grip is not None:
        table.add_row("grip", f"{task.grip.result}: {task.grip.capacity_n:.1f} N of friction "
                      f"for {task.grip.needed_n:.1f} N")
    table.add_row("time", f"{row['seconds']} s, {row['frames']} CAN frames")
    table.add_row("control step", f"worst {row['worst_step_ms']} ms of {task.cfg.period * 1e3:.0f}")
    console.print(table)


def scara_sim(duration: float | None, as_json: bool) -> None:
    """``fwbridge sim scara``: the arm's five modules on python-can's configured bus."""
    import can

    try:
        bus = scara_bus(dict(can.util.load_config()))
    except can.CanInterfaceNotImplementedError:
        bus = scara_bus({})  # nothing configured: the in-process simulator
    except (can.CanError, ValueError) as exc:
        fail(f"python-can configuration: {exc}")
    from fwbridge.cli_verbs.can_common import open_error

    try:
        arm = open_scara(bus, ScaraGeometry())
    except ArmError as exc:
        fail(str(exc))
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        fail(f"cannot open the CAN bus: {open_error(bus.interface, bus.channel, exc)}")
    names = ", ".join(f"{s.name}=0x{0x100 + s.module_id:x}" for s in arm_specs(ScaraGeometry()))

    def ready() -> None:
        if as_json:
            json_line({"event": "ready", "bus": arm.where, "shared": bus.shared,
                       "modules": names})
        else:
            click.echo(f"SCARA arm modules on {arm.where}: {names}", err=True)
            _scara_hint(bus)

    def status(now: float, pos: dict[str, float]) -> None:
        if as_json:
            json_line({"event": "status", "t": round(now, 3), **pos})
        else:
            click.echo("  ".join(f"{k}={v:+.4f}" for k, v in pos.items()), err=True)

    res = serve_scara(arm, duration, on_ready=ready, on_status=status)
    if res.interrupted:
        with contextlib.suppress(OSError):
            sys.stderr.write("\n")  # after the ^C the terminal echoed
    if as_json:
        json_line({"event": "end", "t": res.ran, **res.positions})
    else:
        click.echo(f"sim scara: ran {res.ran:.1f} s, modules at "
                   + "  ".join(f"{k}={v:+.4f}" for k, v in res.positions.items()), err=True)


def _scara_hint(bus: ScaraBus) -> None:
    """How another process reaches the arm (a shared bus), or why it cannot."""
    channel = bus.channel
    if bus.shared:
        click.echo(f"{channel} is a shared bus (its daemon runs it): drive the arm from "
                   f"any process with 'fwbridge arm pick-place -i fwbridge -c {channel}'",
                   err=True)
    elif bus.interface == "fwbridge":
        click.echo(f"{channel} is simulated inside this process, so nothing else reaches "
                   "it; to drive the arm from another process share a bus: 'fwbridge can "
                   "bus up arm0 --bitrate 1000000', then 'CAN_INTERFACE=fwbridge "
                   "CAN_CHANNEL=shared:arm0 fwbridge sim scara' and 'fwbridge arm "
                   "pick-place -i fwbridge -c shared:arm0' (or 'fwbridge arm pick-place' "
                   "alone, which simulates its own arm)", err=True)
