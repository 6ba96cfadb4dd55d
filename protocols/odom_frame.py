"""Odometry frame, firmware -> host, 19 bytes (PROTOCOLS.md 1, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | yaw f32 | sum8`` with the floats
little-endian (the STM32's union byte order) and yaw in **degrees**, as the
seed's host multiplies it by D2R.

Everything here comes from the description, ``protocols/frames/odom.toml``:
the record type's fields, the codec and its construct schema
(:mod:`fwbridge.protocols.engine`).

NaN and infinity: :func:`decode` accepts them (they are what the wire said)
and reports them through :attr:`OdomFrame.nonfinite`; receivers count such
frames. :func:`encode` refuses them unless ``allow_nonfinite=True``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fwbridge.protocols.builtin_frames import builtin
from fwbridge.protocols.engine import FloatFields, record_type, sum8_codec
from fwbridge.protocols.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "OdomFrame", "decode",
           "encode"]


DESCRIPTION = builtin("odom")  # protocols/frames/odom.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz, yaw_deg


class OdomProperties(FloatFields):
    """What an odometry record has besides its fields."""

    __slots__ = ()
    yaw_deg: float

    @property
    def yaw_rad(self) -> float:
        """Yaw in radians (the seed's ``th *= D2R``)."""
        return math.radians(self.yaw_deg)


if TYPE_CHECKING:
    # For the type checker only: the class below is made from the description at run time
    # (tests/test_sum8_codec.py holds these annotations to the description's fields).
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class OdomFrame(OdomProperties):
        """Body velocities (m/s, rad/s) and the firmware's yaw in degrees."""

        vx: float
        vy: float
        wz: float
        yaw_deg: float
else:
    OdomFrame = record_type(
        DESCRIPTION, "OdomFrame", base=OdomProperties, module=__name__,
        doc="Body velocities (m/s, rad/s) and the firmware's yaw in degrees.")


CODEC: Sum8Codec[OdomFrame] = sum8_codec(DESCRIPTION, OdomFrame)
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
