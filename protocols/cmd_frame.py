"""Velocity-command frame, host -> firmware, 15 bytes (PROTOCOLS.md 2, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | sum8``, floats little-endian. NaN and
infinity are handled as in :mod:`protocols.odom_frame`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fwbridge.protocols.builtin_frames import builtin
from fwbridge.protocols.frame_codec import sum8_codec
from fwbridge.protocols.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "ZERO", "CmdFrame",
           "decode", "encode"]


DESCRIPTION = builtin("cmd")  # protocols/frames/cmd.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz


@dataclass(frozen=True, slots=True)
class CmdFrame:
    """Requested body velocities: vx, vy in m/s, wz in rad/s."""

    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0

    @property
    def nonfinite(self) -> tuple[str, ...]:
        """Names of the fields that are NaN or infinite (empty when all finite)."""
        isfinite = math.isfinite  # the all-finite case is the hot one: receivers ask per frame
        if isfinite(self.vx) and isfinite(self.vy) and isfinite(self.wz):
            return ()
        values = (self.vx, self.vy, self.wz)
        return tuple(k for k, v in zip(FIELDS, values) if not isfinite(v))


def _values(frame: CmdFrame) -> tuple[float, ...]:
    return (frame.vx, frame.vy, frame.wz)


CODEC: Sum8Codec[CmdFrame] = sum8_codec(DESCRIPTION, CmdFrame, _values)
SIZE = CODEC.size  # 15
ZERO = CmdFrame()


def encode(frame: CmdFrame, *, allow_nonfinite: bool = False) -> bytes:
    """The 15 bytes of ``frame``."""
    return CODEC.encode(frame, allow_nonfinite=allow_nonfinite)


def decode(data: bytes | bytearray | memoryview) -> CmdFrame:
    """Decode exactly 15 bytes; raises a ``FrameError`` subclass on bad input."""
    return CODEC.decode(data)


def __getattr__(name: str) -> object:
    """``SCHEMA``, the construct schema, built on first use (construct loads slowly)."""
    if name == "SCHEMA":
        return CODEC.schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
