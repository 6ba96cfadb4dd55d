"""One run of a firmware board (the reference firmware on an emulated Cortex-M, as
``fwbridge fw run`` makes it): its counters followed until a deadline, a stop signal or
the board's own end, and the board stopped on every way out."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Board", "BoardRunResult", "run_board"]


class Board(Protocol):
    """A started board that reports its counters (``cli_verbs.fw.QemuBoard``)."""

    latest: dict[str, Any] | None

    @property
    def running(self) -> bool: ...

    def wait_status(self, after_ms: int = -1, timeout: float = 10.0
                    ) -> dict[str, Any] | None: ...

    def stop(self) -> None: ...


@dataclass
class BoardRunResult:
    status: dict[str, Any] = field(default_factory=dict)  # the last counters, {} for none
    interrupted: bool = False  # a stop signal ended the run
    ended_early: bool = False  # the board stopped on its own before the deadline


def run_board(board: Board, duration: float | None, *,
              on_ready: Callable[[], None] = lambda: None,
              on_status: Callable[[dict[str, Any], Any], None] = lambda st, line: None,
              status: Callable[[], contextlib.AbstractContextManager[Any]] = (
                  contextlib.nullcontext),
              on_close: Callable[[], None] = lambda: None) -> BoardRunResult:
    """Follow ``board``'s counters (``on_status`` for each new one, with what ``status``,
    a live line's context, gives) until ``duration`` seconds, a stop
    signal (a normal end, ``interrupted``) or the board's end. ``on_ready`` runs first,
    inside the run: whatever it raises still stops the board. ``board.stop()`` then
    ``on_close`` on every way out."""
    interrupted = early = False
    t0 = time.monotonic()
    try:
        on_ready()
        last_ms = -1
        with status() as line:
            while board.running:
                if duration is not None and time.monotonic() - t0 >= duration:
                    break
                st = board.wait_status(last_ms, timeout=0.2)
                if st is None:
                    continue
                last_ms = st["ms"]
                on_status(st, line)
        early = not board.running and (duration is None or time.monotonic() - t0 < duration)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        board.stop()
        on_close()
    return BoardRunResult(board.latest or {}, interrupted, early)
