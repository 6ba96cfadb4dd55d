"""``decode -p DESC.toml``: each chunk's frames decoded as columns and printed as one block.

The per-frame path turns every frame into a record, a row of labels and a
line. For a fixed-size description the receiver gives the chunk's frames as
numpy columns instead (:mod:`fwbridge.protocols.engine.fixed_columns`, or the
odometry receiver's ``feed_columns`` for a sum-8 float frame), and this
module formats the whole batch with one ``%`` template per line: numbers
straight from the columns, text fields (enums, flags, bytes) labelled once
per distinct value. The lines are the per-frame path's, byte for byte (the
tests compare them); a batch this path cannot print so -- a value wider than
its column in a pipe (the table widens it and repeats its header), a
non-finite value in JSON -- goes through the per-frame path instead.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fwbridge.cli_verbs.frames import flag_text
from fwbridge.cli_verbs.row_fit import ELLIPSIS, elide, float_text
from fwbridge.cli_verbs.table_stream import GAP

if TYPE_CHECKING:
    from fwbridge.cli_verbs.table_stream import RowWriter
    from fwbridge.protocols.descriptions.loader import FieldSpec

__all__ = ["ColumnBlocks", "by_value", "column_blocks", "shortest32_text"]

#: ``%.6g`` of a finite double of magnitude in [1e-99, 1e99) (or zero) is at most 12 characters.
SHORT_RANGE = (1e-99, 1e99)


def column_blocks(rx: Any, codec: Any, protocol: str, table: RowWriter | None,
                  per_frame: Callable[[list[Any]], None]) -> ColumnBlocks | None:
    """The block printer for a description's receiver ``rx``, or None when its frames
    have no columns path (a length field, the action frame's shape)."""
    from fwbridge.protocols.engine.fixed_receiver import FixedReceiver

    if hasattr(rx, "feed_columns") and hasattr(rx, "records"):
        return ColumnBlocks(rx, codec, protocol, table, per_frame)
    if type(rx) is FixedReceiver:
        from fwbridge.protocols.engine.fixed_columns import columns_receiver

        crx = columns_receiver(rx.codec)
        if crx is not None:
            return ColumnBlocks(crx, codec, protocol, table, per_frame)
    return None


def by_value(col: np.ndarray[Any, Any], fmt: str | Callable[[float], str]) -> list[str]:
    """``fmt % value`` (or ``fmt(value)``) for each float of ``col``, formatted once per
    distinct value.

    A sensor's values repeat (a scaled int16 has at most 65536), and formatting
    a float is most of a line's cost. Distinct by bit pattern: ``-0.0`` and
    ``0.0`` (equal as numbers) print differently.
    """
    each: Callable[[float], str] = fmt.__mod__ if isinstance(fmt, str) else fmt
    wire = np.ascontiguousarray(col)
    if wire.dtype.kind != "f" or len(wire) < 64:
        return list(map(each, wire.tolist()))
    bits, inverse = np.unique(wire.view(f"u{wire.itemsize}"), return_inverse=True)
    if 2 * len(bits) > len(wire):  # mostly distinct: the sort would not pay
        return list(map(each, wire.tolist()))
    text = np.array(list(map(each, bits.view(wire.dtype).tolist())), dtype=object)
    out: list[str] = text[inverse.ravel()].tolist()
    return out


def shortest32_text(col: np.ndarray[Any, Any]) -> list[str]:
    """JSON's text of each finite float32 of ``col``: the ``repr`` of what
    :func:`~fwbridge.cli_verbs.common.shortest32` gives, made by numpy's shortest float32
    repr (Dragon4, in C) once per distinct value.

    numpy writes some values in exponent form where Python writes digits (``1.6966202e+06``
    for ``1696620.2``): those are read back and written as Python does. The tests hold the
    two to :func:`~fwbridge.cli_verbs.common.shortest32` on every kind of bit pattern.
    """
    wire = np.ascontiguousarray(col, dtype=np.float32)
    bits, inverse = np.unique(wire.view(np.uint32), return_inverse=True)
    text = [s if "e" not in s else repr(float(s))
            for s in bits.view(np.float32).astype(str).tolist()]
    out: list[str] = np.array(text, dtype=object)[inverse.ravel()].tolist()
    return out


def _fitted(value: float, width: int) -> str:
    """A float in a terminal's column: as many digits as fit, right-aligned."""
    return float_text(value, width).rjust(width)


def _kind(f: FieldSpec) -> str:
    """How a field's column prints: text (flags, enum, bytes), int, f32 or double."""
    if f.flags:
        return "flags"
    if f.enum:
        return "enum"
    if f.type == "bytes":
        return "bytes"
    if f.scaled or f.type == "f64":
        return "double"
    return "f32" if f.type == "f32" else "int"


class ColumnBlocks:
    """Prints each batch of ``rx.feed_columns`` as the lines the per-frame path prints.

    ``per_frame`` takes the batch's records (``rx.records``) when a batch cannot
    be printed as a block. ``rx`` is the receiver whose counters are reported.
    """

    def __init__(self, rx: Any, codec: Any, protocol: str, table: RowWriter | None,
                 per_frame: Callable[[list[Any]], None]) -> None:
        self.rx = rx
        self.table = table
        self.per_frame = per_frame
        self.fields = [(f, _kind(f)) for f in codec.stored]
        self.enums = {f.name: {m.value: m.name for m in codec.enums[f.name]}
                      for f, kind in self.fields if kind == "enum"}
        head = f'{{"offset":%d,"protocol":{json.dumps(protocol)}'
        self.json_fmt = head + "".join(
            f",{json.dumps(f.name)}:" + ("%d" if kind == "int" else "%s")
            for f, kind in self.fields) + "}\n"

    def take(self, chunk: bytes) -> None:
        """Decode one chunk and print its frames."""
        cols = self.rx.feed_columns(chunk)
        if not len(cols):
            return
        text = self.table_text(cols) if self.table is not None else self.json_text(cols)
        if text is None:
            self.per_frame(self.rx.records(cols))
            return
        sys.stdout.write(text)
        if self.table is None:
            sys.stdout.flush()  # as the per-frame path: a JSON batch reaches a pipe whole

    # -- text fields ----------------------------------------------------------
    def _strings(self, f: FieldSpec, kind: str, col: np.ndarray[Any, Any]) -> list[str]:
        """The table text of a text field, labelled once per distinct value."""
        if kind == "bytes":
            step = 2 * (f.size or 0)
            if not step:
                return [""] * len(col)
            h = col.tobytes().hex()
            return [h[k:k + step] for k in range(0, len(h), step)]
        values, inverse = np.unique(col, return_inverse=True)
        if kind == "flags":
            labels = [flag_text(f, v) for v in values.tolist()]
        else:
            names = self.enums[f.name]
            labels = [names.get(v, str(v)) for v in values.tolist()]
        out: list[str] = np.array(labels, dtype=object)[inverse.ravel()].tolist()
        return out

    def _json_text_values(self, f: FieldSpec, kind: str, col: np.ndarray[Any, Any]) -> list[str]:
        if kind == "enum":  # a value without a label is a number in JSON, not a string
            names = self.enums[f.name]
            values, inverse = np.unique(col, return_inverse=True)
            labels = [json.dumps(names[v]) if v in names else str(v) for v in values.tolist()]
            out: list[str] = np.array(labels, dtype=object)[inverse.ravel()].tolist()
            return out
        return [json.dumps(s) for s in self._strings(f, kind, col)] if kind == "flags" else [
            f'"{s}"' for s in self._strings(f, kind, col)]  # hex needs no escaping

    # -- blocks ---------------------------------------------------------------
    def table_text(self, cols: Any) -> str | None:
        """The table lines of a batch, or None when the per-frame path must print it."""
        t = self.table
        assert t is not None
        t.refit()  # a resized window: the new layout's header goes out first
        w, pipe = t.widths, t.fit is None
        offsets = cols.offset.tolist()
        if len(str(offsets[-1])) > w[0]:
            return None  # row() widens the column and repeats the header (a pipe) or cuts
        # every column as its cells' text, then each line one join: cheaper than a
        # ``%`` template per line
        cells = [list(map(f"%{w[0]}d".__mod__, offsets))]
        last = len(self.fields) if not t.marker else -1  # the marker ends the line
        for i, (f, kind) in enumerate(self.fields[:t.shown - 1], start=1):
            col, width = cols.fields[f.name], w[i]
            if kind in ("flags", "enum", "bytes"):
                strings = self._strings(f, kind, col)
                if not pipe:  # on a terminal a long text is cut to its column
                    strings = [s if len(s) <= width else elide(s, width) for s in strings]
                elif i < last and max(map(len, strings)) > width:
                    return None
                if i == last:
                    # the line is right-stripped: its last text prints unpadded, unless a
                    # value would strip further (none of labels, flags or hex does)
                    if any(not s or s[-1].isspace() for s in set(strings)):
                        return None
                    cells.append(strings)
                else:
                    cells.append(list(map(f"%-{width}s".__mod__, strings)))
            elif kind == "int":
                cells.append(list(map(f"%{width}d".__mod__, col.tolist())))
            elif not pipe:  # on a terminal, as many digits as the column holds
                cells.append(by_value(col, functools.partial(_fitted, width=width)))
            else:
                if i < last and width < 13 and col.dtype == np.float64:
                    mag = np.abs(col)
                    short = (mag == 0) | ((mag >= SHORT_RANGE[0]) & (mag < SHORT_RANGE[1]))
                    if not (short | ~np.isfinite(col)).all():
                        return None
                cells.append(by_value(col, f"%{width}.6g"))
        if t.marker:
            cells.append([ELLIPSIS] * len(offsets))
        cells[-1] = [c + "\n" for c in cells[-1]]
        t.rows += len(offsets)
        return "".join(map(GAP.join, zip(*cells)))

    def json_text(self, cols: Any) -> str | None:
        """The JSON lines of a batch, or None (a non-finite value) for the per-frame path."""
        args: list[list[Any]] = [cols.offset.tolist()]
        for f, kind in self.fields:
            col = cols.fields[f.name]
            if kind in ("f32", "double"):
                if not np.isfinite(col).all():
                    return None
                args.append(shortest32_text(col) if kind == "f32" else by_value(col, "%r"))
            elif kind == "int":
                args.append(col.tolist())
            else:
                args.append(self._json_text_values(f, kind, col))
        return "".join(map(self.json_fmt.__mod__, zip(*args)))
