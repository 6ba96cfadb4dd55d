"""``fwbridge bridge CONFIG``: run the mobile-base node, odometry as JSON lines."""

from __future__ import annotations

import json
import sys
import threading
import time

import click

from fwbridge.bridge.base_node import BaseNode, NodeEvent
from fwbridge.bridge.capture import CaptureWriter
from fwbridge.bridge.config import ConfigError, load_config
from fwbridge.bridge.hardware import LifecycleError
from fwbridge.bridge.odometry import Odometry
from fwbridge.bridge.transports import LinkError
from fwbridge.cli_verbs.common import fail, json_line, print_counters
from fwbridge.cli_verbs.link import DURATION, Deadline


def parse_request(line: str) -> tuple[float, float, float] | None:
    """``vx vy wz`` or ``{"vx": …, "vy": …, "wz": …}``; None for a blank line."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith("{"):
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("expected a JSON object")
        vals = [obj.get(k, 0.0) for k in ("vx", "vy", "wz")]
    else:
        vals = text.replace(",", " ").split()
        if len(vals) != 3:
            raise ValueError("expected three numbers: vx vy wz")
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
              help="Capture both directions of the link to a pcapng file.")
@click.option("--cmd-stdin", is_flag=True,
              help="Read velocity requests from stdin, one per line: 'vx vy wz' or JSON.")
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Print every Nth odometry record.")
def bridge_cmd(config: str, duration: float | None, use_sim: bool | None, record: str | None,
               cmd_stdin: bool, every: int) -> None:
    """Run the mobile-base node of CONFIG (a robot TOML file).

    Sends velocity commands at the control rate (zero when requests stop:
    the watchdog), integrates odometry and prints it to stdout as JSON
    lines; reports, and reconnects, when the port goes away. Node events go
    to stderr.
    """
    try:
        cfg = load_config(config, use_sim=use_sim)
    except ConfigError as exc:
        fail(str(exc))
    fatal: list[str] = []

    def on_event(event: NodeEvent) -> None:
        click.echo(f"bridge: {event.message}", err=True)
        if event.kind == "garbage":
            fatal.append(event.message.replace("link.baud", f"link.baud in {config}"))

    def on_odometry(odom: Odometry) -> None:
        if odom.seq % every == 0:
            json_line({"wall": time.time(), **odom.as_dict()})  # stamp is the node's clock

    capture = (
        CaptureWriter(record, port=cfg.link_url, description=f"{cfg.baud} baud")
        if record else None
    )
    node = BaseNode(cfg, on_odometry=on_odometry, on_event=on_event, capture=capture)
    try:
        node.start()
    except (LinkError, ConfigError, LifecycleError) as exc:
        if capture is not None:
            capture.close()
        fail(str(exc))
    source = "simulated endpoint" if cfg.use_sim else "port"
    click.echo(f"bridge: {source} {cfg.link_url} active, {cfg.rate_hz:g} Hz commands", err=True)
    refused = [0]  # stdin lines refused (bad syntax or values)
    if cmd_stdin:
        threading.Thread(target=_read_requests, args=(node, refused), daemon=True).start()
    deadline = Deadline(duration)
    try:
        while node.running and not deadline.expired and not fatal:
            time.sleep(deadline.left(0.1))
    except KeyboardInterrupt:
        click.echo("", err=True)
    finally:
        node.stop()
        if capture is not None:
            capture.close()
    stats = node.stats()
    if cmd_stdin:
        stats["stdin_refused"] = refused[0]
    print_counters(stats, "bridge")
    if fatal:
        fail(fatal[0])
    if node.error is not None:
        fail(str(node.error))
