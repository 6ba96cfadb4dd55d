"""Odometry frame, firmware -> host, 19 bytes (PROTOCOLS.md 1, seed 002).

``AA 55 | vx f32 | vy f32 | wz f32 | yaw f32 | sum8`` with the floats
little-endian (the STM32's union byte order) and yaw in **degrees**, as the
seed's host multiplies it by D2R.

NaN and infinity: :func:`decode` accepts them (they are what the wire said)
and reports them through :attr:`OdomFrame.nonfinite`; receivers count such
frames. :func:`encode` refuses them unless ``allow_nonfinite=True``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fwbridge.protocols.builtin_frames import builtin
from fwbridge.protocols.frame_codec import sum8_codec
from fwbridge.protocols.sum8 import HEADER, Sum8Codec

__all__ = ["CODEC", "DESCRIPTION", "FIELDS", "HEADER", "SIZE", "OdomFrame", "decode",
           "encode"]


DESCRIPTION = builtin("odom")  # protocols/frames/odom.toml
FIELDS = DESCRIPTION.field_names  # wire order: vx, vy, wz, yaw_deg


@dataclass(frozen=True, slots=True)
class OdomFrame:
    """Body velocities (m/s, rad/s) and the firmware's yaw in degrees."""

    vx: float
    vy: float
    wz: float
    yaw_deg: float

    @property
    def yaw_rad(self) -> float:
        """Yaw in radians (the seed's ``th *= D2R``)."""
        return math.radians(self.yaw_deg)

    @property
    def nonfinite(self) -> tuple[str, ...]:
        """Names of the fields that are NaN or infinite (empty when all finite)."""
        isfinite = math.isfinite  # the all-finite case is the hot one: receivers ask per frame
        if isfinite(self.vx) and isfinite(self.vy) and isfinite(self.wz) and isfinite(
            self.yaw_deg
        ):
            return ()
        values = (self.vx, self.vy, self.wz, self.yaw_deg)
        return tuple(k for k, v in zip(FIELDS, values) if not isfinite(v))


def _values(frame: OdomFrame) -> tuple[float, ...]:
    return (frame.vx, frame.vy, frame.wz, frame.yaw_deg)


CODEC: Sum8Codec[OdomFrame] = sum8_codec(DESCRIPTION, OdomFrame, _values)
SIZE = CODEC.size  # 19


def encode(frame: OdomFrame, *, allow_nonfinite: bool = False) -> bytes:
    """The 19 bytes of ``frame``."""
    return CODEC.encode(frame, allow_nonfinite=allow_nonfinite)


def decode(data: bytes | bytearray | memoryview) -> OdomFrame:
    """Decode exactly 19 bytes; raises a ``FrameError`` subclass on bad input."""
    return CODEC.decode(data)


def __getattr__(name: str) -> object:
    """``SCHEMA``, the construct schema, built on first use (construct loads slowly)."""
    if name == "SCHEMA":
        return CODEC.schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
