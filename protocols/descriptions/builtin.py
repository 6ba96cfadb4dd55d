"""The descriptions fwbridge ships (``protocols/frames/*.toml``), by name.

The built-in frames (odometry, command, action) and the actuator struct
are built from these files, so a user's description is loaded by the same
code as the built-ins.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fwbridge.protocols.descriptions.loader import DescriptionError, FrameDescription, load, loads
from fwbridge.protocols.errors import UnknownName

__all__ = ["BUILTIN_NAMES", "builtin", "builtin_text", "resolve"]

BUILTIN_NAMES = ("odom", "cmd", "action", "actuator")
FRAMES_DIR = Path(__file__).resolve().parent.parent / "frames"


def builtin_text(name: str) -> str:
    """The TOML text of the built-in description ``name``."""
    if name not in BUILTIN_NAMES:
        raise UnknownName(f"no built-in description {name!r}")
    # Beside this module in the wheel and in the tree (package data). Not through
    # importlib.resources: its readers import zipfile and so threading, which the
    # protocol floor must not pull in.
    return (FRAMES_DIR / f"{name}.toml").read_text(encoding="utf-8")


@cache
def builtin(name: str) -> FrameDescription:
    """The built-in description ``name`` (one of :data:`BUILTIN_NAMES`).

    Loaded from its TOML file by the same code as a user's description: the file
    is the one source (no parse of it is shipped beside it).
    """
    return loads(builtin_text(name), f"<built-in {name}>")


def resolve(spec: str) -> FrameDescription:
    """A built-in name, or the path of a description file (``.toml``)."""
    if spec in BUILTIN_NAMES:
        return builtin(spec)
    if not spec.endswith(".toml") and not Path(spec).exists():
        raise DescriptionError(spec, 0, "name", f"not a built-in frame ({', '.join(BUILTIN_NAMES)})"
                               " nor a description file")
    return load(spec)

