"""What every verb shares: one-line errors, JSON lines, the terminal console."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from fwbridge.protocols.errors import Error

if TYPE_CHECKING:
    from rich.console import Console


class _LazyConsole:
    """A rich ``Console`` made on first use: importing rich costs more than the
    whole of ``fwbridge encode``, which never prints through it."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            # Piped, rich would fit tables to 80 columns and cut cells ("test-actio…"):
            # a reader of a pipe gets them whole.
            wide = self._stderr or sys.stdout.isatty()
            self._console = Console(stderr=self._stderr, highlight=False,
                                    width=None if wide else 100_000)
        return getattr(self._console, name)

    # rich's Live enters its console as a context manager; special methods are looked
    # up on the type, never through __getattr__, so they are forwarded here.
    def __enter__(self) -> Console:
        return cast("Console", self.__getattr__("__enter__")())

    def __exit__(self, *exc: object) -> None:
        self.__getattr__("__exit__")(*exc)


#: Human output (tables, status lines) goes to stdout; counters and errors to stderr.
console = cast("Console", _LazyConsole(stderr=False))
err_console = cast("Console", _LazyConsole(stderr=True))


class CliError(Error, click.ClickException):
    """An error the user can fix: printed as one ``error: …`` line, exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def fail(message: str) -> NoReturn:
    """Stop the command with one ``error: …`` line."""
    raise CliError(message)


#: ``--force``: the one way to let a verb replace an existing output file.
FORCE = click.option("--force", is_flag=True,
                     help="Replace an output file that exists already (refused without it).")


def writable(path: str, option: str = "", *, force: bool = False) -> None:
    """Check an output path before a run: one ``error:`` line if it cannot be written, or
    if a file is there already and ``force`` (``--force``) does not allow replacing it."""
    from fwbridge.bridge.safe_output import OutputError, check_writable

    try:
        check_writable(path, replace=force)
    except OutputError as exc:
        fail(f"{option} {exc}".strip())


def _jsonable(value: Any) -> Any:
    # JSON has no NaN/inf: write them as strings so every line stays valid JSON.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def json_line(obj: dict[str, Any]) -> None:
    """One JSON object per line on stdout, flushed (for pipes to jq and friends)."""
    sys.stdout.write(json.dumps(_jsonable(obj), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def print_counters(stats: dict[str, int], label: str = "counters") -> None:
    """The receiver counters at the end of a run, on stderr."""
    parts = " ".join(f"{k}={v}" for k, v in stats.items())
    click.echo(f"{label}: {parts}", err=True)


@dataclass(frozen=True)
class Decoder:
    """How ``decode``/``sniff`` handle one protocol: a receiver and its rows."""

    columns: tuple[str, ...]
    make: Callable[[dict[str, Any]], Any]  # options -> receiver with feed()/finish()/stats
    row: Callable[[Any], dict[str, Any]]  # one received item -> field values
