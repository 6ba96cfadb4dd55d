"""``fwbridge bridge CONFIG``: run the mobile-base node; odometry as JSON lines (piped,
or ``--json``) or one live summary line (on a terminal)."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from typing import Any

import click

from fwbridge.bridge.base_run import BaseRunConfig, BaseRunHooks, RunFailed, run_base
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import ConfigError, load_config
from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR
from fwbridge.cli_verbs.common import (
    FORCE,
    JsonBlocks,
    fail,
    print_counters,
    warn_listening,
    writable,
)
from fwbridge.cli_verbs.link import DURATION, Rate, until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.params import velocity_limit_options, velocity_refused
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.cli_verbs.stopping import silence_stdout

#: The longest stdin request line, its end included (three numbers, or a small JSON
#: object, fit many times).
MAX_LINE = 1024


def parse_request(line: str, max_linear: float = MAX_LINEAR,
                  max_angular: float = MAX_ANGULAR) -> tuple[float, float, float] | None:
    """``vx vy wz`` or ``{"vx": …, "vy": …, "wz": …}``; None for a blank line.

    ConfigError names what is wrong: the syntax, or the first field that is not
    finite or is beyond the limits (cmd_vel's, unless changed).
    """
    if len(line) > MAX_LINE:
        raise ConfigError(f"longer than {MAX_LINE} characters")
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    try:
        if text.startswith("{"):
            obj = json.loads(text)
            if not isinstance(obj, dict):
                raise ConfigError("expected a JSON object")
            vals = [obj.get(k, 0.0) for k in ("vx", "vy", "wz")]
        else:
            vals = text.replace(",", " ").split()
            if len(vals) != 3:
                raise ConfigError("expected three numbers: vx vy wz")
        vx, vy, wz = (float(v) for v in vals)
    except ConfigError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ConfigError(f"not a request: {exc}"[:200]) from None
    why = velocity_refused(vx, vy, wz, max_linear, max_angular)
    if why is not None:
        raise ConfigError(why)
    return vx, vy, wz


@click.command("bridge")
@click.argument("config", type=click.Path(dir_okay=False))
@DURATION
@click.option("--sim/--real", "use_sim", default=None,
              help="Override the config's use_sim (simulated endpoint or the real port).")
@click.option("--port", "port", default=None, metavar="PORT",
              help="Open PORT (a device, a pty such as 'fwbridge sim' prints, or a URL) "
                   "instead of the config's link.url; implies --real.")
@click.option("--record", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Capture both directions of the link: pcapng, or MCAP (raw bytes, ROS 2 "
                   "messages, counters) for a .mcap name. An existing FILE is refused unless "
                   "--force, and replaced only once the link is up.")
@FORCE
@click.option("--cmd-stdin", is_flag=True,
              help="Read velocity requests from stdin, one per line: 'vx vy wz' or JSON. A "
                   "line that cannot be followed (bad syntax, not finite, beyond "
                   "--max-linear/--max-angular) stops the base until the next good line.")
@velocity_limit_options
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Print every Nth odometry record (JSON lines).")
@click.option("--json", "as_json", is_flag=True,
              help="Odometry as JSON lines on stdout on a terminal too (piped, it always "
                   "is; on a terminal the default is one live summary line).")
@click.option("--ros2", "ros2", is_flag=True,
              help="Also be a ROS 2 node over Zenoh (the config's [ros2] table; needs "
              "fwbridge[ros2]).")
@click.option("--urdf", "urdf", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Publish FILE on robot_description instead of the "
              "config's [ros2] urdf (which must be in the config's folder; FILE may be "
              "anywhere).")
@FOXGLOVE
def bridge_cmd(config: str, duration: float | None, use_sim: bool | None, record: str | None,
               force: bool, cmd_stdin: bool, every: int, as_json: bool, ros2: bool,
               foxglove: bool, foxglove_host: str, foxglove_port: int, max_linear: float,
               max_angular: float, urdf: str | None = None, port: str | None = None) -> None:
    """Run the mobile-base node of CONFIG (a robot TOML file).

    Sends velocity commands at the control rate (zero when requests stop:
    the watchdog), integrates odometry and prints it to stdout as JSON
    lines (on a terminal: one live line of link state, odometry rate, pose
    and counters, unless --json); reports, and reconnects, when the port
    goes away. Node events go to stderr. With --ros2 (or '[ros2] enabled = true') it is also a ROS 2
    node: odom, /tf, cmd_vel and /diagnostics over Zenoh.
    """
    try:
        cfg = load_config(config, use_sim=use_sim)
        if port is not None:
            cfg = _on_port(cfg, port)
        ros2_settings = _ros2_settings(config, ros2, urdf)
    except ConfigError as exc:
        fail(str(exc))
    if record:
        writable(record, "--record", force=force)
    # JSON lines for a pipe (or when asked); a person at a terminal gets the live line.
    lines = as_json or not sys.stdout.isatty()
    rate = Rate()
    hooks = BaseRunHooks(
        say=lambda line: click.echo(line, err=True),
        out=JsonBlocks(0.05),  # lines in blocks, none held longer than 50 ms
        on_gone=silence_stdout,
        live=live_sink(foxglove, foxglove_host, foxglove_port),  # None without --foxglove
        status=StatusLine if not lines else contextlib.nullcontext,
        summary=lambda node, odom: _summary(node, odom, rate, cfg.link_url),
        interruptible=until_interrupted,
        start_ros2=(None if ros2_settings is None
                    else lambda node: _start_ros2(node, ros2_settings)),
        stdin=sys.stdin, parse_request=parse_request)
    run_cfg = BaseRunConfig(cfg, config_path=config, duration=duration, record=record,
                            lines=lines, every=every, cmd_stdin=cmd_stdin,
                            max_linear=max_linear, max_angular=max_angular, max_line=MAX_LINE)
    try:
        result = run_base(run_cfg, hooks)
    except RunFailed as exc:
        fail(str(exc))
    print_counters(result.stats, "bridge")
    if result.ros2_stats is not None:
        print_counters(result.ros2_stats, "ros2")
    if result.error is not None:
        fail(result.error)


def _on_port(cfg: Any, port: str) -> Any:
    """``cfg`` on ``port`` (checked as a config's link.url is), the real link."""
    import dataclasses

    from fwbridge.bridge.link.link_urls import check_link_url

    try:
        check_link_url(port)
    except ConfigError as exc:
        raise ConfigError(f"--port {port}: {exc}") from None
    return dataclasses.replace(cfg, url=port, use_sim=False)


def _summary(node: BaseNode, odom: Any, rate: Rate, url: str) -> str:
    """The live line: link state, odometry per second, pose, the counters that move."""
    st = node.stats()
    link = "up" if node.connected else "DOWN"
    pose = ("x=- y=- yaw=-" if odom is None else
            f"x={odom.x:+.3f} y={odom.y:+.3f} yaw={math.degrees(odom.yaw):+.1f}°")
    errors = st.get("checksum_errors", 0) + st.get("discarded", 0) + st.get("nonfinite", 0)
    return (f"link {link}  odom {rate(st.get('odometry', 0)):.0f}/s  {pose}  "
            f"commands={st.get('commands', 0)} rx_errors={errors} "
            f"watchdog_trips={st.get('watchdog_trips', 0)} reconnects={st.get('reconnects', 0)}"
            f"  {url}")


def _ros2_settings(config: str, flag: bool, urdf: str | None = None) -> Any:
    """The [ros2] settings when ROS 2 is on (flag or table), else None; ``urdf``: the
    URDF file the command line names, read as it is (the user's own path)."""
    from dataclasses import replace
    from pathlib import Path

    from fwbridge.bridge.ros2.config import load_ros2, read_urdf

    settings = load_ros2(config)
    if urdf is not None:
        settings = replace(settings, urdf=urdf,
                           robot_description=read_urdf(Path(urdf), option="--urdf"))
    if not (flag or settings.enabled):
        return None
    try:
        import rosbags  # noqa: F401
        import zenoh  # noqa: F401
    except ImportError:
        fail("--ros2 needs the ros2 extra: pip install 'fwbridge[ros2]'")
    return settings


def _start_ros2(node: BaseNode, settings: Any) -> Any:
    from fwbridge.bridge.ros2.base import Ros2Base

    warn_listening("bridge", settings.listen)
    ros = Ros2Base(node, settings, say=lambda text: click.echo(f"bridge: {text}", err=True))
    try:
        ros.start()
    except Exception as exc:  # a bad endpoint or Zenoh refusing: stop the robot, say why
        node.stop()
        fail(f"ros2: {exc}")
    ns = settings.namespace.rstrip("/")
    described = f", {ros.description_pub.topic}" if ros.description_pub is not None else ""
    click.echo(f"bridge: ROS 2 node {ns}/{settings.node_name} (domain {settings.domain}, "
               f"{settings.distro}): {ros.odom_pub.topic}, {ros.tf_pub.topic}, "
               f"{ros.cmd_sub.topic}, {ros.diag_pub.topic}{described}", err=True)
    return ros
