"""The build backend of fwbridge: setuptools' own, run on a clean ``build/``.

setuptools packs everything under ``build/lib`` into a wheel, including what
an earlier build with another layout left there (top-level ``protocols/``,
``bridge/``, …). So every wheel and sdist starts by removing ``build/``;
the rest is ``setuptools.build_meta`` unchanged (editable installs too).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the whole PEP 517/660 interface)

__all__ = [name for name in dir(_setuptools) if not name.startswith("_")]


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
