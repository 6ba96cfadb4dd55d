"""``fwbridge teleop``: drive the base from the keyboard, as seed 002's remote_ctrl.py.

Keys: ``w`` forward, ``s`` back, ``a`` turn left, ``d`` turn right, ``q``
quits, any other key stops. The current command is resent at ``--rate`` so
a firmware watchdog stays fed; a key takes effect at once. On a terminal,
stdin is put in raw mode (like the seed's ``tty.setraw``; output processing
stays on so lines end properly, also under tmux); Ctrl-D quits too. Raw
mode hands Ctrl-C over as a byte: it stops the verb as the SIGINT it is
everywhere else (exit status 130), while ``q``, Ctrl-D and the end of piped
keys end it normally (0). Quitting, and every stop signal (SIGINT, SIGTERM,
SIGHUP), sends zero velocity and restores the terminal.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Iterator

import click

from fwbridge.bridge.link.transports import IO_ERRORS
from fwbridge.cli_verbs.common import fail
from fwbridge.cli_verbs.link import BAUD, open_port, until_interrupted
from fwbridge.cli_verbs.params import RATE, Finite
from fwbridge.cli_verbs.stopping import stopped_by
from fwbridge.protocols import cmd_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.errors import needs_posix

QUIT_BYTES = frozenset(b"q\x03\x04")  # q, Ctrl-C, Ctrl-D (raw mode delivers them as bytes)
CTRL_C = 0x03


def key_command(key: int, linear: float, angular: float) -> CmdFrame:
    """The command a key selects (remote_ctrl.py's table); unknown keys stop."""
    return {
        ord("w"): CmdFrame(linear, 0.0, 0.0),
        ord("s"): CmdFrame(-linear, 0.0, 0.0),
        ord("a"): CmdFrame(0.0, 0.0, angular),
        ord("d"): CmdFrame(0.0, 0.0, -angular),
    }.get(key, cmd_frame.ZERO)


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[bool]:
    """Raw input on a terminal ``fd`` (keys arrive one by one, unechoed), restored after."""
    if not os.isatty(fd):
        yield False
        return
    import termios  # POSIX only: imported here so the CLI still loads on Windows
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        mode = termios.tcgetattr(fd)
        mode[1] |= termios.OPOST | termios.ONLCR  # keep "\n" -> "\r\n" for our own output
        termios.tcsetattr(fd, termios.TCSANOW, mode)
        yield True
    finally:
        with contextlib.suppress(termios.error, OSError):  # a terminal that hung up (SIGHUP)
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@click.command("teleop")
@click.argument("port")
@BAUD
@click.option("--rate", type=RATE, default=20.0,
              show_default=True, metavar="HZ", help="Command frames per second.")
@click.option("--linear", type=Finite(0, 5, unit="m/s"), default=0.2, show_default=True,
              help="w/s speed, m/s")
@click.option("--angular", type=Finite(0, 20, unit="rad/s"), default=0.5, show_default=True,
              help="a/d rate, rad/s")
def teleop_cmd(port: str, baud: int, rate: float, linear: float, angular: float) -> None:
    """Drive the base on PORT from the keyboard: w/s/a/d, q quits, other keys stop.

    Ctrl-C stops it too (exit status 130, as for every verb); q and Ctrl-D end it with 0.
    """
    try:
        import termios  # noqa: F401 - asked before the port opens: the keys need it
    except ImportError:
        fail(needs_posix("the keyboard of teleop (read with select() on a POSIX terminal)"))
    link = open_port(port, baud)
    fd = sys.stdin.fileno()
    period = 1.0 / rate
    cmd = cmd_frame.ZERO
    frame = cmd_frame.encode(cmd)
    sent = 0

    def send(data: bytes) -> None:
        nonlocal sent
        try:
            link.write(data)
        except IO_ERRORS as exc:
            fail(f"{port} went away (unplugged?): {exc}")
        sent += 1

    try:
        # Stop signals end the loop inside the raw mode: the terminal is restored after it.
        with raw_terminal(fd), until_interrupted():
            click.echo(f"teleop on {port}: w/s forward/back, a/d turn, other keys stop, q quits",
                       err=True)
            next_at = time.monotonic()
            quitting = False
            while not quitting:
                ready, _, _ = select.select([fd], [], [], max(0.0, next_at - time.monotonic()))
                if ready:
                    keys = os.read(fd, 64)
                    if not keys:
                        break  # end of input
                    for key in keys:
                        if key in QUIT_BYTES:
                            if key == CTRL_C:  # the SIGINT a cooked terminal would send
                                stopped_by(signal.SIGINT)
                            quitting = True
                            break
                        cmd = key_command(key, linear, angular)
                    frame = cmd_frame.encode(cmd)
                    send(frame)  # a key acts now, not at the next tick
                    click.echo(f"vx={cmd.vx:+.2f} vy={cmd.vy:+.2f} wz={cmd.wz:+.2f}", err=True)
                now = time.monotonic()
                if now >= next_at and not quitting:
                    send(frame)
                    next_at += period
                    if next_at <= now:  # fell behind (suspended terminal): skip, don't burst
                        next_at = now + period
    finally:
        with contextlib.suppress(*IO_ERRORS):
            link.write(cmd_frame.encode(cmd_frame.ZERO))  # leave the robot stopped
            link.flush()
        link.close()
    with contextlib.suppress(OSError):  # stderr may be the terminal that hung up
        click.echo(f"teleop: sent {sent} frames, then zero velocity", err=True)
