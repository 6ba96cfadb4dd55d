"""Velocity-command frame, host -> firmware, 15 bytes (PROTOCOLS.md 2, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | sum8``, floats little-endian. The
record type (:mod:`fwbridge.protocols.engine.builtin_records`), codec and schema (the
engine's) come from ``protocols/frames/cmd.toml``;
NaN and infinity are handled as in :mod:`protocols.odom_frame`.
"""

from __future__ import annotations

from typing import cast

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.engine import codec_for
from fwbridge.protocols.engine.builtin_records import CmdFrame
from fwbridge.protocols.engine.kernels.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "ZERO", "CmdFrame",
           "decode", "encode"]


DESCRIPTION = builtin("cmd")  # protocols/frames/cmd.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz

#: The engine's one codec of the description (its record type: :class:`CmdFrame`).
CODEC = cast("Sum8Codec[CmdFrame]", codec_for(DESCRIPTION))
SIZE = CODEC.size  # 15
ZERO = CmdFrame()


def encode(frame: CmdFrame, *, allow_nonfinite: bool = False) -> bytes:
    """The 15 bytes of ``frame``."""
    return CODEC.encode(frame, allow_nonfinite=allow_nonfinite)


def decode(data: bytes | bytearray | memoryview) -> CmdFrame:
    """Decode exactly 15 bytes; raises a ``FrameError`` subclass on bad input."""
    return CODEC.decode(data)


def __getattr__(name: str) -> object:
    """``SCHEMA``, the description's construct schema, built on first use (construct loads
    slowly)."""
    if name == "SCHEMA":
        return CODEC.schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
