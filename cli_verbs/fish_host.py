"""``fwbridge fish --port PORT status|config get|set FILE|flash FILE|actions|errors|serve``.

The fish's system commands (PROTOCOLS.md 6, "fish commands") with the
acknowledged action link underneath: each command is retransmitted on a
lost answer, and a read is asked again until its result comes, up to
``--retries``. Exit 0 on success, 2 with one ``error: …`` line otherwise.
``serve`` runs the fish as a ROS 2 node (:mod:`fwbridge.bridge.ros2.fish`)
until stopped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.link.transports import IO_ERRORS
from fwbridge.bridge.robots.fish_client import FishClient, FishError
from fwbridge.bridge.robots.fish_serve import FishServeConfig, serve_fish
from fwbridge.cli_verbs.common import Group, fail, json_line, print_counters, warn_listening
from fwbridge.cli_verbs.link import BAUD, open_port
from fwbridge.cli_verbs.params import DURATION, Finite
from fwbridge.cli_verbs.ros2 import CONFIG, CONNECT, DISTRO, DOMAIN, LISTEN, ros2_settings
from fwbridge.cli_verbs.stopping import stoppable
from fwbridge.protocols.config_text import TextLimitError, parse_json
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.families.fish_commands import UserConfig

__all__ = ["fish_group"]

MAX_FILE = 1 << 20  # bytes: a configuration or image larger than this is not one


@click.group("fish", cls=Group)
@click.option("-p", "--port", default=None, metavar="PORT",
              help="The fish's serial port (a device, a pty or sim://fish); required.")
@click.option("--machine", type=click.IntRange(0, 255), default=0, show_default=True,
              help="The fish's machine code.")
@click.option("--timeout", type=Finite(0, 60, lo_open=True, unit="s"), default=0.5,
              show_default=True, metavar="S", help="Seconds to wait for each answer or result.")
@click.option("--retries", type=click.IntRange(0, 100), default=5, show_default=True,
              help="Retransmissions after the first attempt.")
@BAUD
@click.pass_context
def fish_group(ctx: click.Context, port: str | None, machine: int, timeout: float, retries: int,
               baud: int) -> None:
    """The robot fish's status, configuration, stored actions and firmware."""
    ctx.meta["fish"] = (port, machine, timeout, retries, baud)
    ctx.meta["fish.ctx"] = ctx  # where --port belongs, for the error that it is missing


@contextlib.contextmanager
def _client(ctx: click.Context) -> Iterator[FishClient]:
    port, machine, timeout, retries, baud = ctx.meta["fish"]
    if port is None:  # checked here, not by click: 'fish flash --help' needs no port
        raise click.UsageError("Missing option '-p' / '--port'.", ctx.meta["fish.ctx"])
    serial_port = open_port(port, baud)
    try:
        yield FishClient(ActionLink(serial_port, timeout=timeout, retries=retries), machine)
    except FishError as exc:
        fail(str(exc))
    except (FrameError, ConfigError) as exc:
        fail(str(exc))
    except IO_ERRORS as exc:
        fail(f"{port} went away: {exc}")
    finally:
        with contextlib.suppress(*IO_ERRORS):
            serial_port.close()


def _show(fields: dict[str, Any], as_json: bool) -> None:
    if as_json:
        json_line(fields)
        return
    for key, value in fields.items():
        if isinstance(value, list):
            click.echo(f"{key}:")
            for row in value:
                click.echo("  " + (json.dumps(row) if isinstance(row, dict) else str(row)))
        else:
            click.echo(f"{key}: {value}")


AS_JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object.")


def _simple(name: str, help_text: str, run: Callable[[FishClient], dict[str, Any]]
            ) -> click.Command:
    @click.command(name, help=help_text)
    @AS_JSON
    @click.pass_context
    def cmd(ctx: click.Context, as_json: bool) -> None:
        with _client(ctx) as fish:
            fields = run(fish)
        _show(fields, as_json)
    return cmd


def _done(action: Callable[[FishClient], None], what: str) -> Callable[[FishClient], Any]:
    def run(fish: FishClient) -> dict[str, Any]:
        action(fish)
        return {"done": what}
    return run


fish_group.add_command(_simple("status", "0x01: mode, firmware bank and version, uptime.",
                               lambda f: f.status().as_dict()))
fish_group.add_command(_simple("actions", "0x37: the stored action groups.",
                               lambda f: f.actions().as_dict()))
fish_group.add_command(_simple("errors", "0x41: the error codes the fish keeps.",
                               lambda f: f.error_codes().as_dict()))
fish_group.add_command(_simple("erase", "0x34: erase the stored action groups.",
                               _done(FishClient.erase_actions, "erased")))
fish_group.add_command(_simple("still", "0x02: stand still (servos to 0° and held).",
                               _done(FishClient.stand_still, "standing still")))
fish_group.add_command(_simple("free", "0x03: free swimming.",
                               _done(FishClient.free_swimming, "free swimming")))
fish_group.add_command(_simple("reset", "0x35 reset: reboot the main controller.",
                               lambda f: f.reset().as_dict()))


@fish_group.group("config")
def config_group() -> None:
    """The user configuration: read it, write it.

    Scenes for free action, decision period, avoidance.
    """


@config_group.command("get")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write it to FILE (JSON, written whole) instead of stdout.")
@click.pass_context
def config_get(ctx: click.Context, output: str | None) -> None:
    """0x36: read the user configuration, as JSON."""
    with _client(ctx) as fish:
        cfg = fish.config_get()
    text = json.dumps(cfg.as_dict(), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    from fwbridge.bridge.sim.fish.flash import write_whole

    write_whole(Path(output), text)


@config_group.command("set")
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_context
def config_set(ctx: click.Context, file: str) -> None:
    """0x33: write the user configuration in FILE (JSON).

    FILE is as 'config get' prints it.
    """
    cfg = _load_config(file)
    with _client(ctx) as fish:
        fish.config_set(cfg)
        back = fish.config_get()
    if back != cfg:
        fail("the fish reads back a different configuration")
    click.echo(f"configuration written: {len(cfg.scenes)} scenes", err=True)


def _load_config(file: str) -> UserConfig:
    try:
        raw = _read_file(file)
        return UserConfig.from_dict(parse_json(raw.decode("utf-8"), file))
    except TextLimitError as exc:
        fail(str(exc))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"{file}: not JSON: {exc}")
    except FrameError as exc:
        fail(f"{file}: {exc}")


def _read_file(file: str) -> bytes:
    try:
        with open(file, "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
    except OSError as exc:
        fail(f"{file}: {exc.strerror or exc}")
    if len(raw) > MAX_FILE:
        fail(f"{file}: larger than {MAX_FILE} bytes")
    return raw


@fish_group.command("flash")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--chunk", type=click.IntRange(1, 512), default=256, show_default=True,
              help="Image bytes per frame.")
@AS_JSON
@click.pass_context
def flash_cmd(ctx: click.Context, file: str, chunk: int, as_json: bool) -> None:
    """0x35: upgrade the firmware to the image in FILE (IAP, dual bank)."""
    image = _read_file(file)

    sent = [0, 0]  # chunks acknowledged, chunks in all

    def progress(done: int, total: int) -> None:
        sent[:] = [done, total]
        if not as_json:
            click.echo(f"\rchunk {done}/{total}", nl=done == total, err=True)

    try:
        with _client(ctx) as fish:
            report = fish.flash(image, chunk_size=chunk, progress=progress)
    except KeyboardInterrupt:  # a stop signal: how far it got, then the entry point's 128 + N
        with contextlib.suppress(OSError):
            click.echo(f"\nfish flash: stopped after chunk {sent[0]} of {sent[1]}", err=True)
        raise
    _show(report.as_dict(), as_json)


@fish_group.command("serve")
@click.option("--namespace", default=None, metavar="NS",
              help="The node's ROS namespace (default: the --config file's, else /fish1).")
@click.option("--node-name", default="fish_bridge", show_default=True, metavar="NAME",
              help="The ROS 2 node's name.")
@click.option("--duration", type=DURATION, default=None, metavar="S",
              help="Stop after S seconds (default: Ctrl-C or SIGTERM).")
@CONNECT
@LISTEN
@DOMAIN
@DISTRO
@CONFIG
@click.pass_context
def serve_cmd(ctx: click.Context, namespace: str | None, node_name: str,
              duration: float | None, connect: tuple[str, ...], listen: tuple[str, ...],
              domain: int | None, distro: str | None, config: str | None) -> None:
    """The fish as a ROS 2 node: its status and configuration as services.

    \b
    /NS/NAME/get_status   std_srvs/srv/Trigger: 0x01 status, link, counters (JSON)
    /NS/NAME/get_config   std_srvs/srv/Trigger: the user configuration (JSON)
    /NS/NAME/set_config   rcl_interfaces/srv/SetParameters: free_period_ms,
                          avoid_mm, stored_probability_pct, scenes (JSON text)
    /NS/NAME/stand_still  std_srvs/srv/Trigger: 0x02, stop swimming
    /diagnostics          the fish's state, link lost, once a second

    A verb of the fish, not of 'ros2': the group's --port, --machine, --timeout
    and --retries choose the fish and its link, as for every fish command; the
    network options are those of 'fwbridge fleet'. Runs until Ctrl-C or SIGTERM
    (or --duration), then prints its counters.
    """
    from fwbridge.bridge.node.config import ConfigError as RobotConfigError
    from fwbridge.bridge.ros2.config import parse_ros2
    port, machine, timeout, retries, baud = ctx.meta["fish"]
    if port is None:
        raise click.UsageError("Missing option '-p' / '--port'.", ctx.meta["fish.ctx"])
    s = ros2_settings(config, connect, listen, domain, distro)
    try:
        if namespace is not None:
            s = replace(s, namespace=parse_ros2({"namespace": namespace},
                                                source="--namespace").namespace)
        elif s.namespace == "/":  # neither the option nor the robot file names one
            s = replace(s, namespace="/fish1")
        parse_ros2({"node_name": node_name}, source="--node-name")
    except RobotConfigError as exc:
        fail(str(exc))
    warn_listening("fish serve", s.listen)
    cfg = FishServeConfig(s, port, machine=machine, timeout=timeout, retries=retries,
                          node_name=node_name, duration=duration)

    def ready(ros: Any) -> None:
        listening = f", listening on {', '.join(s.listen)}" if s.listen else ""
        click.echo(f"fish serve: ROS 2 node /{ros.fqn} for the fish on {port} (domain "
                   f"{s.domain}, {s.distro}), connecting to {', '.join(s.connect)}"
                   f"{listening}; services {', '.join(ros.service_names)}; "
                   "/diagnostics", err=True)

    result = serve_fish(cfg, open_port(port, baud), on_ready=ready, interruptible=stoppable,
                        say=lambda text: click.echo(f"fish serve: {text}", err=True),
                        on_interrupt=lambda: click.echo("", err=True))
    print_counters(result.stats, "fish serve")
