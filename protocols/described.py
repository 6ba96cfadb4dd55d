"""One frame family from its description: codec and receiver together.

``Described.from_spec("odom")`` or ``Described.from_spec("imu.toml")`` is
what the CLI and the code generators start from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwbridge.protocols.builtin_frames import resolve
from fwbridge.protocols.description import FrameDescription
from fwbridge.protocols.frame_codec import FrameCodec

if TYPE_CHECKING:
    from fwbridge.protocols.frame_receiver import FixedReceiver
    from fwbridge.protocols.length_receiver import LengthReceiver

__all__ = ["Described", "receiver_for"]


def receiver_for(codec: FrameCodec[Any], max_length: int | None = None) -> (
        FixedReceiver | LengthReceiver):
    """The receiver a description calls for: fixed-size or length-directed."""
    if codec.desc.length is not None:
        from fwbridge.protocols.length_receiver import LengthReceiver

        return LengthReceiver(codec, max_length)
    from fwbridge.protocols.frame_receiver import FixedReceiver  # numpy: only when receiving

    return FixedReceiver(codec)


@dataclass(frozen=True)
class Described:
    """A description with its codec."""

    desc: FrameDescription
    codec: FrameCodec[Any] = field(repr=False)

    @classmethod
    def of(cls, desc: FrameDescription) -> Described:
        return cls(desc, FrameCodec(desc))

    @classmethod
    def from_spec(cls, spec: str) -> Described:
        """A built-in name or a description file; raises ``DescriptionError``."""
        return cls.of(resolve(spec))

    def receiver(self, max_length: int | None = None) -> FixedReceiver | LengthReceiver:
        return receiver_for(self.codec, max_length)
