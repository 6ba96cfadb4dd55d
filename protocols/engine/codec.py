"""Encode and decode the frames of a description, with a ``struct`` fast path.

:class:`FrameCodec` compiles a description into ``struct`` formats (one per
run of fields with the same byte order), a precomputed check function and
one generated constructor that applies scale, offset and enums while it
builds the frame object. ``encode_with_schema``/``decode_with_schema`` do
the same through the construct schema; the tests hold the two to the same
bytes and values.

Decoded values: integers as ints (enum fields as members of a generated
``IntEnum`` when the value is known, flags as an ``IntFlag``), scaled fields
as ``raw * scale + offset`` floats, bytes as bytes. The length field is not
stored: it is derived from the data it counts.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Generic, Literal, NamedTuple, TypeVar, cast

from fwbridge.protocols.checksums import algorithm
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.descriptions.loader import FieldSpec, FrameDescription
from fwbridge.protocols.engine.tuple_view import value_key
from fwbridge.protocols.errors import (
    ChecksumError,
    FieldValueError,
    HeaderError,
    LengthError,
    TrailerError,
)

__all__ = ["FrameCodec", "Received", "Segment", "frame_class", "label_enum", "schema_of"]


class Received(NamedTuple):
    """A decoded frame and the stream offset of its first header byte."""

    offset: int
    frame: Any


T = TypeVar("T")


def schema_of(desc: FrameDescription) -> Any:
    """The construct schema of a description, one per description (built on first use).

    The description is the source of truth; this is the one place a codec's
    schema comes from. construct loads here, on first use. The built-ins'
    schemas are kept for the process (their fast paths and generic codecs
    share them); other descriptions' in a bounded cache.
    """
    if desc.name in BUILTIN_NAMES and desc is builtin(desc.name):
        schema = _BUILTIN_SCHEMAS.get(desc.name)
        if schema is None:
            schema = _BUILTIN_SCHEMAS[desc.name] = _build(desc)
        return schema
    return _cached_schema(desc)


_BUILTIN_SCHEMAS: dict[str, Any] = {}  # at most len(BUILTIN_NAMES)


def _build(desc: FrameDescription) -> Any:
    from fwbridge.protocols.descriptions.schema import build_schema

    return build_schema(desc)


_cached_schema = lru_cache(maxsize=64)(_build)


@lru_cache(maxsize=256)
def label_enum(desc: FrameDescription, f: FieldSpec) -> type[enum.IntEnum] | type[enum.IntFlag]:
    """The ``IntEnum`` (enum table) or ``IntFlag`` (flags table) of a field (one per
    description and field). Its members pickle as the description, the field and the
    value: the class is made, not importable."""
    name = "".join(p.title() for p in f"{desc.name}_{f.name}".split("_"))
    kind: Any = enum.IntFlag if f.flags else enum.IntEnum
    cls: Any = kind(name, [(lb, v) for v, lb in (f.flags or f.enum)])

    def __reduce_ex__(self: enum.IntEnum, protocol: object) -> tuple[Any, ...]:
        return (_label_of, (desc, f.name, int(self)))

    cls.__reduce_ex__ = __reduce_ex__
    if f.flags:
        return cast("type[enum.IntFlag]", cls)
    return cast("type[enum.IntEnum]", cls)


def _label_of(desc: FrameDescription, name: str, value: int) -> Any:
    """A pickled member of a description's generated enum or flags class, back."""
    return label_enum(desc, desc.field(name))(value)


def frame_class(desc: FrameDescription, names: Sequence[str]) -> type:
    """An immutable named tuple with one attribute per stored field.

    A tuple rather than a dataclass: receivers build one per frame, and a
    tuple is built in one C call (whole columns of them without a Python call
    per frame, see :class:`~fwbridge.protocols.engine.fixed_receiver.FixedReceiver`).
    A frame is a value: it equals its copy with a NaN in it (the same bits), and
    pickles as its description and values (the class is made, not importable).
    """
    return _frame_class(desc, tuple(names))


@lru_cache(maxsize=256)
def _frame_class(desc: FrameDescription, names: tuple[str, ...]) -> type:
    cls_name = "".join(p.title() for p in desc.name.split("_")) + "Frame"
    types = {"bytes": bytes, "f32": float, "f64": float}
    spec = [(n, float if desc.field(n).scaled else types.get(desc.field(n).type, int))
            for n in names]
    cls: Any = NamedTuple(cls_name, spec)  # type: ignore[misc]

    def __eq__(self: tuple[Any, ...], other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        return bool(value_key(self) == value_key(other))

    def __ne__(self: tuple[Any, ...], other: object) -> bool:
        return not __eq__(self, other)

    def __hash__(self: tuple[Any, ...]) -> int:
        return hash(value_key(self))

    def __reduce__(self: tuple[Any, ...]) -> tuple[Any, ...]:
        return (_frame_of, (desc, names, tuple(self)))

    for key, method in (("__eq__", __eq__), ("__ne__", __ne__), ("__hash__", __hash__),
                        ("__reduce__", __reduce__)):
        setattr(cls, key, method)
    result: type = cls
    return result


def _frame_of(desc: FrameDescription, names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """A pickled frame of a description's generated class, back."""
    return frame_class(desc, names)(*values)


def _order(f: FieldSpec) -> str | None:
    """A field's byte order, or None when it has none (single bytes, byte strings)."""
    return None if f.type == "bytes" or f.info.size == 1 else f.byte_order


class Segment:
    """A run of fixed-size fields with one byte order: one ``struct`` call."""

    def __init__(self, offset: int, fields: Sequence[FieldSpec]) -> None:
        self.offset = offset  # from the start of the frame, or of the part after the data
        self.fields = tuple(fields)
        orders = [o for o in map(_order, fields) if o]
        prefix = ">" if orders and orders[0] == "big" else "<"
        self.struct = struct.Struct(prefix + "".join(
            f"{f.size}s" if f.type == "bytes" else f.info.code for f in fields))


def _segments(fields: Sequence[FieldSpec], start: int) -> list[Segment]:
    out: list[Segment] = []
    run: list[FieldSpec] = []
    run_order: str | None = None
    pos = start
    for f in fields:
        order = _order(f)
        if order and run_order and order != run_order:
            out.append(Segment(pos, run))
            pos += out[-1].struct.size
            run, run_order = [], None
        run.append(f)
        run_order = run_order or order
    if run:
        out.append(Segment(pos, run))
    return out


class FrameCodec(Generic[T]):
    """Encoder/decoder of one described frame family.

    ``cls`` (optional) is the frozen, slotted class of decoded frames, its
    attributes the stored fields in wire order; by default one is generated.
    """

    def __init__(self, desc: FrameDescription, cls: type[Any] | None = None) -> None:
        self.desc = desc
        self.name = desc.name
        self._schema: Any = None
        lname = desc.length.field if desc.length else None
        self.stored = tuple(f for f in desc.fields if f.name != lname)
        self.fields = tuple(f.name for f in self.stored)
        self.cls: type[Any] = cls or frame_class(desc, self.fields)
        self.enums = {f.name: label_enum(desc, f) for f in desc.fields if f.enum or f.flags}
        h = len(desc.header)
        ck = desc.checksum
        self.check_size = ck.size if ck else 0
        self.check_func = algorithm(ck.algorithm).func if ck else None
        self.check_order: Literal["little", "big"] = (
            "big" if ck and ck.byte_order == "big" else "little")
        self.span_all = bool(ck and ck.span == "all")
        names = [f.name for f in desc.fields]
        if desc.length is None:
            self.prefix = _segments(desc.fields, h)
            self.suffix: list[Segment] = []
        else:
            k = names.index(desc.length.data)
            self.prefix = _segments(desc.fields[:k], h) if k else []
            self.suffix = _segments(desc.fields[k + 1:], 0) if k + 1 < len(names) else []
            self.len_offset = desc.offset_of(desc.length.field)
            lf = desc.field(desc.length.field)
            self.len_struct = struct.Struct(("<" if lf.byte_order == "little" else ">")
                                            + lf.info.code)
            self.data_offset = desc.offset_of(desc.length.data)
        self.size = desc.size
        self.has_float = any(f.info.kind == "float" for f in self.stored)
        self.make = self._compile_make(with_offset=False)
        self.make_at = self._compile_make(with_offset=True)
        #: ``make_at`` for values already scaled (a batch of numpy columns made records)
        self.make_at_scaled = self._compile_make(with_offset=True, scaled=True)

    # -- the generated constructor ---------------------------------------------
    def reader(self, unpack: Callable[[bytes], tuple[Any, ...]]) -> Callable[[bytes], Any]:
        """``make(*unpack(record))`` as one generated function: a receiver's record (its
        bytes) reads its frame with it, in one Python call."""
        return self._compile_make(with_offset=False, unpack=unpack)

    def _compile_make(self, with_offset: bool,
                      unpack: Callable[[bytes], tuple[Any, ...]] | None = None,
                      scaled: bool = False) -> Callable[..., Any]:
        """``make([offset,] *raw_wire_values)``: converts and builds in one call.

        With ``unpack``: ``make(record)``, the raw values ``unpack(record)``'s; with
        ``scaled``: scaled fields come scaled already.
        """
        desc = self.desc
        env: dict[str, Any] = {"_new": object.__new__, "_cls": self.cls, "_unpack": unpack}
        as_tuple = issubclass(self.cls, tuple)
        env["_tnew"] = tuple.__new__
        args, body = [], [] if as_tuple else ["    o = _new(_cls)"]
        exprs: list[str] = []
        lname = desc.length.field if desc.length else None
        for i, f in enumerate(desc.fields):
            args.append(f"a{i}")
            if f.name == lname:
                continue
            if not as_tuple:
                env[f"_s{i}"] = getattr(self.cls, f.name).__set__
            expr = f"a{i}"
            if f.scaled:
                if not scaled:
                    expr = f"a{i} * {f.scale if f.scale is not None else 1.0!r}"
                    if f.offset:
                        expr += f" + {f.offset!r}"
            elif f.name in self.enums:
                e = self.enums[f.name]
                if f.flags:
                    env[f"_e{i}"] = e
                    expr = f"_e{i}(a{i})"
                else:
                    env[f"_e{i}"] = {m.value: m for m in e}
                    expr = f"_e{i}.get(a{i}, a{i})"
            if as_tuple:
                exprs.append(expr)
            else:
                body.append(f"    _s{i}(o, {expr})")
        if as_tuple:
            body.append(f"    o = _tnew(_cls, ({', '.join(exprs)},))")
        if with_offset:  # receivers: one call per frame builds the (offset, frame) pair
            env["_pair"], env["_wrap"] = tuple.__new__, Received
            body.append("    return _pair(_wrap, (offset, o))")
            head = f"def make(offset, {', '.join(args)}):"
        elif unpack is not None:
            body.insert(0, f"    ({', '.join(args)},) = _unpack(rec)")
            body.append("    return o")
            head = "def make(rec):"
        else:
            body.append("    return o")
            head = f"def make({', '.join(args)}):"
        exec("\n".join([head, *body]), env)  # same technique as dataclasses' __init__
        fn: Callable[..., Any] = env["make"]
        return fn

    # -- raw values ---------------------------------------------------------------
    def raw_values(self, buf: bytes | bytearray | memoryview, start: int = 0,
                   end: int | None = None) -> tuple[Any, ...]:
        """The wire values of the frame at ``buf[start:end]`` (assumed well framed)."""
        vals: tuple[Any, ...] = ()
        for seg in self.prefix:
            vals += seg.struct.unpack_from(buf, start + seg.offset)
        if self.desc.length is None:
            return vals
        assert end is not None
        dend = end - len(self.desc.trailer) - self.check_size - self.suffix_size
        vals += (bytes(buf[start + self.data_offset:dend]),)
        for seg in self.suffix:
            vals += seg.struct.unpack_from(buf, dend + seg.offset)
        return vals

    @property
    def suffix_size(self) -> int:
        return sum(s.struct.size for s in self.suffix)

    def check_value(self, frame: bytes | bytearray | memoryview) -> tuple[int, int]:
        """(computed, received) check of a well-framed frame."""
        assert self.check_func is not None
        h, t, c = len(self.desc.header), len(self.desc.trailer), self.check_size
        end = len(frame) - t
        span = frame[0 if self.span_all else h:end - c]
        return self.check_func(bytes(span)), int.from_bytes(frame[end - c:end], self.check_order)

    # -- decoding -------------------------------------------------------------------
    def check(self, data: bytes | bytearray | memoryview) -> None:
        """Raise the error naming what is wrong with ``data``, if anything."""
        raw = bytes(data)
        d, name = self.desc, self.name
        if len(raw) < d.min_size or (self.size is not None and len(raw) != self.size):
            want = f"{self.size}" if self.size is not None else f"at least {d.min_size}"
            raise LengthError(name, "frame", f"expected {want} bytes, got {len(raw)}", raw)
        if not raw.startswith(d.header):
            raise HeaderError(name, "header", f"expected {d.header.hex(' ')}", raw)
        if d.length is not None:
            n = self.len_struct.unpack_from(raw, self.len_offset)[0]
            want_size = d.overhead + n - d.data_bias
            if n - d.data_bias < 0 or want_size != len(raw):
                raise LengthError(name, d.length.field, f"field says {n}, so {want_size} bytes "
                                  f"in all; got {len(raw)}", raw)
        if d.trailer and not raw.endswith(d.trailer):
            raise TrailerError(name, "trailer", f"expected {d.trailer.hex(' ')}", raw)
        if self.check_func is not None:
            want_ck, got = self.check_value(raw)
            if want_ck != got:
                w = 2 * self.check_size
                raise ChecksumError(self.name, d.checksum.name if d.checksum else "checksum",
                                    f"computed 0x{want_ck:0{w}x}, frame says 0x{got:0{w}x}", raw)

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """Decode exactly one frame; raises a ``FrameError`` subclass on bad input."""
        raw = bytes(data)
        self.check(raw)
        return self.make(*self.raw_values(raw, 0, len(raw)))

    @property
    def schema(self) -> Any:
        """The construct schema of the description, built on first use."""
        if self._schema is None:
            self._schema = schema_of(self.desc)
        return self._schema

    def decode_with_schema(self, data: bytes | bytearray | memoryview) -> Any:
        """Decode with the construct schema; same result and errors as :meth:`decode`."""
        from construct import ConstructError

        raw = bytes(data)
        try:
            parsed: Any = self.schema.parse(raw)
        except ConstructError:
            self.check(raw)  # names what is wrong, in decode()'s words
            raise
        self.check(raw)  # construct does not check the total size or the length field
        value = parsed.body.value if "body" in parsed else parsed
        vals = []
        for f in self.desc.fields:
            v = value[f.name]
            if f.flags:
                v = sum(bit for bit, label in f.flags if v[label])
            vals.append(int(v) if f.is_int else v)
        return self.make(*vals)

    # -- encoding -------------------------------------------------------------------
    def to_raw(self, frame: Any, *, allow_nonfinite: bool = False) -> list[Any]:
        """The wire values of ``frame`` (length field computed), range-checked."""
        d = self.desc
        out: list[Any] = []
        data_len = 0
        for f in d.fields:
            if d.length is not None and f.name == d.length.field:
                out.append(None)
                continue
            v = getattr(frame, f.name)
            out.append(self.raw_of(f, v, allow_nonfinite))
            if d.length is not None and f.name == d.length.data:
                data_len = len(out[-1])
        if d.length is not None:
            i = d.field_names.index(d.length.field)
            if data_len > d.max_data:
                raise FieldValueError(self.name, d.length.data, f"{data_len} bytes; at most "
                                      f"{d.max_data} (length max {d.length.max})")
            out[i] = data_len + d.data_bias
        return out

    def raw_of(self, f: FieldSpec, v: Any, allow_nonfinite: bool = False) -> Any:
        """One field's wire value from its decoded value."""
        name = self.name
        if f.type == "bytes":
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise FieldValueError(name, f.name, f"not bytes: {type(v).__name__}")
            if f.size is not None and len(v) != f.size:
                raise FieldValueError(name, f.name, f"{len(v)} bytes; the field has {f.size}")
            return bytes(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FieldValueError(name, f.name, f"not a number: {v!r}")
        given = v
        if f.scaled:
            if not math.isfinite(v):
                raise FieldValueError(name, f.name, f"{v!r} is not finite")
            v = (v - (f.offset or 0.0)) / (f.scale if f.scale is not None else 1.0)
        if f.info.kind == "float":
            if not allow_nonfinite and not math.isfinite(v):
                raise FieldValueError(name, f.name,
                                      f"{v!r} is not finite (pass allow_nonfinite=True)")
            if f.type == "f32" and math.isfinite(v) and abs(v) > 3.4028235e38:
                raise FieldValueError(name, f.name, "out of float32 range")
            return float(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise FieldValueError(name, f.name, f"{v!r} is not finite")
            v = round(v)
        if not f.info.lo <= v <= f.info.hi:
            if f.scaled:
                lo, hi = (f.info.lo * (f.scale or 1.0) + (f.offset or 0.0),
                          f.info.hi * (f.scale or 1.0) + (f.offset or 0.0))
                raise FieldValueError(name, f.name, f"{given!r} is out of range "
                                      f"{min(lo, hi):g}..{max(lo, hi):g} ({f.type}, scaled)")
            raise FieldValueError(name, f.name, f"{v} is out of the {f.type} range "
                                  f"{f.info.lo}..{f.info.hi}")
        return int(v)

    def encode(self, frame: Any, *, allow_nonfinite: bool = False) -> bytes:
        """The frame's bytes."""
        d = self.desc
        raw = self.to_raw(frame, allow_nonfinite=allow_nonfinite)
        k = d.field_names.index(d.length.data) if d.length else len(raw)
        parts = [d.header]
        pos = 0
        for seg in self.prefix:
            parts.append(seg.struct.pack(*raw[pos:pos + len(seg.fields)]))
            pos += len(seg.fields)
        if d.length is not None:
            parts.append(raw[k])
            pos = k + 1
            for seg in self.suffix:
                parts.append(seg.struct.pack(*raw[pos:pos + len(seg.fields)]))
                pos += len(seg.fields)
        body = b"".join(parts)
        if self.check_func is not None:
            span = body if self.span_all else body[len(d.header):]
            body += self.check_func(span).to_bytes(self.check_size, self.check_order)
        return body + d.trailer

    def encode_with_schema(self, frame: Any, *, allow_nonfinite: bool = False) -> bytes:
        """Same bytes as :meth:`encode`, built by the construct schema."""
        d = self.desc
        raw = self.to_raw(frame, allow_nonfinite=allow_nonfinite)
        value: dict[str, Any] = {}
        for f, v in zip(d.fields, raw):
            if d.length is not None and f.name == d.length.field:
                continue
            if f.flags:
                v = {label: bool(v & bit) for bit, label in f.flags}
            value[f.name] = v
        from construct import ConstructError

        framed = any(sc.name == "body" for sc in self.schema.subcons)
        try:
            return bytes(self.schema.build({"body": {"value": value}} if framed else value))
        except ConstructError as exc:  # pragma: no cover - values are checked above
            raise FieldValueError(self.name, "body", str(exc)) from None

    # -- mappings (CLI, JSON) ----------------------------------------------------------
    def from_mapping(self, values: Mapping[str, Any]) -> Any:
        """A frame from ``{field: value}``; missing numbers are 0, missing bytes empty."""
        unknown = set(values) - set(self.fields)
        if unknown:
            raise FieldValueError(self.name, sorted(unknown)[0],
                                  f"no such field (fields: {', '.join(self.fields)})")
        args = []
        for f in self.stored:
            default: Any = b"" if f.type == "bytes" and f.size is None else (
                bytes(f.size or 0) if f.type == "bytes" else 0)
            args.append(values.get(f.name, default))
        return self.cls(*args)

    def to_mapping(self, frame: Any) -> dict[str, Any]:
        """``{field: value}`` of a decoded frame, in wire order."""
        return {n: getattr(frame, n) for n in self.fields}
