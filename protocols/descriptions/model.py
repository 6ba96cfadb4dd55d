"""The values of a frame description: its fields, length, checksum, CAN messages and
signals, and the frame as a whole, immutable, and the table of field types.
:mod:`fwbridge.protocols.descriptions.loader` makes them from TOML (and re-exports them);
everything that builds on a description (schema, codec, receivers, ``codegen/``)
reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fwbridge.protocols.checksums import Algorithm, algorithm
from fwbridge.protocols.errors import ConfigError, UnknownName

__all__ = [
    "TYPES",
    "CanMessage",
    "CanSignal",
    "ChecksumSpec",
    "FieldSpec",
    "FrameDescription",
    "LengthSpec",
    "TypeInfo",
]


class TypeInfo(NamedTuple):
    """A field type: its ``struct`` code, size in bytes, kind and integer range."""

    code: str
    size: int
    kind: str  # "uint" | "int" | "float" | "bytes"
    lo: int
    hi: int


def _int(code: str, size: int, signed: bool) -> TypeInfo:
    bits = 8 * size
    if signed:
        return TypeInfo(code, size, "int", -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return TypeInfo(code, size, "uint", 0, (1 << bits) - 1)


TYPES: dict[str, TypeInfo] = {
    "u8": _int("B", 1, False), "i8": _int("b", 1, True),
    "u16": _int("H", 2, False), "i16": _int("h", 2, True),
    "u32": _int("I", 4, False), "i32": _int("i", 4, True),
    "u64": _int("Q", 8, False), "i64": _int("q", 8, True),
    "f32": TypeInfo("f", 4, "float", 0, 0), "f64": TypeInfo("d", 8, "float", 0, 0),
    "bytes": TypeInfo("s", 0, "bytes", 0, 0),
}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field, in wire order. ``size`` is set for fixed ``bytes`` fields only."""

    name: str
    type: str
    byte_order: str
    scale: float | None = None
    offset: float | None = None
    unit: str = ""
    enum: tuple[tuple[int, str], ...] = ()
    flags: tuple[tuple[int, str], ...] = ()
    size: int | None = None
    doc: str = ""

    @property
    def info(self) -> TypeInfo:
        return TYPES[self.type]

    @property
    def width(self) -> int | None:
        """Bytes on the wire, or None for a bytes field sized by the length field."""
        return self.size if self.type == "bytes" else self.info.size

    @property
    def scaled(self) -> bool:
        return self.scale is not None or self.offset is not None

    @property
    def is_int(self) -> bool:
        return self.info.kind in ("uint", "int")


@dataclass(frozen=True, slots=True)
class LengthSpec:
    """What the length field counts: ``data`` bytes, the ``payload`` or the ``frame``."""

    field: str
    counts: str
    data: str
    max: int


@dataclass(frozen=True, slots=True)
class ChecksumSpec:
    """The check after the fields: algorithm, the bytes it covers, its byte order."""

    algorithm: str
    span: str
    byte_order: str
    name: str = "checksum"

    @property
    def algo(self) -> Algorithm:
        return algorithm(self.algorithm)

    @property
    def size(self) -> int:
        return self.algo.size


@dataclass(frozen=True, slots=True)
class CanMessage:
    """A CAN message carrying the description: ``id + node`` for each node in ``nodes``."""

    name: str
    id: int
    nodes: tuple[int, int] | None = None
    extended: bool = False
    sender: str = ""

    def ids(self) -> list[tuple[int, int | None]]:
        """(CAN ID, node or None) for every message this entry stands for."""
        if self.nodes is None:
            return [(self.id, None)]
        return [(self.id + k, k) for k in range(self.nodes[0], self.nodes[1] + 1)]


@dataclass(frozen=True, slots=True)
class CanSignal:
    """A wider integer read over bytes that fields cover (for the DBC), in place of them."""

    name: str
    type: str
    byte: int
    byte_order: str
    replaces: tuple[str, ...]
    scale: float = 1.0
    offset: float = 0.0
    unit: str = ""
    doc: str = ""

    @property
    def size(self) -> int:
        return TYPES[self.type].size

    @property
    def signed(self) -> bool:
        return self.type.startswith("i")


@dataclass(frozen=True, slots=True)
class FrameDescription:
    """A frame family, as its description gives it (immutable)."""

    name: str
    header: bytes
    trailer: bytes
    byte_order: str
    fields: tuple[FieldSpec, ...]
    length: LengthSpec | None = None
    checksum: ChecksumSpec | None = None
    can: tuple[CanMessage, ...] = ()
    can_signals: tuple[CanSignal, ...] = ()
    doc: str = ""
    source: str = "<string>"
    #: Headers besides ``header`` that mark a frame a length-directed receiver refuses
    #: (``header_errors``), or takes in relaxed mode (``relaxed_accepts``): a device that
    #: sends another header for the same frame (the action frame's ``FE FF``).
    alt_headers: tuple[bytes, ...] = ()

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> FieldSpec:
        for f in self.fields:
            if f.name == name:
                return f
        raise UnknownName(name)

    @property
    def fixed_payload(self) -> int:
        """Bytes of every field but the length-sized one."""
        return sum(f.width or 0 for f in self.fields)

    @property
    def overhead(self) -> int:
        """Bytes of the frame outside the length-sized field."""
        check = self.checksum.size if self.checksum else 0
        return len(self.header) + self.fixed_payload + check + len(self.trailer)

    @property
    def size(self) -> int | None:
        """The frame's size, or None when a length field makes it variable."""
        return None if self.length else self.overhead

    @property
    def min_size(self) -> int:
        return self.overhead

    @property
    def max_size(self) -> int:
        return self.overhead + (self.max_data if self.length else 0)

    @property
    def max_data(self) -> int:
        """Largest size the length-sized field may take (0 for fixed frames)."""
        if self.length is None:
            return 0
        return max(0, self.length.max - self.data_bias)

    @property
    def data_bias(self) -> int:
        """``length value - data size``: what the length counts besides the data."""
        if self.length is None:
            return 0
        if self.length.counts == "data":
            return 0
        if self.length.counts == "payload":
            return self.fixed_payload
        return self.overhead

    def offset_of(self, name: str) -> int:
        """Offset of a field before the length-sized one, from the frame's start."""
        pos = len(self.header)
        for f in self.fields:
            if f.name == name:
                return pos
            if f.width is None:
                raise ConfigError(f"{name} follows the variable field")
            pos += f.width
        raise UnknownName(name)
