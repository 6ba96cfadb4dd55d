"""docs/API.md is true: its names import, it lists every public name; each package's
lazy table (name -> defining module) is its TYPE_CHECKING re-export block.

Its examples run with the other docs' (tests/doc_examples.py)."""

from __future__ import annotations

import ast
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


def lazy_tables(source: str) -> tuple[dict[str, str], dict[str, str]]:
    """A package ``__init__``'s ``_EXPORTS`` table and its TYPE_CHECKING block's
    ``from MODULE import NAME as NAME`` lines, each as name -> module."""
    table: dict[str, str] = {}
    block: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"not a re-export: {ast.unparse(stmt)}"
                    block[alias.name] = stmt.module
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [
                "_EXPORTS"]:
            table = ast.literal_eval(node.value)
    return table, block


def lazy_packages() -> dict[str, Path]:
    from tests.layout import package_modules

    return {name: path for name, path in package_modules().items()
            if path.name == "__init__.py" and "lazy_exports(" in path.read_text()}


def test_every_lazy_table_is_its_type_checking_block() -> None:
    packages = lazy_packages()
    assert set(packages) <= set(PACKAGES) and len(packages) >= 7
    for package, path in packages.items():
        table, block = lazy_tables(path.read_text())
        assert table and table == block, package
        assert importlib.import_module(package).__all__ == sorted(table)


def test_the_table_reader_sees_a_difference() -> None:
    # The control: a name in one place only, and a name pointing at another module.
    source = ("if TYPE_CHECKING:\n    from fwbridge.x import (\n        A as A,\n    )\n"
              "    from fwbridge.y import B as B\n"
              "_EXPORTS = {'A': 'fwbridge.x', 'B': 'fwbridge.z', 'C': 'fwbridge.x'}\n")
    table, block = lazy_tables(source)
    assert block == {"A": "fwbridge.x", "B": "fwbridge.y"}
    assert table == {"A": "fwbridge.x", "B": "fwbridge.z", "C": "fwbridge.x"}
