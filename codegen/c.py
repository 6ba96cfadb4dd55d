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

from fwbridge.codegen.c_support import c_type, checksum_c, describe, get_expr, put_stmt, uint_get
from fwbridge.protocols.description import FrameDescription

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


class _Frame:
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


def _hex_list(data: bytes) -> str:
    return ", ".join(f"0x{b:02X}u" for b in data)


def _header(fr: _Frame) -> str:
    d, p, u = fr.d, fr.p, fr.u
    out = [f"/* {d.name}: {describe(d)}", f" * {d.doc} */" if d.doc else " */"]
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
            unit = f" /* {f.unit} */" if f.unit else ""
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
        out += _rx_header(fr)
    return "\n".join(out) + "\n"


def _rx_header(fr: _Frame) -> list[str]:
    p, u = fr.p, fr.u
    stats = (["frames", "bytes", "checksum_errors", "trailer_errors", "discarded", "resyncs",
              "nonfinite", "overlapping"] if not fr.var else
             ["frames", "bytes", "discarded", "resyncs", "length_errors", "trailer_errors",
              "checksum_errors", "truncated"])
    out = ["", "/* Receiver counters: the names and meaning of the Python receiver's. */",
           "typedef struct {"]
    out += [f"    uint32_t {s};" for s in stats]
    out.append(f"}} {p}_stats;")
    out.append(f"#define {u}_NSTATS {len(stats)}u")
    out += [
        "",
        "/* Called for each accepted frame: its bytes (valid during the call) and the",
        " * stream offset of its first header byte. */",
        f"typedef void (*{p}_frame_fn)(void *ctx, const uint8_t *frame, size_t len, "
        "uint32_t offset);",
        "",
        "typedef struct {",
        "    uint32_t len;      /* bytes held in buf: one unresolved candidate */",
        "    uint32_t need;     /* bytes buf must hold before it can be decided */",
        "    uint32_t covered;  /* stream position where the last accepted frame ends */",
        "    uint8_t gap;       /* bytes were discarded since the last frame */",
        f"    {p}_stats stats;",
        f"    uint8_t buf[{u}_MAX_SIZE];",
        f"}} {p}_rx;",
        "",
        f"void {p}_rx_init({p}_rx *rx);",
        "/* Feed a chunk (any size); returns the frames it completed. No allocation. */",
        f"size_t {p}_rx_feed({p}_rx *rx, const uint8_t *data, size_t len, {p}_frame_fn fn, "
        "void *ctx);",
        "/* End of stream: decide the held bytes (frames behind an incomplete candidate",
        " * are still found); returns the frames. */",
        f"size_t {p}_rx_finish({p}_rx *rx, {p}_frame_fn fn, void *ctx);",
        "/* Feed one byte (a UART interrupt): the common cases are one store. */",
        f"size_t {p}_rx_push({p}_rx *rx, uint8_t b, {p}_frame_fn fn, void *ctx);",
        f"static inline size_t {p}_rx_byte({p}_rx *rx, uint8_t b, {p}_frame_fn fn, void *ctx)",
        "{",
        "    const uint32_t len = rx->len;",
        "    if (len != 0 && len + 1u < rx->need) {",
        "        rx->buf[len] = b;",
        "        rx->len = len + 1u;",
        "        rx->stats.bytes++;",
        "        return 0;",
        "    }",
        f"    if (len == 0 && b != 0x{fr.d.header[0]:02X}u) {{ /* noise */",
        "        if (!fwg_pos_before(rx->stats.bytes, rx->covered)) {",
        "            rx->stats.discarded++;",
        "            rx->gap = 1;",
        "        }",
        "        rx->stats.bytes++;",
        "        return 0;",
        "    }",
        f"    return {p}_rx_push(rx, b, fn, ctx);",
        "}",
    ]
    return out


def _check_expr(fr: _Frame, ptr: str, end: str) -> list[str]:
    """Statements setting ``ok`` to the checksum verdict of the frame at ``ptr``."""
    if fr.ck is None:
        return ["    ok = 1;"]
    start = "0u" if fr.ck.span == "all" else f"{fr.h}u"
    got = uint_get(f"({ptr} + {end} - {fr.t + fr.csize}u)", fr.csize, fr.ck.byte_order) \
        if fr.csize in (1, 2, 4, 8) else _uint24(fr, f"({ptr} + {end} - {fr.t + fr.csize}u)")
    return [f"    ok = (uint64_t){fr.p}_ck({ptr} + {start}, {end} - {fr.t + fr.csize}u - {start}) "
            f"== (uint64_t){got};"]


def _uint24(fr: _Frame, p: str) -> str:
    order = fr.ck.byte_order if fr.ck else "little"
    idx = [0, 1, 2] if order == "little" else [2, 1, 0]
    return (f"((uint32_t){p}[{idx[0]}] | ((uint32_t){p}[{idx[1]}] << 8) | "
            f"((uint32_t){p}[{idx[2]}] << 16))")


def _source(fr: _Frame) -> str:
    d, p = fr.d, fr.p
    out: list[str] = [f"/* ---- {d.name} ---- */"]
    if fr.h:
        out.append(f"static const uint8_t {p}_hdr[{fr.h}] = {{{_hex_list(d.header)}}};")
    if fr.t:
        out.append(f"static const uint8_t {p}_trl[{fr.t}] = {{{_hex_list(d.trailer)}}};")
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
        out += _receiver(fr)
    return "\n".join(out) + "\n"


def _encode(fr: _Frame) -> list[str]:
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


def _decode(fr: _Frame) -> list[str]:
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


def _len_get(fr: _Frame, ptr: str) -> str:
    d = fr.d
    assert d.length is not None
    f = d.field(d.length.field)
    return uint_get(f"({ptr} + {d.offset_of(f.name)}u)", f.info.size, f.byte_order)


def _check(fr: _Frame) -> list[str]:
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
        out += [f"    value = (uint64_t){_len_get(fr, 'frame')};",
                f"    if ({low}value - {d.data_bias}u + {d.overhead}u != len) {{",
                "        return -1;", "    }"]
    if fr.t:
        out += [f"    if (memcmp(frame + len - {fr.t}u, {p}_trl, {fr.t}u) != 0) {{",
                "        return -3;", "    }"]
    if not (fr.h or fr.t or fr.ck or fr.var):
        out.append("    (void)frame;")
    out += _check_expr(fr, "frame", "len")
    out += ["    return ok ? 0 : -4;", "}", ""]
    return out


def _nonfinite(fr: _Frame, ptr: str) -> str:
    """C expression: 1 when a float field of the frame at ``ptr`` is NaN or infinite."""
    terms = []
    for f in fr.d.fields:
        if f.info.kind != "float":
            continue
        at = fr.d.offset_of(f.name)
        hi, nx = (at + f.info.size - 1, at + f.info.size - 2) if f.byte_order == "little" else (
            at, at + 1)
        mask = 0x80 if f.type == "f32" else 0xF0
        terms.append(f"(({ptr}[{hi}] & 0x7Fu) == 0x7Fu && ({ptr}[{nx}] & 0x{mask:02X}u) == "
                     f"0x{mask:02X}u)")
    return " || ".join(terms) if terms else "0"


def _receiver(fr: _Frame) -> list[str]:
    d, p, u = fr.d, fr.p, fr.u
    h = fr.h
    out = [
        f"void {p}_rx_init({p}_rx *rx)", "{", "    memset(rx, 0, sizeof *rx);",
        f"    rx->need = {h}u;", "}", "",
        "/* n bytes from stream position at leave: those past the last frame were in none. */",
        f"static inline void {p}_drop({p}_rx *rx, uint32_t at, size_t n)", "{",
        "    const int32_t inside = (int32_t)(rx->covered - at);",
        "    size_t k;",
        "    if (inside <= 0) {", "        k = n;",
        "    } else if ((size_t)inside >= n) {", "        k = 0;",
        "    } else {", "        k = n - (size_t)inside;", "    }",
        "    if (k != 0) {", "        rx->stats.discarded += (uint32_t)k;",
        "        rx->gap = 1;", "    }", "}", "",
        "/* The first j >= from where a header (or, at the end, a prefix of it) starts. */",
        f"static inline size_t {p}_next(const uint8_t *q, size_t n, size_t from)", "{",
        "    size_t j = from;",
        "    while (j < n) {",
        f"        const uint8_t *hit = (const uint8_t *)memchr(q + j, 0x{d.header[0]:02X}, "
        "n - j);",
        "        if (hit == NULL) {", "            return n;", "        }",
        "        j = (size_t)(hit - q);",
        f"        if ({_rest_matches(d.header, 'q', 'j', 'n')}) {{", "            return j;",
        "        }",
        "        j++;", "    }", "    return n;", "}", "",
    ]
    out += _judge(fr)
    out += [
        "/* Decide the held bytes as far as they allow. */",
        f"static size_t {p}_process({p}_rx *rx, int final, {p}_frame_fn fn, void *ctx)", "{",
        "    const size_t n = rx->len;",
        "    const uint32_t base0 = rx->stats.bytes - (uint32_t)n;",
        "    size_t frames = 0, s = 0; /* bytes before s are decided */",
        "    while (s < n) {",
        "        const uint8_t *q = rx->buf + s;",
        "        const size_t rem = n - s;",
        "        const uint32_t base = base0 + (uint32_t)s;",
        "        size_t j, adv = 1;",
        f"        if (!({_rest_matches(d.header, 'q', '0', 'rem')})) {{",
        "            j = 1; /* bytes appended broke the header prefix held */",
        f"        }} else if (rem < {h}u) {{",
        "            if (!final) {", f"                rx->need = {h}u;",
        "                break;", "            }",
        "            j = rem;",
        "        } else {",
        f"            const int r = {p}_judge(rx, q, rem, base, final, fn, ctx, &adv);",
        "            if (r == 2) {", "                break;", "            }",
        "            frames += (size_t)r;",
        "            j = adv;",
        "        }",
        f"        j = {p}_next(q, rem, j);",
        f"        {p}_drop(rx, base, j);",
        "        s += j;",
        "    }",
        "    if (s != 0 && s < n) {",
        "        memmove(rx->buf, rx->buf + s, n - s); /* once per call: the rest is undecided */",
        "    }",
        "    rx->len = (uint32_t)(n - s);",
        "    if (rx->len == 0) {", f"        rx->need = {h}u;", "    }",
        "    return frames;",
        "}", "",
        f"size_t {p}_rx_push({p}_rx *rx, uint8_t b, {p}_frame_fn fn, void *ctx)", "{",
        "    rx->buf[rx->len] = b;",
        "    rx->len++;",
        "    rx->stats.bytes++;",
        "    if (rx->len < rx->need) {", "        return 0;", "    }",
        f"    return {p}_process(rx, 0, fn, ctx);",
        "}", "",
        f"size_t {p}_rx_feed({p}_rx *rx, const uint8_t *data, size_t len, {p}_frame_fn fn, "
        "void *ctx)", "{",
        "    size_t i = 0, frames = 0;",
        "    while (i < len) {",
        "        if (rx->len == 0) {",
        "            /* nothing held: find and judge candidates in place, no copy */",
        "            const uint8_t *q = data + i;",
        "            const size_t avail = len - i;",
        f"            const size_t j = ({_rest_matches(d.header, 'q', '0', 'avail')}) ? 0 : "
        f"{p}_next(q, avail, 1);",
        "            if (j != 0) {",
        f"                {p}_drop(rx, rx->stats.bytes, j);",
        "                rx->stats.bytes += (uint32_t)j;",
        "                i += j;",
        "                continue;",
        "            }",
        f"            if (avail >= {h}u) {{",
        "                size_t adv = 1, k;",
        f"                const int r = {p}_judge(rx, q, avail, rx->stats.bytes, 0, fn, ctx, "
        "&adv);",
        "                if (r != 2) {",
        "                    frames += (size_t)r;",
        f"                    k = {p}_next(q, avail, adv); /* one search to the next candidate */",
        f"                    {p}_drop(rx, rx->stats.bytes, k);",
        "                    rx->stats.bytes += (uint32_t)k;",
        "                    i += k;",
        "                    continue;",
        "                }",
        "            } else {",
        f"                rx->need = {h}u;",
        "            }",
        "            /* an undecided candidate: hold it (shorter than the largest frame) */",
        "            memcpy(rx->buf, q, avail);",
        "            rx->len = (uint32_t)avail;",
        "            rx->stats.bytes += (uint32_t)avail;",
        "            break;",
        "        } else {",
        "            const size_t want = rx->need - rx->len;",
        "            const size_t take = len - i < want ? len - i : want;",
        "            memcpy(rx->buf + rx->len, data + i, take);",
        "            rx->len += (uint32_t)take;",
        "            rx->stats.bytes += (uint32_t)take;",
        "            i += take;",
        "            if (rx->len < rx->need) {", "                break;", "            }",
        f"            frames += {p}_process(rx, 0, fn, ctx);",
        "        }",
        "    }",
        "    return frames;",
        "}", "",
        f"size_t {p}_rx_finish({p}_rx *rx, {p}_frame_fn fn, void *ctx)", "{",
        "    size_t frames = 0;",
        "    if (rx->len != 0) {",
        f"        frames = {p}_process(rx, 1, fn, ctx);",
        "    }",
        "    rx->len = 0;",
        f"    rx->need = {h}u;",
        "    return frames;",
        "}", "",
    ]
    del u
    return out


def _rest_matches(header: bytes, q: str, j: str, n: str) -> str:
    """C condition: the bytes at q[j..n) (at most the header's length) match the header."""
    terms = [f"{q}[{j}] == 0x{header[0]:02X}u"] if j == "0" else []
    for k in range(1, len(header)):
        terms.append(f"({n} - {j} <= {k}u || {q}[{j} + {k}u] == 0x{header[k]:02X}u)")
    return " && ".join(terms) if terms else "1"


def _judge(fr: _Frame) -> list[str]:
    """``judge``: 1 accepted (adv: bytes to skip), 0 rejected (adv 1), 2 needs more bytes."""
    d, p, u = fr.d, fr.p, fr.u
    out = [
        "/* The candidate at q (stream position pos, avail bytes there, its header whole):",
        " * 1 accepted (*adv: bytes to move on), 0 rejected (move on 1), 2 needs more. */",
        f"static inline int {p}_judge({p}_rx *rx, const uint8_t *q, size_t avail, uint32_t pos, "
        f"int final, {p}_frame_fn fn, void *ctx, size_t *adv)", "{",
        "    int ok;",
    ]
    if not fr.var:
        out += [
            "    (void)final;",
            f"    if (avail < {u}_SIZE) {{", f"        rx->need = {u}_SIZE;",
            "        return 2;", "    }",
        ]
        if fr.t:
            out += [f"    if (memcmp(q + {u}_SIZE - {fr.t}u, {p}_trl, {fr.t}u) != 0) {{",
                    "        if (!fwg_pos_before(pos, rx->covered)) {",
                    "            rx->stats.trailer_errors++;", "        }",
                    "        return 0;", "    }"]
        out += _check_expr(fr, "q", f"{u}_SIZE")
        out += [
            "    if (!ok) {",
            "        if (!fwg_pos_before(pos, rx->covered)) {",
            "            rx->stats.checksum_errors++;", "        }",
            "        return 0;", "    }",
            "    rx->stats.frames++;",
            f"    rx->stats.nonfinite += ({_nonfinite(fr, 'q')}) ? 1u : 0u;",
            "    if (fwg_pos_before(pos, rx->covered)) {",
            "        rx->stats.overlapping++; /* a false accept cannot swallow a real frame */",
            "    } else if (rx->gap) {", "        rx->stats.resyncs++;", "        rx->gap = 0;",
            "    }",
            f"    rx->covered = pos + {u}_SIZE;",
            "    if (fn != NULL) {", f"        fn(ctx, q, {u}_SIZE, pos);", "    }",
            "    *adv = 1; /* every header position is a candidate, inside frames too */",
            "    return 1;", "}", "",
        ]
        return out
    assert d.length is not None
    lf = d.field(d.length.field)
    len_end = d.offset_of(lf.name) + lf.info.size
    out += [
        "    uint64_t value;",
        "    size_t size;",
        f"    if (avail < {len_end}u) {{",
        "        if (!final) {", f"            rx->need = {len_end}u;", "            return 2;",
        "        }", "        rx->stats.truncated++;", "        return 0;", "    }",
        f"    value = (uint64_t){_len_get(fr, 'q')};",
        f"    if (value > {d.length.max}u"
        + (f" || value < {d.data_bias}u) {{" if d.data_bias else ") {"),
        "        rx->stats.length_errors++;", "        return 0;", "    }",
        f"    size = (size_t)(value - {d.data_bias}u) + {d.overhead}u;",
        "    if (avail < size) {",
        "        if (!final) {", "            rx->need = (uint32_t)size;", "            return 2;",
        "        }", "        rx->stats.truncated++;", "        return 0;", "    }",
    ]
    if fr.t:
        out += [f"    if (memcmp(q + size - {fr.t}u, {p}_trl, {fr.t}u) != 0) {{",
                "        rx->stats.trailer_errors++;", "        return 0;", "    }"]
    out += _check_expr(fr, "q", "size")
    out += [
        "    if (!ok) {", "        rx->stats.checksum_errors++;", "        return 0;", "    }",
        "    rx->stats.frames++;",
        "    if (rx->gap) {", "        rx->stats.resyncs++;", "        rx->gap = 0;", "    }",
        "    rx->covered = pos + (uint32_t)size;",
        "    if (fn != NULL) {", "        fn(ctx, q, size, pos);", "    }",
        "    *adv = size; /* an accepted frame is skipped whole */",
        "    return 1;", "}", "",
    ]
    return out


def generate(descs: Sequence[FrameDescription], base: str, prefix: str = "") -> dict[str, str]:
    """``{base.h: …, base.c: …}`` for the descriptions (distinct names)."""
    frames = [_Frame(d, prefix) for d in descs]
    guard = base.upper().replace("-", "_").replace(".", "_") + "_H"
    names = ", ".join(d.name for d in descs)
    head = [f"/* {base}.h - generated by `fwbridge gen c` from the descriptions of: {names}.",
            " * Do not edit: change the description and generate again. */",
            f"#ifndef {guard}", f"#define {guard}", "", PRELUDE]
    for fr in frames:
        head.append(_header(fr))
    head.append(f"#endif /* {guard} */\n")
    src = [f"/* {base}.c - generated by `fwbridge gen c`; see {base}.h. */",
           f'#include "{base}.h"', ""]
    for fr in frames:
        src.append(_source(fr))
    return {f"{base}.h": "\n".join(head), f"{base}.c": "\n".join(src)}
