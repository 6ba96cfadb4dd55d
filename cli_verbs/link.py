"""What the serial verbs share: opening a port with one-line errors, the live status line."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click
import serial

from fwbridge.bridge.link.transports import LinkError, open_link
from fwbridge.cli_verbs.common import console, err_console, fail
from fwbridge.cli_verbs.params import DURATION as DURATION_S
from fwbridge.cli_verbs.params import Baud
from fwbridge.cli_verbs.stopping import Stop, held, stoppable

if TYPE_CHECKING:  # rich loads with the live line only: `bridge` never shows one
    from rich.live import Live

BAUD = click.option(
    "-b", "--baud", type=Baud(), default=115200, show_default=True,
    help="Baud rate (must match the firmware's UART).",
)
DURATION = click.option(
    "--duration", type=DURATION_S, default=None, metavar="S",
    help="Stop after S seconds (default: until Ctrl-C).",
)


def open_port(port: str, baud: int, **kwargs: Any) -> serial.SerialBase:
    """Open a device or URL; a :class:`~bridge.link.transports.LinkError` becomes ``error: …``."""
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


class StatusLine:
    """A live status line on the terminal; nothing when no output is a terminal.

    With stdout on the terminal the line lives there and stdout/stderr writes
    are redirected above it (rich), so frames and the line do not mix. With
    only stderr on the terminal (stdout piped to a file or jq) the line lives
    on stderr and stdout is left alone.

    The cursor, hidden while the line lives, is shown again on every way out
    (end, error, stop signal, a reader gone): a signal that arrives while the
    line is drawn or cleared takes effect once that is done.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.console = console if console.is_terminal else err_console
        self.enabled = self.console.is_terminal
        self.interval = interval
        self._live: Live | None = None
        self._last = 0.0

    def __enter__(self) -> StatusLine:
        if self.enabled:
            from rich.live import Live
            from rich.text import Text

            on_stdout = self.console is console
            live = Live(
                Text(""), console=self.console, transient=True, auto_refresh=False,
                redirect_stdout=on_stdout, redirect_stderr=True,
            )
            self._live = live
            try:
                with held():  # Ctrl-C here comes after the cursor is hidden and the line drawn
                    live.start(refresh=True)
            except BaseException:
                self._stop()  # the with block never runs, nor our __exit__
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        with held():  # a stop signal now must not cut the clearing short (cursor hidden)
            self._stop()

    def _stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            # A terminal that hung up (SIGHUP, its window closed) answers EIO: there is no
            # screen left to restore, and the verb's clean-up must go on.
            with contextlib.suppress(OSError):
                live.stop()

    def update(self, text: str, *, force: bool = False) -> None:
        """Show ``text``; at most every ``interval`` seconds unless ``force``."""
        if self._live is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            from rich.text import Text

            with held():  # never half an escape sequence on the screen
                # One line, cut to the window: a wrapped line would scroll on a narrow one.
                self._live.update(Text(text, no_wrap=True, overflow="ellipsis"), refresh=True)


@contextlib.contextmanager
def drawn(display: Any) -> Iterator[None]:
    """A rich live display (a ``Progress``) for the block, started and stopped whole: a
    stop signal waits for either to finish, and the cursor is shown again on every way
    out (as :class:`StatusLine` does)."""
    try:
        with held():
            display.start()
        yield
    finally:
        with held(), contextlib.suppress(OSError):  # OSError: a terminal that hung up
            display.stop()


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
