"""The descriptions fwbridge ships (``protocols/frames/*.toml``), by name.

The built-in frames (odometry, command, action) and the actuator struct
are built from these files, so a user's description is loaded by the same
code as the built-ins.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fwbridge.protocols.description import (
    DescriptionError,
    FrameDescription,
    from_doc,
    load,
)
from fwbridge.protocols.errors import UnknownName

__all__ = ["BUILTIN_NAMES", "builtin", "builtin_text", "docs_source", "resolve"]

BUILTIN_NAMES = ("odom", "cmd", "action", "actuator")
FRAMES_DIR = Path(__file__).resolve().parent / "frames"


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

    Validated by the same code as a user's, from its TOML parsed at build time
    (:mod:`~fwbridge.protocols.builtin_docs`): the command and odometry frames
    load on every start, and ``tomllib`` would cost more than the rest.
    """
    if name not in BUILTIN_NAMES:
        raise UnknownName(f"no built-in description {name!r}")
    from fwbridge.protocols.builtin_docs import DOCS

    return from_doc(DOCS[name], f"<built-in {name}>", lambda: builtin_text(name))


def docs_source() -> str:
    """The text of :mod:`~fwbridge.protocols.builtin_docs`: every built-in TOML, parsed."""
    import pprint
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    lines = ['"""The built-in descriptions (``frames/*.toml``) as ``tomllib`` parses them.',
             "",
             "Generated: ``python -m fwbridge.protocols.builtin_frames`` writes it again",
             "(tests/test_description.py fails while it differs from the TOML files).",
             '"""', "", "from typing import Any", ""]
    docs = {name: tomllib.loads(builtin_text(name)) for name in BUILTIN_NAMES}
    lines.append("DOCS: dict[str, dict[str, Any]] = " + pprint.pformat(docs, width=96,
                                                                      sort_dicts=False))
    return "\n".join(lines) + "\n"


def resolve(spec: str) -> FrameDescription:
    """A built-in name, or the path of a description file (``.toml``)."""
    if spec in BUILTIN_NAMES:
        return builtin(spec)
    if not spec.endswith(".toml") and not Path(spec).exists():
        raise DescriptionError(spec, 0, "name", f"not a built-in frame ({', '.join(BUILTIN_NAMES)})"
                               " nor a description file")
    return load(spec)


if __name__ == "__main__":
    (Path(__file__).resolve().parent / "builtin_docs.py").write_text(docs_source(),
                                                                   encoding="utf-8")
