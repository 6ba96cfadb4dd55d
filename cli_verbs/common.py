"""What every verb shares: one-line errors, JSON lines, the terminal console."""

from __future__ import annotations

import functools
import math
import struct
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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


class Group(click.Group):
    """A click group whose listing gives each command's first sentence whole (or its
    ``short_help``), wrapped to the window: click would cut it with "..." at a width
    that depends on the terminal. Its subgroups are of this class too."""

    group_class = type

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class CliError(Error, click.ClickException):
    """An error the user can fix: printed as one ``error: …`` line, exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def fail(message: str) -> NoReturn:
    """Stop the command with one ``error: …`` line."""
    raise CliError(message)


class Renamed(click.Option):
    """An option with an old spelling still accepted: every name after the first is an
    old one, left out of ``--help`` (one meaning, one name across verbs)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        old = self.opts[1:]
        self.opts = self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = [*self.opts, *old]


#: ``--force``: the one way to let a verb replace an existing output file.
FORCE = click.option("--force", is_flag=True,
                     help="Replace an output file that exists already (refused without it).")


def writable(path: str, option: str = "", *, force: bool = False) -> None:
    """Check an output path before a run: one ``error:`` line if it cannot be written, or
    if a file is there already and ``force`` (``--force``) does not allow replacing it."""
    from fwbridge.bridge.record.safe_output import OutputError, check_writable

    try:
        check_writable(path, replace=force)
    except OutputError as exc:
        fail(f"{option} {exc}".strip())


class Float32(float):
    """A value that is a float32 on the wire: JSON prints the shortest decimal that reads
    back to the same float32 (``0.1``, not the double ``0.10000000149011612``)."""

    __slots__ = ()


_F32 = struct.Struct("<f")


@functools.lru_cache(maxsize=8192)  # a stream's values repeat (standstill, set points)
def shortest_decimal32(x: float) -> float:
    """The double of the shortest decimal that reads back to the float32 ``x``."""
    import numpy as np

    short = float(str(np.float32(x)))  # numpy's Dragon4: the shortest unique float32 digits
    # The reader parses a double and narrows it: keep x if that ever lands elsewhere.
    return short if _F32.unpack(_F32.pack(short))[0] == x else x


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        # JSON has no NaN/inf: write them as strings so every line stays valid JSON.
        if not math.isfinite(value):
            return str(value)
        # zeros as they are: the cache would take -0.0 for 0.0 (they compare equal)
        return shortest_decimal32(float(value)) if type(value) is Float32 and value else value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def json_line(obj: dict[str, Any]) -> None:
    """One JSON object per line on stdout, flushed (for pipes to jq and friends)."""
    import json  # loads on first use: `fwbridge encode` starts without it

    sys.stdout.write(json.dumps(_jsonable(obj), separators=(",", ":")) + "\n")
    sys.stdout.flush()


class JsonBlocks:
    """JSON lines written in blocks: at most ``period`` seconds after the first one waits.

    For a live stream (``bridge`` at 200 Hz): one write and flush per block
    instead of per line, whatever ``PYTHONUNBUFFERED`` says, and a person
    still sees the lines as they come. :meth:`add` may run on another thread
    than :meth:`flush`; the caller calls :meth:`flush` at least every ``period``
    (and at the end). ``flush`` raises ``BrokenPipeError`` when the reader is gone.
    """

    def __init__(self, period: float = 0.05) -> None:
        import json
        import threading

        self.period = period
        self._lines: list[str] = []
        self._first = 0.0
        self._lock = threading.Lock()
        # One encoder, made once: json.dumps builds a new one per call for these separators.
        self._encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

    def add(self, obj: dict[str, Any], now: float) -> None:
        """Queue one object (``now``: a monotonic clock); write the block when it is due."""
        try:
            line = self._encode(obj)
        except ValueError:  # NaN or infinity somewhere: the strings json_line writes
            line = self._encode(_jsonable(obj))
        self.add_line(line, now)

    def add_line(self, line: str, now: float) -> None:
        """Queue one line already formatted (no newline); write the block when it is due."""
        with self._lock:
            lines = self._lines
            if not lines:
                self._first = now
            lines.append(line)
            due = now - self._first >= self.period
        if due:
            self.flush()

    def flush(self) -> None:
        """Write and flush what is queued."""
        with self._lock:
            if not self._lines:
                return
            text = "\n".join(self._lines) + "\n"
            self._lines.clear()
        sys.stdout.write(text)
        sys.stdout.flush()


def json_lines(objs: list[dict[str, Any]]) -> None:
    """:func:`json_line` for a batch of flat objects (a chunk's frames): one write, one
    flush, and the float32 values turned to their shortest decimals in one numpy pass."""
    if not objs:
        return
    marked = [v for obj in objs for v in obj.values() if type(v) is Float32]
    if marked:
        import numpy as np

        wire = np.array(marked, dtype=np.float32)
        short = np.array(list(map(float, map(str, wire))))  # numpy's Dragon4: shortest unique
        # the reader parses a double and narrows it: where that lands elsewhere keep the value
        back = short.astype(np.float32)
        same = (back == wire) | np.isnan(wire)
        values = iter(np.where(same, short, wire.astype(np.float64)).tolist())
        objs = [{k: next(values) if type(v) is Float32 else v for k, v in obj.items()}
                for obj in objs]
    import json

    dumps = json.dumps
    sys.stdout.write("".join(dumps(_jsonable(obj), separators=(",", ":")) + "\n"
                             for obj in objs))
    sys.stdout.flush()


_NORMAL32 = 1.1754944e-38  # smallest normal float32


def shortest32(values: Any) -> list[float]:
    """Each float32 of ``values`` (a numpy array) as the double of its shortest decimal.

    What :class:`Float32` prints, for a block: each distinct bit pattern is
    formatted once, with the fewest significant digits (``%.Ng``) that read back
    to the same float32. The correctly rounded N-digit decimal is the one
    Dragon4's shortest finds; a normal float32 is within 2**-24 of any short
    decimal that reads back to it, so its ladder starts at 6 digits.
    """
    import numpy as np

    wire = np.ascontiguousarray(values, dtype=np.float32)
    bits, inverse = np.unique(wire.view(np.uint32), return_inverse=True)
    distinct = bits.view(np.float32)
    doubles = distinct.astype(np.float64).tolist()
    out = list(doubles)
    tiny = (np.abs(distinct) < _NORMAL32).tolist()
    finite = [i for i, d in enumerate(doubles) if d == d]  # NaN stays as it is
    ladders = (([i for i in finite if tiny[i]], 1), ([i for i in finite if not tiny[i]], 6))
    for todo, start in ladders:
        for digits in range(start, 10):  # 9 digits always read back
            if not todo:
                break
            fmt = f"%.{digits}g"
            cand = [float(fmt % doubles[i]) for i in todo]
            hit = (np.array(cand, dtype=np.float32).view(np.uint32) == bits[todo]).tolist()
            for i, c, ok in zip(todo, cand, hit):
                if ok:
                    out[i] = c
            todo = [i for i, ok in zip(todo, hit) if not ok]
    return [out[k] for k in inverse.tolist()]


def warn_listening(who: str, addresses: Iterable[str]) -> None:
    """Nothing listens beyond loopback unless asked; when asked, every listener says so
    in the same one line (``link_urls.listen_warning``), on stderr."""
    from fwbridge.bridge.link.link_urls import listen_warning

    for address in addresses:
        line = listen_warning(who, address)
        if line is not None:
            click.echo(line, err=True)


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
    widths: Mapping[str, int] = field(default_factory=dict)  # a column's widest value, if known
    text: frozenset[str] = frozenset()  # columns of text (left-aligned), not numbers
