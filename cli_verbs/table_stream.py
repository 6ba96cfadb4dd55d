"""Tables that stream: one fixed-width line per row as it comes, aligned, nothing held.

A rich ``Table`` keeps every row until the end and fits itself to the
terminal. A capture of millions of frames needs neither: the header goes out
first, then each row, written through stdout's own buffer (line-buffered on a
terminal, block-buffered in a pipe). Columns start as wide as their values can
be (the widths a decoder knows from its fields, else their name and a
number's 12 characters); numbers are right-aligned, text left-aligned.

- On a terminal the table fits its width (``COLUMNS`` or the terminal's):
  text columns narrow (the widest first), the last takes what is left, and a text value longer
  than its column is cut with ``…``; numbers are never cut.
- Piped, nothing is cut: a value wider than its column widens that column for
  the rows after it, and the header is printed again above the wider rows,
  so every row lines up under the header above it. The last column grows
  without that (nothing to its right to push).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ["NUMBER_WIDTH", "RowWriter", "cell"]

#: Width of a numeric column: "-1.23457e+06" fits.
NUMBER_WIDTH = 12
#: Narrowest a text column gets to fit a terminal.
MIN_TEXT = 6
GAP = "  "


def cell(value: Any) -> str:
    """A value as table text: floats to 6 significant digits, the rest as ``str``."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class RowWriter:
    """Writes a title, a header and then rows of ``columns`` to stdout, one line each.

    ``widths``: the widest value of a column, where known; ``left``: the text
    columns (left-aligned, elided on a terminal). ``width``: the terminal's
    width to fit, None for a pipe (default: the terminal's when stdout is one).
    """

    def __init__(self, columns: Sequence[str], title: str = "", first: str = "offset",
                 widths: Mapping[str, int] | None = None, left: Collection[str] = (),
                 width: int | None = -1) -> None:
        self.columns = tuple(columns)
        self.names = (first, *self.columns)
        self.left = [False, *(c in left for c in self.columns)]
        hint = widths or {}
        self.widths = [max(10, len(first)),
                       *(max(hint.get(c, NUMBER_WIDTH), len(c)) for c in self.columns)]
        if width == -1:
            width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        self.fit = width
        if width is not None:
            self._fit(width)
        self.rows = 0
        #: where lines go: stdout's write, or a list's append while a block is gathered
        self.out = sys.stdout.write
        if title:
            self.out(title + "\n")
        self._header()

    def _fit(self, width: int) -> None:
        """Narrow the text columns until a line fits ``width``; the last text column
        takes what is left. Numbers keep their widths."""
        w = self.widths
        room = width - len(GAP) * (len(w) - 1)
        text = [i for i, left in enumerate(self.left) if left]
        while sum(w) > room:
            narrowable = [i for i in text if w[i] > max(MIN_TEXT, len(self.names[i]))]
            if not narrowable:
                break  # numbers only, or every text column at its narrowest: lines wrap
            w[max(narrowable, key=lambda i: w[i])] -= 1  # the widest first
        if self.left[-1] and sum(w) < room:
            w[-1] += room - sum(w)

    def _header(self) -> None:
        write = self.out
        write(self._line(self.names) + "\n")
        write(self._line(["-" * w for w in self.widths]) + "\n")

    def _line(self, cells: Sequence[str]) -> str:
        return GAP.join(c.ljust(w) if left else c.rjust(w)
                        for c, w, left in zip(cells, self.widths, self.left)).rstrip()

    def row(self, first: Any, fields: dict[str, Any]) -> None:
        """One row: ``first`` (the offset) and the fields by column name (missing: blank)."""
        cells = [str(first), *(cell(fields.get(c, "")) for c in self.columns)]
        widths = self.widths
        if self.fit is not None:
            for i, text in enumerate(cells):
                if self.left[i] and len(text) > widths[i]:
                    cells[i] = text[:max(widths[i] - 1, 0)] + "…"
        else:
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
        its column (:meth:`row` widens it and repeats the header).
        """
        w = self.widths
        if not offsets or any(self.left) or len(str(offsets[-1])) > w[0] or min(offsets) < 0:
            return not offsets
        fmt = GAP.join([f"%{w[0]}d", *(f"%{x}.6g" for x in w[1:])]) + "\n"
        self.out("".join(map(fmt.__mod__, zip(offsets, *columns))))
        self.rows += len(offsets)
        return True

    def flush(self) -> None:
        sys.stdout.flush()
