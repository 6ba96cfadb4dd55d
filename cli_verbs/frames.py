"""Descriptions on the command line: ``-p imu.toml``, ``encode imu.toml ax=0.5``, ``frames``.

Wherever a verb takes a protocol it also takes a description: a built-in
name (``odom``, ``cmd``, ``action``, ``actuator``) or the path of a TOML
file (docs/FRAMES.md). A bad description stops the verb with one
``error: FILE:LINE: KEY: …`` line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from fwbridge.cli_verbs.common import Decoder, Float32, Group, console, fail, json_line
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.descriptions.loader import DescriptionError, FieldSpec, FrameDescription
from fwbridge.protocols.errors import ConfigError, FrameError

__all__ = [
    "DescribedGroup",
    "EncodeGroup",
    "ProtocolParam",
    "described",
    "description_decoder",
    "flag_text",
    "frames_cmd",
    "is_description",
    "parse_assignments",
    "parse_flags",
    "row_of",
    "tap_for",
]


def is_description(spec: str) -> bool:
    """True for the path of a description file (as opposed to a protocol name)."""
    return spec.endswith(".toml")


def described(spec: str) -> Any:
    """The ``Described`` (description and codec) for a name or a file; one error line."""
    from fwbridge.protocols.described import Described

    try:
        return Described.from_spec(spec)
    except DescriptionError as exc:
        fail(str(exc))


if TYPE_CHECKING:
    _ParamBase = click.ParamType[str]
else:  # click before 8.2 has no subscriptable ParamType at run time
    _ParamBase = click.ParamType


class ProtocolParam(_ParamBase):
    """``-p``: one of ``choices``, or the path of a description (``*.toml``)."""

    name = "protocol"

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = tuple(choices)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.choices) + "|FILE.toml]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        if text in self.choices:
            return text
        if is_description(text):
            described(text)  # refuse a bad description before anything opens
            return text
        self.fail(f"{text!r} is not one of {', '.join(self.choices)} nor a description file "
                  "(FILE.toml)", param, ctx)


def flag_text(f: FieldSpec, value: int) -> str:
    """A flags value as the names of its set bits, ``a|b`` (a bit without a name in hex,
    ``0x80``; none set: ``0``): what ``decode`` prints and ``encode`` takes."""
    value = int(value)
    names = [label for bit, label in f.flags if value & bit]
    rest = value & ~sum(bit for bit, _ in f.flags)
    if rest:
        names.append(f"0x{rest:x}")
    return "|".join(names) or "0"


def parse_flags(name: str, f: FieldSpec, text: str) -> int:
    """The value of ``a|b`` (names in any case, numbers too) for the flags field ``f``."""
    labels = {label.lower(): bit for bit, label in f.flags}
    value = 0
    for part in text.split("|"):
        part = part.strip()
        if part.lower() in labels:
            value |= labels[part.lower()]
            continue
        try:
            value |= int(part, 0)
        except ValueError:
            fail(f"{name}: {f.name}={text!r}: {part!r} is neither a number nor a flag "
                 f"({', '.join(lb for _, lb in f.flags)}); join flags with '|'")
    return value


def _label(f: FieldSpec, value: Any) -> Any:
    if f.flags:
        return flag_text(f, value)
    if f.enum:
        return value.name if hasattr(value, "name") else int(value)
    if isinstance(value, bytes):
        return value.hex()
    if f.type == "f32" and not f.scaled:  # a float32 on the wire (scaled values are doubles)
        return Float32(value)
    return value


def row_of(codec: Any, frame: Any) -> dict[str, Any]:
    """A decoded frame as ``{field: value}``: enums by label, bytes as hex."""
    return {f.name: _label(f, getattr(frame, f.name)) for f in codec.stored}


def _column(f: FieldSpec) -> tuple[int | None, bool]:
    """(widest value as table text, or None when unbounded; whether it is text)."""
    info = f.info
    if f.flags:  # one name wide: several set at once widen the column when piped
        return max(len(lb) for _, lb in f.flags), True
    if f.enum:
        return max(len(str(info.lo)), len(str(info.hi)), *(len(lb) for _, lb in f.enum)), True
    if f.type == "bytes":
        return (2 * f.size if f.size else None), True
    if f.is_int and not f.scaled:
        return max(len(str(info.lo)), len(str(info.hi))), False
    return None, False  # floats: NUMBER_WIDTH


def description_decoder(spec: str) -> tuple[str, Decoder]:
    """(frame name, ``decode``/``sniff`` decoder) of a description."""
    d = described(spec)
    widths: dict[str, int] = {}
    text: set[str] = set()
    for f in d.codec.stored:
        width, is_text = _column(f)
        if width is not None:
            widths[f.name] = width
        if is_text:
            text.add(f.name)

    def make(opts: dict[str, Any]) -> Any:
        return d.receiver(opts.get("max_length"))

    def row(item: Any) -> dict[str, Any]:
        return row_of(d.codec, item.frame)

    return d.desc.name, Decoder(d.codec.fields, make, row, widths, frozenset(text))


class FrameTap:
    """The bytes of each frame a receiver accepted, cut from a bounded window of the stream.

    Receivers return decoded frames and their offsets; a capture's frames
    interface wants the bytes. The window holds the last bytes fed (twice the
    largest frame plus two reads), enough for any frame a receiver returns.
    """

    def __init__(self, desc: FrameDescription) -> None:
        self.desc = desc
        self.limit = 2 * desc.max_size + (1 << 17)
        self.window = bytearray()
        self.base = 0
        self.codec: Any = None
        if desc.length is not None:
            from fwbridge.protocols.engine import codec_for

            self.codec = codec_for(desc)

    def feed(self, chunk: bytes) -> None:
        self.window += chunk
        excess = len(self.window) - self.limit
        if excess > 0:
            del self.window[:excess]
            self.base += excess

    def frame(self, offset: int) -> bytes | None:
        """The frame at stream ``offset``, or None when it left the window."""
        start = offset - self.base
        size = self.desc.size
        if size is None:
            c = self.codec
            if start < 0 or start + c.len_offset + c.len_struct.size > len(self.window):
                return None
            value = c.len_struct.unpack_from(self.window, start + c.len_offset)[0]
            size = self.desc.overhead + value - self.desc.data_bias
        if start < 0 or start + size > len(self.window):
            return None
        return bytes(self.window[start:start + size])


def tap_for(protocol: str) -> FrameTap | None:
    """A tap for a built-in frame family or a description file (None for others)."""
    if is_description(protocol):
        return FrameTap(described(protocol).desc)
    return FrameTap(builtin(protocol)) if protocol in BUILTIN_NAMES else None


# -- KEY=VALUE -------------------------------------------------------------------------
def _parse_value(name: str, f: FieldSpec, text: str, allow_nonfinite: bool) -> Any:
    if f.type == "bytes":
        try:
            return bytes.fromhex(text.replace(":", " "))
        except ValueError:
            fail(f"{name}: {f.name}={text!r} is not hex bytes")
    if f.flags:
        return parse_flags(name, f, text)
    if f.enum:
        labels = {label.lower(): v for v, label in f.enum}
        if text.lower() in labels:
            return labels[text.lower()]
    try:
        value: Any = int(text, 0) if f.is_int and not f.scaled else float(text)
    except ValueError:
        kind = "an integer" + (f" or one of {', '.join(lb for _, lb in f.enum)}" if f.enum
                               else "") if f.is_int and not f.scaled else "a number"
        fail(f"{name}: {f.name}={text!r} is not {kind}")
    if isinstance(value, float) and not math.isfinite(value) and not allow_nonfinite:
        fail(f"{name}: {f.name}={text} is not finite (pass --allow-nonfinite)")
    return value


def parse_assignments(d: Any, pairs: Sequence[str], allow_nonfinite: bool = False) -> bytes:
    """The bytes of the frame ``KEY=VALUE …`` describes (missing fields are 0 / empty)."""
    desc: FrameDescription = d.desc
    values: dict[str, Any] = {}
    stored = {f.name: f for f in d.codec.stored}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            fail(f"{pair!r}: write FIELD=VALUE (fields: {', '.join(stored)})")
        if key not in stored:
            hint = " (it is computed from the data)" if (
                desc.length and key == desc.length.field) else ""
            fail(f"{desc.name}: no field {key!r}{hint}; fields: {', '.join(stored)}")
        values[key] = _parse_value(desc.name, stored[key], text, allow_nonfinite)
    try:
        return bytes(d.codec.encode(d.codec.from_mapping(values), allow_nonfinite=allow_nonfinite))
    except FrameError as exc:
        fail(str(exc))


class DescribedGroup(Group):
    """A group whose unknown subcommand may name a description: ``encode imu.toml ax=1``.

    ``action`` turns (described frame, frame bytes, options) into the verb's work.
    """

    action: Callable[[click.Context, Any, bytes, dict[str, Any]], None] | None = None
    extra_params: Callable[[], list[click.Parameter]] | None = None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or not (is_description(cmd_name) or cmd_name in BUILTIN_NAMES):
            return found
        action = type(self).action
        params: list[click.Parameter] = [
            click.Argument(["assignments"], nargs=-1, metavar="[FIELD=VALUE]..."),
            click.Option(["--allow-nonfinite"], is_flag=True,
                         help="Accept nan/inf in float fields (refused by default)."),
        ]
        extra = type(self).extra_params
        params += extra() if extra else []

        def run(assignments: tuple[str, ...], allow_nonfinite: bool, **opts: Any) -> None:
            d = described(cmd_name)
            frame = parse_assignments(d, assignments, allow_nonfinite)
            assert action is not None
            action(click.get_current_context(), d, frame, opts)

        return click.Command(cmd_name, params=params, callback=run,
                             help=f"A frame described by {cmd_name}: FIELD=VALUE for each field "
                             "(missing ones are 0).")


def _emit_hex(ctx: click.Context, d: Any, frame: bytes, opts: dict[str, Any]) -> None:
    from fwbridge.protocols.hextext import to_hex

    click.echo(to_hex(frame, opts["sep"]))


def _sep_params() -> list[click.Parameter]:
    return [click.Option(["--sep"], default=" ", show_default="' '",
                         help="Byte separator ('' for none).")]


class EncodeGroup(DescribedGroup):
    """``fwbridge encode``: its own subcommands, and ``encode DESC FIELD=VALUE…``."""

    action = staticmethod(_emit_hex)
    extra_params = staticmethod(_sep_params)


# -- fwbridge frames ----------------------------------------------------------------------
def _size(desc: FrameDescription) -> str:
    return str(desc.size) if desc.size is not None else f"{desc.min_size}..{desc.max_size}"


def _field_text(f: FieldSpec) -> str:
    text = f"{f.name}:{f.type}" + (f"[{f.size}]" if f.size else "")
    if f.scaled:
        text += f"*{f.scale if f.scale is not None else 1:g}"
        text += f"{f.offset:+g}" if f.offset else ""
    if f.unit:
        text += f" {f.unit}"
    if f.byte_order == "big" and f.info.size > 1:
        text += " (BE)"
    return text


def _summary(desc: FrameDescription, source: str) -> dict[str, Any]:
    ck = desc.checksum
    return {
        "name": desc.name, "source": source, "size": _size(desc),
        "header": desc.header.hex(" "), "trailer": desc.trailer.hex(" "),
        "checksum": f"{ck.algorithm} over {ck.span}" if ck else "",
        "length": (f"{desc.length.field} counts {desc.length.counts} (max {desc.length.max})"
                   if desc.length else ""),
        "fields": [_field_text(f) for f in desc.fields],
        "can_ids": [f"0x{i:x}" for m in desc.can for i, _ in m.ids()][:4],
    }


@click.command("frames")
@click.argument("descriptions", nargs=-1, metavar="[DESC.toml]...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame family.")
def frames_cmd(descriptions: tuple[str, ...], as_json: bool) -> None:
    """List the built-in frame descriptions and the given ones: sizes and fields."""
    rows: list[dict[str, Any]] = []
    try:
        rows += [_summary(builtin(n), "built-in") for n in BUILTIN_NAMES]
    except ConfigError as exc:  # pragma: no cover - the shipped files are tested
        fail(str(exc))
    for spec in descriptions:
        rows.append(_summary(described(spec).desc, spec))
    if as_json:
        for row in rows:
            json_line(row)
        return
    from rich.table import Column, Table

    # One field and one check per line: the table is as wide as its longest item, not as
    # the sum of them (piped, nothing is cut; on a terminal rich fits the width).
    # name, size and header are never cut; the rest folds onto more lines to fit a terminal
    table = Table(Column("name", no_wrap=True), Column("source", overflow="fold"),
                  Column("bytes", no_wrap=True), Column("header", no_wrap=True),
                  Column("check", overflow="fold"), Column("fields", overflow="fold"),
                  show_lines=True)
    for row in rows:
        check = [row["checksum"], row["length"],
                 f"trailer {row['trailer']}" if row["trailer"] else ""]
        table.add_row(row["name"], row["source"], row["size"], row["header"] or "(CAN)",
                      "\n".join(c for c in check if c), "\n".join(row["fields"]))
    click.echo("frames")
    console.print(table)
