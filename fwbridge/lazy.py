"""Lazy package exports (PEP 562): a package lists its public names once, each
loads with its module on first use.

A package ``__init__`` passes :func:`lazy_exports` a plain table, public name ->
defining module, and repeats the same names in an ``if TYPE_CHECKING:`` block of
``from MODULE import NAME as NAME`` lines for type checkers (tests/test_api_doc.py
holds the two equal). So ``import fwbridge.protocols`` stays cheap (no numpy, no
construct) while ``from fwbridge.protocols import ActionReceiver`` works. A
package is fwbridge's under its one name only: ``import protocols`` (the folder,
from the repository root) fails here instead of loading a second copy of every
module.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "one_name"]


def lazy_exports(package: str, exports: Mapping[str, str],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public names are the keys
    of ``exports`` (name -> the module that defines it)."""
    one_name(package)
    namespace = sys.modules[package].__dict__
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(table)
        else:
            module = table.get(name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__


def one_name(module: str) -> None:
    """Refuse ``module`` unless it is under ``fwbridge``: the client's folders sit at the
    top of the repository, where ``import protocols`` would find them under a second name
    (and a second ``Error`` class that ``except fwbridge.Error`` does not catch)."""
    if module != "fwbridge" and not module.startswith("fwbridge."):
        raise ImportError(f"{module} is part of fwbridge: import it as fwbridge.{module}")

