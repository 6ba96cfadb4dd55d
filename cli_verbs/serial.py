"""Verbs on real serial ports: ``ports``, ``send``, ``sniff``, ``record``, ``replay``."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import click
from serial.tools import list_ports

from fwbridge.bridge.link.transports import IO_ERRORS, drop_backlog, read_some
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.bridge.record.serial_pcapng import (
    LINKTYPE_USER1,
    RX,
    TX,
    CaptureError,
)
from fwbridge.bridge.record.sniff import SniffConfig, frame_errors, record_frame, run_sniff
from fwbridge.cli_verbs.codec import DECODERS
from fwbridge.cli_verbs.common import (
    FORCE,
    Decoder,
    console,
    fail,
    json_line,
    print_counters,
    writable,
)
from fwbridge.cli_verbs.frames import (
    DescribedGroup,
    ProtocolParam,
    described,
    description_decoder,
    is_description,
    tap_for,
)
from fwbridge.cli_verbs.link import (
    BAUD,
    DURATION,
    Deadline,
    Rate,
    open_port,
    until_interrupted,
    write_line,
)
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.params import (
    FLOAT32,
    RATE,
    SPEED,
    TIMEOUT_MAX,
    Finite,
    velocity_limit_options,
    velocity_refused,
)
from fwbridge.cli_verbs.row_fit import WIDE_OPTION, LineFit
from fwbridge.cli_verbs.status_line import StatusLine, bar
from fwbridge.cli_verbs.stopping import held
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.engine import receiver_for

__all__ = ["ports_cmd", "record_cmd", "replay_cmd", "send_group", "sniff_cmd"]

SNIFF_PROTOCOLS = ("odom", "cmd", "action")


# -- ports --------------------------------------------------------------------------
@click.command("ports")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per port.")
def ports_cmd(as_json: bool) -> None:
    """List serial ports with their USB vendor:product ids."""
    found = sorted(list_ports.comports(), key=lambda p: p.device)
    rows = [
        {
            "device": p.device,
            "usb": f"{p.vid:04x}:{p.pid:04x}" if p.vid is not None else "",
            "description": "" if p.description in ("n/a", p.device) else p.description,
            "serial_number": p.serial_number or "",
            "manufacturer": p.manufacturer or "",
            "location": p.location or "",
        }
        for p in found
    ]
    if as_json:
        for row in rows:
            json_line(row)
        return
    if not rows:
        click.echo("no serial ports found (is the board plugged in? see 'dmesg | grep tty')",
                   err=True)
        return
    from rich.table import Table

    table = Table("device", "USB id", "description", "serial number", "manufacturer", "location")
    for row in rows:
        table.add_row(*row.values())
    console.print(table)


# -- send ---------------------------------------------------------------------------
def _send_options(fn: Any) -> Any:
    fn = click.option("--count", type=click.IntRange(min=0), default=1, show_default=True,
                      help="Frames to send (0: until Ctrl-C).")(fn)
    fn = click.option("--rate", type=RATE, default=10.0,
                      show_default=True, metavar="HZ", help="Frames per second.")(fn)
    return BAUD(fn)


def _send_described(ctx: click.Context, d: Any, frame: bytes, opts: dict[str, Any]) -> None:
    _send(ctx.meta["send.port"], opts["baud"], frame, d.desc.name, opts["rate"], opts["count"])


def _send_params() -> list[click.Parameter]:
    holder = _send_options(lambda: None)
    return list(reversed(holder.__click_params__))


class SendGroup(DescribedGroup):
    """``fwbridge send PORT``: its own frames, and ``send PORT DESC.toml FIELD=VALUE…``."""

    action = staticmethod(_send_described)
    extra_params = staticmethod(_send_params)


@click.group("send", cls=SendGroup)
@click.argument("port")
@click.pass_context
def send_group(ctx: click.Context, port: str) -> None:
    """Send frames to PORT at a steady rate (a device path or pyserial URL).

    Besides the frames below: 'fwbridge send PORT DESC.toml FIELD=VALUE…' for
    a frame described in a file (docs/FRAMES.md).
    """
    ctx.meta["send.port"] = port


def _send(port: str, baud: int, frame: bytes, kind: str, rate: float, count: int,
          on_stop: bytes = b"") -> None:
    """``frame`` ``count`` times at ``rate``; ``on_stop`` once more if stopped before the
    end (zero velocity after a stop signal: the robot must not keep the last command)."""
    link = open_port(port, baud)
    sent = 0
    period = 1.0 / rate
    next_at = time.monotonic()
    stopped = False
    try:
        with until_interrupted() as stop:
            try:
                while count == 0 or sent < count:
                    link.write(frame)
                    sent += 1
                    if count and sent >= count:
                        break
                    next_at += period
                    time.sleep(max(0.0, next_at - time.monotonic()))
            except IO_ERRORS as exc:
                fail(f"{port} went away after {sent} frames: {exc}")
        stopped = stop.early
    finally:
        with contextlib.suppress(*IO_ERRORS):
            if on_stop and (stopped or sys.exc_info()[0] is not None):
                link.write(on_stop)
            link.flush()  # the last frame must leave before close drops the queue
        with contextlib.suppress(*IO_ERRORS):
            link.close()
    then = ", then zero velocity" if on_stop and stopped else ""
    click.echo(f"sent {sent} {kind} frame{'s' if sent != 1 else ''} to {port}{then}", err=True)


@send_group.command("cmd")
@click.option("--vx", type=FLOAT32, default=0.0, show_default=True, help="m/s")
@click.option("--vy", type=FLOAT32, default=0.0, show_default=True, help="m/s")
@click.option("--wz", type=FLOAT32, default=0.0, show_default=True, help="rad/s")
@velocity_limit_options
@_send_options
@click.pass_context
def send_cmd(ctx: click.Context, vx: float, vy: float, wz: float, max_linear: float,
             max_angular: float, baud: int, rate: float, count: int) -> None:
    """Velocity-command frames (host -> firmware).

    A velocity beyond --max-linear / --max-angular (the limits of the ROS 2
    cmd_vel path) is refused before the port is opened.
    """
    why = velocity_refused(vx, vy, wz, max_linear, max_angular, prefix="--")
    if why is not None:
        fail(why)
    try:
        frame = cmd_frame.encode(cmd_frame.CmdFrame(vx, vy, wz))
    except ValueError as exc:
        fail(str(exc))
    _send(ctx.meta["send.port"], baud, frame, "cmd", rate, count,
          on_stop=cmd_frame.encode(cmd_frame.ZERO))


@send_group.command("odom")
@click.option("--vx", type=FLOAT32, default=0.0, show_default=True, help="m/s")
@click.option("--vy", type=FLOAT32, default=0.0, show_default=True, help="m/s")
@click.option("--wz", type=FLOAT32, default=0.0, show_default=True, help="rad/s")
@click.option("--yaw", type=FLOAT32, default=0.0, show_default=True, help="degrees")
@_send_options
@click.pass_context
def send_odom(ctx: click.Context, vx: float, vy: float, wz: float, yaw: float, baud: int,
              rate: float, count: int) -> None:
    """Odometry frames (firmware -> host), to exercise a host without the board."""
    try:
        frame = odom_frame.encode(odom_frame.OdomFrame(vx, vy, wz, yaw))
    except ValueError as exc:
        fail(str(exc))
    _send(ctx.meta["send.port"], baud, frame, "odom", rate, count)


# -- sniff --------------------------------------------------------------------------
def decoder_for(protocol: str) -> Decoder:
    """The protocol's decoder from the ``decode`` registry (action frames when available)."""
    if is_description(protocol):
        return description_decoder(protocol)[1]
    if protocol in DECODERS:
        return DECODERS[protocol]
    if protocol == "action":
        try:
            from fwbridge.cli_verbs.action import action_decoder
        except ImportError as exc:
            fail(f"action frames cannot be decoded here: {exc}")
        return action_decoder()
    fail(f"unknown protocol {protocol!r} (choose from {', '.join(SNIFF_PROTOCOLS)})")


KEEP_BACKLOG = click.option(
    "--keep-backlog", is_flag=True,
    help="Keep the bytes PORT held back from before it was opened (a device's or a "
         "simulator's buffer); by default they are dropped, so the run starts with fresh "
         "bytes.")


def _start_clean(link: Any, port: str, verb: str) -> None:
    """Drop PORT's backlog, saying so on stderr when there was one."""
    try:
        dropped = drop_backlog(link)
    except IO_ERRORS as exc:
        link.close()
        fail(f"{port} went away (unplugged?): {exc}")
    if dropped:
        click.echo(f"{verb}: dropped {dropped} bytes {port} held back from before it was "
                   "opened (--keep-backlog keeps them)", err=True)


@click.command("sniff")
@click.argument("port")
@click.option("-p", "--protocol", type=ProtocolParam(SNIFF_PROTOCOLS), required=True,
              help="Frame family arriving on PORT, or a description file (FILE.toml).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame.")
@click.option("--record", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also capture the raw bytes to a pcapng file (MCAP with the decoded "
                   "messages for a .mcap name); an existing FILE only with --force.")
@FORCE
@KEEP_BACKLOG
@DURATION
@BAUD
@click.option("--garbage-timeout", type=Finite(0, TIMEOUT_MAX, unit="s"), default=3.0,
              show_default=True, metavar="S",
              help="Stop with 'wrong baud rate?' after S s of bytes and no frame (0: never).")
@click.option("--absolute", is_flag=True,
              help="Print the wall-clock time (seconds since the epoch) instead of seconds "
                   "since the start.")
@WIDE_OPTION
@FOXGLOVE
def sniff_cmd(port: str, protocol: str, as_json: bool, record: str | None, force: bool,
              keep_backlog: bool, duration: float | None, baud: int, garbage_timeout: float,
              absolute: bool, wide: bool,
              foxglove: bool, foxglove_host: str, foxglove_port: int) -> None:
    """Decode the frames arriving on PORT as they come, with a live rate/error line.

    Frames go to stdout (lines, or JSON with --json), each with its time in
    seconds since the start (--absolute: since the epoch); the counters to
    stderr at the end.
    """
    dec = decoder_for(protocol)
    tap = tap_for(protocol) if record else None
    if is_description(protocol):
        protocol = described(protocol).desc.name
    rx = dec.make({})
    if record:  # before the port: a bad path is one line, not a late error
        writable(record, "--record", force=force)
    link = open_port(port, baud)
    if not keep_backlog:
        _start_clean(link, port, "sniff")
    kind = protocol if protocol in ("odom", "cmd") else None
    capture = _open_capture(record, port, baud, live_sink(foxglove, foxglove_host, foxglove_port),
                            link, rx=kind, tx=None, frames=protocol) if record or foxglove else None
    start = time.monotonic()
    fit = LineFit("sniff", wide)  # on a terminal each line fits its width

    def emit(item: Any) -> None:
        fields = dec.row(item)
        t = round(time.time() if absolute else time.monotonic() - start, 6)
        if as_json:
            json_line({"t": t, "offset": item.offset, "protocol": protocol, **fields})
        else:
            when = f"{t:17.6f}" if absolute else f"{t:10.3f}"
            write_line(fit.pairs(f"{when} {item.offset:>10}",
                                 [(c, fields.get(c, "")) for c in dec.columns]))

    @contextlib.contextmanager
    def view() -> Iterator[Callable[[dict[str, int]], None]]:
        rate = Rate()
        with StatusLine() as status, until_interrupted():
            yield lambda stats: status.update(
                f"{port} {protocol}: {stats['frames']} frames, {rate(stats['frames']):.0f}/s, "
                f"{frame_errors(stats)} errors, {stats['discarded']} bytes discarded")

    config = SniffConfig(duration=duration, garbage_timeout=garbage_timeout)
    # Ready: open and reading (said inside the view's stop block, so a stop right after
    # it takes the normal way out).
    res = run_sniff(link, rx, config, emit, capture=capture, tap=tap, view=view,
                    on_ready=lambda: click.echo(f"sniffing {port} for {protocol} frames",
                                                err=True))
    if res.lost is not None:
        fail(f"{port} went away (unplugged?): {res.lost}")
    print_counters(res.stats)
    if res.garbage is not None:
        fail(res.garbage.message(port, baud, "change it with --baud"))


# -- record / replay ----------------------------------------------------------------
def _open_capture(file: str | None, port: str, baud: int, live: Any, link: Any,
                  **recorder: Any) -> Any:
    """pcapng, or MCAP by the .mcap suffix, and/or a live view; one error line if not."""
    from fwbridge.bridge.record.serial_mcap import open_capture

    try:
        return open_capture(file, port=port, description=f"{baud} baud", live=live, **recorder)
    except CaptureError as exc:
        link.close()
        if live is not None:
            live.close()
        fail(str(exc))



@click.command("record")
@click.argument("port")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--protocol", type=ProtocolParam(SNIFF_PROTOCOLS), default=None,
              help="Also put each frame the receiver accepts on a second interface, whole "
              "(Wireshark dissects frames split across reads from it).")
@FORCE
@KEEP_BACKLOG
@DURATION
@BAUD
def record_cmd(port: str, file: str, protocol: str | None, force: bool, keep_backlog: bool,
               duration: float | None, baud: int) -> None:
    """Capture the bytes arriving on PORT to a pcapng FILE (Wireshark, tshark, replay),
    or to MCAP for a .mcap name (raw bytes, odometry as ROS 2 messages, counters).

    An existing FILE is refused unless --force; it is replaced only once PORT is open."""
    writable(file, force=force)
    rx = decoder_for(protocol).make({}) if protocol else None
    tap = tap_for(protocol) if protocol else None
    name = described(protocol).desc.name if protocol and is_description(protocol) else protocol
    link = open_port(port, baud)  # FILE is created only once PORT is open
    if not keep_backlog:
        _start_clean(link, port, "record")
    deadline = Deadline(duration)
    rate = Rate()
    with _open_capture(file, port, baud, None, link, tx=None, frames=name) as cap:
        try:
            with StatusLine() as status, until_interrupted():
                click.echo(f"recording {port} to {file}", err=True)  # both open: ready
                while not deadline.expired:
                    # Bytes taken off the port reach the file: a stop waits for the write
                    # (at most the port's read timeout, 0.1 s, later).
                    with held():
                        try:
                            data = read_some(link)
                        except IO_ERRORS as exc:
                            fail(f"{port} went away (unplugged?) after {cap.packets} packets: "
                                 f"{exc}; the capture up to then is in {file}")
                        cap.write(RX, data)
                    if rx is not None and tap is not None and data:
                        tap.feed(data)
                        for item in rx.feed(data):
                            record_frame(cap, tap, item)
                    status.update(f"{port} -> {file}: {cap.packets} packets, {cap.bytes} bytes, "
                                  f"{rate(cap.bytes):.0f} B/s")
            if rx is not None:
                for item in rx.finish():
                    record_frame(cap, tap, item)
        finally:
            link.close()
    frames = f", {cap.frames} {name} frames" if protocol else ""
    click.echo(f"recorded {cap.packets} packets ({cap.bytes} bytes{frames}) from {port} to "
               f"{file}", err=True)


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("port")
@click.option("--speed", type=SPEED, default=1.0,
              show_default=True, help="Time scale: 2 plays twice as fast.")
@click.option("--loop", "loop", is_flag=True, help="Start over at the end, until Ctrl-C.")
@click.option("--direction", type=click.Choice([RX, TX]), default=RX, show_default=True,
              help="Which side to play: rx = what the device sent, tx = what the host sent.")
@click.option("-p", "--protocol", type=ProtocolParam(SNIFF_PROTOCOLS), default=None,
              help="Accepted like record's and checked, but replay plays the raw reads, "
              "whatever the frames: it never replays the frames interface.")
@BAUD
def replay_cmd(file: str, port: str, speed: float, loop: bool, direction: str,
               protocol: str | None, baud: int) -> None:
    """Write one direction of a capture (pcapng or MCAP) to PORT, keeping its recorded
    timing."""
    del protocol  # byte-level: the raw reads are played as they were read
    try:
        everything = [p for p in read_capture(file) if p.link_type != LINKTYPE_USER1]
    except CaptureError as exc:
        fail(str(exc))
    packets = [p for p in everything if p.direction == direction]
    if not packets:
        have = {d: sum(1 for p in everything if p.direction == d) for d in (RX, TX)}
        fail(f"{file}: no {direction} packets (it has rx={have[RX]}, tx={have[TX]}; "
             "see --direction)")
    base = packets[0].ts_ns
    offsets = [(p.ts_ns - base) / 1e9 / speed for p in packets]
    span = offsets[-1]
    # A loop restarts one average gap after the last packet, not on top of it.
    lap = span + (span / (len(packets) - 1) if len(packets) > 1 else 0.1)
    link = open_port(port, baud)
    sent = laps = 0
    total = None if loop else len(packets)
    # Replaying velocity commands commands motion: a stop before the end sends zero velocity.
    commands = _carries_commands(packets)
    stopped = False
    again = ", in a loop" if loop else ""
    t0 = time.monotonic()
    try:
        with StatusLine() as status, until_interrupted() as stop:
            click.echo(f"replaying {len(packets)} {direction} packets from {file} to {port}"
                       f"{again}", err=True)
            while True:
                for off, packet in zip(offsets, packets):
                    delay = t0 + laps * lap + off - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    try:
                        link.write(packet.data)
                    except IO_ERRORS as exc:
                        fail(f"{port} went away after {sent} packets: {exc}")
                    sent += 1
                    status.update(_replay_text(sent, total, laps, off, span))
                laps += 1
                if not loop:
                    break
        stopped = stop.early
    finally:
        with contextlib.suppress(*IO_ERRORS):
            if commands and (stopped or sys.exc_info()[0] is not None):
                link.write(cmd_frame.encode(cmd_frame.ZERO))
            link.flush()
        link.close()
    then = ", then zero velocity" if commands and stopped else ""
    click.echo(f"replayed {sent} {direction} packets from {file} to {port}{then}", err=True)


def _replay_text(sent: int, total: int | None, laps: int, at: float, span: float) -> str:
    """The replay's live line: a bar, the packets sent, the time left (a loop: its lap)."""
    if total is None:
        return f"replay {bar(sent, None)} {sent} packets, lap {laps + 1}"
    return (f"replay {bar(sent, total)} {sent}/{total} packets, "
            f"{max(span - at, 0.0):.0f} s left")


def _carries_commands(packets: list[Any]) -> bool:
    """True when the first 64 KiB of the packets hold velocity-command frames."""
    rx = receiver_for(cmd_frame.CODEC)
    seen = 0
    for packet in packets:
        if rx.feed(packet.data):
            return True
        seen += len(packet.data)
        if seen >= 1 << 16:
            break
    return False

