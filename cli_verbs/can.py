"""``fwbridge can``: actuator messages on any python-can bus, and the simulated one.

Bus options follow python-can and can-utils: ``-i/--interface``,
``-c/--channel``, ``-b/--bitrate``, plus ``--bus-kwarg KEY=VALUE`` (python-can's
``--bus-kwargs``). Without ``-i`` python-can's configuration decides, and
without one the simulated bus ``fwbridge`` channel ``sim0``. A simulated
channel lives inside one process: give it traffic with ``--modules N`` (N
actuator modules) or run ``fwbridge can sim``. ``-c shared:NAME`` is the bus
that ``fwbridge can bus up NAME`` shares between every process.

Here: the group, its bus options and ``send``; the other verbs are modules of their
own, registered in ``cli.py``'s ``SUBCOMMANDS`` (``can_sniff``: sniff, record;
``can_files``: replay, decode; ``can_busload``; ``can_sim``; ``can_daemon``: bus).
Every verb stops at ``--count``/``--duration`` (or Ctrl-C, still printing its
summary); frames go to stdout, counters and errors to stderr.
"""

from __future__ import annotations

import time
from typing import Any

import can
import click
from can.util import cast_from_string

from fwbridge.bridge.record.can_logs import format_frame, parse_frame
from fwbridge.can_bus.ids import Direction, to_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.can_common import (
    BusOptions,
    bus_label,
    lone_hint,
    open_bus,
    options,
    parse_command,
    target,
)
from fwbridge.cli_verbs.common import Group, fail
from fwbridge.cli_verbs.link import until_interrupted
from fwbridge.cli_verbs.params import BITRATE, INTERVAL
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault

__all__ = ["can_group"]


@click.group("can", cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-i", "--interface", default=None, metavar="NAME",
              help="python-can interface (fwbridge, virtual, socketcan, ...); default: "
                   "python-can's configuration, else fwbridge.")
@click.option("-c", "--channel", default=None, metavar="CHANNEL",
              help="Channel (sim0, vcan0, can0, ...); fwbridge default: sim0, this process's "
                   "own; shared:NAME is the bus 'fwbridge can bus up NAME' shares.")
@click.option("-b", "--bitrate", type=BITRATE, default=None, metavar="BITRATE",
              help="Bit rate in bit/s (fwbridge default 500000).")
@click.option("--bus-kwarg", "bus_kwargs", multiple=True, metavar="KEY=VALUE",
              help="Extra keyword for the bus, as python-can's --bus-kwargs (repeatable), "
                   "e.g. pacing=afap, receive_own_messages=true.")
@click.option("--modules", type=click.IntRange(0, 255), default=0, metavar="N",
              help="fwbridge: run N simulated actuator modules (IDs 1..N) on the channel while "
                   "the verb runs (as can_bus.sim.nodes.start_modules).")
@click.pass_context
def can_group(ctx: click.Context, interface: str | None, channel: str | None,
              bitrate: int | None, bus_kwargs: tuple[str, ...], modules: int) -> None:
    """CAN: actuator structs on any python-can bus, and the simulated bus."""
    kwargs: dict[str, Any] = {}
    for item in bus_kwargs:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            fail(f"--bus-kwarg {item!r}: expected KEY=VALUE")
        kwargs[key] = cast_from_string(value)
    opts = BusOptions(interface, channel, bitrate, kwargs, modules)
    if modules and target(opts)[0] != "fwbridge":
        fail("--modules runs simulated modules on the simulated bus (-i fwbridge)")
    ctx.ensure_object(dict)["can"] = opts


# -- send ---------------------------------------------------------------------------
class _FrameOrVerb(Group):
    """``send ID#DATA`` or ``send actuator ...``: anything but a verb is a frame spec."""

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "frame", self.commands["frame"], args
        return super().resolve_command(ctx, args)


_SEND_OPTS = [
    click.option("--count", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Send it this many times."),
    click.option("--interval", type=INTERVAL, default=0.1, show_default=True,
                 metavar="S", help="Seconds between repeats."),
]


def _send_options(fn: Any) -> Any:
    for opt in reversed(_SEND_OPTS):
        fn = opt(fn)
    return fn


@can_group.group("send", cls=_FrameOrVerb, invoke_without_command=False)
def send_group() -> None:
    """Send one frame (candump's ID#DATA) or an actuator struct.

    \b
    fwbridge can send 123#DEADBEEF        standard ID, 4 data bytes
    fwbridge can send 1F334455#11.22      extended ID (8 hex digits)
    fwbridge can send 123#R4              remote frame, DLC 4
    fwbridge can send actuator --module 3 --angle 20 --speed 50
    """


def _send(ctx: click.Context, msg: can.Message, count: int, interval: float) -> None:
    bus = open_bus(options(ctx))
    sent = 0
    try:
        with until_interrupted():
            if count > 1:  # a run that lasts: say it has begun
                click.echo(f"sending {count} x {format_frame(msg)} on {bus_label(bus)}, one "
                           f"every {interval:g} s", err=True)
            for i in range(count):
                if i:
                    time.sleep(interval)
                try:
                    bus.send(msg, timeout=1.0)
                except can.CanError as exc:
                    fail(f"{format_frame(msg)} not sent after {sent} frame(s): {exc}"
                         + lone_hint(bus))
                sent += 1
        unacked = bus.wait_sent() if isinstance(bus, FwBridgeBus) else 0
    finally:
        bus.shutdown()
    click.echo(f"sent {sent} x {format_frame(msg)} on {bus_label(bus)}", err=True)
    if unacked:
        fail(f"{unacked} frame(s) not acknowledged{lone_hint(bus)}")


@send_group.command("frame", hidden=True)
@click.argument("spec", metavar="ID#DATA")
@_send_options
@click.pass_context
def send_frame(ctx: click.Context, spec: str, count: int, interval: float) -> None:
    """Send a frame given in candump notation."""
    try:
        msg = parse_frame(spec)
    except ValueError as exc:
        fail(str(exc))
    _send(ctx, msg, count, interval)


@send_group.command("actuator")
@click.option("--module", "module", type=click.IntRange(0, 255), required=True,
              help="Module ID k (command ID 0x100+k, feedback 0x200+k).")
@click.option("--angle", type=click.IntRange(-128, 127), default=0, show_default=True,
              help="Degrees.")
@click.option("--speed", type=click.IntRange(0, 255), default=0, show_default=True)
@click.option("--current", type=click.IntRange(0, 255), default=0, show_default=True,
              help="100 mA units (a limit in commands).")
@click.option("--command", "command", default="SET_SERVO_POSITION", show_default=True,
              metavar="CMD", help="Sub-command: a name (set-servo-position) or a number (0x38).")
@click.option("--fault", default="0", metavar="FLAGS",
              help="Fault flags: names joined by '|' (over_current|stall_timeout), or a number.")
@click.option("--feedback", is_flag=True, help="Send as module feedback (0x200+k).")
@_send_options
@click.pass_context
def send_actuator(ctx: click.Context, module: int, angle: int, speed: int, current: int,
                  command: str, fault: str, feedback: bool, count: int, interval: float) -> None:
    """Send an actuator struct to (or, with --feedback, from) module K."""
    from fwbridge.cli_verbs.frames import parse_flags
    from fwbridge.protocols.descriptions.builtin import builtin

    try:
        cmd = parse_command(command)
    except ValueError as exc:
        fail(str(exc))
    spec = next(f for f in builtin("actuator").fields if f.name == "fault")
    flags = parse_flags("--fault", spec, fault)
    if not 0 <= flags <= 0xFF:
        fail(f"--fault {fault}: {flags} does not fit in one byte (0..255)")
    struct = ActuatorStruct(angle=angle, speed=speed, current=current, module_id=module,
                            command=cmd, fault=Fault(flags))
    direction = Direction.FEEDBACK if feedback else Direction.COMMAND
    _send(ctx, to_message(struct, direction, module), count, interval)
