"""The one error tree of fwbridge's protocols.

Every error names the frame family, the field and the bytes it was looking
at, so a user can see at once what was wrong with their input. Receivers
never raise these on bad bytes: they count. ``encode()``/``decode()`` raise
them on bad arguments.
"""

from __future__ import annotations


def hexbytes(data: bytes | bytearray | memoryview, limit: int = 48) -> str:
    """Space-separated hex of ``data``, cut after ``limit`` bytes."""
    raw = bytes(data)
    text = raw[:limit].hex(" ")
    if len(raw) > limit:
        text += f" … (+{len(raw) - limit} bytes)"
    return text


class FrameError(ValueError):
    """Bad frame input: names the frame family, the field and the bytes."""

    def __init__(
        self,
        frame: str,
        field: str,
        reason: str,
        data: bytes | bytearray | memoryview | None = None,
    ) -> None:
        self.frame = frame
        self.field = field
        self.reason = reason
        self.data = bytes(data) if data is not None else None
        msg = f"{frame} frame: {field}: {reason}"
        if self.data is not None:
            msg += f" (bytes: {hexbytes(self.data) or '<none>'})"
        super().__init__(msg)


class LengthError(FrameError):
    """The frame, or a length field, has the wrong size."""


class HeaderError(FrameError):
    """The frame does not start with its header bytes."""


class TrailerError(FrameError):
    """The frame does not end with its trailer bytes."""


class ChecksumError(FrameError):
    """A sum-8 checksum or a CRC does not match."""


class FieldValueError(FrameError):
    """A field value cannot be encoded (out of range, not finite, wrong type)."""


class ConfigError(ValueError):
    """A protocol option is unknown or out of range (e.g. a CRC preset name)."""


class StateError(RuntimeError):
    """A state machine was asked for something its state does not allow.

    For example: sending a second action frame while the first still waits
    for its answer (stop-and-wait sends one frame at a time).
    """
