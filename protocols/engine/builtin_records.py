"""The record types of the built-in sum-8 frames: ``OdomFrame`` and ``CmdFrame``.

Made by :func:`~fwbridge.protocols.engine.records.record_type` from the shipped
descriptions (``protocols/frames/odom.toml``, ``cmd.toml``) like any
description's record; what they add is a mixin (``yaw_rad``) and defaults.
They live below the engine so that the engine makes the one codec of each
built-in description itself (:func:`~fwbridge.protocols.engine.codec_for`);
:mod:`~fwbridge.protocols.odom_frame` and :mod:`~fwbridge.protocols.cmd_frame`
take it from there.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.engine.records import FloatFields, record_type

__all__ = ["RECORD_TYPES", "CmdFrame", "OdomFrame", "OdomProperties"]


class OdomProperties(FloatFields):
    """What an odometry record has besides its fields."""

    __slots__ = ()
    yaw_deg: float

    @property
    def yaw_rad(self) -> float:
        """Yaw in radians (the seed's ``th *= D2R``)."""
        return math.radians(self.yaw_deg)


if TYPE_CHECKING:
    # For the type checker only: the classes below are made from the descriptions at run
    # time (tests/test_sum8_codec.py holds these annotations to the descriptions' fields).
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class OdomFrame(OdomProperties):
        """Body velocities (m/s, rad/s) and the firmware's yaw in degrees."""

        vx: float
        vy: float
        wz: float
        yaw_deg: float

    @dataclass(frozen=True, slots=True)
    class CmdFrame(FloatFields):
        """Requested body velocities: vx, vy in m/s, wz in rad/s."""

        vx: float = 0.0
        vy: float = 0.0
        wz: float = 0.0
else:
    OdomFrame = record_type(
        builtin("odom"), "OdomFrame", base=OdomProperties, module=__name__,
        doc="Body velocities (m/s, rad/s) and the firmware's yaw in degrees.")
    CmdFrame = record_type(
        builtin("cmd"), "CmdFrame", base=FloatFields, module=__name__,
        defaults=dict.fromkeys(builtin("cmd").field_names, 0.0),
        doc="Requested body velocities: vx, vy in m/s, wz in rad/s.")

#: Built-in name -> the record type of its frames (what the engine's codec decodes to).
RECORD_TYPES: dict[str, type] = {"odom": OdomFrame, "cmd": CmdFrame}
