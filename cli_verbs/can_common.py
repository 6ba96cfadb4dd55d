"""What the ``fwbridge can`` verbs share: bus options, bounds, status line, struct text."""

from __future__ import annotations

import errno
import warnings
from dataclasses import dataclass, field
from typing import Any

import can
import click

from fwbridge.can_bus.attach import SharedBusWarning
from fwbridge.can_bus.bus_node import SHARED
from fwbridge.can_bus.ids import ActuatorMessage
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.bus_kwargs import BusKwargError, check_bus_kwargs
from fwbridge.cli_verbs.common import CliError
from fwbridge.cli_verbs.params import DURATION as DURATION_S
from fwbridge.protocols.action_frame import SubCommand, as_sub_command
from fwbridge.protocols.errors import ConfigError

__all__ = ["ABSOLUTE", "COUNT", "DURATION", "BusOptions", "Stamps", "actuator_fields",
           "actuator_text", "bus_label", "lone_hint", "open_bus", "open_error", "options",
           "parse_command", "target"]

DURATION = click.option(
    "--duration", type=DURATION_S, default=None, metavar="S",
    help="Stop after S seconds (default: until Ctrl-C).")
COUNT = click.option(
    "--count", type=click.IntRange(min=1), default=None, metavar="N",
    help="Stop after N frames (default: until Ctrl-C).")

ABSOLUTE = click.option(
    "--absolute", is_flag=True,
    help="Print the frames' own timestamps (seconds since the epoch) instead of seconds "
         "since the first frame.")


class Stamps:
    """The time a line shows for a frame: seconds since the first frame, or its timestamp."""

    def __init__(self, absolute: bool = False) -> None:
        self.absolute = absolute
        self.t0: float | None = None

    def __call__(self, timestamp: float) -> float:
        if self.absolute:
            return timestamp
        if self.t0 is None:
            self.t0 = timestamp
        return round(timestamp - self.t0, 6)


@dataclass
class BusOptions:
    """The ``can`` group's bus options, handed to its verbs."""

    interface: str | None = None
    channel: str | None = None
    bitrate: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    modules: int = 0  # --modules N: simulated actuator modules, started with the first bus
    running: Any = None  # those modules (nodes.Modules) once started


def options(ctx: click.Context) -> BusOptions:
    obj = ctx.find_object(dict) or {}
    opts = obj.get("can")
    return opts if isinstance(opts, BusOptions) else BusOptions()


def target(opts: BusOptions) -> tuple[str, Any]:
    """(interface, channel) the options name, after python-can's configuration."""
    interface, channel = opts.interface, opts.channel
    if interface is None:
        try:  # python-can's config files and CAN_INTERFACE / CAN_CHANNEL
            cfg = can.util.load_config()
            interface = cfg.get("interface")
            channel = channel if channel is not None else cfg.get("channel")
        except (can.CanInterfaceNotImplementedError, ValueError, KeyError):
            interface = None
        interface = interface or "fwbridge"
    if interface == "fwbridge" and channel is None:
        channel = "sim0"
    return interface, channel


def open_bus(opts: BusOptions, **extra: Any) -> can.BusABC:
    """A python-can Bus from the group's options; one ``error:`` line if it cannot open."""
    interface, channel = target(opts)
    try:
        checked = check_bus_kwargs(interface, opts.kwargs)
    except BusKwargError as exc:
        raise CliError(str(exc)) from None
    kwargs: dict[str, Any] = {**checked, **extra}
    if opts.bitrate is not None:
        kwargs["bitrate"] = opts.bitrate
    where = interface + (f" channel {channel}" if channel is not None else "")
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", SharedBusWarning)
            bus = can.Bus(interface=interface, channel=channel, ignore_config=True, **kwargs)
    except (can.CanError, NotImplementedError, ValueError, TypeError, OSError) as exc:
        raise CliError(f"cannot open CAN bus {where}: {open_error(interface, channel, exc)}"
                       ) from None
    for w in said:
        click.echo(f"warning: {w.message}", err=True)
    if opts.modules and opts.running is None:
        _start_modules(opts, channel, checked, where, bus)
    return bus


def _start_modules(opts: BusOptions, channel: Any, kwargs: dict[str, Any], where: str,
                   bus: can.BusABC) -> None:
    """``--modules N`` on the channel the first bus opened; stopped as the command ends."""
    from fwbridge.can_bus.sim.nodes import start_modules

    # the channel's settings came with the first bus; a module names itself
    kw = {k: v for k, v in kwargs.items() if k not in ("name", "capture")}
    try:
        opts.running = start_modules(channel, opts.modules, **kw)
    except (can.CanError, ValueError, OSError) as exc:
        bus.shutdown()
        raise CliError(f"cannot start {opts.modules} modules on {where}: {exc}") from None
    click.get_current_context().call_on_close(opts.running.stop)


def _vcan(channel: str) -> str:
    return f"modprobe vcan; ip link add dev {channel} type vcan; ip link set up {channel}"


def open_error(interface: str | None, channel: Any, exc: BaseException) -> str:
    """Why a bus did not open, with the fix where the cause is known (SocketCAN's errnos)."""
    code = getattr(exc, "errno", None)
    if code is None and isinstance(exc.__cause__, OSError):
        code = exc.__cause__.errno
    if interface == "socketcan":
        name = str(channel or "vcan0")
        virtual = name if name.startswith("vcan") else "vcan0"
        if code == errno.EAFNOSUPPORT:
            return ("this machine has no SocketCAN (the Linux kernel's CAN sockets); on Linux, "
                    f"as root, make a virtual bus: {_vcan(virtual)}; or use the simulated bus "
                    "(-i fwbridge)")
        if code == errno.ENODEV:
            return (f"no CAN interface {name} (ip link shows the ones there are); a virtual "
                    f"one, as root: {_vcan(virtual)}")
        if code == errno.ENETDOWN:
            return f"{name} is down; as root: ip link set up {name}"
    return str(exc)


def bus_label(bus: can.BusABC) -> str:
    """The channel name for messages and candump lines."""
    name = getattr(bus, "channel_name", None) or getattr(bus, "channel", None)
    return str(name) if name is not None else bus.channel_info


def lone_hint(bus: can.BusABC) -> str:
    """Why a simulated channel may be silent (empty for other buses)."""
    if isinstance(bus, FwBridgeBus) and len(bus.sim.endpoints) <= 1:
        name = bus.channel_name
        if bus.shared:
            return (f" (the shared bus {name} has no other node: run"
                    f" 'fwbridge can -c {SHARED}{name} sim N' in another terminal)")
        return (f" ({name} is simulated inside this process and has no other node: add"
                f" --modules N, use 'fwbridge can sim N', or share a bus between processes:"
                f" 'fwbridge can bus up {name}', then -c {SHARED}{name})")
    return ""


def parse_command(text: str) -> SubCommand | int:
    """A sub-command by name (``set-servo-position``, any case) or number (``0x38``, ``56``)."""
    try:
        value = int(text, 0)
    except ValueError:
        key = text.strip().upper().replace("-", "_")
        if key in SubCommand.__members__:
            return SubCommand[key]
        names = ", ".join(n.lower().replace("_", "-") for n in SubCommand.__members__)
        raise ConfigError(f"unknown command {text!r}; use a number or one of: {names}") from None
    if not 0 <= value <= 255:
        raise ConfigError(f"command {value} out of range 0..255")
    return as_sub_command(value)


def _command_name(cmd: SubCommand | int) -> str:
    return cmd.name.lower().replace("_", "-") if isinstance(cmd, SubCommand) else f"0x{cmd:02X}"


def actuator_fields(item: ActuatorMessage, t: float | None = None) -> dict[str, Any]:
    """JSON fields of a decoded actuator struct (``t``: the time to show, default its own)."""
    s = item.struct
    return {"t": item.timestamp if t is None else t, "direction": item.direction.value,
            "module": item.module,
            "angle": s.angle, "speed": s.speed, "current_ma": s.current_ma,
            "module_id": s.module_id, "command": _command_name(s.command),
            "fault": int(s.fault), "faults": [f.name for f in type(s.fault) if f and f in s.fault],
            "reserved": [s.reserved_a, s.reserved_b]}


def actuator_text(item: ActuatorMessage, t: float | None = None) -> str:
    """One human line per struct (``t``: the time to show, default its timestamp)."""
    s = item.struct
    faults = "|".join((f.name or "").lower() for f in type(s.fault) if f and f in s.fault) or "-"
    arrow = "->" if item.direction.value == "command" else "<-"
    mismatch = "" if s.module_id == item.module else f" (struct says module {s.module_id})"
    when = item.timestamp if t is None else t
    return (f"{when:17.6f} {arrow} module {item.module:3d} {item.direction.value:8s} "
            f"angle={s.angle:4d} speed={s.speed:3d} current={s.current_ma:5d}mA "
            f"cmd={_command_name(s.command)} fault={faults}{mismatch}")
