"""Velocity-command frame, host -> firmware, 15 bytes (PROTOCOLS.md 2, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | sum8``, floats little-endian. The
record type, codec and schema come from ``protocols/frames/cmd.toml``;
NaN and infinity are handled as in :mod:`protocols.odom_frame`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.protocols.builtin_frames import builtin
from fwbridge.protocols.engine import FloatFields, record_type, sum8_codec
from fwbridge.protocols.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "ZERO", "CmdFrame",
           "decode", "encode"]


DESCRIPTION = builtin("cmd")  # protocols/frames/cmd.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz

if TYPE_CHECKING:
    # For the type checker only: the class below is made from the description at run time
    # (tests/test_sum8_codec.py holds these annotations to the description's fields).
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class CmdFrame(FloatFields):
        """Requested body velocities: vx, vy in m/s, wz in rad/s."""

        vx: float = 0.0
        vy: float = 0.0
        wz: float = 0.0
else:
    CmdFrame = record_type(DESCRIPTION, "CmdFrame", base=FloatFields, module=__name__,
                           defaults=dict.fromkeys(FIELDS, 0.0),
                           doc="Requested body velocities: vx, vy in m/s, wz in rad/s.")


CODEC: Sum8Codec[CmdFrame] = sum8_codec(DESCRIPTION, CmdFrame)
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
