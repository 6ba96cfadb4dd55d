"""The records of the sum-8 receiver (:mod:`~fwbridge.protocols.engine.kernels.sum8_receiver`): a
frame kept as its stream offset and its fields' bytes, read as the flat tuple it was.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar

from fwbridge.protocols.descriptions.loader import FrameDescription
from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec
from fwbridge.protocols.engine.tuple_view import TupleView

__all__ = ["Sum8Received", "received_class"]


class Sum8Received(TupleView, bytes):
    """A received frame: the stream offset of its first header byte, then its fields.

    Reads as the flat record ``(offset, vx, vy, ...)`` it was as a tuple:
    ``item.offset``, each field by name (``item.vx``), and the tuple's
    iteration, indexing, ``len``, comparisons and hash; :func:`received_class`
    makes one subclass per frame family. ``item.frame`` builds the family's
    frame object (``OdomFrame``...) from the fields on each access.

    Stored as bytes, the offset (int64 LE) then the fields as on the wire
    (float32 LE), which ``bytes(item)`` gives: a frame kept is then one object
    the garbage collector has nothing to look into (CPython tracks every
    instance of a Python class; its traversal visits only the class), where a
    tuple of numbers was six objects and made every collection walk the
    numbers of every frame an application keeps (a quarter of the receiving
    time). It is no longer a ``tuple`` instance: ``tuple(item)`` makes one
    (for ``numpy.array`` of records, say; ``feed_columns`` is the faster way).
    """

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ("offset",)
    _frame_of: ClassVar[Callable[..., Any]]
    _pickle_as: ClassVar[tuple[FrameDescription, type | None]]  # not the codec: no cycle

    @property
    def offset(self) -> int:
        """Stream offset of the frame's first header byte."""
        offset: int = _OFFSET(self)[0]
        return offset

    @property
    def _values(self) -> tuple[Any, ...]:
        """``(offset, fields...)``; each family's class unpacks them in C."""
        raise NotImplementedError

    @property
    def frame(self) -> Any:
        """The decoded frame object, made from the fields."""
        return self._frame_of(*self._values[1:])

    def _asdict(self) -> dict[str, Any]:
        """Field name -> value, the offset first (as a named tuple's)."""
        return dict(zip(self._fields, self._values))

    def __reduce__(self) -> tuple[Any, ...]:
        # The class is made per codec, not importable: a pickle holds the description,
        # the frame class (when it is importable) and the bytes.
        return (_rebuilt, (*self._pickle_as, bytes(self)))

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values))
        return f"{type(self).__name__}({body})"


_OFFSET = struct.Struct("<q").unpack_from


def _field(k: int, name: str) -> property:
    """The property of field ``k``: one ``unpack_from`` (the record is its bytes)."""
    get = struct.Struct(f"<{8 + 4 * k}xf").unpack_from

    def value(self: Sum8Received) -> float:
        v: float = get(self)[0]
        return v

    return property(value, doc=f"The frame's {name}.")


_CLASSES: dict[int, tuple[Sum8Codec[Any], type[Sum8Received]]] = {}


def received_class(codec: Sum8Codec[Any]) -> type[Sum8Received]:
    """The :class:`Sum8Received` subclass of ``codec``'s frames (one per codec)."""
    got = _CLASSES.get(id(codec))
    if got is not None and got[0] is codec:
        return got[1]
    name = "".join(p.title() for p in codec.name.split("_")) + "Received"
    namespace: dict[str, Any] = {
        "__slots__": (), "__module__": __name__, "__doc__": Sum8Received.__doc__,
        "_fields": ("offset", *codec.fields), "_frame_of": staticmethod(codec.make),
        "_pickle_as": (codec.desc, _importable(codec.cls)),
        "_values": property(struct.Struct(f"<q{len(codec.fields)}f").unpack)}
    for k, field_name in enumerate(codec.fields):
        namespace[field_name] = _field(k, field_name)
    cls = type(name, (Sum8Received,), namespace)
    _CLASSES[id(codec)] = (codec, cls)
    return cls


def _importable(cls: type) -> type | None:
    """``cls`` when a pickle can name it (its module has it under its name), else None."""
    module = sys.modules.get(cls.__module__)
    return cls if getattr(module, cls.__qualname__, None) is cls else None


@lru_cache(maxsize=64)
def _rebuilt_codec(desc: FrameDescription, cls: type | None) -> Sum8Codec[Any]:
    return Sum8Codec(desc, cls)


def _rebuilt(desc: FrameDescription, cls: type | None, data: bytes) -> Sum8Received:
    """A pickled record, back: of the codec of ``desc`` and ``cls`` (None: the
    description's generated frame class)."""
    return bytes.__new__(received_class(_rebuilt_codec(desc, cls)), data)
