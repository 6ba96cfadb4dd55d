"""``fwbridge can``: actuator messages on any python-can bus, and the simulated one.

Bus options follow python-can and can-utils: ``-i/--interface``,
``-c/--channel``, ``-b/--bitrate``, plus ``--bus-kwarg KEY=VALUE`` (python-can's
``--bus-kwargs``). Without ``-i`` python-can's configuration decides, and
without one the simulated bus ``fwbridge`` channel ``sim0``. A simulated
channel lives inside one process: give it traffic with ``--modules N`` (N
actuator modules) or run ``fwbridge can sim``. ``-c shared:NAME`` is the bus
that ``fwbridge can bus up NAME`` shares between every process.

Every verb stops at ``--count``/``--duration`` (or Ctrl-C, still printing its
summary); frames go to stdout, counters and errors to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import can
import click
from can.util import cast_from_string

from fwbridge.bridge.record.can_logs import (
    candump_line,
    decode_actuators,
    format_frame,
    parse_frame,
    read_messages,
)
from fwbridge.can_bus.bits import Frame, frame_length
from fwbridge.can_bus.ids import ActuatorMessage, Direction, classify, from_message, to_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.can_common import (
    ABSOLUTE,
    COUNT,
    DURATION,
    BusOptions,
    Stamps,
    actuator_fields,
    actuator_text,
    bus_label,
    lone_hint,
    open_bus,
    options,
    parse_command,
    target,
)
from fwbridge.cli_verbs.common import (
    FORCE,
    Group,
    console,
    fail,
    json_line,
    print_counters,
    writable,
)
from fwbridge.cli_verbs.link import Deadline, until_interrupted
from fwbridge.cli_verbs.live import FOXGLOVE, live_sink
from fwbridge.cli_verbs.params import BITRATE, INTERVAL, Finite
from fwbridge.cli_verbs.row_fit import WIDE_OPTION, LineFit
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.protocols.actuator import ActuatorStruct, Fault
from fwbridge.protocols.errors import CaptureTruncated, FrameError

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
    from fwbridge.protocols.builtin_frames import builtin

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


# -- sniff / record -------------------------------------------------------------------
def _receive(bus: can.BusABC, deadline: Deadline, count: int | None) -> Iterator[can.Message]:
    n = 0
    while not deadline.expired and (count is None or n < count):
        msg = bus.recv(timeout=deadline.left(0.1))
        if msg is not None:
            n += 1
            yield msg


@can_group.command("sniff")
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


@can_group.command("record")
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


# -- replay / decode ----------------------------------------------------------------------
def _unreadable(file: str, exc: BaseException) -> str:
    """One line for a capture that cannot be read whole: the reader's own names the file."""
    text = str(exc)
    return text if text.startswith(f"{file}:") else f"{file}: not a readable capture: {text}"


def _load(file: str) -> tuple[list[can.Message], str | None]:
    """The frames of ``file`` up to any damage, and the line that says what it is."""
    msgs: list[can.Message] = []
    try:
        for m in read_messages(file):
            if not m.is_error_frame:
                msgs.append(m)
    except FileNotFoundError:
        fail(f"{file}: no such file")
    except (ValueError, OSError, EOFError) as exc:
        if not msgs or not isinstance(exc, CaptureTruncated):
            fail(_unreadable(file, exc))
        return msgs, _unreadable(file, exc)  # a cut file: its whole frames, then the notice
    return msgs, None


@can_group.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--speed", type=Finite(0, 1000), default=1.0, show_default=True,
              help="Time scale: 2 plays twice as fast, 0 as fast as possible.")
@click.option("--loop", "loops", type=click.IntRange(min=0), default=1, show_default=True,
              help="Play the file this many times (0: until Ctrl-C or a bound).")
@COUNT
@DURATION
@click.pass_context
def replay_cmd(ctx: click.Context, file: str, speed: float, loops: int, count: int | None,
               duration: float | None) -> None:
    """Send the frames of a capture with their recorded timing.

    Error frames are skipped.
    """
    msgs, damage = _load(file)
    if not msgs:
        fail(f"{file}: no frames to replay")
    offsets = [m.timestamp - msgs[0].timestamp for m in msgs]
    gap = (offsets[-1] / (len(msgs) - 1)) if len(msgs) > 1 else 0.0
    lap = offsets[-1] + gap  # a loop restarts one average gap after the last frame
    opts = options(ctx)
    # the simulator's default transmit buffer sends a backlog lowest ID first; keep file order
    fifo = {"tx_order": "fifo"} if target(opts)[0] == "fwbridge" else {}
    bus = open_bus(opts, **fifo)
    deadline = Deadline(duration)
    sent = lap_no = 0
    laps = "until stopped" if loops == 0 else f"{loops} time(s)"
    t0 = time.monotonic()
    try:
        with until_interrupted():
            click.echo(f"replaying {len(msgs)} frames from {file} on {bus_label(bus)}, {laps}",
                       err=True)
            while (loops == 0 or lap_no < loops) and not deadline.expired:
                for off, msg in zip(offsets, msgs):
                    if deadline.expired or (count is not None and sent >= count):
                        break
                    if speed:
                        delay = t0 + (lap_no * lap + off) / speed - time.monotonic()
                        if delay > 0:
                            time.sleep(deadline.left(delay))
                            if deadline.expired:
                                break
                    out = can.Message(arbitration_id=msg.arbitration_id,
                                      is_extended_id=msg.is_extended_id,
                                      is_remote_frame=msg.is_remote_frame, dlc=msg.dlc,
                                      data=msg.data)
                    try:
                        bus.send(out, timeout=1.0)
                    except can.CanError as exc:
                        fail(f"replay stopped after {sent} frames: {exc}{lone_hint(bus)}")
                    sent += 1
                lap_no += 1
                if count is not None and sent >= count:
                    break
    finally:
        bus.shutdown()
    click.echo(f"replayed {sent} frames ({lap_no} lap(s)) from {file} on {bus_label(bus)}",
               err=True)
    if damage is not None:
        fail(damage)


#: ``can decode`` reads candump logs a block at a time (False: message by message, as for
#: the other formats; the tests compare the two).
CANDUMP_BLOCKS = True


@can_group.command("decode")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per struct.")
@ABSOLUTE
@COUNT
@WIDE_OPTION
def decode_cmd(file: str, as_json: bool, absolute: bool = False, count: int | None = None,
               wide: bool = False) -> None:
    """Decode the actuator structs in a CAN capture.

    Any format python-can reads: .log, .asc, .blf, .pcapng, .mcap and more.
    Times are seconds since the first actuator frame (--absolute: the recorded
    timestamps).
    """
    stats: Counter[str] = Counter()
    stamp = Stamps(absolute)
    fit = LineFit("can decode", wide or as_json)  # on a terminal each line fits its width

    def each(items: Iterator[ActuatorMessage | tuple[can.Message, Exception]]) -> bool:
        """Print structs one by one; False once ``count`` of them are printed."""
        for item in items:
            if count is not None and stats["structs"] >= count:
                return False
            if isinstance(item, ActuatorMessage):
                stats["structs"] += 1
                t = stamp(item.timestamp)
                if as_json:
                    json_line(actuator_fields(item, t))
                else:
                    click.echo(fit.text(actuator_text(item, t)))
            else:
                stats["malformed"] += 1
                t = stamp(item[0].timestamp)
                click.echo(f"{candump_line(item[0], None, t)}  malformed: {item[1]}", err=True)
        return True

    try:
        if CANDUMP_BLOCKS and file.lower().endswith(".log") and os.path.isfile(file):
            # candump text: read and printed a block of lines at a time (cli_verbs/can_blocks)
            from fwbridge.cli_verbs.can_blocks import CandumpBlocks, LineBlocks

            lines = LineBlocks(file)
            blocks = CandumpBlocks(as_json, stamp, stats, count,
                                   lambda msgs: each(decode_actuators(msgs)), lines)
            for block in lines:
                text, go_on = blocks.take(block)
                if text and fit.on:
                    text = "".join(fit.text(line) + "\n" for line in text.splitlines())
                if text:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                if not go_on:
                    break
            else:
                lines.check()  # over-long lines skipped: named after the frames
        else:
            each(decode_actuators(file))
    except FileNotFoundError:
        fail(f"{file}: no such file")
    except BrokenPipeError:
        raise  # stdout's reader went away (| head): a normal end, not a bad capture
    except (ValueError, OSError, EOFError) as exc:
        if stats["structs"] or stats["malformed"]:  # what was read, then the damage
            print_counters({"structs": stats["structs"], "malformed": stats["malformed"]})
        fail(_unreadable(file, exc))
    print_counters({"structs": stats["structs"], "malformed": stats["malformed"]})


# -- busload ------------------------------------------------------------------------------
@can_group.command("busload")
@click.option("--interval", type=Finite(0, 3600, lo_open=True, unit="s"), default=1.0,
              show_default=True, metavar="S", help="Seconds per report.")
@click.option("--ids/--no-ids", "per_id", default=True, show_default=True,
              help="Per-ID rows under each report.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per interval.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Stop after this many intervals.")
@DURATION
@click.pass_context
def busload_cmd(ctx: click.Context, interval: float, per_id: bool, as_json: bool,
                count: int | None, duration: float | None) -> None:
    """Bus load and frames/s per ID, as canbusload -e.

    Exact frame bits, stuffing included.
    """
    opts = options(ctx)
    bus = open_bus(opts)
    bitrate = opts.bitrate or (bus.sim.bitrate if isinstance(bus, FwBridgeBus) else None)
    if bitrate is None:
        bus.shutdown()
        fail("give the bit rate with -b: the load is a share of it")

    sim = isinstance(bus, FwBridgeBus)
    data_bitrate = bus.sim.data_bitrate if isinstance(bus, FwBridgeBus) else None

    def clock() -> float:  # the time base of the messages' timestamps
        return bus.sim.epoch + bus.time if isinstance(bus, FwBridgeBus) else time.time()

    deadline = Deadline(duration)
    reports = 0
    frames: Counter[tuple[int, bool]] = Counter()
    bits: Counter[tuple[int, bool]] = Counter()
    end = clock() + interval

    def close() -> None:
        nonlocal end, reports
        _report(bus_label(bus), bitrate, interval, frames, bits, per_id, as_json)
        frames.clear()
        bits.clear()
        end += interval
        reports += 1

    try:
        with until_interrupted():
            while not deadline.expired and (count is None or reports < count):
                msg = bus.recv(timeout=deadline.left(0.05))
                if msg is None:
                    if clock() >= end:  # a quiet interval still gets its report
                        close()
                    continue
                if msg.is_error_frame:
                    continue
                # Windows follow the frames' timestamps (bus time on the simulator, which
                # an afap bus runs ahead of the wall); a foreign clock base falls back to ours.
                ts = msg.timestamp if sim or abs(msg.timestamp - clock()) < 10 else clock()
                if not reports and not frames and ts < end - interval:
                    end = ts + interval  # traffic older than the first window: start there
                while ts >= end and (count is None or reports < count):
                    close()
                if count is not None and reports >= count:
                    break
                key = (msg.arbitration_id, msg.is_extended_id)
                frames[key] += 1
                bits[key] += bus_bits(msg, bitrate, data_bitrate)
    finally:
        bus.shutdown()


def bus_bits(msg: can.Message, bitrate: int, data_bitrate: int | None) -> int:
    """The nominal bit times a frame occupies the bus (an FD data phase at its own rate)."""
    if msg.is_fd:
        from fwbridge.can_bus.fd import frame_seconds

        f = Frame.make(msg.arbitration_id, bytes(msg.data), extended=msg.is_extended_id,
                       fd=True, brs=msg.bitrate_switch, esi=msg.error_state_indicator)
        return round(frame_seconds(f, bitrate, data_bitrate if msg.bitrate_switch else None)
                     * bitrate)
    return frame_length(Frame(msg.arbitration_id, msg.is_extended_id, msg.is_remote_frame,
                              msg.dlc, b"" if msg.is_remote_frame else bytes(msg.data)))


def _report(label: str, bitrate: int, interval: float, frames: Counter[tuple[int, bool]],
            bits: Counter[tuple[int, bool]], per_id: bool, as_json: bool) -> None:
    total_bits = sum(bits.values())
    load = 100.0 * total_bits / (bitrate * interval)
    keys = sorted(frames, key=lambda k: (k[1], k[0]))
    rows: list[dict[str, Any]] = [
        {"id": f"{i:08X}" if ext else f"{i:03X}", "frames": frames[(i, ext)],
         "fps": frames[(i, ext)] / interval, "bits": bits[(i, ext)],
         "load": 100.0 * bits[(i, ext)] / (bitrate * interval)} for i, ext in keys]
    if as_json:
        json_line({"channel": label, "bitrate": bitrate, "interval": interval,
                   "frames": sum(frames.values()), "bits": total_bits, "load": load,
                   "ids": rows if per_id else []})
        return
    console.print(f"{label}@{bitrate} {sum(frames.values()):6d} frames {total_bits:9d} bits "
                  f"{load:6.2f} %")
    if per_id:
        for (i, ext), r in zip(keys, rows):
            module = classify(i, ext)
            who = f"  {module[0].value} {module[1]}" if module else ""
            console.print(f"  {r['id']:>8} {r['frames']:6d} frames {r['fps']:9.1f}/s "
                          f"{r['load']:6.2f} %{who}")

