"""fwbridge: the host side of the serial and CAN links between a robot's computer
and its microcontrollers.

The client's folders install as subpackages of this one name:
:mod:`fwbridge.protocols`, :mod:`fwbridge.bridge`, :mod:`fwbridge.can_bus` and
the command line :mod:`fwbridge.cli`. This module holds the error tree's
root and subtrees (``except fwbridge.Error`` catches every error fwbridge
raises on purpose) and nothing heavy: importing it loads no third-party
library. The public names of each subpackage: ``docs/API.md``.
"""

from __future__ import annotations

from fwbridge.protocols.errors import (
    ArmError,
    CanError,
    CaptureError,
    ConfigError,
    Error,
    FrameError,
    LifecycleError,
    LinkError,
    StateError,
)

__all__ = [
    "ArmError",
    "CanError",
    "CaptureError",
    "ConfigError",
    "Error",
    "FrameError",
    "LifecycleError",
    "LinkError",
    "StateError",
]
