"""``fwbridge can sniff`` and ``fwbridge can record``: the frames on a bus as they pass, to
the terminal (actuator structs decoded, or candump lines, or JSON; a live view) or to a
capture file of any format python-can writes.

The bus comes from the ``can`` group's options (:mod:`cli_verbs.can_common`); both
stop at ``--count``/``--duration`` or Ctrl-C, shutting the bus down and closing the file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import can
import click

from fwbridge.bridge.record.can_logs import candump_line
from fwbridge.can_bus.ids import from_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.can_common import (
    ABSOLUTE,
    COUNT,
    DURATION,
    Stamps,
    actuator_fields,
    actuator_text,
    bus_label,
    lone_hint,
    open_bus,
    options,
)
from fwbridge.cli_verbs.common import FORCE, fail, json_line, print_counters, writable
from fwbridge.cli_verbs.link import Deadline, until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.row_fit import WIDE_OPTION, LineFit
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.protocols.errors import FrameError

__all__ = ["record_cmd", "sniff_cmd"]


def _receive(bus: can.BusABC, deadline: Deadline, count: int | None) -> Iterator[can.Message]:
    n = 0
    while not deadline.expired and (count is None or n < count):
        msg = bus.recv(timeout=deadline.left(0.1))
        if msg is not None:
            n += 1
            yield msg


@click.command("sniff")
@click.option("--raw", is_flag=True, help="Every frame as a candump line: (time) channel ID#DATA.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame.")
@click.option("--all", "show_all", is_flag=True,
              help="Also show frames that are not actuator structs (as candump lines).")
@ABSOLUTE
@COUNT
@DURATION
@WIDE_OPTION
@FOXGLOVE
@click.pass_context
def sniff_cmd(ctx: click.Context, raw: bool, as_json: bool, show_all: bool, absolute: bool,
              count: int | None, duration: float | None, wide: bool, foxglove: bool,
              foxglove_host: str, foxglove_port: int) -> None:
    """Show the actuator structs on the bus as they pass.

    Decoded; with --raw every frame. Times are seconds since the first frame
    (--absolute: the frames' timestamps).
    """
    bus = open_bus(options(ctx))
    stamp = Stamps(absolute)
    live = (_writer(None, bus, options(ctx).bitrate,
                    live_sink(True, foxglove_host, foxglove_port)) if foxglove else None)
    stats: Counter[str] = Counter()
    deadline = Deadline(duration)
    fit = LineFit("can sniff", wide)  # on a terminal each line fits its width
    try:
        with StatusLine() as status, until_interrupted():
            for msg in _receive(bus, deadline, count):
                stats["frames"] += 1
                t = stamp(msg.timestamp)
                if live is not None:
                    live.on_message_received(msg)
                if msg.is_error_frame:
                    stats["error_frames"] += 1
                try:
                    got = None if raw else from_message(msg)
                except FrameError as exc:
                    stats["malformed"] += 1
                    click.echo(fit.text(f"{candump_line(msg, bus_label(bus), t)}  malformed: "
                                        f"{exc}"))
                    continue
                if got is not None:
                    stats["actuator"] += 1
                    if as_json:
                        json_line({"t": t, "id": msg.arbitration_id, **actuator_fields(got, t)})
                    else:
                        click.echo(fit.text(actuator_text(got, t)))
                elif raw or show_all:
                    if as_json:
                        json_line(_raw_fields(msg, bus_label(bus), t))
                    else:
                        click.echo(fit.text(candump_line(msg, bus_label(bus), t)))
                status.update(f"{bus_label(bus)}: {stats['frames']} frames, "
                              f"{stats['actuator']} actuator, {stats['error_frames']} errors")
    finally:
        bus.shutdown()
        if live is not None:
            live.stop()
    if not stats["frames"]:
        click.echo(f"no frames{lone_hint(bus)}", err=True)
    print_counters({k: stats[k] for k in ("frames", "actuator", "malformed", "error_frames")})


def _raw_fields(msg: can.Message, channel: str, t: float) -> dict[str, Any]:
    return {"t": t, "channel": msg.channel if msg.channel is not None else channel,
            "id": msg.arbitration_id, "extended": msg.is_extended_id,
            "remote": msg.is_remote_frame, "error": msg.is_error_frame, "dlc": msg.dlc,
            "data": bytes(msg.data).hex(), "rx": msg.is_rx}


def _writer(file: str | None, bus: can.BusABC, bitrate: int | None, live: Any) -> Any:
    """The capture (any format; MCAP and live views with joint_states); one error line."""
    from fwbridge.bridge.record.can_joint_states import can_writer
    from fwbridge.bridge.record.mcap_sink import McapError
    rate = bitrate or (bus.sim.bitrate if isinstance(bus, FwBridgeBus) else None)
    try:
        return can_writer(file, bitrate=rate, live=live, channel=bus_label(bus))
    except (ValueError, OSError, McapError) as exc:
        bus.shutdown()
        if live is not None:
            live.close()
        fail(str(exc))


@click.command("record")
@click.argument("file", type=click.Path(dir_okay=False))
@COUNT
@DURATION
@FORCE
@click.pass_context
def record_cmd(ctx: click.Context, file: str, count: int | None, duration: float | None,
               force: bool) -> None:
    """Record frames to FILE; its extension picks the format.

    .log (candump), .asc, .blf, .csv, .trc, .pcapng for Wireshark, .mcap for
    Foxglove (frames, load, joint_states). An existing FILE is refused unless
    --force; it is replaced only once the bus is open.
    """
    writable(file, force=force)
    bus = open_bus(options(ctx))  # FILE is created only once the bus is open
    n = 0
    writer: Any = None
    try:  # from here every way out shuts the bus down (a stop signal may come at once)
        writer = _writer(file, bus, options(ctx).bitrate, None)
        with StatusLine() as status, until_interrupted():
            click.echo(f"recording {bus_label(bus)} to {file}", err=True)  # both open: ready
            for msg in _receive(bus, Deadline(duration), count):
                writer.on_message_received(msg)
                n += 1
                status.update(f"{bus_label(bus)} -> {file}: {n} frames")
    finally:
        bus.shutdown()
        if writer is not None:
            writer.stop()
    click.echo(f"recorded {n} frames from {bus_label(bus)} to {file}"
               + ("" if n else lone_hint(bus)), err=True)
