"""The build backend of fwbridge: setuptools' own, plus one mapping it lacks.

The client's folders (``protocols/``, ``bridge/``, …) become ``fwbridge.*`` through
setuptools' ``package-dir`` (pyproject.toml). ``package-dir`` maps packages only,
and ``cli.py`` is a module at the top of the repository that installs as
``fwbridge.cli``; ``[tool.fwbridge-build.modules]`` names such modules, and:

- :class:`BuildPy` (setuptools' ``build_py``, declared in ``[tool.setuptools.cmdclass]``)
  adds them to their package, so wheels and sdists hold ``fwbridge/cli.py``;
- :func:`build_editable` adds to setuptools' editable wheel a finder that maps
  each to its real file, as setuptools' own finder maps the packages.

Every wheel and sdist starts by removing ``build/``: setuptools packs
everything under ``build/lib`` into a wheel, including what an earlier build
left there. The rest is ``setuptools.build_meta`` unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the whole PEP 517/660 interface)
from setuptools.command.build_py import build_py as _build_py

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover  (tomli: a build requirement on 3.10)
    import tomli as tomllib

__all__ = [*(name for name in dir(_setuptools) if not name.startswith("_")), "BuildPy"]


def modules(root: Path = Path()) -> dict[str, str]:
    """``[tool.fwbridge-build.modules]``: dotted module name -> its file, relative to the root."""
    with (root / "pyproject.toml").open("rb") as f:
        table: dict[str, str] = tomllib.load(f)["tool"]["fwbridge-build"]["modules"]
    return table


class BuildPy(_build_py):
    """setuptools' ``build_py``, with the single-file modules of pyproject's table."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        found: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        for name, path in modules().items():
            parent, _, module = name.rpartition(".")
            if parent == package:
                found.append((package, module, path))
        return found


_FINDER = '''\
"""fwbridge's single-file modules in this editable install: {names}."""
import sys
from importlib.util import spec_from_file_location

MODULES = {mapping!r}


class Finder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        file = MODULES.get(fullname)
        return None if file is None else spec_from_file_location(fullname, file)


def install():
    if Finder not in sys.meta_path:
        sys.meta_path.append(Finder)
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _add_to_wheel(wheel: Path, files: dict[str, bytes]) -> None:
    """Add ``files`` to ``wheel`` and to its RECORD (rewritten whole: zip entries are final)."""
    with zipfile.ZipFile(wheel) as zf:
        entries = {info.filename: zf.read(info) for info in zf.infolist()}
    (record,) = (n for n in entries if n.endswith(".dist-info/RECORD"))
    lines = entries[record].decode().splitlines()
    entries.update(files)
    lines[-1:-1] = [_record_line(name, data) for name, data in files.items()]
    entries[record] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


def _clean() -> None:
    shutil.rmtree(Path("build"), ignore_errors=True)


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    """setuptools' ``build_wheel`` after removing ``build/``."""
    _clean()
    return str(_setuptools.build_wheel(wheel_directory, config_settings, metadata_directory))


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """setuptools' ``build_sdist`` after removing ``build/``."""
    _clean()
    return str(_setuptools.build_sdist(sdist_directory, config_settings))


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    """setuptools' editable wheel, plus a finder for the single-file modules (real files)."""
    name = str(_setuptools.build_editable(wheel_directory, config_settings, metadata_directory))
    mapping = {module: str(Path(path).resolve()) for module, path in modules().items()}
    finder = "__editable___fwbridge_modules_finder"
    _add_to_wheel(Path(wheel_directory, name), {
        f"{finder}.py": _FINDER.format(names=", ".join(mapping), mapping=mapping).encode(),
        "__editable__.fwbridge_modules.pth": f"import {finder}; {finder}.install()\n".encode(),
    })
    return name
