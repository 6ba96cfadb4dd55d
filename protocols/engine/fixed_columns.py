"""The frames of a fixed-size description as numpy columns, a chunk at a time.

:class:`~fwbridge.protocols.engine.fixed_receiver.FixedReceiver` makes one record
per frame; a decoder of a large capture that prints whole blocks wants the
chunk's frames as columns instead (one array per field), as
:meth:`~fwbridge.protocols.engine.kernels.sum8_receiver.Sum8Receiver.feed_columns` gives
for the odometry family. :class:`ColumnsReceiver` is that for any
fixed-size description with a header and a sum-8, XOR-8, CRC or no check:
the fixed receiver's own numpy scan (its ``feed_rows``), so the same
frames, offsets and counters for any chunking (the tests hold the two
together), and
:meth:`ColumnsReceiver.records` turns a batch back into the fixed
receiver's records for the rare batch a caller cannot print as a block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbridge.protocols.engine.codec import FrameCodec, Received
from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
from fwbridge.protocols.engine.receiver_counters import FixedReceiverStats

__all__ = ["ColumnsReceiver", "FixedColumns", "columns_receiver"]

@dataclass(frozen=True)
class FixedColumns:
    """One batch of frames: their stream offsets and one array per field.

    Values as the fixed receiver's records hold them before labels: scaled
    fields as doubles (``raw * scale + offset``), other numbers as on the
    wire, a bytes field as a 2-D ``uint8`` array (a row per frame), enum and
    flags fields as their raw integers.
    """

    offset: np.ndarray[Any, Any]
    fields: dict[str, np.ndarray[Any, Any]]
    stats: FixedReceiverStats

    def __len__(self) -> int:
        return len(self.offset)


def columns_receiver(codec: FrameCodec[Any]) -> ColumnsReceiver | None:
    """A columns receiver for ``codec``'s description, or None when it has no fixed layout
    (a length field, no header, a check the scanners do not know, a scaled enum)."""
    d = codec.desc
    if d.size is None or not d.header or d.length is not None:
        return None
    ck = d.checksum
    if ck is not None:
        kind = ck.algo.kind
        if kind not in ("sum8", "xor8", "crc"):
            return None
    if any(f.scaled and (f.enum or f.flags or f.type == "bytes") for f in d.fields):
        return None
    return ColumnsReceiver(codec)


class ColumnsReceiver:
    """Byte stream in, :class:`FixedColumns` out: the fixed receiver's frames, as columns.

    The scan is the fixed receiver's own (:meth:`FixedReceiver.feed_rows`): this only
    turns each batch's field bytes into columns, so the two cannot disagree.
    """

    def __init__(self, codec: FrameCodec[Any]) -> None:
        self.codec = codec
        self.scanner = FixedReceiver(codec)
        self.stats = self.scanner.stats
        self.dtype = self.scanner.dtype
        self._scaled = [(f.name, f.scale if f.scale is not None else 1.0, f.offset)
                        for f in codec.desc.fields if f.scaled]

    @property
    def pending(self) -> int:
        """Bytes held back for the next call (always less than one frame)."""
        return self.scanner.pending

    def feed_columns(self, data: bytes | bytearray | memoryview) -> FixedColumns:
        """Take the next chunk of the stream; return the frames it completes, as columns."""
        offsets, body = self.scanner.feed_rows(data)
        rec = np.ascontiguousarray(body).view(self.dtype).reshape(len(offsets))
        names = self.dtype.names or ()
        fields = {name: rec[name] for name in names}
        with np.errstate(over="ignore", invalid="ignore"):  # an infinite result is the value
            for name, scale, offset in self._scaled:
                col = np.multiply(fields[name], scale, dtype=np.float64)
                if offset:
                    np.add(col, offset, out=col)
                fields[name] = col
        return FixedColumns(offsets, fields, self.stats)

    def records(self, columns: FixedColumns) -> list[Received]:
        """The records the fixed receiver gives for the frames of ``columns`` (a batch
        that needs the per-frame path)."""
        values = [columns.fields[f.name].tolist() if f.type != "bytes"
                  else [bytes(r) for r in columns.fields[f.name]] for f in self.codec.desc.fields]
        return list(map(self.codec.make_at_scaled, columns.offset.tolist(), *values))

    def finish(self) -> list[Received]:
        """End of stream: the held-back tail counts as discarded (no frame can be in it)."""
        self.scanner.finish()
        return []
