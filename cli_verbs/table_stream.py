"""Tables that stream: one fixed-width line per row as it comes, aligned, nothing held.

A rich ``Table`` keeps every row until the end and fits itself to the
terminal. A capture of millions of frames needs neither: the header goes out
first, then each row, written through stdout's own buffer (line-buffered on a
terminal, block-buffered in a pipe). Columns start as wide as their values can
be (the widths a decoder knows from its fields, else their name and a
number's 12 characters); numbers are right-aligned, text left-aligned.

- On a terminal every line fits its width (``COLUMNS`` or the terminal's, measured
  again as rows come, so a resized window gets a new header and layout), the
  steps of :mod:`~fwbridge.cli_verbs.row_fit` in turn until it does: text
  columns narrow (the widest first) and their values are elided with ``…``;
  float columns narrow and their values get fewer significant digits; column
  names are elided; then the trailing columns are dropped, a last ``+N``
  column saying how many (and one line on stderr naming ``--wide``). Integers
  are never cut. The last column, text, takes what is left.
- Piped (or ``--wide``), nothing is cut: a value wider than its column widens that column for
  the rows after it, and the header is printed again above the wider rows,
  so every row lines up under the header above it. The last column grows
  without that (nothing to its right to push).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from fwbridge.cli_verbs.row_fit import (
    ELLIPSIS,
    FLOAT_MIN,
    MIN_TEXT,
    elide,
    float_text,
    hidden_hint,
    stdout_columns,
)

__all__ = ["GAP", "NUMBER_WIDTH", "RowWriter", "cell"]

#: Width of a numeric column: "-1.23457e+06" fits.
NUMBER_WIDTH = 12
GAP = "  "
#: A column name is elided to no fewer characters than this (or its length).
MIN_NAME = 3


def cell(value: Any) -> str:
    """A value as table text: floats to 6 significant digits, the rest as ``str``."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class RowWriter:
    """Writes a title, a header and then rows of ``columns`` to stdout, one line each.

    ``widths``: the widest value of a column, where known (integers and text; a
    number without one is a float); ``left``: the text columns (left-aligned,
    elided on a terminal). ``width``: the terminal's width to fit, None for a
    pipe (default, -1: the terminal's, followed as it changes, when stdout is
    one). ``verb`` names the command in the hint line.
    """

    def __init__(self, columns: Sequence[str], title: str = "", first: str = "offset",
                 widths: Mapping[str, int] | None = None, left: Collection[str] = (),
                 width: int | None = -1, verb: str = "decode") -> None:
        self.columns = tuple(columns)
        self.names = (first, *self.columns)
        hint = widths or {}
        self.text = [False, *(c in left for c in self.columns)]
        self.floats = [False, *(c not in hint and c not in left for c in self.columns)]
        #: each column's width when nothing is cut
        self.full = [max(10, len(first)),
                     *(max(hint.get(c, NUMBER_WIDTH), len(c)) for c in self.columns)]
        #: the narrowest each gets: the offset and integers whole, text and floats narrowed
        self.floor = [self.full[0], *(
            MIN_TEXT if t else FLOAT_MIN if f else hint.get(c, NUMBER_WIDTH)
            for c, t, f in zip(self.columns, self.text[1:], self.floats[1:]))]
        self.verb = verb
        self.hinted = False
        self.auto = width == -1
        if width == -1:
            width = stdout_columns()
        self.fit = width
        self.rows = 0
        #: where lines go: stdout's write, or a list's append while a block is gathered
        self.out = sys.stdout.write
        self._layout()
        if title:
            self.out(title + "\n")
        self._header()

    # -- layout ---------------------------------------------------------------------------
    def _layout(self) -> None:
        """The shown columns (``shown``, the first ones), their ``widths`` and ``left``,
        and the ``marker`` (``+N`` for N columns dropped, else "") for ``self.fit``."""
        n = len(self.full)
        self.shown, self.marker = n, ""
        self.widths = list(self.full)
        self.left = list(self.text)
        width = self.fit
        if width is None:
            return
        floors = [min(full, max(f, min(len(name), MIN_NAME))) if i else f
                  for i, (f, full, name) in enumerate(zip(self.floor, self.full, self.names))]
        for shown in range(n, 0, -1):
            marker = f"+{n - shown}" if shown < n else ""
            if self._room(shown, marker, width) >= sum(floors[:shown]) or shown == 1:
                break
        self.shown, self.marker = shown, marker
        self.left = self.text[:shown]
        w = self.widths = self.full[:shown]
        room = self._room(shown, marker, width)
        text = [i for i in range(1, shown) if self.text[i]]
        floats = [i for i in range(1, shown) if self.floats[i]]
        steps: list[tuple[list[int], list[int]]] = [
            (text, [max(floors[i], len(self.names[i])) for i in range(shown)]),
            (floats, [max(floors[i], len(self.names[i])) for i in range(shown)]),
            (list(range(1, shown)), floors),  # names elided
        ]
        for cols, low in steps:
            while sum(w) > room:
                narrowable = [i for i in cols if w[i] > low[i]]
                if not narrowable:
                    break
                w[max(narrowable, key=lambda i: w[i])] -= 1  # the widest first
        if shown > 1 and self.left[-1] and sum(w) < room:
            w[-1] += room - sum(w)
        if marker and not self.hinted:
            self.hinted = True
            sys.stderr.write(hidden_hint(self.verb, n - shown) + "\n")
            sys.stderr.flush()

    @staticmethod
    def _room(shown: int, marker: str, width: int) -> int:
        """What the columns' widths may add up to: the window less the gaps and marker."""
        return width - len(GAP) * (shown - 1) - (len(GAP) + len(marker) if marker else 0)

    def refit(self) -> None:
        """Follow the terminal's width: a new layout, under a new header, when it changed."""
        if not self.auto or self.fit is None:
            return
        width = stdout_columns()
        if width is None or width == self.fit:
            return
        before = (self.widths, self.shown)
        self.fit = width
        self._layout()
        if (self.widths, self.shown) != before:
            self._header()

    def _header(self) -> None:
        write = self.out
        names = [elide(name, w) for name, w in zip(self.names, self.widths)]
        dashes = ["-" * w for w in self.widths]
        if self.marker:
            names.append(self.marker)
            dashes.append("-" * len(self.marker))
        write(self._line(names) + "\n")
        write(self._line(dashes) + "\n")

    def _line(self, cells: Sequence[str]) -> str:
        line = GAP.join([c.ljust(w) if left else c.rjust(w)
                         for c, w, left in zip(cells, self.widths, self.left)]
                        + list(cells[len(self.widths):])).rstrip()
        if self.fit is not None and len(line) > self.fit:  # an offset past 10 digits
            line = elide(line, self.fit)
        return line

    def row(self, first: Any, fields: dict[str, Any]) -> None:
        """One row: ``first`` (the offset) and the fields by column name (missing: blank)."""
        widths = self.widths
        if self.fit is not None:
            self.refit()
            widths = self.widths
            cells = [str(first)]
            for i in range(1, self.shown):
                value = fields.get(self.columns[i - 1], "")
                if self.floats[i] and isinstance(value, float):
                    cells.append(float_text(value, widths[i]))
                else:
                    text = cell(value)
                    cells.append(elide(text, widths[i]) if self.left[i] else text)
            if self.marker:
                cells.append(ELLIPSIS)
        else:
            cells = [str(first), *(cell(fields.get(c, "")) for c in self.columns)]
            wider = [i for i, text in enumerate(cells[:-1]) if len(text) > widths[i]]
            if wider:
                for i in wider:
                    widths[i] = len(cells[i])
                self._header()
        self.out(self._line(cells) + "\n")
        self.rows += 1

    def numbers(self, offsets: Sequence[int], columns: Sequence[Sequence[float]]) -> bool:
        """Rows of numbers only (an offset, then floats), formatted as a block.

        The same lines as :meth:`row` for each, in one ``%`` format per row and
        one write. False, having written nothing, when an offset is wider than
        its column (:meth:`row` widens it and repeats the header) or on a terminal
        (:meth:`row` fits each value to its column).
        """
        w = self.widths
        if (not offsets or self.fit is not None or any(self.left)
                or len(str(offsets[-1])) > w[0] or min(offsets) < 0):
            return not offsets
        fmt = GAP.join([f"%{w[0]}d", *(f"%{x}.6g" for x in w[1:])]) + "\n"
        self.out("".join(map(fmt.__mod__, zip(offsets, *columns))))
        self.rows += len(offsets)
        return True

    def flush(self) -> None:
        sys.stdout.flush()
