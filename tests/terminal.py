"""A CLI verb on a real pseudo-terminal, as a person runs it.

:class:`Terminal` starts ``fwbridge ARGS`` with a new pty as its controlling
terminal (stdin, stdout and stderr, or any of the last two elsewhere), a window of the
given size and ``TERM=xterm-256color``; it reads everything the verb draws,
waits for a line with a bounded timeout, types keys (``Ctrl-C`` is the byte
0x03, which the pty's line discipline turns into SIGINT for the foreground
process group, exactly as a keypress does) and collects the exit status.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from typing import Any

from tests.helpers import ROOT, cli_env, fwbridge_argv

#: CSI (cursor moves, erases, colours, ``?25l``) and OSC sequences: what a screen interprets.
_ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-B]?")
HIDE_CURSOR = b"\x1b[?25l"
SHOW_CURSOR = b"\x1b[?25h"
CTRL_C = b"\x03"


def plain(raw: bytes) -> str:
    """What the bytes say without their escape sequences, one ``\\n`` per line end."""
    text = _ESCAPES.sub(b"", raw).decode("utf-8", "replace")
    return text.replace("\r\n", "\n")


def cursor_restored(raw: bytes) -> bool:
    """The cursor is visible at the end: no hide, or a show after the last hide."""
    hidden = raw.rfind(HIDE_CURSOR)
    return hidden < 0 or raw.rfind(SHOW_CURSOR) > hidden


class Terminal:
    """``fwbridge ARGS`` on a new pty of ``rows`` x ``cols``; a context manager that
    kills the verb and closes the pty on the way out if the test did not end it."""

    def __init__(self, *args: str, rows: int = 24, cols: int = 100,
                 stdout: Any = None, stderr: Any = None,
                 env: dict[str, str] | None = None) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.attrs_before = termios.tcgetattr(slave)
        full_env = cli_env({"TERM": "xterm-256color", **(env or {})})
        for name in ("COLUMNS", "LINES", "NO_COLOR"):  # the window's size, as on a desk
            full_env.pop(name, None)
        self.proc = subprocess.Popen(
            [*fwbridge_argv(), *args], stdin=slave,
            stdout=slave if stdout is None else stdout,
            stderr=slave if stderr is None else stderr, cwd=ROOT, env=full_env,
            start_new_session=True, preexec_fn=_take_terminal,
        )
        os.close(slave)  # the verb holds the only slave: its exit ends our reads (EIO)
        self._raw = bytearray()
        self._cond = threading.Condition()
        self._eof = False
        self._closing = False
        self._reader = threading.Thread(target=self._read, name="pty-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        # The reader owns the master: it polls (never blocks in read, which would hold the
        # pty open) and closes it on hang_up() or close().
        import select

        while True:
            data = b""
            if not self._closing:
                try:
                    if not select.select([self.master], [], [], 0.05)[0]:
                        continue
                    data = os.read(self.master, 65536)
                except OSError:  # EIO: every slave is closed (the verb ended)
                    data = b""
            with self._cond:
                if data:
                    self._raw += data
                    self._cond.notify_all()
                    continue
                if self._closing:
                    os.close(self.master)
                    self.master = -1
                self._eof = True
                self._cond.notify_all()
                return

    @property
    def raw(self) -> bytes:
        """Every byte the verb wrote to the terminal so far, escapes included."""
        with self._cond:
            return bytes(self._raw)

    @property
    def text(self) -> str:
        """The same, as words (:func:`plain`)."""
        return plain(self.raw)

    def expect(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) appears on the screen; fail with the screen if
        it does not within ``timeout`` seconds or the verb ends first."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                found = rx.search(plain(bytes(self._raw)))
                if found:
                    return found
                left = end - time.monotonic()
                if left <= 0 or self._eof:
                    why = "ended" if self._eof else f"not within {timeout} s"
                    raise AssertionError(f"{pattern!r} {why}; screen:\n{plain(bytes(self._raw))}"
                                         f"\nexit status: {self.proc.poll()}")
                self._cond.wait(min(left, 0.5))

    def send(self, keys: bytes) -> None:
        """Type ``keys`` (through the line discipline: 0x03 is Ctrl-C)."""
        os.write(self.master, keys)

    def interrupt(self) -> None:
        """Ctrl-C, as typed."""
        self.send(CTRL_C)

    def kill(self, sig: int) -> None:
        """Send ``sig`` to the verb (kill, systemd, a service manager)."""
        self.proc.send_signal(sig)

    def hang_up(self) -> None:
        """Close the terminal (its window closed): the kernel sends SIGHUP to the verb."""
        self._closing = True
        self._reader.join(5.0)

    def wait(self, timeout: float = 20.0) -> int:
        """The exit status, once the verb has ended and its last output is read."""
        rc = self.proc.wait(timeout=timeout)
        with self._cond:
            self._cond.wait_for(lambda: self._eof, timeout)
        return rc

    def attrs(self) -> list[Any]:
        """The pty's termios attributes now (as the verb left them)."""
        return termios.tcgetattr(self.master)

    def attrs_restored(self) -> bool:
        """The pty's line settings are those it had before the verb ran (not left raw)."""
        return self.attrs() == self.attrs_before

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._closing = True
        self._reader.join(5.0)
        if self.master >= 0:  # the reader stopped at EIO before it was told to close
            os.close(self.master)
            self.master = -1

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _take_terminal() -> None:
    # In the child, after setsid: the pty on fd 0 becomes the controlling terminal, so the
    # line discipline's Ctrl-C and a hang-up reach the verb as on a real desk.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
