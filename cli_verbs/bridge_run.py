"""``fwbridge bridge CONFIG``: run the mobile-base node; odometry as JSON lines (piped,
or ``--json``) or one live summary line (on a terminal)."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any

import click

from fwbridge.bridge.link.transports import LinkError
from fwbridge.bridge.node.base_node import BaseNode, NodeEvent
from fwbridge.bridge.node.config import ConfigError, load_config
from fwbridge.bridge.node.hardware import LifecycleError
from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR
from fwbridge.bridge.node.sinks import CallbackSink, JsonLinesSink, Sink
from fwbridge.cli_verbs.common import (
    FORCE,
    JsonBlocks,
    fail,
    print_counters,
    warn_listening,
    writable,
)
from fwbridge.cli_verbs.link import DURATION, Deadline, Rate, until_interrupted
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


def _lines(stream: IO[str]) -> Iterator[str]:
    """``stream``'s lines, a longer one than MAX_LINE cut to MAX_LINE + 1 characters (which
    parse_request refuses): its rest is read and dropped, so a line without an end cannot
    fill the memory."""
    while line := stream.readline(MAX_LINE + 1):
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while (rest := stream.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
        yield line


def _read_requests(node: BaseNode, refused: list[int], max_linear: float,
                   max_angular: float) -> None:
    """Feed velocity requests from stdin lines until end of input. A line that cannot be
    followed stops the base (a zero request: what it meant is not known, and the request
    before it is not what the sender wants now) until the next good line; it is counted
    and named in one error line."""
    for lineno, line in enumerate(_lines(sys.stdin), 1):
        try:
            req = parse_request(line, max_linear, max_angular)
            if req is not None:
                node.request(*req)
        except (ValueError, TypeError) as exc:
            refused[0] += 1
            node.request(0.0, 0.0, 0.0)
            click.echo(f"error: stdin line {lineno} ignored, the base stops: {exc}", err=True)


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
    fatal: list[str] = []
    reader_gone = threading.Event()  # stdout's reader went away (| head): stop the base

    def on_event(event: NodeEvent) -> None:
        click.echo(f"bridge: {event.message}", err=True)
        if event.kind == "garbage":
            fatal.append(event.message.replace("link.baud", f"link.baud in {config}"))

    out = JsonBlocks(0.05)  # lines in blocks, none held longer than 50 ms

    def flush_out() -> None:
        if reader_gone.is_set():
            return
        try:
            out.flush()
        except BrokenPipeError:
            gone()

    def gone() -> None:
        silence_stdout()
        reader_gone.set()

    # The verb picks the sinks; the node hands each the same bytes, records and events,
    # and closes them (last first) after the safe stop, whatever ends the run.
    sinks: list[Sink] = []
    pending = None
    node: BaseNode | None = None
    if record or foxglove:
        # The capture goes beside --record until the link works: a failed start leaves it
        # as it was. (The record room loads with --record only: a plain bridge starts faster.)
        from fwbridge.bridge.record.safe_output import OutputError, PendingFile
        from fwbridge.bridge.record.serial_mcap import open_capture
        from fwbridge.protocols.errors import CaptureError

        live = live_sink(foxglove, foxglove_host, foxglove_port)
        try:
            pending = PendingFile(record) if record else None
            sinks.append(open_capture(
                record, port=cfg.link_url, description=f"{cfg.baud} baud", live=live,
                stream=pending.stream if pending else None, decode=False,
                stats=lambda: node.stats() if node is not None else {},
                receivers=lambda: node.receiver_stats() if node is not None else {}))
        except (CaptureError, OutputError) as exc:
            if live is not None:
                live.close()
            if pending is not None:
                pending.discard()
            fail(f"--record {exc}" if isinstance(exc, OutputError) else str(exc))
    # JSON lines for a pipe (or when asked); a person at a terminal gets the live line.
    lines = as_json or not sys.stdout.isatty()
    latest: list[Any] = [None]  # the newest odometry record, for the live line
    if lines:
        sinks.append(JsonLinesSink(out, every, on_gone=gone))  # stamp is the node's clock

    def keep(odom: Any) -> None:
        latest[0] = odom

    sinks.append(CallbackSink(on_event=on_event, on_odometry=None if lines else keep))
    node = BaseNode(cfg, sinks=sinks, on_event=None,
                    say=lambda line: click.echo(line, err=True))
    try:
        node.start()
    except (LinkError, ConfigError, LifecycleError) as exc:
        node.stop()  # closes the sinks
        if pending is not None:
            pending.discard()
        fail(str(exc))
    except BaseException:  # a stop signal while the link starts: the safe stop all the same
        node.stop()
        if pending is not None:
            pending.discard()
        raise
    ros: Any = None
    refused = [0]  # stdin lines refused (bad syntax or values)
    deadline = Deadline(duration)
    rate = Rate()
    try:
        with StatusLine() if not lines else contextlib.nullcontext() as status, \
                until_interrupted():  # any stop from here on reaches the safe stop below
            if pending is not None:
                pending.publish()
            source = "simulated endpoint" if cfg.use_sim else "port"
            click.echo(f"bridge: {source} {cfg.link_url} active, {cfg.rate_hz:g} Hz commands",
                       err=True)
            if record:
                click.echo(f"bridge: recording the link to {record}", err=True)
            if ros2_settings is not None:
                ros = _start_ros2(node, ros2_settings)
            if cmd_stdin:
                threading.Thread(target=_read_requests,
                                 args=(node, refused, max_linear, max_angular),
                                 daemon=True).start()
            while node.running and not deadline.expired and not fatal:
                if reader_gone.wait(deadline.left(out.period)):
                    break
                flush_out()
                if status is not None:
                    status.update(_summary(node, latest[0], rate, cfg.link_url))
    finally:
        if ros is not None:
            ros.stop()
        node.stop()  # the safe stop: zero velocity, whatever ended the run; sinks closed
        flush_out()  # the last block of odometry lines
        if pending is not None:
            pending.close()
    stats = node.stats()
    if cmd_stdin:
        stats["stdin_refused"] = refused[0]
    print_counters(stats, "bridge")
    if ros is not None:
        print_counters(ros.stats(), "ros2")
    if fatal:
        fail(fatal[0])
    if node.error is not None:
        fail(str(node.error))


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
