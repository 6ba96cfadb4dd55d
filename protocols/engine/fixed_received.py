"""The records a fixed-size description's receiver returns: one object per frame, its bytes.

A record reads as the pair ``(offset, frame)`` a :class:`Received` is:
``item.offset``, ``item.frame`` (the codec's frame object, built from the
stored bytes on each access, so scale, offset and enum tables apply as in
:meth:`FrameCodec.decode`), and the pair's iteration, indexing, ``len``,
comparisons and hash. :func:`received_class` makes one subclass per codec.

Stored as bytes: the offset (int64 LE), then the frame's fields as on the
wire. A kept frame is then one object the garbage collector has nothing to
look into (CPython tracks every instance of a Python class; the traversal
of this one visits only its class), where a ``Received`` holding a frame
tuple was two tracked objects, and every collection walked both and the
numbers in them. It is not a ``tuple`` instance: ``tuple(item)`` is the pair.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from fwbridge.protocols.engine.codec import FrameCodec, Received
from fwbridge.protocols.engine.tuple_view import TupleView

__all__ = ["FixedReceived", "frame_reader", "received_class"]

#: The record's first 8 bytes: the stream offset of the frame's first header byte.
_offset_of = struct.Struct("<q").unpack_from


class FixedReceived(TupleView, bytes):
    """A received frame of a fixed-size description: ``(offset, frame)``, stored as bytes."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, str]] = ("offset", "frame")
    _frame_of: ClassVar[Callable[..., Any]]

    @property
    def offset(self) -> int:
        """Stream offset of the frame's first header byte."""
        offset: int = _offset_of(self)[0]
        return offset

    @property
    def frame(self) -> Any:
        """The decoded frame object, made from the stored fields on each access."""
        return self._frame_of(self)

    @property
    def _values(self) -> tuple[int, Any]:
        return (_offset_of(self)[0], self._frame_of(self))

    def _asdict(self) -> dict[str, Any]:
        """``{"offset": ..., "frame": ...}`` (as a named tuple's)."""
        return dict(zip(self._fields, self._values))

    def _replace(self, **changes: Any) -> Received:
        """A :class:`Received` with ``changes`` (a record's own bytes cannot change)."""
        return Received(*self._values)._replace(**changes)

    def __reduce__(self) -> tuple[Any, ...]:
        # The class is made per codec, not importable: a pickle holds the pair (its
        # frame a value that pickles: a record type, or a description's named tuple).
        return (Received, self._values)


    def __len__(self) -> int:
        return 2


    def __repr__(self) -> str:
        offset, frame = self._values
        return f"{type(self).__name__}(offset={offset!r}, frame={frame!r})"

    __str__ = __repr__  # not the bytes'


def frame_reader(codec: FrameCodec[Any]) -> Callable[[bytes], Any]:
    """record bytes -> the codec's frame: one ``unpack`` and the codec's constructor.

    A frame class that is a tuple and needs no conversion (no scale, offset
    or table: the odometry description's named tuple) is built from the
    unpacked tuple in one C call.
    """
    hl = len(codec.desc.header)
    segs = codec.prefix
    if len(segs) == 1:
        fmt = segs[0].struct.format
        unpack = struct.Struct(fmt[0] + "8x" + fmt[1:]).unpack  # the record's exact size
        plain = issubclass(codec.cls, tuple) and not codec.enums and not any(
            f.scaled for f in codec.stored)
        if plain:
            new, cls = tuple.__new__, codec.cls
            return lambda rec: new(cls, unpack(rec))
        return codec.reader(unpack)  # unpack, convert and build in one generated call
    parts = [(s.struct.unpack_from, s.offset - hl + 8) for s in segs]
    make = codec.make

    def read(rec: bytes) -> Any:
        vals: tuple[Any, ...] = ()
        for unpack_from, at in parts:
            vals += unpack_from(rec, at)
        return make(*vals)

    return read


_CLASSES: weakref.WeakKeyDictionary[FrameCodec[Any], type[FixedReceived]] = (
    weakref.WeakKeyDictionary())


def received_class(codec: FrameCodec[Any]) -> type[FixedReceived]:
    """The :class:`FixedReceived` subclass of ``codec``'s frames (one per codec)."""
    cls = _CLASSES.get(codec)
    if cls is None:
        name = "".join(p.title() for p in codec.name.split("_")) + "Received"
        read = frame_reader(codec)
        cls = type(name, (FixedReceived,), {
            "__slots__": (), "__module__": __name__, "__doc__": FixedReceived.__doc__,
            "_frame_of": staticmethod(read),
            # the reader itself as the getter: one Python call less per read
            "frame": property(read, doc=FixedReceived.frame.__doc__)})
        _CLASSES[codec] = cls
    return cls
