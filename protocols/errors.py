"""The one error tree of fwbridge: every exception it raises on purpose.

:class:`Error` is the root (``except fwbridge.Error``); each area has a
subtree below it, defined here, on the lowest floor, so that every floor can
raise and catch it::

    Error
    ├── FrameError (ValueError)       bad frame input: family, field, bytes
    │   └── LengthError, HeaderError, TrailerError, ChecksumError,
    │       FieldValueError, HexTextError
    ├── ConfigError (ValueError)      bad option, parameter or config file
    ├── StateError (RuntimeError)     a state machine asked the impossible
    ├── LinkError                     a link cannot be opened or went away
    ├── LifecycleError (RuntimeError) a lifecycle transition not allowed now
    ├── CanError                      the CAN layer (bus, frames, nodes)
    │   └── CanFrameError (ValueError) an identifier, DLC or payload out of range
    ├── CaptureError (ValueError)     a capture file that cannot be read/written
    ├── ArmError                      the SCARA arm (reach, safe height, config)
    └── SimStopped                    the simulation was asked to stop

Frame errors name the frame family, the field and the bytes they were
looking at. Receivers never raise these on bad bytes: they count.
``encode()``/``decode()`` raise them on bad arguments.
"""

from __future__ import annotations


def hexbytes(data: bytes | bytearray | memoryview, limit: int = 48) -> str:
    """Space-separated hex of ``data``, cut after ``limit`` bytes."""
    raw = bytes(data)
    text = raw[:limit].hex(" ")
    if len(raw) > limit:
        text += f" … (+{len(raw) - limit} bytes)"
    return text


def needs_posix(what: str) -> str:
    """The message of a part that needs POSIX (ptys, Unix-domain sockets, terminal modes)
    run where there is none (Windows): said when it is used, never at import."""
    return f"needs Linux/macOS: {what}"


__all__ = [
    "ArmError",
    "CanError",
    "CanFrameError",
    "CaptureError",
    "CaptureTruncated",
    "ChecksumError",
    "ConfigError",
    "Error",
    "FieldValueError",
    "FrameError",
    "HeaderError",
    "LengthError",
    "LifecycleError",
    "LinkError",
    "SimStopped",
    "StateError",
    "TrailerError",
    "UnknownName",
    "hexbytes",
    "needs_posix",
]


class Error(Exception):
    """The root of every error fwbridge raises on purpose."""


class FrameError(Error, ValueError):
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


class ConfigError(Error, ValueError):
    """An option, parameter or config file that cannot be used.

    Names what was wrong: a CRC preset, a URL option, a file and its key.
    """


class StateError(Error, RuntimeError):
    """A state machine was asked for something its state does not allow.

    For example: sending a second action frame while the first still waits
    for its answer (stop-and-wait sends one frame at a time).
    """


class LinkError(Error):
    """A link could not be opened or went away; the message says what to do."""


class LifecycleError(Error, RuntimeError):
    """A lifecycle transition that is not allowed from the current state."""


class CanError(Error):
    """The CAN layer: a frame that cannot exist, a bus that refuses an operation."""


class CanFrameError(CanError, ValueError):
    """A CAN frame that cannot exist: identifier, DLC or data length out of range."""


class CaptureError(Error, ValueError):
    """A capture file that cannot be read or written: names the file and the problem."""


class CaptureTruncated(CaptureError):
    """The file ends inside a block (a recorder that died): what came before was read."""


class UnknownName(ConfigError, KeyError):
    """A name looked up that is not there (a field, a built-in description)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ArmError(Error):
    """The SCARA arm: a target out of reach, an unsafe move, a bad ``[arm]`` table."""


class SimStopped(Error):
    """Raised out of a step when the simulation is asked to stop (Webots' ``step() == -1``)."""
