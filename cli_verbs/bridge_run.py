"""``fwbridge bridge CONFIG``: run the mobile-base node, odometry as JSON lines."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import click

from fwbridge.bridge.link.transports import LinkError
from fwbridge.bridge.node.base_node import BaseNode, NodeEvent
from fwbridge.bridge.node.config import ConfigError, load_config
from fwbridge.bridge.node.hardware import LifecycleError
from fwbridge.bridge.node.sinks import CallbackSink, JsonLinesSink, Sink
from fwbridge.cli_verbs.common import FORCE, JsonBlocks, fail, print_counters, writable
from fwbridge.cli_verbs.link import DURATION, Deadline, until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.stopping import silence_stdout


def parse_request(line: str) -> tuple[float, float, float] | None:
    """``vx vy wz`` or ``{"vx": …, "vy": …, "wz": …}``; None for a blank line."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith("{"):
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ConfigError("expected a JSON object")
        vals = [obj.get(k, 0.0) for k in ("vx", "vy", "wz")]
    else:
        vals = text.replace(",", " ").split()
        if len(vals) != 3:
            raise ConfigError("expected three numbers: vx vy wz")
    out = tuple(float(v) for v in vals)
    return out[0], out[1], out[2]


def _read_requests(node: BaseNode, refused: list[int]) -> None:
    """Feed velocity requests from stdin lines until end of input; count refused lines."""
    for lineno, line in enumerate(sys.stdin, 1):
        try:
            req = parse_request(line)
            if req is not None:
                node.request(*req)
        except (ValueError, TypeError) as exc:
            refused[0] += 1
            click.echo(f"bridge: stdin line {lineno} ignored: {exc}", err=True)


@click.command("bridge")
@click.argument("config", type=click.Path(dir_okay=False))
@DURATION
@click.option("--sim/--real", "use_sim", default=None,
              help="Override the config's use_sim (simulated endpoint or the real port).")
@click.option("--record", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Capture both directions of the link: pcapng, or MCAP (raw bytes, ROS 2 "
                   "messages, counters) for a .mcap name. An existing FILE is refused unless "
                   "--force, and replaced only once the link is up.")
@FORCE
@click.option("--cmd-stdin", is_flag=True,
              help="Read velocity requests from stdin, one per line: 'vx vy wz' or JSON.")
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Print every Nth odometry record.")
@click.option("--ros2", "ros2", is_flag=True,
              help="Also be a ROS 2 node over Zenoh (the config's [ros2] table; needs "
              "fwbridge[ros2]).")
@FOXGLOVE
def bridge_cmd(config: str, duration: float | None, use_sim: bool | None, record: str | None,
               force: bool, cmd_stdin: bool, every: int, ros2: bool, foxglove: bool,
               foxglove_host: str, foxglove_port: int) -> None:
    """Run the mobile-base node of CONFIG (a robot TOML file).

    Sends velocity commands at the control rate (zero when requests stop:
    the watchdog), integrates odometry and prints it to stdout as JSON
    lines; reports, and reconnects, when the port goes away. Node events go
    to stderr. With --ros2 (or '[ros2] enabled = true') it is also a ROS 2
    node: odom, /tf, cmd_vel and /diagnostics over Zenoh.
    """
    try:
        cfg = load_config(config, use_sim=use_sim)
        ros2_settings = _ros2_settings(config, ros2)
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
    sinks.append(JsonLinesSink(out, every, on_gone=gone))  # stamp is the node's clock
    sinks.append(CallbackSink(on_event=on_event))
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
    try:
        with until_interrupted():  # any stop from here on reaches the safe stop below
            if pending is not None:
                pending.publish()
            source = "simulated endpoint" if cfg.use_sim else "port"
            click.echo(f"bridge: {source} {cfg.link_url} active, {cfg.rate_hz:g} Hz commands",
                       err=True)
            if ros2_settings is not None:
                ros = _start_ros2(node, ros2_settings)
            if cmd_stdin:
                threading.Thread(target=_read_requests, args=(node, refused),
                                 daemon=True).start()
            while node.running and not deadline.expired and not fatal:
                if reader_gone.wait(deadline.left(out.period)):
                    break
                flush_out()
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


def _ros2_settings(config: str, flag: bool) -> Any:
    """The [ros2] settings when ROS 2 is on (flag or table), else None."""
    from fwbridge.bridge.ros2.config import load_ros2

    settings = load_ros2(config)
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
