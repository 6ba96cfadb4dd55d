"""The package's layout, read from pyproject.toml: import names and the real files.

The client's folders become ``fwbridge.*`` through ``[tool.setuptools.package-dir]``
and ``[tool.fwbridge-build.modules]`` (``cli.py``). In an editable install
``pkgutil.walk_packages(fwbridge.__path__)`` sees only ``fwbridge/`` itself; tests
that visit every module take the list from here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def tool(root: Path = ROOT) -> dict[str, Any]:
    """pyproject's ``[tool]`` table."""
    with (root / "pyproject.toml").open("rb") as f:
        table: dict[str, Any] = tomllib.load(f)["tool"]
    return table


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package: import name -> its file in the repository."""
    t = tool(root)
    found: dict[str, Path] = {}
    for package, folder in t["setuptools"]["package-dir"].items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(root / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for module, file in t["fwbridge-build"]["modules"].items():
        found[module] = root / file
    return dict(sorted(found.items()))


def package_folders(root: Path = ROOT) -> dict[str, Path]:
    """Every package with an ``__init__.py``: import name -> its folder."""
    return {name: path.parent for name, path in package_modules(root).items()
            if path.name == "__init__.py"}
