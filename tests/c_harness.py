"""Compile generated C with a small harness and drive it through ctypes."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fwbridge.codegen.c import generate
from fwbridge.protocols.descriptions.loader import FrameDescription

CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wconversion", "-O1"]

_SINK = """
typedef struct { uint32_t *offsets; uint32_t *lens; size_t n, cap; } sink;
static void on_frame(void *ctx, const uint8_t *f, size_t len, uint32_t off)
{
    sink *s = (sink *)ctx;
    (void)f;
    if (s->n < s->cap) {
        s->offsets[s->n] = off;
        s->lens[s->n] = (uint32_t)len;
    }
    s->n++;
}
"""

_HARNESS = """
size_t run_{p}(const uint8_t *data, size_t len, const size_t *cuts, size_t ncuts, int bytewise,
              uint32_t *offsets, uint32_t *lens, size_t cap, uint32_t *stats);
size_t run_{p}(const uint8_t *data, size_t len, const size_t *cuts, size_t ncuts, int bytewise,
              uint32_t *offsets, uint32_t *lens, size_t cap, uint32_t *stats)
{{
    {p}_rx rx;
    sink s;
    size_t prev = 0, k, i;
    s.offsets = offsets; s.lens = lens; s.n = 0; s.cap = cap;
    {p}_rx_init(&rx);
    for (k = 0; k <= ncuts; k++) {{
        size_t cut = k < ncuts ? cuts[k] : len;
        if (cut < prev) {{
            continue;
        }}
        if (bytewise) {{
            for (i = prev; i < cut; i++) {{
                {p}_rx_byte(&rx, data[i], on_frame, &s);
            }}
        }} else {{
            {p}_rx_feed(&rx, data + prev, cut - prev, on_frame, &s);
        }}
        prev = cut;
    }}
    {p}_rx_finish(&rx, on_frame, &s);
    memcpy(stats, &rx.stats, sizeof rx.stats);
    return s.n;
}}
"""

_CODEC = """
int check_{p}(const uint8_t *f, size_t len);
int check_{p}(const uint8_t *f, size_t len) {{ return {p}_check(f, len); }}
size_t reencode_{p}(const uint8_t *f, size_t len, uint8_t *out, size_t cap);
size_t reencode_{p}(const uint8_t *f, size_t len, uint8_t *out, size_t cap)
{{
    {p}_t v;
    {p}_decode(f, len, &v);
    return {p}_encode(&v, out, cap);
}}
"""


def compiler() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc/cc) on this machine")
    return cc


def build(descs: Sequence[FrameDescription], workdir: Path, base: str = "fwframes") -> Any:
    """Generate, compile (-Werror -Wconversion …) and load the C of ``descs``."""
    cc = compiler()
    files = generate(descs, base)
    for name, text in files.items():
        (workdir / name).write_text(text)
    harness = "".join(
        (_HARNESS if d.header else "").format(base=base, p=d.name) + _CODEC.format(p=d.name)
        for d in descs)
    (workdir / "harness.c").write_text(f'#include "{base}.h"\n' + _SINK + harness)
    lib = workdir / "libgen.so"
    proc = subprocess.run([cc, *CFLAGS, "-fPIC", "-shared", "-I", str(workdir),
                           str(workdir / f"{base}.c"), str(workdir / "harness.c"), "-o", str(lib)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return ctypes.CDLL(str(lib))


def run_receiver(lib: Any, name: str, nstats: int, data: bytes, cuts: Sequence[int],
                 bytewise: bool = False) -> tuple[list[tuple[int, bytes]], list[int]]:
    """(offset, frame bytes) of every frame the C receiver accepts, and its counters."""
    cap = len(data) + 1
    offsets = (ctypes.c_uint32 * cap)()
    lens = (ctypes.c_uint32 * cap)()
    stats = (ctypes.c_uint32 * nstats)()
    ccuts = (ctypes.c_size_t * max(1, len(cuts)))(*sorted(cuts))
    fn = getattr(lib, f"run_{name}")
    fn.restype = ctypes.c_size_t
    n = fn(data, ctypes.c_size_t(len(data)), ccuts, ctypes.c_size_t(len(cuts)),
           ctypes.c_int(int(bytewise)), offsets, lens, ctypes.c_size_t(cap), stats)
    frames = [(offsets[k], data[offsets[k]:offsets[k] + lens[k]]) for k in range(n)]
    return frames, list(stats)


def check(lib: Any, name: str, frame: bytes) -> int:
    fn = getattr(lib, f"check_{name}")
    return int(fn(frame, ctypes.c_size_t(len(frame))))


def reencode(lib: Any, name: str, frame: bytes) -> bytes:
    out = (ctypes.c_uint8 * (len(frame) + 16))()
    fn = getattr(lib, f"reencode_{name}")
    fn.restype = ctypes.c_size_t
    n = fn(frame, ctypes.c_size_t(len(frame)), out, ctypes.c_size_t(len(out)))
    return bytes(out[:n])
