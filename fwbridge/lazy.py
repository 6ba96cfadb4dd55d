"""Lazy package exports (PEP 562): a package lists its public names once, each
loads with its module on first use.

The list is the package's ``if TYPE_CHECKING:`` block of ``from MODULE import
NAME as NAME`` lines: type checkers read it as the re-exports, and
:func:`lazy_exports` reads the same lines (as text, on first use) for the name ->
module table and ``__all__``. So ``import fwbridge.protocols`` stays cheap (no
numpy, no construct) while ``from fwbridge.protocols import ActionReceiver``
works. A package is fwbridge's under its one name only: ``import protocols``
(the folder, from the repository root) fails here instead of loading a second
copy of every module.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["exports_of", "lazy_exports", "moved_module", "one_name"]

# ``from fwbridge.x.y import (\n    Name as Name,\n)`` or on one line; ruff's isort
# writes every re-export in one of these two shapes (tests/test_api_doc.py holds the
# table read here against the one the ast module reads).
_REEXPORT = re.compile(r"^    from (fwbridge[\w.]*) import \(?\s*(\w+) as (\w+),?\s*\)?$", re.M)
_BLOCK = re.compile(r"^if TYPE_CHECKING:\n((?:(?:    .*)?\n)+)", re.M)


def exports_of(source: str) -> dict[str, str]:
    """Public name -> defining module, from a package ``__init__``'s TYPE_CHECKING block."""
    block = _BLOCK.search(source)
    if block is None:
        return {}
    return {alias: module for module, name, alias in _REEXPORT.findall(block.group(1))
            if name == alias}


def lazy_exports(package: str, moved: Mapping[str, str] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public names are the
    re-exports of its TYPE_CHECKING block (read when a name is first asked for).

    ``moved``: old public names that now live in another package (name -> that
    package); they still answer here, with a DeprecationWarning, and are not listed."""
    one_name(package)
    namespace = sys.modules[package].__dict__
    table: dict[str, str] = {}

    def exports() -> dict[str, str]:
        if not table:
            table.update(exports_of(Path(namespace["__file__"]).read_text(encoding="utf-8")))
        return table

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(exports())
        else:
            module = exports().get(name)
            if module is None and moved and name in moved:
                warnings.warn(f"{package}.{name} moved to {moved[name]}.{name}; the old name "
                              "will go in a later release", DeprecationWarning, stacklevel=2)
                return getattr(importlib.import_module(moved[name]), name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports()})

    return __getattr__, __dir__


def one_name(module: str) -> None:
    """Refuse ``module`` unless it is under ``fwbridge``: the client's folders sit at the
    top of the repository, where ``import protocols`` would find them under a second name
    (and a second ``Error`` class that ``except fwbridge.Error`` does not catch)."""
    if module != "fwbridge" and not module.startswith("fwbridge."):
        raise ImportError(f"{module} is part of fwbridge: import it as fwbridge.{module}")


def moved_module(old: str, new: str) -> None:
    """Make ``old`` (a module that moved, run as its alias file) the module ``new``, with
    a DeprecationWarning. A package's submodules are registered under the old name too,
    so ``import old.sub`` finds the one loaded module instead of a second copy."""
    warnings.warn(f"{old} moved to {new}; the old name will go in a later release",
                  DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    for path in getattr(module, "__path__", ()):
        for file in sorted(Path(path).glob("*.py")):
            if file.stem != "__init__":
                sys.modules[f"{old}.{file.stem}"] = importlib.import_module(f"{new}.{file.stem}")
