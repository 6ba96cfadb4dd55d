"""A DBC from CAN payload descriptions: one message per CAN ID, one signal per field.

Integer fields become signals (scale and offset as factor and offset, enum
tables as ``VAL_``), a flags field one 1-bit signal per flag (``fault_over_current``
…), a ``[[can.signal]]`` overlay one wider signal in place of the fields it
covers (the actuator's fine position), float fields IEEE signals
(``SIG_VALTYPE_``). Field docs become ``CM_`` comments. cantools, SavvyCAN and
BusMaster read the result; the repository ships the actuator's
(can_bus/fwbridge_actuators.dbc) and a test keeps it equal to this output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fwbridge.protocols.description import FrameDescription
from fwbridge.protocols.description_names import clash_error
from fwbridge.protocols.errors import ConfigError

__all__ = ["generate"]

_NS = ("NS_DESC_", "CM_", "BA_DEF_", "BA_", "VAL_", "CAT_DEF_", "CAT_", "FILTER",
       "BA_DEF_DEF_", "EV_DATA_", "ENVVAR_DATA_", "SGTYPE_", "SGTYPE_VAL_", "BA_DEF_SGTYPE_",
       "BA_SGTYPE_", "SIG_TYPE_REF_", "VAL_TABLE_", "SIG_GROUP_", "SIG_VALTYPE_",
       "SIGTYPE_VALTYPE_",
       "BO_TX_BU_", "BA_DEF_REL_", "BA_REL_", "BA_DEF_DEF_REL_", "BU_SG_REL_", "BU_EV_REL_",
       "BU_BO_REL_", "SG_MUL_VAL_")


@dataclass(frozen=True)
class _Signal:
    name: str
    byte: int
    bits: int
    little: bool
    signed: bool
    factor: float
    offset: float
    unit: str
    doc: str = ""
    start_bit: int = 0  # within the byte, for 1-bit flag signals
    labels: tuple[tuple[int, str], ...] = ()
    valtype: int = 0  # 1 float32, 2 float64

    def start(self) -> int:
        if self.little or self.bits <= 8 - self.start_bit:
            return 8 * self.byte + self.start_bit
        return 8 * self.byte + 7  # Motorola: the most significant bit of the first byte

    def limits(self) -> tuple[float, float]:
        if self.valtype:
            return (0.0, 0.0)
        lo, hi = ((-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed
                  else (0, (1 << self.bits) - 1))
        a, b = lo * self.factor + self.offset, hi * self.factor + self.offset
        return (min(a, b), max(a, b))


def _text(text: str) -> str:
    """``text`` inside a DBC string: one line without ``"`` (DBC strings have no escape).

    The loader refuses such text; descriptions built in code are made safe here.
    """
    return "".join("'" if ch == '"' else " " if ord(ch) < 0x20 or ch in "\\\x7f" else ch
                   for ch in text)


def _node(name: str) -> str:
    """A node name as a DBC identifier (the loader refuses any other)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return out if re.match(r"[A-Za-z_]", out) else f"N_{out}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _signals(d: FrameDescription) -> list[_Signal]:
    replaced = {r: s for s in d.can_signals for r in s.replaces}
    out: list[_Signal] = []
    done: set[str] = set()
    for f in d.fields:
        at = d.offset_of(f.name)
        if f.name in replaced:
            s = replaced[f.name]
            if s.name not in done:
                order = s.byte_order or d.byte_order
                out.append(_Signal(s.name, s.byte, 8 * s.size, order == "little", s.signed,
                                   s.scale, s.offset, s.unit, s.doc))
                done.add(s.name)
            continue
        if f.flags:
            for bit, label in f.flags:
                k = bit.bit_length() - 1
                out.append(_Signal(f"{f.name}_{label.lower()}", at + k // 8, 1, True, False, 1.0,
                                   0.0, "", f"{f.name} bit {k}: {label}", start_bit=k % 8))
            continue
        size = f.width or 0
        if f.type == "bytes":
            out.append(_Signal(f.name, at, 8 * size, True, False, 1.0, 0.0, f.unit, f.doc))
            continue
        valtype = {"f32": 1, "f64": 2}.get(f.type, 0)
        out.append(_Signal(f.name, at, 8 * size, f.byte_order == "little" or size == 1,
                           f.info.kind == "int" or bool(valtype),
                           f.scale if f.scale is not None else 1.0, f.offset or 0.0, f.unit,
                           f.doc, labels=f.enum, valtype=valtype))
    return out


def generate(descs: Sequence[FrameDescription]) -> str:
    """The DBC text for the CAN payload descriptions among ``descs``."""
    can = [d for d in descs if d.can]
    if not can:
        raise ConfigError("no CAN payload among the descriptions: give one with a [can] table "
                         "(e.g. actuator)")
    clash = clash_error(can, targets=("dbc",))
    if clash is not None:
        raise ConfigError(clash)
    too_big = [d.name for d in can if (d.size or 99) > 8]
    if too_big:
        raise ConfigError(f"{too_big[0]}: a CAN payload has at most 8 bytes")
    nodes = sorted({_node(m.sender) for d in can for m in d.can if m.sender})
    lines = ['VERSION ""', "", "NS_ :", *(f"\t{ns}" for ns in _NS), "", "BS_:", "",
             f"BU_: {' '.join(nodes)}".rstrip(), ""]
    comments: list[str] = []
    values: list[str] = []
    valtypes: list[str] = []
    for d in can:
        sigs = _signals(d)
        for msg in d.can:
            sender = _node(msg.sender) if msg.sender else "Vector__XXX"
            receivers = ",".join(n for n in nodes if n != sender) or "Vector__XXX"
            for ident, node in msg.ids():
                name = msg.name if node is None else f"{msg.name}_{node}"
                frame_id = ident | (0x80000000 if msg.extended else 0)
                lines.append(f"BO_ {frame_id} {name}: {d.size} {sender}")
                for s in sigs:
                    lo, hi = s.limits()
                    lines.append(
                        f" SG_ {s.name} : {s.start()}|{s.bits}@{1 if s.little else 0}"
                        f"{'-' if s.signed else '+'} ({_num(s.factor)},{_num(s.offset)}) "
                        f'[{_num(lo)}|{_num(hi)}] "{_text(s.unit)}" {receivers}')
                    if s.labels:
                        values.append(f"VAL_ {frame_id} {s.name} " + " ".join(
                            f'{v} "{label}"' for v, label in s.labels) + " ;")
                    if s.valtype:
                        valtypes.append(f"SIG_VALTYPE_ {frame_id} {s.name} : {s.valtype};")
                    if s.doc:
                        comments.append(f'CM_ SG_ {frame_id} {s.name} "{_text(s.doc)}";')
                doc = d.doc + (f" (node {node})" if node is not None else "")
                if doc:
                    comments.append(f'CM_ BO_ {frame_id} "{_text(doc)}";')
                lines.append("")
    return "\n".join([*lines, *comments, *valtypes, *values, ""])
