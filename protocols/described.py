"""One frame family from its description: codec and receiver together.

``Described.from_spec("odom")`` or ``Described.from_spec("imu.toml")`` is
what the CLI and the code generators start from. Both parts come from the
factory, :mod:`fwbridge.protocols.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwbridge.protocols import engine
from fwbridge.protocols.descriptions.builtin import resolve
from fwbridge.protocols.descriptions.loader import FrameDescription
from fwbridge.protocols.engine.codec import FrameCodec

if TYPE_CHECKING:
    from fwbridge.protocols.engine import Receiver

__all__ = ["Described", "receiver_for"]


def receiver_for(codec: FrameCodec[Any], max_length: int | None = None) -> Receiver:
    """The receiver of ``codec``'s description: :func:`fwbridge.protocols.engine.receiver_for`."""
    return engine.receiver_for(codec, max_length=max_length)


@dataclass(frozen=True)
class Described:
    """A description with its codec."""

    desc: FrameDescription
    codec: FrameCodec[Any] = field(repr=False)

    @classmethod
    def of(cls, desc: FrameDescription) -> Described:
        return cls(desc, engine.codec_for(desc))

    @classmethod
    def from_spec(cls, spec: str) -> Described:
        """A built-in name or a description file; raises ``DescriptionError``."""
        return cls.of(resolve(spec))

    def receiver(self, max_length: int | None = None) -> Receiver:
        return engine.receiver_for(self.codec, max_length=max_length)
