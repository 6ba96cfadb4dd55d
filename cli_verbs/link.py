"""What the serial verbs share: opening a port with one-line errors, ``--duration``, rates."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import click
import serial

from fwbridge.bridge.link.transports import LinkError, open_link
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.cli_verbs.common import fail
from fwbridge.cli_verbs.params import DURATION as DURATION_S
from fwbridge.cli_verbs.params import Baud
from fwbridge.cli_verbs.stopping import Stop, stoppable

BAUD = click.option(
    "-b", "--baud", type=Baud(), default=115200, show_default=True,
    help="Baud rate (must match the firmware's UART).",
)
DURATION = click.option(
    "--duration", type=DURATION_S, default=None, metavar="S",
    help="Stop after S seconds (default: until Ctrl-C).",
)


def open_port(port: str, baud: int, **kwargs: Any) -> serial.SerialBase:
    """Open a device or URL; a :class:`~bridge.link.transports.LinkError` becomes ``error: …``.

    The command offers ``sim://`` wherever a port goes (also when a verb runs outside
    the ``fwbridge`` group that offers it, as an embedding program may run one)."""
    offer_sim()
    try:
        return open_link(port, baud, **kwargs)
    except LinkError as exc:
        fail(str(exc))


class Deadline:
    """``--duration`` as a clock: ``expired`` once S seconds have passed (never for None)."""

    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds

    @property
    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def left(self, cap: float) -> float:
        """Seconds to wait at most: ``cap``, or less when the end is nearer."""
        return cap if self.end is None else max(0.0, min(cap, self.end - time.monotonic()))


class Rate:
    """Events per second over a sliding second, for status lines."""

    def __init__(self) -> None:
        self._marks: list[tuple[float, int]] = []

    def __call__(self, total: int) -> float:
        now = time.monotonic()
        marks = self._marks
        marks.append((now, total))
        while len(marks) > 2 and now - marks[0][0] > 1.0:
            marks.pop(0)
        t0, n0 = marks[0]
        return (total - n0) / (now - t0) if now > t0 else 0.0


def write_line(text: str) -> None:
    """One line to stdout, flushed; through ``sys.stdout`` as it is now (a live
    status line may have redirected it), unlike ``click.echo``'s cached stream."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def until_interrupted() -> contextlib.AbstractContextManager[Stop]:
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP) or a closed stdout ends a streaming verb
    normally: its summary still prints (see :mod:`cli_verbs.stopping` for the exit status)."""
    return stoppable()
