"""``fwbridge encode`` and ``fwbridge decode``: frames to hex and streams to frames."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from fwbridge.cli_verbs.common import (
    CliError,
    Decoder,
    Float32,
    fail,
    json_lines,
    print_counters,
)
from fwbridge.cli_verbs.frames import (
    EncodeGroup,
    ProtocolParam,
    described,
    description_decoder,
    is_description,
)
from fwbridge.cli_verbs.params import WIRE_FLOAT
from fwbridge.cli_verbs.row_fit import WIDE_OPTION
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.hextext import HexTextError, looks_like_hex, parse_hex, to_hex

# Receivers (numpy), captures (python-pcapng) and rich's tables load in the
# decode path: `fwbridge encode` imports this module and must start fast.
if TYPE_CHECKING:
    from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec
    from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

READ_CHUNK = 1 << 16


# -- encode -----------------------------------------------------------------
@click.group("encode", cls=EncodeGroup)
def encode_group() -> None:
    """Build one frame and print it as hex.

    Besides the frames below: 'fwbridge encode DESC.toml FIELD=VALUE…' for
    a frame described in a file (docs/FRAMES.md).
    """



def _emit(frame_bytes: bytes, sep: str) -> None:
    click.echo(to_hex(frame_bytes, sep))


_SEP = click.option("--sep", default=" ", show_default="' '", help="Byte separator ('' for none).")
_NONFINITE = click.option(
    "--allow-nonfinite", is_flag=True, help="Accept nan/inf values (refused by default)."
)


def _refuse_nonfinite(kind: str, fields: tuple[str, ...], allowed: bool) -> None:
    if fields and not allowed:
        names = ", ".join(f"--{f}" for f in fields)
        fail(f"{kind} frame: {names} not finite (add --allow-nonfinite to encode it anyway)")


@encode_group.command("cmd")
@click.option("--vx", type=WIRE_FLOAT, default=0.0, show_default=True, help="m/s")
@click.option("--vy", type=WIRE_FLOAT, default=0.0, show_default=True, help="m/s")
@click.option("--wz", type=WIRE_FLOAT, default=0.0, show_default=True, help="rad/s")
@_NONFINITE
@_SEP
def encode_cmd(vx: float, vy: float, wz: float, allow_nonfinite: bool, sep: str) -> None:
    """Velocity-command frame (15 bytes, host -> firmware)."""
    frame = cmd_frame.CmdFrame(vx, vy, wz)
    _refuse_nonfinite("cmd", frame.nonfinite, allow_nonfinite)
    try:
        _emit(cmd_frame.encode(frame, allow_nonfinite=allow_nonfinite), sep)
    except FrameError as exc:
        fail(str(exc))


@encode_group.command("odom")
@click.option("--vx", type=WIRE_FLOAT, default=0.0, show_default=True, help="m/s")
@click.option("--vy", type=WIRE_FLOAT, default=0.0, show_default=True, help="m/s")
@click.option("--wz", type=WIRE_FLOAT, default=0.0, show_default=True, help="rad/s")
@click.option("--yaw", type=WIRE_FLOAT, default=0.0, show_default=True, help="degrees")
@_NONFINITE
@_SEP
def encode_odom(
    vx: float, vy: float, wz: float, yaw: float, allow_nonfinite: bool, sep: str
) -> None:
    """Odometry frame (19 bytes, firmware -> host)."""
    frame = odom_frame.OdomFrame(vx, vy, wz, yaw)
    _refuse_nonfinite("odom", frame.nonfinite, allow_nonfinite)
    try:
        _emit(odom_frame.encode(frame, allow_nonfinite=allow_nonfinite), sep)
    except FrameError as exc:
        fail(str(exc))


# -- decode -----------------------------------------------------------------
def _hex_blocks(path: str, first: bytes, stream: BinaryIO) -> Iterator[bytes]:
    """The bytes of hex text, parsed a block of whole lines at a time."""
    pending, line = first, 1
    while True:
        more = stream.read(READ_CHUNK)
        cut = len(pending) if not more else pending.rfind(b"\n") + 1
        if cut or not more:
            text = pending[:cut].decode("ascii", errors="replace")
            try:
                yield parse_hex(text, line)
            except HexTextError as exc:
                raise CliError(f"{path}: {exc}") from None
            line += len(text.splitlines())
            pending = pending[cut:]
        if not more:
            return
        pending += more



def _sum8_row(item: Any) -> dict[str, Any]:
    frame = item.frame
    row: dict[str, Any] = {name: Float32(getattr(frame, name)) for name in frame.__slots__}
    if frame.nonfinite:
        row["nonfinite"] = list(frame.nonfinite)
    return row


def _sum8_receiver(codec: Sum8Codec[Any]) -> Sum8Receiver[Any]:
    from fwbridge.protocols.engine import receiver_for

    rx: Sum8Receiver[Any] = receiver_for(codec)
    return rx


class _Decoders(dict[str, Decoder]):
    """The built-in decoders; the action frame's (construct, enums) loads when asked for."""

    def __missing__(self, key: str) -> Decoder:
        if key != "action":
            raise KeyError(key)
        from fwbridge.cli_verbs.action import action_decoder

        self[key] = dec = action_decoder()
        return dec

    def __contains__(self, key: object) -> bool:
        return key == "action" or super().__contains__(key)

    def names(self) -> list[str]:
        return sorted({*self.keys(), "action"})


DECODERS: _Decoders = _Decoders({
    "odom": Decoder(
        ("vx", "vy", "wz", "yaw_deg"), lambda opts: _sum8_receiver(odom_frame.CODEC), _sum8_row
    ),
    "cmd": Decoder(("vx", "vy", "wz"), lambda opts: _sum8_receiver(cmd_frame.CODEC), _sum8_row),
})


#: Frame families decoded a chunk at a time into numpy columns and printed as blocks
#: (cli_verbs/block_rows.py; a block with a non-finite value prints frame by frame).
BLOCK_CODECS: dict[str, Sum8Codec[Any]] = {"odom": odom_frame.CODEC, "cmd": cmd_frame.CODEC}


def read_pcapng_payloads(path: str, direction: str | None = None) -> Iterator[bytes]:
    """The packet bytes of a pcapng serial capture (one direction: ``"rx"``/``"tx"``)."""
    from fwbridge.bridge.record.serial_captures import read_payloads
    from fwbridge.bridge.record.serial_pcapng import CaptureError

    try:
        yield from read_payloads(path, direction)
    except CaptureError as exc:
        raise CliError(str(exc)) from None


#: The side of a two-direction capture that carries each frame family.
CARRIER = {"odom": "rx", "cmd": "tx"}
_SIDE = {"rx": "rx (firmware -> host)", "tx": "tx (host -> firmware)"}


def _both_directions(path: str) -> bool:
    """True when a pcapng capture holds packets of both directions (stops at the first pair)."""
    from fwbridge.bridge.record.serial_captures import read_capture
    from fwbridge.bridge.record.serial_pcapng import CaptureError

    seen: set[str] = set()
    try:
        for packet in read_capture(path):
            seen.add(packet.direction)
            if {"rx", "tx"} <= seen:
                return True
    except CaptureError:
        pass  # reported with its offset by the decoding pass itself
    return False


def read_input(path: str, fmt: str, direction: str | None = None,
               prefer: str | None = None) -> Iterator[bytes]:
    """Chunks of the input's bytes: raw binary, hex text, a pcapng or MCAP serial capture.

    ``auto`` tells them apart by the first bytes; ``direction`` picks one side
    (``rx``/``tx``) of a capture of both directions, ``prefer`` the side taken
    when none is given and the capture has both. A CAN capture is refused.
    """
    try:
        stream: BinaryIO = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except IsADirectoryError:
        fail(f"{path}: is a directory, not a capture file")
    except PermissionError:
        fail(f"{path}: permission denied")
    from fwbridge.bridge.record.serial_pcapng_reader import capture_kind

    with stream:
        first = stream.read(READ_CHUNK)
        kind = capture_kind(first)
        if kind is not None and "serial" not in kind and fmt in ("auto", "pcapng"):
            hint = " (decode it with 'fwbridge can decode')" if "CAN" in kind else ""
            fail(f"{path}: a {kind}, not a serial capture or byte stream{hint}")
        if fmt == "auto":
            from fwbridge.bridge.record.mcap_sink import looks_like_mcap
            from fwbridge.bridge.record.serial_pcapng import looks_like_pcapng

            fmt = ("pcapng" if looks_like_pcapng(first)
                   else "mcap" if looks_like_mcap(first)
                   else "hex" if looks_like_hex(first) else "raw")
        if fmt in ("pcapng", "mcap"):  # read_payloads reads both (MCAP: its raw channels)
            if path == "-":
                fail(f"{fmt} captures are read from a file, not from stdin")
            if direction is None and prefer is not None and _both_directions(path):
                direction = prefer
                click.echo(f"decode: {path} holds both directions; decoding {_SIDE[prefer]}, "
                           "the side these frames travel (--direction to choose)", err=True)
            yield from read_pcapng_payloads(path, direction)
            return
        if direction is not None:
            fail("--direction applies to pcapng captures only")
        if fmt == "hex":  # a block of whole lines at a time: bounded memory on long files
            yield from _hex_blocks(path, first, stream)
            return
        while first:
            yield first
            first = stream.read(READ_CHUNK)


def _action_extras(item: Any, as_json: bool) -> None:
    """Action groups (0x31/0x32) print as a table of steps under their frame."""
    from fwbridge.cli_verbs.action import print_action_group
    from fwbridge.protocols.action_frame import SubCommand

    frame = getattr(item, "frame", None)
    if not as_json and frame is not None and getattr(frame, "sub", None) in (
        SubCommand.WRITE_ACTION_GROUP, SubCommand.TEST_ACTION_GROUP
    ):
        print_action_group(frame, title=f"action group of the frame at offset {item.offset}")


@click.command("decode")
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option(
    "-p", "--protocol", type=ProtocolParam([*DECODERS.names(), "actuator"]), required=True,
    help="Frame family on this stream, or a description file (FILE.toml); 'actuator' reads "
         "a CAN capture (.log, .asc, .blf, .pcapng, .mcap) and decodes its actuator structs.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["auto", "raw", "hex", "pcapng", "mcap"]),
    default="auto",
    show_default=True, help="Input encoding.",
)
@click.option("--direction", type=click.Choice(["rx", "tx"]), default=None,
              help="pcapng and MCAP captures: decode one direction only (default: the side the "
                   "frames travel when the capture has both, rx for odom and tx for cmd; "
                   "both, in order, for action frames).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame.")
@WIDE_OPTION
@click.option("--crc", default=None, metavar="NAME",
              help="Action frames: CRC-16 preset (default crc-ccitt-false).")
@click.option("--relaxed", is_flag=True,
              help="Action frames: accept FE FF headers and bad CRCs (for the patent's "
                   "example and captures like it); never the default.")
@click.option("--max-length", type=click.IntRange(0, 65535), default=None,
              help="Action frames: largest data length accepted (default 1024).")
def decode_cmd(
    source: str, protocol: str, fmt: str, direction: str | None, as_json: bool, wide: bool,
    crc: str | None, relaxed: bool, max_length: int | None,
) -> None:
    """Decode every frame in a capture (raw bytes, hex text, pcapng or MCAP; '-' is stdin).

    Frames go to stdout (a table, or JSON lines with --json), the receiver's
    counters to stderr at the end.
    """
    if protocol == "actuator":  # a CAN capture, not a byte stream
        from fwbridge.cli_verbs.can_files import decode_cmd as can_decode

        click.get_current_context().invoke(can_decode, file=source, as_json=as_json, count=None,
                                           wide=wide)
        return
    source_spec = protocol
    protocol, dec, opts = _decoder_of(protocol, crc, relaxed, max_length)
    try:
        rx = dec.make(opts)
    except ConfigError as exc:
        fail(str(exc))
    chunks = read_input(source, fmt, direction, prefer=CARRIER.get(protocol))
    first = next(chunks, b"")  # input errors come before any output
    # Rows stream as they are decoded (bounded memory, never cut when piped).
    from fwbridge.cli_verbs.table_stream import RowWriter
    from fwbridge.protocols.engine.stream_decode import decode_stream

    table = None if as_json else RowWriter(dec.columns, title=f"{protocol} frames",
                                           widths=dec.widths, left=dec.text,
                                           width=None if wide else -1)
    take = _frame_printer(protocol, dec, table, as_json)
    blocks: Any = None
    if "described" in opts:  # a description: its columns path, when its layout is fixed
        from fwbridge.cli_verbs.block_rows import column_blocks

        blocks = column_blocks(rx, described(source_spec).codec, protocol, table, take)
    elif protocol in BLOCK_CODECS and hasattr(rx, "feed_columns"):
        from fwbridge.cli_verbs.block_rows import ColumnBlocks

        blocks = ColumnBlocks(rx, BLOCK_CODECS[protocol], protocol, table, take)
    counters = decode_stream(blocks.rx if blocks is not None else rx,
                             itertools.chain([first], chunks), take,
                             feed=blocks.take if blocks is not None else None)
    if table is not None:
        table.flush()
    print_counters(counters)


def _decoder_of(protocol: str, crc: str | None, relaxed: bool,
                max_length: int | None) -> tuple[str, Decoder, dict[str, Any]]:
    """``decode``'s frame family (a description's name), its decoder and its receiver's
    options; one ``error:`` line for an option the family does not take."""
    opts: dict[str, Any] = {k: v for k, v in (("crc", crc), ("relaxed", relaxed),
                                              ("max_length", max_length))
                            if v not in (None, False)}
    if is_description(protocol):
        protocol, dec = description_decoder(protocol)
        if set(opts) - {"max_length"}:
            fail(f"--{next(iter(set(opts) - {'max_length'}))} applies to --protocol action only;"
                 " a description names its own checksum")
        opts = {**opts, "described": True}
    else:
        dec = DECODERS[protocol]
    if opts and protocol != "action" and "described" not in opts:
        fail(f"--{next(iter(opts)).replace('_', '-')} applies to --protocol action only")
    return protocol, dec, opts


def _frame_printer(protocol: str, dec: Decoder, table: Any,
                   as_json: bool) -> Callable[[list[Any]], None]:
    """What ``decode`` does with a chunk's frames: JSON lines, or the table's rows (an action
    frame's extras after its row), one write per chunk."""

    def take(items: list[Any]) -> None:
        if table is None:  # a chunk's frames as one batch of lines
            json_lines([{"offset": item.offset, "protocol": protocol, **dec.row(item)}
                        for item in items])
            return
        lines: list[str] = []  # one write per chunk, even when stdout is unbuffered
        table.out = lines.append
        for item in items:
            table.row(item.offset, dec.row(item))
            if protocol == "action":
                sys.stdout.write("".join(lines))
                lines.clear()
                _action_extras(item, as_json)
        table.out = sys.stdout.write
        sys.stdout.write("".join(lines))

    return take
