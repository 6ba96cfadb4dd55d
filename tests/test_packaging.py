"""The packages: one top-level name (``fwbridge``), real folders, nothing stale, nothing missing.

Everything is built from a ``git clone -c core.symlinks=false`` of this
repository (what a clone on a filesystem without symlinks gets), with the
working tree's uncommitted changes laid over it and an old layout's
``build/lib`` planted in it: the wheel as a user builds it (``pip wheel``,
build isolation), the sdist as a release does (``python -m build --sdist``).
The sdist alone then installs into a fresh venv (its wheel built from the file,
in isolation) and runs there. One build of each, shared by the module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.layout import ROOT, package_folders, package_modules, tool

OLD_NAMES = ("protocols", "bridge", "can_bus", "cli_verbs", "codegen", "cli")
#: What `fwbridge encode cmd --vx 0.2 --vy 0 --wz 0.5` prints (README, "Usage").
CMD_BYTES = "aa 55 cd cc 4c 3e 00 00 00 00 00 00 00 3f 62"

pytestmark = pytest.mark.slow


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          timeout=120).stdout


def _tracked() -> list[str]:
    """The files of the next commit: tracked and new (not ignored), minus the deleted."""
    names = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return sorted(n for n in names if n and os.path.lexists(ROOT / n))


def _built(res: subprocess.CompletedProcess[str]) -> None:
    out = res.stderr + res.stdout
    if res.returncode and ("Could not find a version" in out or "No matching distribution" in out):
        pytest.skip(f"no build requirements reachable: {out.strip()[-300:]}")
    assert res.returncode == 0, out[-3000:]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    src = tmp_path_factory.mktemp("clone") / "fwbridge"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", "-c", "core.symlinks=false",
                    str(ROOT), str(src)], check=True, timeout=120, capture_output=True)
    _git("checkout", "--quiet", "--detach", _git("rev-parse", "HEAD").strip(), cwd=src)
    # The working tree's changes over the commit; a link becomes what git writes without
    # symlinks: a file holding its target.
    for name in _git("ls-files", "-z", "--modified", "--others", "--exclude-standard").split("\0"):
        if not name:
            continue
        here, there = ROOT / name, src / name
        there.unlink(missing_ok=True)
        if here.is_symlink():
            there.parent.mkdir(parents=True, exist_ok=True)
            there.write_text(os.readlink(here))
        elif here.exists():
            there.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(here, there)
    stale = src / "build" / "lib" / "protocols"  # what an old layout left behind
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("STALE = True\n")
    return src


@pytest.fixture(scope="module")
def wheel(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _built(subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(tree)],
        capture_output=True, text=True, timeout=900, check=False))
    (whl,) = out.glob("fwbridge-*.whl")
    return whl


@pytest.fixture(scope="module")
def sdist(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    _built(subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(out), str(tree)],
                          capture_output=True, text=True, timeout=900, check=False))
    (tgz,) = out.glob("fwbridge-*.tar.gz")
    return tgz


@pytest.fixture(scope="module")
def venv(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the sdist installed (built from the file alone, in isolation).

    The runtime dependencies come from this test's environment through a path
    entry (not a site directory: its .pth files, the editable fwbridge among them,
    do not run), so no dependency is downloaded.
    """
    env = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   timeout=300)
    python = env / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = subprocess.run([str(python), "-c", where], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _built(subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         str(sdist)], capture_output=True, text=True, timeout=900, check=False))
    return env


def _wheel_name(repo_path: str) -> str | None:
    """Where the repository's file ``repo_path`` lands in the wheel (None: it does not ship)."""
    t = tool()
    for module, file in t["fwbridge-build"]["modules"].items():
        if repo_path == file:
            return module.replace(".", "/") + ".py"
    best = None
    for package, folder in t["setuptools"]["package-dir"].items():
        if repo_path.startswith(folder + "/") and (best is None or len(folder) > len(best[1])):
            best = (package, folder)
    if best is None:
        return None
    return best[0].replace(".", "/") + repo_path[len(best[1]):]


def test_no_link_is_tracked() -> None:
    # A clone on a filesystem without symlinks gets the same files as any other.
    links = [line for line in _git("ls-files", "-s").splitlines() if line.startswith("120000")]
    assert links == []


def test_packages_lists_every_package() -> None:
    # setuptools builds the packages pyproject lists: a folder missing there would be
    # missing from the wheel (an editable install would still find it).
    listed = tool()["setuptools"]["packages"]
    data_only = {p for p, f in tool()["setuptools"]["package-dir"].items()
                 if not (ROOT / f / "__init__.py").exists()}
    assert sorted(listed) == sorted({*package_folders(), *data_only})


def test_wheel_holds_fwbridge_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
    assert {n.split("/")[0] for n in names} == {"fwbridge", info}
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(f"{info}/top_level.txt").decode().split() == ["fwbridge"]
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        assert zf.read("fwbridge/cli.py") == (ROOT / "cli.py").read_bytes()
    assert "fwbridge/py.typed" in names
    assert not any("STALE" in n for n in names)
    # Every module of the package, under its one name, and nothing else.
    modules = {f"{name.replace('.', '/')}{'/__init__' if path.name == '__init__.py' else ''}.py"
               for name, path in package_modules().items()}
    assert modules == {n for n in names if n.endswith(".py")}
    assert len(modules) > 100
    # The console script and the plugins point at the one name.
    for target in ("fwbridge.cli:main", "fwbridge.can_bus.interface:FwBridgeBus",
                   "fwbridge.bridge.record.can_pcapng:PcapngWriter",
                   "fwbridge.bridge.record.can_pcapng:PcapngReader",
                   "fwbridge.bridge.record.can_mcap:McapCanWriter"):
        assert target in entry_points


def test_wheel_ships_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    # Every file of the package's folders ships: modules and data alike.
    tracked = _tracked()
    shipping = {f: _wheel_name(f) for f in tracked if _wheel_name(f) and "__pycache__" not in f}
    missing = sorted(f for f, n in shipping.items() if n not in names)
    assert missing == []
    # What the docs say ships: each path they name in a package folder is in the wheel.
    named: set[str] = set()
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for token in re.findall(r"[\w./*-]+\.(?:dbc|eds|toml|json)\b", doc.read_text()):
            named.update(str(p.relative_to(ROOT)) for p in ROOT.glob(token.lstrip("./")))
    documented = {f for f in named if _wheel_name(f)}
    assert {"can_bus/fwbridge_actuators.dbc", "docs/foxglove/base.json", "docs/foxglove/can.json",
            "protocols/frames/cmd.toml"} <= documented
    assert sorted(f for f in documented if _wheel_name(f) not in names) == []
    assert "fwbridge/can_bus/eds/actuator.eds" in names


def test_sdist_holds_the_repository(sdist: Path) -> None:
    with tarfile.open(sdist) as tf:
        members = tf.getmembers()
    top = members[0].name.split("/")[0]
    files = {m.name.partition("/")[2] for m in members if m.isfile()}
    assert not any(m.issym() or m.islnk() for m in members)
    # Every file of the repository (so it builds and its tests run from it), nothing stale.
    assert sorted(set(_tracked()) - files) == []
    assert "build_backend/fwbridge_backend.py" in files and "PKG-INFO" in files
    assert not any(f.startswith(("build/", "dist/", ".git/")) or "__pycache__" in f
                   for f in files), top


def test_sdist_installs_alone_and_runs(venv: Path, wheel: Path) -> None:
    fwbridge = venv / "bin" / "fwbridge"
    args = ["encode", "cmd", "--vx", "0.2", "--vy", "0", "--wz", "0.5"]
    res = subprocess.run([str(fwbridge), *args], capture_output=True, text=True, timeout=120,
                         check=False, cwd=venv)
    assert res.returncode == 0 and res.stdout.strip() == CMD_BYTES, res.stderr
    # -I: no current directory, no PYTHONPATH, no user site: the venv only.
    probe = (
        "import importlib, json, fwbridge, fwbridge.can_bus.interface as itf, fwbridge.cli\n"
        "from importlib.resources import files\n"
        "assert issubclass(fwbridge.FrameError, fwbridge.Error)\n"
        "bare = {}\n"
        f"for name in {OLD_NAMES!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        bare[name] = 'imported'\n"
        "    except ModuleNotFoundError:\n"
        "        pass\n"
        "print(json.dumps({'files': [fwbridge.__file__, itf.__file__, fwbridge.cli.__file__],\n"
        "    'bare': bare,\n"
        "    'frames': sorted(p.name for p in files('fwbridge.protocols.frames').iterdir()),\n"
        "    'layouts': sorted(p.name for p in files('fwbridge.foxglove').iterdir())}))\n"
    )
    res = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", probe], capture_output=True,
                         text=True, cwd=venv, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert all(f.startswith(str(venv)) for f in got["files"]), got["files"]
    assert got["bare"] == {}
    assert got["frames"] == sorted(p.name for p in (ROOT / "protocols" / "frames").glob("*.toml"))
    assert got["layouts"] == sorted(p.name for p in (ROOT / "docs" / "foxglove").glob("*.json"))
    # The wheel pip built from the sdist holds what the one built from the tree holds.
    (record,) = venv.glob("lib/python*/site-packages/fwbridge-*.dist-info/RECORD")
    installed = {line.split(",")[0] for line in record.read_text().splitlines()}
    installed = {n for n in installed if n.startswith("fwbridge/") and "__pycache__" not in n}
    assert installed == {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("fwbridge/")}
