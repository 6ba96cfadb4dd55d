"""``fwbridge can replay`` and ``fwbridge can decode``: a CAN capture (any format python-can
reads) sent to a bus with its recorded timing, or its actuator structs printed.

A damaged capture: the frames before the damage are used, then one ``error:`` line
names the file and what is wrong.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterator

import can
import click

from fwbridge.bridge.record.can_logs import candump_line, decode_actuators, read_messages
from fwbridge.can_bus.ids import ActuatorMessage
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
    target,
)
from fwbridge.cli_verbs.common import fail, json_line, print_counters
from fwbridge.cli_verbs.link import Deadline, until_interrupted
from fwbridge.cli_verbs.params import Finite
from fwbridge.cli_verbs.row_fit import WIDE_OPTION, LineFit
from fwbridge.protocols.errors import CaptureTruncated

__all__ = ["CANDUMP_BLOCKS", "decode_cmd", "replay_cmd"]


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


@click.command("replay")
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


@click.command("decode")
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
