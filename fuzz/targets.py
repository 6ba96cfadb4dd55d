"""Fuzz targets: one function per parser of untrusted bytes.

The invariant for each: decode, count, or raise the project's own documented
error; never any other exception, never a hang, memory bounded. A target
raises ``AssertionError`` when the invariant breaks (atheris reports any
uncaught exception as a crash). Targets import lazily so that a tree without
some part (say, the CAN layer) can still fuzz the rest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

#: Bytes a receiver may hold back between calls: one frame (bounded memory).
MAX_PENDING = 1 << 12


def _split(data: bytes) -> list[bytes]:
    """Use the first byte to choose a chunking, so the fuzzer explores them."""
    if not data:
        return []
    step = (data[0] % 23) + 1
    body = data[1:]
    return [body[i : i + step] for i in range(0, len(body), step)]


def sum8_receiver(data: bytes) -> None:
    from protocols import cmd_frame, odom_frame
    from protocols.sum8_receiver import Sum8Receiver

    for codec in (odom_frame.CODEC, cmd_frame.CODEC):
        rx = Sum8Receiver(codec)
        frames = 0
        for chunk in _split(data):
            got = rx.feed(chunk)
            frames += len(got)
            for r in got:
                assert codec.encode(r.frame, allow_nonfinite=True) == bytes(
                    data[1:][r.offset : r.offset + codec.size]
                ) or r.frame.nonfinite
            assert rx.pending < codec.size
        rx.finish()
        assert rx.stats.frames == frames
        assert rx.stats.bytes == max(0, len(data) - 1)


def sum8_decode(data: bytes) -> None:
    from protocols import odom_frame
    from protocols.errors import FrameError

    with contextlib.suppress(FrameError):
        odom_frame.decode(data)
    with contextlib.suppress(FrameError):
        odom_frame.CODEC.decode_with_schema(data)


def hex_parser(data: bytes) -> None:
    from protocols.hextext import HexTextError, looks_like_hex, parse_hex

    text = data.decode("utf-8", errors="replace")
    try:
        out = parse_hex(text)
    except HexTextError:
        return
    assert len(out) * 2 <= len(text)
    looks_like_hex(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "sum8_receiver": sum8_receiver,
    "sum8_decode": sum8_decode,
    "hex_parser": hex_parser,
}
