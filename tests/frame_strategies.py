"""Hypothesis strategies: random valid frame descriptions (as TOML) and their frames."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

from fwbridge.protocols.descriptions.loader import TYPES, FrameDescription, loads
from fwbridge.protocols.engine.codec import FrameCodec

ALGORITHMS = ("sum8", "xor8", "crc-8", "crc-16-modbus", "crc-ccitt-false", "xmodem", "crc-32",
              "crc-24", "crc-64")
SCALES = (0.01, 0.1, 0.5, 2.0, 0.001)
NUMERIC = [t for t in TYPES if t != "bytes"]


@st.composite
def description_texts(draw: st.DrawFn, *, max_fields: int = 6, variable: bool | None = None,
                      algorithms: tuple[str, ...] = ALGORITHMS) -> str:
    """The TOML text of a random valid description."""
    header = draw(st.binary(min_size=1, max_size=4))
    trailer = draw(st.one_of(st.just(b""), st.binary(min_size=1, max_size=2)))
    order = draw(st.sampled_from(("little", "big")))
    lines = ["[frame]", 'name = "rnd"', f'header = "{header.hex(" ")}"',
             f'trailer = "{trailer.hex(" ")}"', f'byte_order = "{order}"', ""]
    n = draw(st.integers(1, max_fields))
    var = draw(st.booleans()) if variable is None else variable
    names = [f"f{i}" for i in range(n)]
    len_at = data_at = -1
    if var:
        len_at = draw(st.integers(0, n))
        data_at = draw(st.integers(len_at + 1, n + 1))
        names.insert(len_at, "len")
        names.insert(data_at, "data")
    for name in names:
        lines.append("[[field]]")
        lines.append(f'name = "{name}"')
        if name == "len":
            ltype = draw(st.sampled_from(("u8", "u16", "u32")))
            lines.append(f'type = "{ltype}"')
        elif name == "data":
            lines.append('type = "bytes"')
        else:
            ftype = draw(st.sampled_from([*NUMERIC, "bytes"]))
            lines.append(f'type = "{ftype}"')
            if ftype == "bytes":
                lines.append(f"size = {draw(st.integers(1, 6))}")
            elif ftype in ("u8", "i8", "u16", "i16", "u32", "i32") and draw(st.integers(0, 3)) == 0:
                lines.append(f"scale = {draw(st.sampled_from(SCALES))!r}")
                if draw(st.booleans()):
                    lines.append(f"offset = {draw(st.sampled_from((-5.5, 20.0, 100.0)))!r}")
            elif ftype in ("u8", "i8", "u16") and draw(st.integers(0, 3)) == 0:
                lines.append('enum = { 0 = "zero", 1 = "one", 2 = "two" }')
            if draw(st.booleans()):
                lines.append(f'byte_order = "{draw(st.sampled_from(("little", "big")))}"')
        lines.append("")
    if var and draw(st.integers(0, 2)) == 0:  # alternative headers: as long, distinct
        near = st.integers(0, 255).map(lambda b: header[:-1] + bytes([b]))  # FE EF, FE FF
        alts = draw(st.lists(st.binary(min_size=len(header), max_size=len(header)) | near,
                             min_size=1, max_size=2, unique=True).filter(
                                 lambda hs: header not in hs))
        lines.insert(3, f'alt_headers = [{", ".join(repr(h.hex(" ")) for h in alts)}]'
                     .replace("'", '"'))
    if var:
        counts = draw(st.sampled_from(("data", "payload", "frame")))
        lines += ["[length]", 'field = "len"', f'counts = "{counts}"', 'data = "data"',
                  "max = 200", ""]
    if draw(st.integers(0, 4)):
        algo = draw(st.sampled_from(algorithms))
        span = draw(st.sampled_from(("payload", "after-header", "all")))
        border = draw(st.sampled_from(("little", "big")))
        lines += ["[checksum]", f'algorithm = "{algo}"', f'span = "{span}"',
                  f'byte_order = "{border}"', ""]
    return "\n".join(lines)


def descriptions(**kwargs: Any) -> st.SearchStrategy[FrameDescription]:
    return description_texts(**kwargs).map(lambda text: loads(text, "random.toml"))


@st.composite
def raw_values(draw: st.DrawFn, codec: FrameCodec[Any]) -> list[Any]:
    """Wire values for every field (the length field's is computed by the caller)."""
    d = codec.desc
    out: list[Any] = []
    for f in d.fields:
        if d.length is not None and f.name == d.length.field:
            out.append(0)
        elif f.type == "bytes":
            size = f.size if f.size is not None else draw(st.integers(0, d.max_data))
            out.append(draw(st.binary(min_size=size, max_size=size)))
        elif f.info.kind == "float":
            width = 32 if f.type == "f32" else 64
            v = draw(st.floats(allow_nan=False, allow_infinity=False, width=width))
            out.append(v)
        else:
            lo, hi = f.info.lo, f.info.hi
            if f.scaled:  # keep raw * scale exact enough to round back
                lo, hi = max(lo, -(1 << 31)), min(hi, (1 << 31) - 1)
            out.append(draw(st.integers(lo, hi)))
    return out


def frame_from_raw(codec: FrameCodec[Any], raw: list[Any]) -> Any:
    return codec.make(*raw)


def f32(v: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", v))[0])


def frame_bytes(codec: FrameCodec[Any], raw: list[Any]) -> tuple[bytes, Any]:
    frame = codec.make(*raw)
    return codec.encode(frame, allow_nonfinite=True), frame


def feed(rx: Any, data: bytes, cuts: list[int]) -> list[tuple[int, Any]]:
    """What a receiver gives for ``data`` fed in pieces cut at ``cuts``, then finished."""
    got = []
    prev = 0
    for cut in [*sorted(cuts), len(data)]:
        got += rx.feed(data[prev:cut])
        prev = max(prev, cut)
    got += rx.finish()
    return [(r.offset, r.frame) for r in got]


@st.composite
def streams(draw: st.DrawFn, codec: FrameCodec[Any]) -> tuple[bytes, list[int], list[Any]]:
    """Frames with noise between them: random bytes, header bytes, truncated frames, and
    frames under the description's alternative headers, if it has any."""
    d = codec.desc
    parts: list[bytes] = []
    offsets: list[int] = []
    frames: list[Any] = []
    pos = 0
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 4 if d.alt_headers else 3))
        noise = b""
        if kind == 1:
            noise = draw(st.binary(max_size=12))
        elif kind == 2:
            noise = draw(st.lists(st.sampled_from([*d.header, *d.trailer, 0]), max_size=10)
                         .map(bytes))
        elif kind == 3:
            raw, _ = frame_bytes(codec, draw(raw_values(codec)))
            noise = raw[: draw(st.integers(1, len(raw) - 1))] if len(raw) > 1 else b""
        elif kind == 4:  # a whole frame under another header
            raw, _ = frame_bytes(codec, draw(raw_values(codec)))
            noise = draw(st.sampled_from(d.alt_headers)) + raw[len(d.header):]
        parts.append(noise)
        pos += len(noise)
        raw, _ = frame_bytes(codec, draw(raw_values(codec)))
        parts.append(raw)
        offsets.append(pos)
        frames.append(codec.decode(raw))
        pos += len(raw)
    return b"".join(parts), offsets, frames
