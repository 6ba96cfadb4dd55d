"""``fwbridge send PORT action``: one action frame, optionally acknowledged (stop-and-wait).

Without ``--ack`` the frame is written once. With ``--ack`` it is sent until
answered OK (retransmitted on a timeout or a negative answer, up to
``--retries`` times) and a read request (types 0x01..0x03) also waits for
its result, printed field by field for the fish's queries (0x11..0x14).
Exit status 0 when delivered (or written), 2 when not.
"""

from __future__ import annotations

import contextlib
from typing import Any

import click

from fwbridge.bridge.link.action_link import ActionLink, Exchange
from fwbridge.bridge.link.transports import IO_ERRORS
from fwbridge.cli_verbs.action import enum_label, frame_options
from fwbridge.cli_verbs.common import fail, json_line
from fwbridge.cli_verbs.link import BAUD, open_port
from fwbridge.cli_verbs.params import Finite
from fwbridge.protocols.action_frame import ActionFrame, InstructionType
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.hextext import HexTextError, parse_hex, to_hex

__all__ = ["send_action_cmd"]


def _result_fields(ex: Exchange) -> Any:
    """The result as JSON-able fields, or its raw hex when it is not a known layout."""
    if ex.result is None:
        return None
    try:
        decoded = ex.decoded()
    except FrameError:
        return {"raw": ex.result.data.hex()}
    if isinstance(decoded, tuple):
        return [s.as_dict() for s in decoded]
    assert decoded is not None
    return decoded.as_dict()


def _print_result(fields: Any) -> None:
    rows = fields if isinstance(fields, list) else [fields]
    for row in rows:
        click.echo("  " + "  ".join(f"{k}={v}" for k, v in row.items() if k != "nodes"))
        for node in row.get("nodes", ()):
            click.echo("    node " + "  ".join(f"{k}={v}" for k, v in node.items()))


@click.command("action")
@frame_options
@click.option("--ack", is_flag=True,
              help="Wait for the answer; retransmit on timeout or a negative answer.")
@click.option("--timeout", type=Finite(0, 60, lo_open=True, unit="s"), default=0.2,
              show_default=True, metavar="S", help="--ack: seconds to wait for each answer.")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True,
              help="--ack: retransmissions after the first attempt.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object with the outcome.")
@BAUD
@click.pass_context
def send_action_cmd(ctx: click.Context, machine: int, itype: int, sub: int, data_hex: str,
                    crc: str, ack: bool, timeout: float, retries: int, as_json: bool,
                    baud: int) -> None:
    """An action frame (FE EF … FD DF), with --ack until the peer answers OK."""
    port = ctx.meta["send.port"]
    try:
        data = parse_hex(data_hex)
    except HexTextError as exc:
        fail(f"--data: {exc}")
    frame = ActionFrame(machine, itype, sub, data)
    link_port = open_port(port, baud)
    try:
        try:
            link = ActionLink(link_port, crc=crc, timeout=timeout, retries=retries)
            if not ack:
                raw = link.write_only(frame)
                with contextlib.suppress(*IO_ERRORS):
                    link_port.flush()  # the frame must leave before close drops the queue
                if as_json:
                    json_line({"event": "sent", "frame": raw.hex()})
                else:
                    click.echo(f"sent {to_hex(raw)} to {port}", err=True)
                return
            ex = link.send(frame)
        except (FrameError, ConfigError) as exc:
            fail(str(exc))
        except IO_ERRORS as exc:
            fail(f"{port} went away: {exc}")
    finally:
        with contextlib.suppress(*IO_ERRORS):
            link_port.close()
    _report(ex, link, port, as_json)


def _report(ex: Exchange, link: ActionLink, port: str, as_json: bool) -> None:
    status = None if ex.status is None else enum_label(ex.status)
    result = _result_fields(ex)
    if as_json:
        json_line({"event": "delivered" if ex.delivered else "failed", "attempts": ex.attempts,
                   "status": status, "reason": ex.reason or None,
                   "seconds": round(ex.seconds, 6), "result": result,
                   "other_frames": len(ex.other), "sender": link.stats})
    else:
        what = (f"{enum_label(ex.request.type)} {enum_label(ex.request.sub)} "
                f"({len(ex.request.data)} data bytes)")
        if ex.delivered:
            click.echo(f"{what}: delivered to {port} after {ex.attempts} "
                       f"attempt{'s' if ex.attempts != 1 else ''} (status {status})")
            if result is not None:
                click.echo(f"result {enum_label(ex.result.type) if ex.result else ''}:")
                _print_result(result)
            elif ex.request.type in (InstructionType.READ_PHONE, InstructionType.READ_SIMULATOR,
                                     InstructionType.READ_PC):
                click.echo("no result frame came after the answer", err=True)
    if not ex.delivered:
        fail(f"not delivered to {port}: {ex.reason} (last answer: {status or 'none'})")
