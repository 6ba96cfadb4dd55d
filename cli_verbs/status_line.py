"""The one live status line of every verb that draws one on a terminal.

A live line is the last line of the terminal, redrawn in place (frames/s,
counters, a progress bar); whatever else the verb prints scrolls above it.
On a terminal :class:`StatusLine` puts itself in front of ``sys.stdout`` and
``sys.stderr`` (those that write to the same terminal): every line written
through them (``print``, ``click.echo``, ``sys.stdout.write``) erases the
live line, goes out, and the live line is drawn again under it, so rows and
the line never share a screen line.

The line is cut to one column less than the window (measured at each draw,
so a resized window is followed) and the cursor, hidden while the line
lives, is put back at the line's start after each draw: the ``^C`` the
terminal echoes for Ctrl-C then lands on the line itself, never past the
window's edge (where it would wrap to a new line and leave the old one on
the screen), and the erase at the end (``\\r`` and erase-line) removes both.
The cursor is shown again on every way out (end, error, stop signal, a
reader gone); a signal that arrives while the line is drawn or erased takes
effect once that is done.

Nothing of this happens when neither stdout nor stderr is a terminal: the
verb's output is then exactly what it writes.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from typing import Any, TextIO

from fwbridge.cli_verbs.row_fit import columns, elide, is_terminal
from fwbridge.cli_verbs.stopping import held

__all__ = ["StatusLine", "bar"]

HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"
#: Back to the line's start and erase it whole.
ERASE = "\r\x1b[2K"


def _same_terminal(a: Any, b: Any) -> bool:
    """``a`` and ``b`` write to the same terminal device."""
    try:
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return False
    return (sa.st_rdev, sa.st_dev) == (sb.st_rdev, sb.st_dev)


def _printable(text: str) -> str:
    """The first line of ``text`` with its control characters shown as ``?``: a port name
    or a peer's text must not move the cursor or wrap the line."""
    first = text.split("\n", 1)[0]
    return "".join(c if c.isprintable() else "?" for c in first)


def bar(done: int, total: int | None, width: int = 24) -> str:
    """A text progress bar ``[#####-----]`` of ``width`` cells; a total of None (a loop)
    draws a marker that moves with ``done``."""
    inner = max(width - 2, 1)
    if total is None or total <= 0:
        at = done % inner
        return "[" + "-" * at + "#" + "-" * (inner - at - 1) + "]"
    filled = min(inner, inner * done // total)
    return "[" + "#" * filled + "-" * (inner - filled) + "]"


class _Above(io.TextIOBase):
    """A stream in front of stdout or stderr while a live line is drawn: each whole line
    written goes out above the live line. A text stream, so ``click.echo`` writes
    through it (it would go around a stream that takes bytes)."""

    def __init__(self, line: StatusLine, stream: TextIO) -> None:
        super().__init__()
        self._line = line
        self.stream = stream
        self.pending = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]  # the stream's, read-only
        return str(getattr(self.stream, "encoding", "utf-8"))

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # the stream's, read-only
        return getattr(self.stream, "errors", "strict")

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            return self.stream.write(text)  # the stream's own TypeError, as io's contract has it
        with self._line.lock:
            self.pending += text
            if "\n" in self.pending:
                whole, _, self.pending = self.pending.rpartition("\n")
                self._line.above(self.stream, whole + "\n")
        return len(text)

    def flush(self) -> None:
        # A partial line waits for its end (or the line's): shown now it would be drawn
        # over by the live line.
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()


class StatusLine:
    """A live status line on the terminal; nothing when no output is a terminal.

    With stdout on the terminal the line lives there; with only stderr on the
    terminal (stdout piped to a file or jq) it lives on stderr and stdout is
    left alone. A context manager: entered, the line is drawn (empty) and
    the streams on its terminal write above it; left, it is erased.
    """

    def __init__(self, interval: float = 0.25) -> None:
        out, err = sys.stdout, sys.stderr
        self.term: TextIO | None = (out if is_terminal(out)
                                    else err if is_terminal(err) else None)
        self.enabled = self.term is not None
        self.interval = interval
        self.lock = threading.RLock()
        self.text = ""
        self._drawn = False
        self._last = 0.0
        self._saved: tuple[TextIO, TextIO] | None = None

    def __enter__(self) -> StatusLine:
        term = self.term
        if term is None:
            return self
        try:
            with held():  # Ctrl-C here comes after the cursor is hidden and the streams set
                self._saved = (sys.stdout, sys.stderr)
                if sys.stdout is term or _same_terminal(sys.stdout, term):
                    sys.stdout = _Above(self, sys.stdout)
                if sys.stderr is term or _same_terminal(sys.stderr, term):
                    sys.stderr = _Above(self, sys.stderr)
                with self.lock:
                    self._raw(HIDE_CURSOR)
                    self._drawn = True
        except BaseException:
            self._stop()  # the with block never runs, nor our __exit__
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        with held():  # a stop signal now must not cut the erasing short (cursor hidden)
            self._stop()

    def _stop(self) -> None:
        saved, self._saved = self._saved, None
        if saved is None:
            return
        proxies = [s for s in (sys.stdout, sys.stderr) if isinstance(s, _Above)]
        sys.stdout, sys.stderr = saved
        # A terminal that hung up (SIGHUP, its window closed) answers EIO: there is no
        # screen left to restore, and the verb's clean-up must go on.
        with self.lock, contextlib.suppress(OSError, ValueError):
            self._drawn = False
            self._raw(ERASE)
            for proxy in proxies:  # a last partial line: it ends with the live line
                if proxy.pending:
                    proxy.stream.write(proxy.pending)
                    proxy.stream.flush()
                    proxy.pending = ""
            self._raw(SHOW_CURSOR)

    def _raw(self, text: str) -> None:
        assert self.term is not None
        self.term.write(text)
        self.term.flush()

    def render(self) -> str:
        """The line as drawn: erased, the text cut to one column less than the window,
        the cursor back at its start."""
        assert self.term is not None
        room = columns(self.term) - 1
        text = _printable(self.text)
        return ERASE + elide(text, room) + "\r"

    def above(self, stream: TextIO, text: str) -> None:
        """Write ``text`` (whole lines) to ``stream`` above the live line."""
        with self.lock:
            if not self._drawn:
                stream.write(text)
                stream.flush()
                return
            if stream is self.term:
                self._raw(ERASE + text + self.render())  # one write: no flicker
                return
            self._raw(ERASE)
            stream.write(text)
            stream.flush()
            self._raw(self.render())

    def update(self, text: str, *, force: bool = False) -> None:
        """Show ``text``; at most every ``interval`` seconds unless ``force``."""
        if self.term is None or self._saved is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            with held(), self.lock:  # never half an escape sequence on the screen
                self.text = text
                with contextlib.suppress(OSError, ValueError):
                    self._raw(self.render())
