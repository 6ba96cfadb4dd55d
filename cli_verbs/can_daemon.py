"""``fwbridge can bus up|down|list``: a simulated bus shared by every process of this user.

``bus up NAME`` runs the bus model as a small daemon (foreground, or
``--detach``) on a Unix socket in the user's private runtime directory; from
then on ``fwbridge can -c shared:NAME ...`` and ``can.Bus(interface="fwbridge",
channel="shared:NAME")`` in any process are nodes of that one bus (a plain NAME
stays a bus of its own process).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import click

from fwbridge.cli_verbs.common import Group, console, fail, json_line
from fwbridge.cli_verbs.stopping import stopped_by

__all__ = ["bus_group"]


@click.group("bus", cls=Group)
def bus_group() -> None:
    """A simulated bus shared across processes: up, down, list."""


@bus_group.command("up")
@click.argument("name", default="sim0")
@click.option("--bitrate", type=click.IntRange(min=1000, max=10_000_000), default=500_000,
              show_default=True, help="Nominal bit rate, bit/s.")
@click.option("--data-bitrate", type=click.IntRange(min=1000, max=20_000_000), default=None,
              help="CAN FD data-phase bit rate (default: the nominal rate).")
@click.option("--pacing", type=click.Choice(["realtime", "afap"]), default="realtime",
              show_default=True, help="Bus time follows the wall clock, or runs as fast as the "
              "attached nodes allow (they all wait on it).")
@click.option("--socketcand", "socketcand", type=click.IntRange(0, 65535), default=None,
              metavar="PORT", help="Also serve the socketcand protocol (raw mode) on "
              "127.0.0.1:PORT (0: a free port, printed), for python-can's socketcand interface.")
@click.option("--max-clients", type=click.IntRange(1, 1000), default=16, show_default=True,
              help="socketcand clients served at once; one more is refused (counted).")
@click.option("--queue-budget", type=click.IntRange(1, 16384), default=64, show_default=True,
              metavar="MIB", help="MiB queued for all nodes together; beyond, frames drop "
              "(counted) for the nodes that do not read.")
@click.option("--detach", is_flag=True, help="Run in the background; 'bus down NAME' stops it.")
def up_cmd(name: str, bitrate: int, data_bitrate: int | None, pacing: str,
           socketcand: int | None, max_clients: int, queue_budget: int, detach: bool) -> None:
    """Start the shared bus NAME (default sim0)."""
    from fwbridge.can_bus.daemon import serve
    from fwbridge.can_bus.daemon_dir import daemon_info, runtime_dir, valid_name

    if not valid_name(name):
        fail(f"bus name {name!r}: use letters, digits, '_', '.', '-' (at most 64)")
    if data_bitrate is not None and data_bitrate < bitrate:
        fail(f"--data-bitrate {data_bitrate} is below the nominal --bitrate {bitrate}")
    try:
        runtime_dir(create=True)
    except Exception as exc:  # a foreign or open runtime directory
        fail(str(exc))
    if daemon_info(name) is not None:
        fail(f"bus {name} is already up ('fwbridge can bus down {name}' stops it)")
    rates = f"{bitrate}" + (f"/{data_bitrate}" if data_bitrate else "")
    if detach:
        args = [sys.executable, "-c", "from fwbridge.cli import main; main()", "can", "bus", "up",
                name, "--bitrate", str(bitrate), "--pacing", pacing]
        if data_bitrate:
            args += ["--data-bitrate", str(data_bitrate)]
        if socketcand is not None:
            args += ["--socketcand", str(socketcand)]
        args += ["--max-clients", str(max_clients), "--queue-budget", str(queue_budget)]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10.0
        while daemon_info(name) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"bus {name} did not come up")
            time.sleep(0.05)
        info = daemon_info(name) or {}
        where = f", socketcand on {info['socketcand']}" if "socketcand" in info else ""
        click.echo(f"bus {name} up at {rates} bit/s ({pacing}), pid {proc.pid}{where}; nodes "
                   f"attach with channel shared:{name}", err=True)
        return

    def ready(daemon: object) -> None:
        port = getattr(daemon, "socketcand_port", None)
        where = "" if port is None else f", socketcand on 127.0.0.1:{port}"
        click.echo(f"bus {name} up at {rates} bit/s ({pacing}) on "
                   f"{getattr(daemon, 'path', '?')}{where}; nodes attach with channel "
                   f"shared:{name}; Ctrl-C stops it", err=True)

    try:
        signum = serve(name, bitrate=bitrate, data_bitrate=data_bitrate, pacing=pacing,
                       socketcand=socketcand, max_clients=max_clients,
                       queue_budget=queue_budget << 20, ready=ready)
    except OSError as exc:
        fail(f"bus {name}: {exc}")
    if signum is not None:  # Ctrl-C, 'bus down' (SIGTERM), a closed terminal: 128 + N
        stopped_by(signum)
        with contextlib.suppress(OSError):
            sys.stderr.write("\n")  # after the ^C the terminal echoed
    click.echo(f"bus {name} down", err=True)


@bus_group.command("down")
@click.argument("name", default="sim0")
def down_cmd(name: str) -> None:
    """Stop the shared bus NAME."""
    from fwbridge.can_bus.daemon import stop_daemon

    if not stop_daemon(name):
        fail(f"no bus {name} is up")
    click.echo(f"bus {name} down", err=True)


@bus_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per bus.")
def list_cmd(as_json: bool) -> None:
    """The shared buses that are up."""
    from fwbridge.can_bus.daemon_dir import list_daemons

    found = list_daemons()
    for info in found:
        if as_json:
            json_line(info)
        else:
            rates = f"{info['bitrate']}" + (f"/{info['data_bitrate']}"
                                            if info["data_bitrate"] != info["bitrate"] else "")
            console.print(f"{info['name']:12s} {rates:>16s} bit/s  {info['pacing']:8s} "
                          f"pid {info['pid']}")
            if info.get("not_listening"):  # held afap bus time past the daemon's limit
                console.print(f"  not listening: {', '.join(info['not_listening'])}")
            for node, n in (info.get("dropped") or {}).items():
                console.print(f"  {node}: {n} frames dropped (sent faster than the bus, or"
                              " did not read)")
            if info.get("refused"):
                console.print(f"  {info['refused']} socketcand connections refused (at most"
                              f" {info.get('max_clients')} clients, or the queue budget spent)")
    if not found and not as_json:
        click.echo("no shared bus is up ('fwbridge can bus up sim0' starts one)", err=True)
