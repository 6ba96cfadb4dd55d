"""Rows that fit the terminal: a frame's row is never wider than the window it is shown in.

A row wider than the terminal wraps onto the next screen line, and a stream of
them is unreadable. On a terminal (stdout a tty, ``--wide`` not given) every
row is made to fit, in this order, until it does:

1. padding inside the row squeezed (``key=value`` lines; a table keeps its columns);
2. floats shortened to fewer significant digits (a true rounding of the value,
   from the value itself, never of its printed text);
3. long text (labels, flags, hex) elided with ``…`` (a true prefix);
4. the trailing fields dropped, ``+N`` saying how many, and once per run a line
   on stderr naming the option that shows them (``--wide``; a pipe does too).

Piped (or with ``--wide``) a row is exactly what it was: scripts and the tests
that read pipes see every digit. :class:`LineFit` fits the ``key=value`` lines
of ``sniff``, ``can sniff`` and ``can decode`` one by one;
:class:`~fwbridge.cli_verbs.table_stream.RowWriter` fits a table's columns
with the same pieces (:func:`float_text`, :func:`elide`).
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import click

__all__ = ["ELLIPSIS", "FLOAT_MIN", "MIN_TEXT", "WIDE", "WIDE_OPTION", "LineFit", "columns",
           "elide", "float_text", "hidden_hint", "is_terminal", "stdout_columns"]

ELLIPSIS = "…"
#: Narrowest a text value gets before fields are dropped.
MIN_TEXT = 6
#: Narrowest a float gets: ``-1.2e+06`` (two digits), and any double at one digit.
FLOAT_MIN = 8
#: The option that turns the fitting off (every verb that fits rows takes it).
WIDE = "--wide"
WIDE_OPTION = click.option(
    WIDE, "wide", is_flag=True,
    help="On a terminal too, print whole rows as a pipe gets them: every field and digit "
         "(by default a row is fitted to the terminal's width).")
#: Fewest significant digits a ``key=value`` line shortens a float to before eliding.
_LINE_DIGITS = 3
#: ``key=`` at the start of a field of a formatted line (names are identifiers).
_FIELD = re.compile(r" (?=[A-Za-z_][A-Za-z0-9_]*=)")


def is_terminal(stream: Any) -> bool:
    """``stream`` writes to a terminal (False for a closed or fd-less stream)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def columns(stream: Any) -> int:
    """The width of the window ``stream`` writes to: ``COLUMNS`` when set, else the
    terminal's (asked at each call: a resized window is followed), else 80."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return 80


def stdout_columns() -> int | None:
    """The terminal's width when stdout is a terminal (``COLUMNS`` when set), else None."""
    return columns(sys.stdout) if is_terminal(sys.stdout) else None


def float_text(value: float, width: int, digits: int = 6) -> str:
    """``value`` to at most ``digits`` significant digits, fewer as needed to fit ``width``
    (``%.6g`` when that fits): always a rounding of the value itself. At one digit it may
    still be wider (``-1e+100``): :data:`FLOAT_MIN` columns hold any double."""
    text = f"{value:.{digits}g}"
    for p in range(digits - 1, 0, -1):
        if len(text) <= width:
            break
        text = f"{value:.{p}g}"
    return text


def elide(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, its last one ``…`` when cut."""
    if len(text) <= width:
        return text
    return text[:max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def hidden_hint(verb: str, hidden: int) -> str:
    """The one line, once per run, that says fields were dropped and how to see them
    (short: it fits a narrow terminal too)."""
    return f"{verb}: {hidden} field(s) hidden to fit; {WIDE} shows all"


class LineFit:
    """Fits ``PREFIX key=value key=value…`` lines to the terminal stdout is on.

    Off (every line exactly as given) when stdout is not a terminal or ``wide``.
    The width is measured for each line (an ioctl): a resized window is followed.
    """

    def __init__(self, verb: str, wide: bool = False) -> None:
        self.verb = verb
        self.on = not wide and stdout_columns() is not None
        self.hinted = False

    def width(self) -> int | None:
        return stdout_columns() if self.on else None

    def pairs(self, prefix: str, pairs: Sequence[tuple[str, Any]]) -> str:
        """The line ``prefix`` then ``name=value`` for each pair (floats as ``%.6g``),
        fitted when on. Floats are shortened from their values."""
        full = f"{prefix} {' '.join(f'{k}={_text(v)}' for k, v in pairs)}"
        width = self.width()
        if width is None or len(full) <= width:
            return full
        return self._fit(prefix, list(pairs), width)

    def text(self, line: str) -> str:
        """An already formatted line, fitted when on: its fields are found by their
        ``key=`` (the text before the first is the prefix); without any, the line is
        elided at the window's edge."""
        width = self.width()
        if width is None or len(line) <= width:
            return line
        prefix, *fields = _FIELD.split(line)
        pairs: list[tuple[str, Any]] = [(k, v) for k, _, v in (f.partition("=") for f in fields)]
        return self._fit(prefix, pairs, width)

    def _fit(self, prefix: str, pairs: list[tuple[str, Any]], width: int) -> str:
        head = " ".join(prefix.split())  # 1: padding squeezed; the values stay whole
        names = [k for k, _ in pairs]
        values: list[Any] = [v.strip() if isinstance(v, str) else v for _, v in pairs]
        n = len(values)

        def line(texts: Sequence[str]) -> str:
            hidden = n - len(texts)
            parts = [head, *(f"{k}={t}" for k, t in zip(names, texts))]
            return " ".join(parts + ([f"+{hidden}"] if hidden else []))

        def shortened(shown: int) -> list[str]:
            """The first ``shown`` fields through steps 2 and 3, as far as needed."""
            texts = [_text(v) for v in values[:shown]]
            floats = [i for i, v in enumerate(values[:shown]) if isinstance(v, float)]
            digits = 6
            while len(line(texts)) > width and floats and digits > _LINE_DIGITS:  # 2
                digits -= 1
                for i in floats:  # fewer digits can be longer (101325 -> 1.01e+05)
                    short = f"{values[i]:.{digits}g}"
                    if len(short) < len(texts[i]):
                        texts[i] = short
            over = len(line(texts)) - width
            while over > 0:  # 3: the longest text first, down to MIN_TEXT
                long = [i for i in range(shown) if i not in floats and len(texts[i]) > MIN_TEXT]
                if not long:
                    break
                i = max(long, key=lambda j: len(texts[j]))
                texts[i] = elide(texts[i], len(texts[i]) - min(over, len(texts[i]) - MIN_TEXT))
                over = len(line(texts)) - width
            return texts

        for shown in range(n, -1, -1):  # 4: the trailing fields dropped, fewest first
            texts = shortened(shown)
            if len(line(texts)) <= width:
                break
        if shown < n and not self.hinted:
            self.hinted = True
            sys.stderr.write(hidden_hint(self.verb, n - shown) + "\n")
            sys.stderr.flush()
        return elide(line(texts), width)  # a window narrower than the prefix: cut at its edge


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
