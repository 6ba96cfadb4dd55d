"""docs/API.md is true: its names import, it lists every public name.

Its examples run with the other docs' (tests/doc_examples.py)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

API = Path(__file__).resolve().parent.parent / "docs" / "API.md"
PACKAGES = ("fwbridge", "fwbridge.protocols", "fwbridge.bridge", "fwbridge.bridge.sim",
            "fwbridge.bridge.sim.models", "fwbridge.bridge.sim.fish", "fwbridge.bridge.robots.arm",
            "fwbridge.bridge.record", "fwbridge.can_bus")


def documented() -> dict[str, set[str]]:
    """Package -> the names of the tables under its headings.

    A table belongs to the last package named in backquotes in a heading or
    in the line that introduces the table.
    """
    out: dict[str, set[str]] = {}
    package = None
    in_code = False
    for line in API.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        named = re.findall(r"`(fwbridge(?:\.\w+)*)`", line)
        if named and (line.startswith("#") or line.rstrip().endswith(":")):
            package = named[-1]
        row = re.match(r"\| `(\w+)` \|", line)
        if row:
            assert package is not None, line
            out.setdefault(package, set()).add(row.group(1))
    return out


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", API.read_text(), re.S)


def test_every_documented_name_imports() -> None:
    for package, names in documented().items():
        module = importlib.import_module(package)
        for name in sorted(names):
            assert getattr(module, name) is not None, f"{package}.{name}"
            exec(f"from {package} import {name}", {})  # the form users write


@pytest.mark.parametrize("package", PACKAGES)
def test_the_doc_lists_each_package_whole(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == documented().get(package, set())


def test_the_parser_sees_the_doc() -> None:
    assert len(examples()) >= 8 and sum(map(len, documented().values())) > 150
