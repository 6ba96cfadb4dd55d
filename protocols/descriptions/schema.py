"""The construct schema of a frame description (the description is the source of truth).

Every codec's schema is built here, the built-ins' included, one per
description (:func:`fwbridge.protocols.engine.codec.schema_of`).

Shape: a description with neither header, trailer nor checksum (a CAN
payload) is a flat ``Struct`` of its fields. Any other is
``header / body (RawCopy of the fields) / <checksum> / trailer``, the shape
of the built-in schemas, so a checksum can refer to the body's raw bytes.
Integer fields hold raw values (scale and offset are the codec's); enums
and flags become construct ``Enum`` and ``FlagsEnum``; the length field
is rebuilt from the data it counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from construct import (
    Bytes,
    Checksum,
    Const,
    Construct,
    Enum,
    FlagsEnum,
    FormatField,
    RawCopy,
    Rebuild,
    Struct,
    this,
)

from fwbridge.protocols.checksums import algorithm
from fwbridge.protocols.descriptions.loader import FieldSpec, FrameDescription

__all__ = ["build_schema", "check_format", "field_format", "span_function"]


def field_format(order: str, type_code: str, size: int) -> Construct:
    """The construct of one fixed-size number."""
    del size
    code = {"I": "L", "i": "l"}.get(type_code, type_code)  # construct's names for 32 bits
    return FormatField("<" if order == "little" else ">", code)


def check_format(desc: FrameDescription, width_bytes: int) -> Construct:
    """The construct of the check value (unsigned, the checksum's byte order)."""
    order = desc.checksum.byte_order if desc.checksum else desc.byte_order
    code = {1: "B", 2: "H", 4: "L", 8: "Q"}.get(width_bytes)
    if code is not None:
        return FormatField("<" if order == "little" else ">", code)
    from construct import BytesInteger  # 24-bit CRCs

    return BytesInteger(width_bytes, signed=False, swapped=order == "little")


def span_function(desc: FrameDescription, name: str | None = None) -> Callable[[bytes], int]:
    """``body bytes -> check``: the header is prepended for span ``all``."""
    assert desc.checksum is not None
    func = algorithm(name or desc.checksum.algorithm).func
    if desc.checksum.span != "all":
        return func
    header = desc.header

    def over_all(data: bytes) -> int:
        return func(header + bytes(data))

    return over_all


class _Label(NamedTuple):
    """An entry of a label table, as construct's ``merge`` reads enum members."""

    name: str
    value: int


def _field(desc: FrameDescription, f: FieldSpec) -> Construct:
    if f.type == "bytes":
        if f.size is not None:
            return Bytes(f.size)
        assert desc.length is not None
        bias, lname = desc.data_bias, desc.length.field
        return Bytes(lambda ctx: ctx[lname] - bias)
    base = field_format(f.byte_order, f.info.code, f.info.size)
    if desc.length is not None and f.name == desc.length.field:
        data, counts = desc.length.data, desc.length.counts
        bias = desc.data_bias

        def rebuild(ctx: Any) -> int:
            return len(ctx[data]) + bias

        del counts
        return Rebuild(base, rebuild)
    # labels through construct's merge argument, not as keywords: a label may be any
    # identifier, "subcon" (the name of construct's first parameter) included
    if f.enum:
        return Enum(base, [_Label(label, value) for value, label in f.enum])
    if f.flags:
        return FlagsEnum(base, [_Label(label, value) for value, label in f.flags])
    return base


def build_schema(desc: FrameDescription, *, algorithm_name: str | None = None,
                 relaxed: bool = False) -> Struct:
    """The construct schema of ``desc``.

    ``algorithm_name`` replaces the description's checksum algorithm (a link
    may choose its CRC); ``relaxed`` reads any header and the check as a
    plain number, unverified (for captures such as the patent's example).
    """
    fields = Struct(*(f.name / _field(desc, f) for f in desc.fields))
    if not desc.header and not desc.trailer and desc.checksum is None:
        return fields
    parts: list[Construct] = []
    if desc.header:
        parts.append("header" / (Bytes(len(desc.header)) if relaxed else Const(desc.header)))
    parts.append("body" / RawCopy(fields))
    if desc.checksum is not None:
        ck = desc.checksum
        size = algorithm(algorithm_name or ck.algorithm).size
        fmt = check_format(desc, size)
        if relaxed:
            parts.append(ck.name / fmt)
        else:
            parts.append(ck.name / Checksum(fmt, span_function(desc, algorithm_name),
                                            this.body.data))
    if desc.trailer:
        parts.append("trailer" / Const(desc.trailer))
    return Struct(*parts)
