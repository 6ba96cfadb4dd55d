"""The package's layout, read from pyproject.toml: import names and the real files;
and the command line's tree of commands (:func:`cli_commands`).

The client's folders become ``fwbridge.*`` through ``[tool.setuptools.package-dir]``
and ``[tool.fwbridge-build.modules]`` (``cli.py``). In an editable install
``pkgutil.walk_packages(fwbridge.__path__)`` sees only ``fwbridge/`` itself; tests
that visit every module take the list from here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
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


def cli_commands() -> Iterator[tuple[list[str], Any]]:
    """Every command and group under ``fwbridge`` (a ``click.Command``), with its path of
    names. Imports the CLI when called, not when this module is imported."""
    import click

    from fwbridge.cli import fwbridge

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None
             ) -> Iterator[tuple[list[str], click.Command]]:
        yield path, cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1] if path else "fwbridge", parent=parent)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    yield from walk(sub, [*path, name], ctx)

    yield from walk(fwbridge, [], None)
