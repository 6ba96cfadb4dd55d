"""mypy over the whole fwbridge package, each module under its import name.

The client's folders become ``fwbridge.*`` through pyproject's ``package-dir``,
which mypy does not read: it names a module after its path, and finds
``fwbridge.protocols`` only in a folder ``fwbridge/protocols/``. This hands
mypy every file of the package with its module name from the same tables
(``[tool.setuptools.package-dir]``, ``[tool.fwbridge-build.modules]``), so
``protocols/errors.py`` is checked as ``fwbridge.protocols.errors`` and messages
name the real files. The options are ``[tool.mypy]``; arguments are passed on
to mypy. ``make lint`` runs it: ``python build_backend/typecheck.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def package_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package: import name -> its file in the repository."""
    with (root / "pyproject.toml").open("rb") as f:
        tool = tomllib.load(f)["tool"]
    found: dict[str, Path] = {}
    for package, folder in tool["setuptools"]["package-dir"].items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(root / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for module, file in tool["fwbridge-build"]["modules"].items():
        found[module] = root / file
    return found


def main(argv: list[str]) -> int:
    sources, options = process_options(
        ["--config-file", str(ROOT / "pyproject.toml"), *argv], require_targets=False)
    sources += [BuildSource(str(path), module) for module, path in package_files().items()]
    try:
        messages = build.build(sources, options).errors
    except CompileError as exc:  # a blocking error (syntax): mypy's own messages
        messages = exc.messages
    for line in messages:
        print(line)
    errors = [m for m in messages if ": error:" in m]
    if errors:
        files = len({m.partition(":")[0] for m in errors})
        print(f"Found {len(errors)} errors in {files} files "
              f"(checked {len(sources)} source files)")
        return 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
