"""The receiver part of the C generator: state, byte and chunk entry points, judging.

The C receivers keep the Python receivers' contract (any chunking gives the
same frames, offsets and counters; backtracking; one largest frame of
memory): the tests hold them to it on random descriptions and streams.
"""

from __future__ import annotations

import math
import sys

from fwbridge.codegen.c_support import Frame, check_expr, get_expr, len_get
from fwbridge.protocols.descriptions.loader import FieldSpec, FrameDescription
from fwbridge.protocols.engine.receiver_counters import (
    FixedReceiverStats,
    LengthReceiverStats,
    counter_names,
)

__all__ = ["any_header", "judge", "receiver", "rest_matches", "rx_header"]


def rx_header(fr: Frame) -> list[str]:
    p, u = fr.p, fr.u
    stats = counter_names(LengthReceiverStats if fr.var else FixedReceiverStats)
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
        f"    if (len == 0 && {' && '.join(f'b != 0x{c:02X}u' for c in _firsts(fr.d))}) "
        "{ /* noise */",
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


def nonfinite(fr: Frame, ptr: str) -> str:
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
    for f in fr.d.fields:
        # a scaled value is raw * scale + offset in double, as the Python receivers decode
        # it: where a finite raw value can make it infinite, the frame counts as nonfinite
        if not f.scaled or not _may_overflow(f):
            continue
        value = (f"((double){get_expr(f, f'({ptr} + {fr.d.offset_of(f.name)}u)')} * "
                 f"{f.scale if f.scale is not None else 1.0!r} + {f.offset or 0.0!r})")
        terms.append(f"!({value} <= {_DBL_MAX} && {value} >= -{_DBL_MAX})")
    return " || ".join(terms) if terms else "0"


_DBL_MAX = "1.7976931348623157e308"


def _may_overflow(f: FieldSpec) -> bool:
    """Whether a finite raw value of scaled field ``f`` can decode to an infinite value."""
    scale, offset = (f.scale if f.scale is not None else 1.0), f.offset or 0.0
    top = {"f32": 3.4028234663852886e38, "f64": sys.float_info.max}.get(
        f.type, float(max(abs(f.info.lo), abs(f.info.hi))))
    return any(math.isinf(r * scale + offset) for r in (top, -top))


def receiver(fr: Frame) -> list[str]:
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
    ]
    firsts = _firsts(d)
    if len(firsts) == 1:  # every header starts with one byte: memchr finds the candidates
        out += [
            "    while (j < n) {",
            f"        const uint8_t *hit = (const uint8_t *)memchr(q + j, 0x{firsts[0]:02X}, "
            "n - j);",
            "        if (hit == NULL) {", "            return n;", "        }",
            "        j = (size_t)(hit - q);",
            f"        if ({any_header(d, 'q', 'j', 'n', first_known=True)}) {{",
            "            return j;", "        }",
            "        j++;", "    }", "    return n;", "}", "",
        ]
    else:  # headers starting with different bytes: one pass over the bytes
        out += [
            "    for (; j < n; j++) {",
            f"        if ({any_header(d, 'q', 'j', 'n')}) {{", "            return j;", "        }",
            "    }", "    return n;", "}", "",
        ]
    out += judge(fr)
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
        f"        if (!({any_header(d, 'q', '0', 'rem')})) {{",
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
        "/* rx_feed's chunk path (one byte goes to the inline path of rx_byte). */",
        f"static FWG_NOINLINE size_t {p}_feed({p}_rx *rx, const uint8_t *data, size_t len, "
        f"{p}_frame_fn fn, void *ctx)", "{",
        "    size_t i = 0, frames = 0;",
        "    while (i < len) {",
        "        if (rx->len == 0) {",
        "            /* nothing held: find and judge candidates in place, no copy */",
        "            const uint8_t *q = data + i;",
        "            const size_t avail = len - i;",
        f"            const size_t j = ({any_header(d, 'q', '0', 'avail')}) ? 0 : "
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
        f"size_t {p}_rx_feed({p}_rx *rx, const uint8_t *data, size_t len, {p}_frame_fn fn, "
        "void *ctx)", "{",
        "    if (len == 1) {",
        "        /* one byte at a time (a UART interrupt): the inline path stores it and",
        "         * calls nothing until the held candidate can be decided */",
        f"        return {p}_rx_byte(rx, data[0], fn, ctx);",
        "    }",
        f"    return {p}_feed(rx, data, len, fn, ctx);",
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


def rest_matches(header: bytes, q: str, j: str, n: str, first_known: bool = False) -> str:
    """C condition: the bytes at q[j..n) (at most the header's length) match the header;
    its first byte is not compared when ``first_known`` (a memchr found it)."""
    terms = [] if first_known else [f"{q}[{j}] == 0x{header[0]:02X}u"]
    for k in range(1, len(header)):
        terms.append(f"({n} - {j} <= {k}u || {q}[{j} + {k}u] == 0x{header[k]:02X}u)")
    return " && ".join(terms) if terms else "1"


def any_header(d: FrameDescription, q: str, j: str, n: str, first_known: bool = False) -> str:
    """C condition: q[j..n) begins like the header or one of the alternative headers."""
    headers = (d.header, *d.alt_headers)
    if first_known:  # only the headers starting with the byte found
        headers = tuple(h for h in headers if h[0] == d.header[0])
    conds = [rest_matches(h, q, j, n, first_known) for h in headers]
    return conds[0] if len(conds) == 1 else " || ".join(f"({c})" for c in conds)


def _firsts(d: FrameDescription) -> list[int]:
    """The bytes a header (the description's or an alternative) starts with."""
    return sorted({h[0] for h in (d.header, *d.alt_headers)})


def judge(fr: Frame) -> list[str]:
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
        out += check_expr(fr, "q", f"{u}_SIZE")
        out += [
            "    if (!ok) {",
            "        if (!fwg_pos_before(pos, rx->covered)) {",
            "            rx->stats.checksum_errors++;", "        }",
            "        return 0;", "    }",
            "    rx->stats.frames++;",
            f"    rx->stats.nonfinite += ({nonfinite(fr, 'q')}) ? 1u : 0u;",
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
    head_end = d.offset_of(d.length.data)  # the header and every field before the data
    alts = bool(d.alt_headers)
    # Under an alternative header a candidate is judged like one under the header, but
    # only a whole one (length and trailer right) counts: as a header error, never taken.
    mine = "primary && " if alts else ""
    out += ["    uint64_t value;", "    size_t size;"]
    if alts:
        out.append(f"    const int primary = memcmp(q, {p}_hdr, {fr.h}u) == 0;")
    out += [
        f"    if (avail < {head_end}u) {{",
        "        if (!final) {", f"            rx->need = {head_end}u;", "            return 2;",
        "        }",
        *_count(mine, "truncated"), "        return 0;", "    }",
        f"    value = (uint64_t){len_get(fr, 'q')};",
        f"    if (value > {d.length.max}u"
        + (f" || value < {d.data_bias}u) {{" if d.data_bias else ") {"),
        *_count(mine, "length_errors"), "        return 0;", "    }",
        f"    size = (size_t)(value - {d.data_bias}u) + {d.overhead}u;",
        "    if (avail < size) {",
        "        if (!final) {", "            rx->need = (uint32_t)size;", "            return 2;",
        "        }", *_count(mine, "truncated"), "        return 0;", "    }",
    ]
    if fr.t:
        out += [f"    if (memcmp(q + size - {fr.t}u, {p}_trl, {fr.t}u) != 0) {{",
                *_count(mine, "trailer_errors"), "        return 0;", "    }"]
    out += check_expr(fr, "q", "size")
    if alts:
        out += [
            "    if (!primary || !ok) {",
            "        if (!primary) {", "            rx->stats.header_errors++;", "        }",
            "        if (!ok) {", "            rx->stats.checksum_errors++;", "        }",
            "        return 0;", "    }",
        ]
    else:
        out += ["    if (!ok) {", "        rx->stats.checksum_errors++;", "        return 0;",
                "    }"]
    out += [
        "    rx->stats.frames++;",
        "    if (rx->gap) {", "        rx->stats.resyncs++;", "        rx->gap = 0;", "    }",
        "    rx->covered = pos + (uint32_t)size;",
        "    if (fn != NULL) {", "        fn(ctx, q, size, pos);", "    }",
        "    *adv = size; /* an accepted frame is skipped whole */",
        "    return 1;", "}", "",
    ]
    return out


def _count(cond: str, counter: str) -> list[str]:
    """Count a rejection (``cond``: ``"primary && "``, only under the header)."""
    if not cond:
        return [f"        rx->stats.{counter}++;"]
    return [f"        if ({cond[:-4]}) {{", f"            rx->stats.{counter}++;", "        }"]
