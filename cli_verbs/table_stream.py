"""Tables that stream: one fixed-width line per row as it comes, nothing held, nothing cut.

A rich ``Table`` keeps every row until the end and fits itself to the
terminal, cropping cells when piped (80 columns). A capture of millions of
frames needs neither: the header goes out first, then each row, written
through stdout's own buffer (line-buffered on a terminal, block-buffered in
a pipe). A value wider than its column widens that line instead of being cut.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["RowWriter", "cell"]

#: Width of a numeric column: "-1.23457e+06" fits.
NUMBER_WIDTH = 12


def cell(value: Any) -> str:
    """A value as table text: floats to 6 significant digits, the rest as ``str``."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class RowWriter:
    """Writes a title, a header and then rows of ``columns`` to stdout, one line each."""

    def __init__(self, columns: Sequence[str], title: str = "", first: str = "offset") -> None:
        self.columns = tuple(columns)
        self.widths = [max(10, len(first)), *(max(NUMBER_WIDTH, len(c)) for c in self.columns)]
        self.rows = 0
        write = sys.stdout.write
        if title:
            write(title + "\n")
        header = [first, *self.columns]
        write(self._line(header) + "\n")
        write(self._line(["-" * w for w in self.widths]) + "\n")

    def _line(self, cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(cells, self.widths)).rstrip()

    def row(self, first: Any, fields: dict[str, Any]) -> None:
        """One row: ``first`` (the offset) and the fields by column name (missing: blank)."""
        sys.stdout.write(self._line([str(first), *(cell(fields.get(c, "")) for c in self.columns)])
                         + "\n")
        self.rows += 1

    def flush(self) -> None:
        sys.stdout.flush()
