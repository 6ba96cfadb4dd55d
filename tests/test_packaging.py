"""The wheel: one top-level name (``fwbridge``), typed, and nothing stale in it.

Built as a user would (``pip wheel``, with build isolation) from a clean copy
of the repository into which an old layout's ``build/lib`` has been planted:
the backend must not pack it. Then installed alone into a fresh venv, where
the old bare names must not import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("protocols", "bridge", "can_bus", "cli_verbs")
OLD_NAMES = (*FOLDERS, "cli")
SKIP = {".git", ".venv", "build", "dist", ".pytest_cache", ".mypy_cache", ".ruff_cache",
        ".hypothesis", "__pycache__"}

pytestmark = pytest.mark.slow


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIP or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_ignore)
    stale = src / "build" / "lib" / "protocols"  # what the old layout left behind
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("STALE = True\n")
    out = tmp / "dist"
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=900, check=False,
    )
    if res.returncode and "Could not find a version" in res.stderr + res.stdout:
        pytest.skip(f"no build requirements reachable: {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    (whl,) = out.glob("fwbridge-*.whl")
    return whl


def test_wheel_holds_fwbridge_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
    assert {n.split("/")[0] for n in names} == {"fwbridge", info}
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(f"{info}/top_level.txt").decode().split() == ["fwbridge"]
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    assert "fwbridge/py.typed" in names
    assert "fwbridge/__init__.py" in names and "fwbridge/cli.py" in names
    assert not any("STALE" in n or n.startswith("protocols/") for n in names)
    # Every module of the client's folders is in the wheel under fwbridge/.
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            assert f"fwbridge/{path.relative_to(ROOT)}" in names, path
    # The console script and the python-can plugins point at the one name.
    for target in ("fwbridge.cli:main", "fwbridge.can_bus.interface:FwBridgeBus",
                   "fwbridge.can_bus.pcapng:PcapngWriter", "fwbridge.can_bus.pcapng:PcapngReader"):
        assert target in entry_points


def test_fresh_venv_imports_fwbridge_not_the_bare_names(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         "--no-index", str(wheel)],
        check=True, timeout=300, capture_output=True,
    )
    # -I: no current directory, no PYTHONPATH, no user site: only the venv.
    probe = (
        "import importlib, fwbridge, fwbridge.protocols, fwbridge.protocols.errors\n"
        f"venv = {str(venv)!r}\n"
        "assert fwbridge.__file__.startswith(venv), fwbridge.__file__\n"
        "assert issubclass(fwbridge.FrameError, fwbridge.Error)\n"
        f"for name in {OLD_NAMES!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "    raise SystemExit(f'import {name} worked')\n"
        "print('ok')\n"
    )
    res = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
