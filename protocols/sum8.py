"""Fixed-length frames of seed 002: ``AA 55``, float32 LE fields, sum-8.

One :class:`Sum8Codec` per frame family (odometry, command). The construct
schema is the declarative source of truth; ``encode``/``decode`` use a
``struct`` fast path that the tests compare byte for byte with the schema
(``encode_with_schema``/``decode_with_schema``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from fwbridge.protocols.errors import ChecksumError, FieldValueError, HeaderError, LengthError

# construct loads with the schema, on first use: `fwbridge encode` starts without it.
if TYPE_CHECKING:
    from construct import Struct

__all__ = ["HEADER", "Sum8Codec", "build_schema", "fast_constructor", "sum8"]

HEADER = b"\xaa\x55"

T = TypeVar("T")
W = TypeVar("W", bound=tuple[Any, ...])


def sum8(data: bytes | bytearray | memoryview) -> int:
    """Sum of the bytes modulo 256 (the seed's ``checkout``)."""
    return sum(data) & 0xFF


def build_schema(fields: Sequence[str]) -> Struct:
    """The construct schema: header, float32 LE fields, sum-8 over the fields."""
    from construct import Checksum, Const, Float32l, Int8ul, RawCopy, Struct, this

    body = Struct(*(name / Float32l for name in fields))
    return Struct(
        "header" / Const(HEADER),
        "body" / RawCopy(body),
        "checksum" / Checksum(Int8ul, sum8, this.body.data),
    )


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


class Sum8Codec(Generic[T]):
    """Encoder/decoder of one fixed-length sum-8 frame family.

    ``cls`` is the frozen, slotted dataclass of the decoded value, its fields
    in wire order; ``values`` takes them back out of an instance.
    """

    def __init__(
        self,
        name: str,
        fields: Sequence[str],
        cls: type[T],
        values: Callable[[T], tuple[float, ...]],
    ) -> None:
        self.name = name
        self.cls = cls
        self.fields = tuple(fields)
        self._schema: Any = None
        #: builds the construct schema the first time it is asked for
        self.schema_factory: Callable[[], Any] = lambda: build_schema(self.fields)
        self.struct = struct.Struct("<" + "f" * len(self.fields))
        self.body_size = self.struct.size
        self.size = len(HEADER) + self.body_size + 1
        self.make = fast_constructor(cls, self.fields)
        self.values = values

    @property
    def schema(self) -> Any:
        """The construct schema (the declarative source of truth), built on first use."""
        if self._schema is None:
            self._schema = self.schema_factory()
        return self._schema

    @schema.setter
    def schema(self, value: Any) -> None:
        self._schema = value

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

    def encode_with_schema(self, frame: T, *, allow_nonfinite: bool = False) -> bytes:
        """Same bytes as :meth:`encode`, built by the construct schema."""
        from construct import ConstructError

        vals = self._checked(frame, allow_nonfinite)
        try:
            return bytes(self.schema.build({"body": {"value": dict(zip(self.fields, vals))}}))
        except ConstructError as exc:
            raise FieldValueError(self.name, "body", str(exc)) from None

    # -- decoding ---------------------------------------------------------
    def check(self, data: bytes | bytearray | memoryview) -> None:
        """Raise the error that names what is wrong with ``data``, if anything."""
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
        return self.make(*self.struct.unpack_from(data, 2))

    def decode_with_schema(self, data: bytes | bytearray | memoryview) -> T:
        """Decode with the construct schema; same result and errors as :meth:`decode`."""
        from construct import ChecksumError as ConstructChecksumError
        from construct import ConstError, StreamError

        raw = bytes(data)
        if len(raw) != self.size:
            self.check(raw)  # raises LengthError
        try:
            parsed: Any = self.schema.parse(raw)
        except ConstError:
            raise HeaderError(self.name, "header", f"expected {HEADER.hex(' ')}", raw) from None
        except ConstructChecksumError:
            self.check(raw)  # raises ChecksumError with both values
            raise
        except StreamError as exc:  # pragma: no cover - length is checked above
            raise LengthError(self.name, "length", str(exc), raw) from None
        value = parsed.body.value
        return self.make(*(value[f] for f in self.fields))
