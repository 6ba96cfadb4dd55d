"""Odometry frame, firmware -> host, 19 bytes (PROTOCOLS.md 1, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | yaw f32 | sum8`` with the floats
little-endian (the STM32's union byte order) and yaw in **degrees**, as the
seed's host multiplies it by D2R.

Everything here comes from the description, ``protocols/frames/odom.toml``,
loaded like a user's: the record type's fields
(:mod:`fwbridge.protocols.engine.builtin_records`), the codec and its construct
schema (the engine's, :func:`fwbridge.protocols.engine.codec_for`).

NaN and infinity: :func:`decode` accepts them (they are what the wire said)
and reports them through :attr:`OdomFrame.nonfinite`; receivers count such
frames. :func:`encode` refuses them unless ``allow_nonfinite=True``.
"""

from __future__ import annotations

from typing import cast

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.engine import codec_for
from fwbridge.protocols.engine.builtin_records import OdomFrame
from fwbridge.protocols.engine.kernels.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "OdomFrame", "decode",
           "encode"]


DESCRIPTION = builtin("odom")  # protocols/frames/odom.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz, yaw_deg

#: The engine's one codec of the description (its record type: :class:`OdomFrame`).
CODEC = cast("Sum8Codec[OdomFrame]", codec_for(DESCRIPTION))
SIZE = CODEC.size  # 19


def encode(frame: OdomFrame, *, allow_nonfinite: bool = False) -> bytes:
    """The 19 bytes of ``frame``."""
    return CODEC.encode(frame, allow_nonfinite=allow_nonfinite)


def decode(data: bytes | bytearray | memoryview) -> OdomFrame:
    """Decode exactly 19 bytes; raises a ``FrameError`` subclass on bad input."""
    return CODEC.decode(data)


def __getattr__(name: str) -> object:
    """``SCHEMA``, the description's construct schema, built on first use (construct loads
    slowly)."""
    if name == "SCHEMA":
        return CODEC.schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
