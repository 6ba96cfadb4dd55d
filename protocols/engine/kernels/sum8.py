"""The sum-8 specialisation of the codec: ``AA 55``, float32 LE fields, sum-8.

:class:`Sum8Codec` is the codec :func:`fwbridge.protocols.engine.codec_for`
picks for a description of that shape (the odometry and command frames): a
:class:`~fwbridge.protocols.engine.codec.FrameCodec` whose ``encode``,
``decode`` and ``check`` are one ``struct`` call and a byte sum. Everything
else, the construct schema included, is the generic codec's, built from
the same description; the tests hold the two paths to the same bytes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, TypeVar, overload

from fwbridge.protocols.descriptions.loader import FrameDescription
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.errors import (
    ChecksumError,
    ConfigError,
    FieldValueError,
    HeaderError,
    LengthError,
)

__all__ = ["HEADER", "Sum8Codec", "fast_constructor", "fits_sum8"]

HEADER = b"\xaa\x55"

T = TypeVar("T")
W = TypeVar("W", bound=tuple[Any, ...])


def fits_sum8(desc: FrameDescription) -> bool:
    """True when ``desc`` is an ``AA 55`` / float32 LE / sum-8-over-the-fields frame."""
    ck = desc.checksum
    return (desc.header == HEADER and not desc.trailer and desc.length is None
            and ck is not None and ck.algorithm == "sum8" and ck.span == "payload"
            and bool(desc.fields)
            and all(f.type == "f32" and f.byte_order == "little" and not f.scaled
                    for f in desc.fields))


@overload
def fast_constructor(cls: type[T], names: Sequence[str]) -> Callable[..., T]: ...


@overload
def fast_constructor(cls: type[T], names: Sequence[str], wrap: type[W]) -> Callable[..., W]: ...


def fast_constructor(
    cls: type[T], names: Sequence[str], wrap: type[W] | None = None
) -> Callable[..., Any]:
    """A positional constructor for a frozen, slotted dataclass that skips ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``; receivers build one object per frame, and storing
    through the slot descriptors directly costs half as much. The result is
    an ordinary instance (equal to, and indistinguishable from, ``cls(*args)``);
    the tests check that. With ``wrap`` (a named tuple ``(offset, frame)``),
    the constructor takes the offset first and returns the wrapped pair: one
    call per received frame instead of two.
    """
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_wrap": wrap,
                           "_tuple_new": tuple.__new__}
    args = ", ".join(f"a{i}" for i in range(len(names)))
    head = f"def make(offset, {args}):" if wrap is not None else f"def make({args}):"
    body = [head, "    o = _new(_cls)"]
    for i, name in enumerate(names):
        env[f"_s{i}"] = getattr(cls, name).__set__  # the slot's member descriptor
        body.append(f"    _s{i}(o, a{i})")
    body.append("    return _tuple_new(_wrap, (offset, o))" if wrap is not None else "    return o")
    exec("\n".join(body), env)  # same technique as dataclasses' generated __init__
    make: Callable[..., Any] = env["make"]
    return make


def _getter(names: Sequence[str]) -> Callable[[Any], tuple[float, ...]]:
    """``frame -> its field values``, one C call (``attrgetter``) for two fields or more."""
    if len(names) > 1:
        get: Callable[[Any], tuple[float, ...]] = attrgetter(*names)
        return get
    one = attrgetter(names[0])
    return lambda frame: (one(frame),)


class Sum8Codec(FrameCodec[T]):
    """The codec of one ``AA 55`` / float32 LE / sum-8 description, ``struct`` fast.

    ``cls`` is the class of decoded frames (by default the generic codec's),
    its fields in wire order; ``values`` takes them back out of an instance
    (by default an ``attrgetter`` of the fields). Get one through
    :func:`fwbridge.protocols.engine.codec_for`.
    """

    size: int  # fixed: the description has no length field

    def __init__(self, desc: FrameDescription, cls: type[Any] | None = None,
                 values: Callable[[T], tuple[float, ...]] | None = None) -> None:
        if not fits_sum8(desc):
            # the fast path assumes this shape: refusing any other keeps the two from drifting
            raise ConfigError(f"{desc.source}: not an AA 55 / float32 LE / sum-8 frame")
        super().__init__(desc, cls)
        self.struct = struct.Struct("<" + "f" * len(self.fields))
        self.body_size = self.struct.size
        assert self.size == len(HEADER) + self.body_size + 1
        self.values: Callable[[T], tuple[float, ...]] = values or _getter(self.fields)

    # -- encoding ---------------------------------------------------------
    def _checked(self, frame: T, allow_nonfinite: bool) -> tuple[float, ...]:
        vals = self.values(frame)
        for field, value in zip(self.fields, vals):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise FieldValueError(self.name, field, f"not a number: {value!r}")
            if not allow_nonfinite and not math.isfinite(value):
                raise FieldValueError(
                    self.name, field, f"{value!r} is not finite (pass allow_nonfinite=True)"
                )
        return vals

    def encode(self, frame: T, *, allow_nonfinite: bool = False) -> bytes:
        """The frame's bytes; refuses NaN/inf unless ``allow_nonfinite``."""
        vals = self._checked(frame, allow_nonfinite)
        try:
            body = self.struct.pack(*vals)
        except OverflowError:
            field = next(
                f for f, v in zip(self.fields, vals) if math.isfinite(v) and abs(v) > 3.4028235e38
            )
            raise FieldValueError(self.name, field, "out of float32 range") from None
        return HEADER + body + bytes((sum(body) & 0xFF,))

    # -- decoding ---------------------------------------------------------
    def check(self, data: bytes | bytearray | memoryview) -> None:
        """Raise the error that names what is wrong with ``data``, if anything."""
        assert self.size is not None
        if len(data) != self.size:
            raise LengthError(
                self.name, "length", f"expected {self.size} bytes, got {len(data)}", data
            )
        if bytes(data[:2]) != HEADER:
            raise HeaderError(self.name, "header", f"expected {HEADER.hex(' ')}", data)
        want = sum(data[2 : self.size - 1]) & 0xFF
        got = data[self.size - 1]
        if want != got:
            raise ChecksumError(
                self.name, "checksum", f"computed 0x{want:02x}, frame says 0x{got:02x}", data
            )

    def decode(self, data: bytes | bytearray | memoryview) -> T:
        """Decode exactly one frame; raises a ``FrameError`` subclass on bad input."""
        self.check(data)
        frame: T = self.make(*self.struct.unpack_from(data, 2))
        return frame
