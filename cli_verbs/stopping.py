"""One way to stop every verb: SIGINT, SIGTERM and SIGHUP alike, and a reader that goes away.

:func:`stop_signals` (installed by ``fwbridge``'s entry point around every
verb) turns each of the three signals into :class:`Stopped`, a
:class:`KeyboardInterrupt`, so Ctrl-C, ``kill``, ``timeout``, systemd and a
closed terminal take the path Ctrl-C always took: the verb's ``finally``
blocks send zero velocity, restore the terminal, close captures whole and
remove what the verb created, then it prints its summary. Only the first
signal interrupts, and only while the verb's main loop runs: later ones, or
one that comes while the verb cleans up after its loop, only set the exit
status, so a signal cannot cut a capture or a zero command short.

Exit status (also in the README): 0 at a normal end (``--duration``,
``--count``, end of input) and when the reader of stdout goes away
(``| head``); 128 + the signal's number when stopped by one (130 SIGINT,
143 SIGTERM, 129 SIGHUP), after the same clean-up and summary; 2 for an
error the user can fix; 1 for anything else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

__all__ = ["SIGNALS", "PipeClosed", "Stop", "Stopped", "exit_code", "held", "received",
           "silence_stdout", "stdout_closed", "stop_signals", "stoppable", "stopped_by",
           "terminal_gone"]

#: The signals that stop a verb (Windows has no SIGHUP: a closed console window ends the
#: process there without one).
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                if hasattr(signal, name))


class PipeClosed(Exception):
    """A write hit a broken pipe (stdout's reader gone, or a link's peer); wraps it."""


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; raised once, in the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_received: list[int] = []  # the first stop signal of this process, once it came
_shielded = False  # the verb's main loop is over: signals only set the exit status
_holding = False  # inside held(): the first signal is raised at the block's end
_held = False  # a signal came while holding and is still to be raised


def received() -> int | None:
    """The first stop signal this process got, or None."""
    return _received[0] if _received else None


def exit_code() -> int | None:
    """128 + the first stop signal's number, or None when no signal stopped the verb."""
    sig = received()
    return None if sig is None else 128 + sig


def stopped_by(signum: int) -> None:
    """Take ``signum`` as the verb's stop signal without one arriving: a terminal in raw
    mode hands over Ctrl-C as the byte 0x03, and the verb that reads it says so here, so
    that the exit status (130) is the one a SIGINT gives."""
    if not _received:
        _received.append(signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _held
    if _received:
        return  # later signals must not interrupt the clean-up the first one started
    _received.append(signum)
    if _holding:
        _held = True
    elif not _shielded:
        raise Stopped(signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A stop signal that arrives in this block is raised at its end, not in its middle:
    for a step that must not be cut in half (a status line drawn, or cleared and the
    cursor shown again). Nested blocks hold until the outermost ends."""
    global _holding, _held
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    _holding = True
    try:
        yield
    finally:
        _holding = False
    if _held:  # the block ended normally: the signal takes effect now
        _held = False
        if not _shielded and _received:
            raise Stopped(_received[0])


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` in this block; the previous
    handlers come back after it. Outside the main thread (tests): nothing changes."""
    global _shielded, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()  # a fresh run (the entry point may be called more than once)
    _shielded = False
    _held = False
    previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stdout_closed() -> bool:
    """True when stdout is a pipe (or socket) whose reader has gone away. Without
    ``poll()`` (Windows) there is no asking: False, and a broken pipe is taken as stdout's
    by the entry point all the same."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def silence_stdout(*, stderr: bool = False) -> None:
    """Point stdout (and stderr too, with ``stderr``) at /dev/null, so what is still
    buffered (and the interpreter's last flush) cannot raise again once its reader has
    gone away."""
    for stream in (sys.stdout, sys.stderr) if stderr else (sys.stdout,):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


def terminal_gone(exc: BaseException) -> bool:
    """``exc`` is a write to a terminal that hung up (EIO) after a stop signal: the verb
    was stopped (SIGHUP, its window closed) and has no one left to tell."""
    return isinstance(exc, OSError) and exc.errno == errno.EIO and received() is not None


@dataclass
class Stop:
    """Why a :func:`stoppable` block ended early: ``"signal"``, ``"pipe"`` or None."""

    reason: str | None = None

    @property
    def early(self) -> bool:
        return self.reason is not None


@contextlib.contextmanager
def stoppable() -> Iterator[Stop]:
    """A streaming verb's main loop: a stop signal or a closed stdout end it normally.

    The code after the block (summary, counters) still runs; the exit status
    is then set by the entry point (:func:`exit_code`). A broken pipe that is
    not stdout's (a socket link) is re-raised.
    """
    global _shielded
    stop = Stop()
    try:
        yield stop
    except KeyboardInterrupt:
        stop.reason = "signal"
        # After the ^C the terminal echoed; a live status line (stderr redirected above
        # it) clears that line itself.
        under_live_line = sys.stderr is not sys.__stderr__
        if not under_live_line:
            with contextlib.suppress(OSError):
                sys.stderr.write("\n")
    except BrokenPipeError:
        if not stdout_closed():
            raise
        stop.reason = "pipe"
        silence_stdout()
    finally:
        # The loop is over and the clean-up (zero velocity, closing captures) begins: a
        # signal from now on is not raised, it only sets the exit status.
        if threading.current_thread() is threading.main_thread():
            _shielded = True
