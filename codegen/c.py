"""C99 from frame descriptions: wire layouts, encoders, decoders, receivers.

``generate(descs, base)`` returns ``{"base.h": text, "base.c": text}``: for
each description a packed wire layout (structs of ``uint8_t`` arrays, so no
padding on any ABI, checked by static assertions), a value struct, an
encoder, a decoder, a full check, and for frames with a header a receiver
with the guarantees of the Python ones: any chunking gives the same frames
and counters, backtracking after a rejected candidate, bounded memory (one
largest frame), no allocation. Byte-wise (``_rx_byte``, for a UART
interrupt) and chunk (``_rx_feed``, for DMA buffers) entry points share the
state. The code is clean under ``-std=c99 -Wall -Wextra -Werror -pedantic
-Wconversion``.
"""

from __future__ import annotations

from collections.abc import Sequence

from fwbridge.codegen.c_receiver import receiver, rx_header
from fwbridge.codegen.c_support import (
    Frame,
    c_type,
    check_expr,
    checksum_c,
    comment,
    describe,
    get_expr,
    hex_list,
    len_get,
    put_stmt,
)
from fwbridge.protocols.description import FrameDescription
from fwbridge.protocols.description_names import GenName, clash_error
from fwbridge.protocols.errors import ConfigError

__all__ = ["PRELUDE", "generate"]

PRELUDE = """\
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef FWG_COMMON_DEFINED
#define FWG_COMMON_DEFINED
/* C99 has no _Static_assert; a negative array size fails at compile time. */
#define FWG_STATIC_ASSERT(cond, name) typedef char fwg_static_assert_##name[(cond) ? 1 : -1]
FWG_STATIC_ASSERT(sizeof(float) == 4 && sizeof(double) == 8, fwg_ieee754_sizes);

static inline float fwg_f32_of(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline double fwg_f64_of(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
static inline uint32_t fwg_bits_f32(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline uint64_t fwg_bits_f64(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
static inline int8_t fwg_s8(uint8_t u) { return (int8_t)(u >= 0x80u ? (int)u - 0x100 : (int)u); }
static inline int16_t fwg_s16(uint16_t u)
{
    return (int16_t)(u >= 0x8000u ? (int32_t)u - 0x10000 : (int32_t)u);
}
static inline int32_t fwg_s32(uint32_t u)
{
    return u >= 0x80000000u ? -(int32_t)(~u) - 1 : (int32_t)u;
}
static inline int64_t fwg_s64(uint64_t u)
{
    return u >= 0x8000000000000000ull ? -(int64_t)(~u) - 1 : (int64_t)u;
}
/* Stream positions are 32-bit and wrap: compare them through this. */
static inline int fwg_pos_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
#endif
"""


# The receivers' chunk paths stay out of line: the one-byte path in front of them then
# returns without saving a register (an inlined chunk path makes every byte pay its
# prologue). Only where the compiler has the attribute; elsewhere it is a hint lost.
NOINLINE = """\
#ifndef FWG_NOINLINE
#if defined(__GNUC__)
#define FWG_NOINLINE __attribute__((noinline))
#else
#define FWG_NOINLINE
#endif
#endif
"""


def _header(fr: Frame) -> str:
    d, p, u = fr.d, fr.p, fr.u
    out = [f"/* {d.name}: {describe(d)}", f" * {comment(d.doc)} */" if d.doc else " */"]
    if fr.var:
        out.append(f"#define {u}_MIN_SIZE {d.min_size}u")
        out.append(f"#define {u}_MAX_SIZE {d.max_size}u")
        out.append(f"#define {u}_MAX_DATA {d.max_data}u")
    else:
        out.append(f"#define {u}_SIZE {d.size}u")
        out.append(f"#define {u}_MAX_SIZE {d.size}u")
    for f in d.fields:
        if f.scaled:
            out.append(f"#define {u}_{f.name.upper()}_SCALE {f.scale if f.scale else 1.0!r}")
            out.append(f"#define {u}_{f.name.upper()}_OFFSET {f.offset or 0.0!r}")
        for value, label in (*f.enum, *f.flags):
            out.append(f"#define {u}_{f.name.upper()}_{label.upper()} {value}u")
    # the packed wire layout of the fixed part (up to the variable field)
    out.append("")
    out.append(f"/* Wire layout{' up to the data' if fr.var else ''}: uint8_t arrays only, "
               "so no padding. */")
    out.append("typedef struct {")
    if fr.h:
        out.append(f"    uint8_t header[{fr.h}];")
    for f in d.fields:
        if f.width is None:
            break
        out.append(f"    uint8_t {f.name}[{f.width}];")
    if not fr.var:
        if fr.csize:
            out.append(f"    uint8_t {fr.ck.name if fr.ck else 'checksum'}[{fr.csize}];")
        if fr.t:
            out.append(f"    uint8_t trailer[{fr.t}];")
    out.append(f"}} {p}_wire;")
    wire_size = (d.offset_of(d.length.data) if d.length else d.size)
    out.append(f"FWG_STATIC_ASSERT(sizeof({p}_wire) == {wire_size}u, {p}_wire_size);")
    pos = fr.h
    for f in d.fields:
        if f.width is None:
            break
        out.append(f"FWG_STATIC_ASSERT(offsetof({p}_wire, {f.name}) == {pos}u, "
                   f"{p}_{f.name}_offset);")
        pos += f.width
    # the value struct
    out.append("")
    out.append("/* Values: raw wire values (scaled fields: value = raw * SCALE + OFFSET). */")
    out.append("typedef struct {")
    for f in fr.stored:
        if f.type == "bytes" and f.size is not None:
            out.append(f"    uint8_t {f.name}[{f.size}];")
        elif f.type == "bytes":
            out.append(f"    const uint8_t *{f.name}; /* into the frame (decode) or the caller's "
                       "buffer (encode) */")
            out.append(f"    size_t {f.name}_len;")
        else:
            unit = f" /* {comment(f.unit)} */" if f.unit else ""
            out.append(f"    {c_type(f)} {f.name};{unit}")
    out.append(f"}} {p}_t;")
    out.append("")
    out.append(f"/* Encode into out (cap bytes); returns the frame's size, 0 when it does not "
               f"fit{' or the data is too long' if fr.var else ''}. */")
    out.append(f"size_t {p}_encode(const {p}_t *v, uint8_t *out, size_t cap);")
    out.append(f"/* Decode a frame already checked (by {p}_check or the receiver). */")
    out.append(f"void {p}_decode(const uint8_t *frame, size_t len, {p}_t *out);")
    out.append("/* Full check of exactly len bytes: 0 ok, -1 size or length field, -2 header, "
               "-3 trailer, -4 checksum. */")
    out.append(f"int {p}_check(const uint8_t *frame, size_t len);")
    if fr.h:
        out += rx_header(fr)
    return "\n".join(out) + "\n"


def _source(fr: Frame) -> str:
    d, p = fr.d, fr.p
    out: list[str] = [f"/* ---- {d.name} ---- */"]
    if fr.h:
        out.append(f"static const uint8_t {p}_hdr[{fr.h}] = {{{hex_list(d.header)}}};")
    if fr.t:
        out.append(f"static const uint8_t {p}_trl[{fr.t}] = {{{hex_list(d.trailer)}}};")
    if fr.ck is not None:
        out.append(checksum_c(fr.ck.algo, f"{p}_ck"))
        out.append(f"static void {p}_put_ck(uint8_t *q, uint64_t v)")
        out.append("{")
        for k in range(fr.csize):
            i = k if fr.ck.byte_order == "little" else fr.csize - 1 - k
            out.append(f"    q[{i}] = (uint8_t)((v >> {8 * k}) & 0xFFu);")
        out.append("}")
    out += _encode(fr)
    out += _decode(fr)
    out += _check(fr)
    if fr.h:
        out += receiver(fr)
    return "\n".join(out) + "\n"


def _encode(fr: Frame) -> list[str]:
    d, p, u = fr.d, fr.p, fr.u
    out = [f"size_t {p}_encode(const {p}_t *v, uint8_t *out, size_t cap)", "{"]
    if fr.var:
        assert d.length is not None
        data = d.length.data
        out += ["    size_t n;", "    uint8_t *q = out;",
                f"    if (v->{data}_len > {u}_MAX_DATA || cap < {u}_MIN_SIZE + v->{data}_len) {{",
                "        return 0;", "    }", f"    n = {u}_MIN_SIZE + v->{data}_len;"]
    else:
        out += [f"    const size_t n = {u}_SIZE;", "    uint8_t *q = out;",
                "    if (cap < n) {", "        return 0;", "    }"]
    if fr.h:
        out.append(f"    memcpy(q, {p}_hdr, {fr.h}u);")
        out.append(f"    q += {fr.h};")
    for f in d.fields:
        if d.length is not None and f.name == d.length.field:
            li = f.info
            out.append(f"    {{ const {c_type(f)} len_ = ({c_type(f)})(v->{d.length.data}_len + "
                       f"{d.data_bias}u);")
            out.append("    " + put_stmt(f, "q", "len_") + " }")
            del li
        elif f.type == "bytes" and f.size is None:
            out.append(f"    if (v->{f.name}_len != 0) {{")
            out.append(f"        memcpy(q, v->{f.name}, v->{f.name}_len);")
            out.append("    }")
            out.append(f"    q += v->{f.name}_len;")
            continue
        elif f.type == "bytes":
            out.append(f"    memcpy(q, v->{f.name}, {f.size}u);")
        else:
            out.append("    " + put_stmt(f, "q", f"v->{f.name}"))
        out.append(f"    q += {f.width};")
    if fr.ck is not None:
        start = "out" if fr.ck.span == "all" else f"out + {fr.h}"
        out.append(f"    {p}_put_ck(q, (uint64_t){p}_ck({start}, (size_t)(q - ({start}))));")
        out.append(f"    q += {fr.csize};")
    if fr.t:
        out.append(f"    memcpy(q, {p}_trl, {fr.t}u);")
    out += ["    return n;", "}", ""]
    return out


def _decode(fr: Frame) -> list[str]:
    d, p = fr.d, fr.p
    out = [f"void {p}_decode(const uint8_t *frame, size_t len, {p}_t *out)", "{",
           f"    const uint8_t *q = frame + {fr.h};"]
    if fr.var:
        out.append(f"    const size_t data_len = len - {d.overhead}u;")
    else:
        out.append("    (void)len;")
    for f in d.fields:
        if d.length is not None and f.name == d.length.field:
            out.append(f"    q += {f.width};")
            continue
        if f.type == "bytes" and f.size is None:
            out += [f"    out->{f.name} = q;", f"    out->{f.name}_len = data_len;",
                    "    q += data_len;"]
            continue
        if f.type == "bytes":
            out.append(f"    memcpy(out->{f.name}, q, {f.size}u);")
        else:
            out.append(f"    out->{f.name} = {get_expr(f, 'q')};")
        out.append(f"    q += {f.width};")
    out += ["    (void)q;", "}", ""]
    return out


def _check(fr: Frame) -> list[str]:
    d, p, u = fr.d, fr.p, fr.u
    out = [f"int {p}_check(const uint8_t *frame, size_t len)", "{", "    int ok;"]
    if fr.var:
        out += ["    uint64_t value;",
                f"    if (len < {u}_MIN_SIZE) {{", "        return -1;", "    }"]
    else:
        out += [f"    if (len != {u}_SIZE) {{", "        return -1;", "    }"]
    if fr.h:
        out += [f"    if (memcmp(frame, {p}_hdr, {fr.h}u) != 0) {{", "        return -2;", "    }"]
    if fr.var:
        low = f"value < {d.data_bias}u || " if d.data_bias else ""
        out += [f"    value = (uint64_t){len_get(fr, 'frame')};",
                f"    if ({low}value - {d.data_bias}u + {d.overhead}u != len) {{",
                "        return -1;", "    }"]
    if fr.t:
        out += [f"    if (memcmp(frame + len - {fr.t}u, {p}_trl, {fr.t}u) != 0) {{",
                "        return -3;", "    }"]
    if not (fr.h or fr.t or fr.ck or fr.var):
        out.append("    (void)frame;")
    out += check_expr(fr, "frame", "len")
    out += ["    return ok ? 0 : -4;", "}", ""]
    return out


def generate(descs: Sequence[FrameDescription], base: str, prefix: str = "") -> dict[str, str]:
    """``{base.h: …, base.c: …}`` for the descriptions (distinct names)."""
    guard = base.upper().replace("-", "_").replace(".", "_") + "_H"
    clash = clash_error(descs, prefix, ("c",), [GenName("c", guard, f"the include guard of "
                                                          f"{base}.h", ("frame", None, None))])
    if clash is not None:
        raise ConfigError(clash)
    frames = [Frame(d, prefix) for d in descs]
    names = ", ".join(d.name for d in descs)
    head = [f"/* {base}.h - generated by `fwbridge gen c` from the descriptions of: {names}.",
            " * Do not edit: change the description and generate again. */",
            f"#ifndef {guard}", f"#define {guard}", "", PRELUDE]
    for fr in frames:
        head.append(_header(fr))
    head.append(f"#endif /* {guard} */\n")
    src = [f"/* {base}.c - generated by `fwbridge gen c`; see {base}.h. */",
           f'#include "{base}.h"', "", NOINLINE]
    for fr in frames:
        src.append(_source(fr))
    return {f"{base}.h": "\n".join(head), f"{base}.c": "\n".join(src)}
