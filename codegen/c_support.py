"""Pieces of the C generator: names, types, byte access, checksums."""

from __future__ import annotations

import unicodedata

import crcmod

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.descriptions.loader import HIDDEN_CATEGORIES, FieldSpec, FrameDescription

__all__ = ["Frame", "c_type", "check_expr", "checksum_c", "comment", "get_expr", "hex_list",
           "len_get", "put_stmt", "uint24", "upper"]

_CTYPES = {"u8": "uint8_t", "i8": "int8_t", "u16": "uint16_t", "i16": "int16_t",
           "u32": "uint32_t", "i32": "int32_t", "u64": "uint64_t", "i64": "int64_t",
           "f32": "float", "f64": "double"}
_UTYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}


def comment(text: str) -> str:
    """``text`` made safe inside a C block comment: one line, no comment delimiter in it,
    no character that is not what it shows.

    The loader refuses such text; this keeps descriptions built in code from reaching the C
    as code (a ``*/`` ends the comment, a backslash or the trigraph ``??/`` before a newline
    splices lines) or as text that reads otherwise than it compiles (a bidirectional override:
    trojan source, and gcc's -Wbidi-chars). Such characters are written as ``<U+202E>``.
    """
    flat = "".join(f"<U+{ord(ch):04X}>"
                   if ch == "\\" or unicodedata.category(ch) in HIDDEN_CATEGORIES else ch
                   for ch in text)
    while "*/" in flat or "/*" in flat or "??" in flat:
        flat = flat.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    return flat


def upper(name: str) -> str:
    return name.upper()


def c_type(f: FieldSpec) -> str:
    return _CTYPES[f.type]


def _uint_expr(p: str, size: int, order: str) -> str:
    """The unsigned value of ``size`` bytes at ``p`` (C expression)."""
    if size == 1:
        return f"{p}[0]"
    utype = _UTYPES[size]
    parts = []
    for i in range(size):
        shift = 8 * i if order == "little" else 8 * (size - 1 - i)
        parts.append(f"(({utype}){p}[{i}] << {shift})" if shift else f"({utype}){p}[{i}]")
    if size < 4:  # a narrow type is promoted to int by the shift: back to its own (clang's
        # -Wimplicit-int-conversion)
        return f"({utype})(" + " | ".join(parts) + ")"
    return "(" + " | ".join(parts) + ")"


def get_expr(f: FieldSpec, p: str) -> str:
    """C expression reading field ``f`` (fixed size, not bytes) at pointer expression ``p``."""
    size = f.info.size
    u = _uint_expr(p, size, f.byte_order)
    if f.type == "f32":
        return f"fwg_f32_of({u})"
    if f.type == "f64":
        return f"fwg_f64_of({u})"
    if f.info.kind == "int":
        return f"({c_type(f)})fwg_s{8 * size}({u})" if size > 1 else f"(int8_t)fwg_s8({u})"
    return f"({c_type(f)}){u}" if size > 1 else u


def put_stmt(f: FieldSpec, p: str, value: str) -> str:
    """C statements writing ``value`` (of the field's C type) at ``p``."""
    size = f.info.size
    utype = _UTYPES[size]
    if f.type == "f32":
        raw = f"fwg_bits_f32({value})"
    elif f.type == "f64":
        raw = f"fwg_bits_f64({value})"
    else:
        raw = f"({utype}){value}"
    lines = [f"{{ const {utype} u_ = {raw};"]
    for k in range(size):
        i = k if f.byte_order == "little" else size - 1 - k
        lines.append(f" {p}[{i}] = (uint8_t)((u_ >> {8 * k}) & 0xFFu);" if k else
                     f" {p}[{i}] = (uint8_t)(u_ & 0xFFu);")
    lines.append(" }")
    return "".join(lines)


def uint_get(p: str, size: int, order: str) -> str:
    return _uint_expr(p, size, order)


def checksum_c(algo: Algorithm, fn: str) -> str:
    """A C function ``fn(const uint8_t *p, size_t n)`` computing ``algo``."""
    if algo.kind == "sum8":  # four bytes a step in 16-bit lanes; a sum has no byte order
        return (f"static uint32_t {fn}(const uint8_t *p, size_t n)\n{{\n"
                "    uint32_t s = 0;\n    size_t i = 0;\n"
                "    while (i + 4u <= n) {\n"
                "        uint32_t acc = 0;\n        unsigned k;\n"
                "        for (k = 0; k < 64u && i + 4u <= n; k++, i += 4u) {\n"
                "            uint32_t w;\n            memcpy(&w, p + i, sizeof w);\n"
                "            acc += (w & 0x00FF00FFu) + ((w >> 8) & 0x00FF00FFu);\n"
                "        }\n        s += (acc & 0xFFFFu) + (acc >> 16);\n    }\n"
                "    for (; i < n; i++) {\n        s += p[i];\n    }\n"
                "    return s & 0xFFu;\n}\n")
    if algo.kind == "xor8":
        return (f"static uint32_t {fn}(const uint8_t *p, size_t n)\n{{\n"
                "    uint32_t s = 0;\n    size_t i;\n"
                "    for (i = 0; i < n; i++) {\n        s ^= p[i];\n    }\n"
                "    return s;\n}\n")
    width = algo.width
    # The register in the narrowest type that holds it: a uint16_t table of a CRC-16 is
    # half the cache of a uint32_t one, and the width's own wrap-around replaces a mask.
    rtype = {8: "uint8_t", 16: "uint16_t"}.get(width, "uint64_t" if width > 32 else "uint32_t")
    suffix = "u" if width <= 32 else "ull"
    mask = (1 << width) - 1
    crc = crcmod.Crc(algo.poly | (1 << width), initCrc=algo.init, rev=algo.reverse,
                     xorOut=algo.xor_out)
    table = ", ".join(f"0x{v:x}{suffix}" for v in crc.table)
    init = (algo.init ^ algo.xor_out) & mask
    exact = width in (8, 16, 32, 64)
    if algo.reverse:
        step = f"        r = ({rtype})((r >> 8) ^ t[(r ^ p[i]) & 0xFFu]);\n"
    elif width == 8:
        step = "        r = t[(r ^ p[i]) & 0xFFu];\n"
    elif exact:
        step = f"        r = ({rtype})((r << 8) ^ t[((r >> {width - 8}) ^ p[i]) & 0xFFu]);\n"
    else:
        step = (f"        r = ((r << 8) ^ t[((r >> {width - 8}) ^ p[i]) & 0xFFu])"
                f" & 0x{mask:x}{suffix};\n")
    return (f"static {rtype} {fn}(const uint8_t *p, size_t n)\n{{\n"
            f"    static const {rtype} t[256] = {{{table}}};\n"
            f"    {rtype} r = 0x{init:x}{suffix};\n    size_t i;\n"
            f"    for (i = 0; i < n; i++) {{\n{step}    }}\n"
            f"    return ({rtype})(r ^ 0x{algo.xor_out:x}{suffix});\n}}\n")


def describe(desc: FrameDescription) -> str:
    """A comment block naming the frame's layout."""
    parts = [desc.header.hex(" ").upper()] if desc.header else []
    for f in desc.fields:
        size = f"[{f.size}]" if f.size else "[N]" if f.type == "bytes" else ""
        parts.append(f"{f.name} {f.type}{size}")
    if desc.checksum:
        parts.append(f"{desc.checksum.name} {desc.checksum.algorithm}")
    if desc.trailer:
        parts.append(desc.trailer.hex(" ").upper())
    return " | ".join(parts)


class Frame:
    """Names and numbers of one description, for the templates."""

    def __init__(self, desc: FrameDescription, prefix: str) -> None:
        self.d = desc
        self.p = f"{prefix}{desc.name}"
        self.u = self.p.upper()
        ck = desc.checksum
        self.ck = ck
        self.csize = ck.size if ck else 0
        self.h = len(desc.header)
        self.t = len(desc.trailer)
        self.var = desc.length is not None
        self.max = desc.max_size
        self.stored = [f for f in desc.fields if not (desc.length and f.name == desc.length.field)]


def hex_list(data: bytes) -> str:
    return ", ".join(f"0x{b:02X}u" for b in data)


def check_expr(fr: Frame, ptr: str, end: str) -> list[str]:
    """Statements setting ``ok`` to the checksum verdict of the frame at ``ptr``."""
    if fr.ck is None:
        return ["    ok = 1;"]
    start = "0u" if fr.ck.span == "all" else f"{fr.h}u"
    got = uint_get(f"({ptr} + {end} - {fr.t + fr.csize}u)", fr.csize, fr.ck.byte_order) \
        if fr.csize in (1, 2, 4, 8) else uint24(fr, f"({ptr} + {end} - {fr.t + fr.csize}u)")
    return [f"    ok = (uint64_t){fr.p}_ck({ptr} + {start}, {end} - {fr.t + fr.csize}u - {start}) "
            f"== (uint64_t){got};"]


def uint24(fr: Frame, p: str) -> str:
    order = fr.ck.byte_order if fr.ck else "little"
    idx = [0, 1, 2] if order == "little" else [2, 1, 0]
    return (f"((uint32_t){p}[{idx[0]}] | ((uint32_t){p}[{idx[1]}] << 8) | "
            f"((uint32_t){p}[{idx[2]}] << 16))")


def len_get(fr: Frame, ptr: str) -> str:
    d = fr.d
    assert d.length is not None
    f = d.field(d.length.field)
    return uint_get(f"({ptr} + {d.offset_of(f.name)}u)", f.info.size, f.byte_order)
