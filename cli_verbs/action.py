"""Action frames on the command line: ``encode action``, the ``action`` decoder, group tables."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import click

from fwbridge.cli_verbs.common import Decoder, console, fail
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand, encode
from fwbridge.protocols.crc import DEFAULT_CRC, preset_names
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.hextext import HexTextError, parse_hex, to_hex

# The receiver, the action groups (numpy) and rich's tables load where they are
# used: `fwbridge encode` imports this module and must start fast.
if TYPE_CHECKING:
    from rich.table import Table

    from fwbridge.protocols.engine.kernels.action_receiver import ActionReceived, ActionReceiver
    from fwbridge.protocols.families.action_group import ActionGroup

__all__ = [
    "ByteEnum",
    "action_decoder",
    "action_group_table",
    "encode_action",
    "enum_label",
    "frame_options",
    "print_action_group",
]


def enum_label(value: int) -> str:
    """``write-pc`` for a known member, ``0x42``-style hex for an unknown value."""
    if isinstance(value, IntEnum):
        return value.name.lower().replace("_", "-")
    return f"0x{value:02x}"


if TYPE_CHECKING:
    _ParamType = click.ParamType[int]
else:  # click before 8.2 has no subscriptable ParamType at run time
    _ParamType = click.ParamType


class ByteEnum(_ParamType):
    """A byte given by enum name (kebab-case, any case) or number (``6``, ``0x06``)."""

    def __init__(self, enum: type[IntEnum]) -> None:
        self.enum = enum
        self.name = enum.__name__

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "NAME|NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        member = self.enum.__members__.get(text.upper().replace("-", "_"))
        if member is not None:
            return int(member)
        try:
            number = int(text, 0)
        except ValueError:
            names = ", ".join(n.lower().replace("_", "-") for n in self.enum.__members__)
            self.fail(f"{text!r} is neither a name ({names}) nor a number", param, ctx)
        if not 0 <= number <= 0xFF:
            self.fail(f"{number} does not fit in one byte (0..255)", param, ctx)
        return number


def frame_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options that describe one action frame: machine, type, sub, data, CRC preset."""
    for option in reversed((
        click.option("--machine", type=click.IntRange(0, 255), default=0, show_default=True,
                     help="Machine code (device identifier)."),
        click.option("--type", "itype", type=ByteEnum(InstructionType), required=True,
                     help="Instruction type, e.g. write-pc or 0x06."),
        click.option("--sub", type=ByteEnum(SubCommand), required=True,
                     help="Sub-command, e.g. test-action-group or 0x32."),
        click.option("--data", "data_hex", default="", metavar="HEX",
                     help="Sub-command data as hex."),
        click.option("--crc", default=DEFAULT_CRC, show_default=True, metavar="NAME",
                     help=f"CRC-16 preset: {', '.join(preset_names())}."),
    )):
        fn = option(fn)
    return fn


# -- encode -------------------------------------------------------------------
@click.command("action")
@frame_options
@click.option("--sep", default=" ", show_default="' '", help="Byte separator ('' for none).")
def encode_action(machine: int, itype: int, sub: int, data_hex: str, crc: str, sep: str) -> None:
    """Action frame (FE EF … FD DF, user side <-> main controller)."""
    try:
        data = parse_hex(data_hex)
    except HexTextError as exc:
        fail(f"--data: {exc}")
    try:
        click.echo(to_hex(encode(ActionFrame(machine, itype, sub, data), crc=crc), sep))
    except (FrameError, ConfigError) as exc:
        fail(str(exc))


# -- decode -------------------------------------------------------------------
# data last: the one column of any length, so a long one pushes no column out of line
_COLUMNS = ("machine", "type", "sub", "length", "defects", "data")


def _make_receiver(opts: dict[str, Any]) -> ActionReceiver:
    from fwbridge.protocols.engine import action_receiver
    from fwbridge.protocols.engine.kernels.action_receiver import DEFAULT_MAX_LENGTH

    try:
        return action_receiver(
            crc=opts.get("crc") or DEFAULT_CRC,
            relaxed=bool(opts.get("relaxed", False)),
            max_length=opts.get("max_length", DEFAULT_MAX_LENGTH),
        )
    except ConfigError as exc:
        fail(str(exc))


def _row(item: ActionReceived) -> dict[str, Any]:
    frame = item.frame
    row: dict[str, Any] = {
        "machine": frame.machine,
        "type": enum_label(frame.type),
        "sub": enum_label(frame.sub),
        "length": frame.length,
        "data": frame.data.hex(),
    }
    if item.defects:
        row["defects"] = ",".join(item.defects)
    return row


def action_decoder() -> Decoder:
    """The ``action`` protocol for ``decode``/``sniff``.

    Options read: ``relaxed`` (bool), ``crc`` (preset name), ``max_length``.
    The receiver's ``finish()`` returns the frames it could only decide at
    the end of the stream: print those too.
    """
    def widest(enum: type[IntEnum]) -> int:
        return max(len(enum_label(m)) for m in enum)

    widths = {"machine": 3, "type": widest(InstructionType), "sub": widest(SubCommand),
              "length": 5, "defects": len("defects")}
    return Decoder(_COLUMNS, _make_receiver, _row, widths,
                   frozenset({"type", "sub", "defects", "data"}))


# -- action groups --------------------------------------------------------------
def action_group_table(source: ActionFrame | ActionGroup, title: str = "") -> Table:
    """A table of the steps of an action group (or of the group a 0x31/0x32 frame carries).

    Raises a ``FrameError`` when the frame carries no well-formed action group.
    """
    from rich.table import Table

    from fwbridge.protocols.families import action_group

    group = action_group.from_frame(source) if isinstance(source, ActionFrame) else source
    table = Table(
        "step", "servo", "speed", "angle", "step length", "prefix_raw", "params_raw",
        title=title or f"action group: {len(group.steps)} steps", title_justify="left",
        caption=f"header_raw  {group.header_raw.hex(' ')}\n"
        f"trailer_raw {group.trailer_raw.hex(' ') or '-'}",
        caption_justify="left",
    )
    for k, step in enumerate(group.steps):
        head = (str(k), str(step.step_length), step.prefix_raw.hex(" "), step.params_raw.hex(" "))
        if not step.servos:
            table.add_row(head[0], "-", "-", "-", *head[1:])
        for j, servo in enumerate(step.servos):
            first = j == 0
            table.add_row(
                head[0] if first else "", str(servo.servo_id), str(servo.speed),
                f"{servo.angle:+d}", *(head[1:] if first else ("", "", "")),
            )
        table.add_section()
    return table


def print_action_group(source: ActionFrame | ActionGroup, title: str = "") -> None:
    """Print :func:`action_group_table` on the console; a bad payload is one error line."""
    try:
        console.print(action_group_table(source, title))
    except FrameError as exc:
        fail(str(exc))
