"""Floors hold at import time: the pure parts import no I/O machinery.

Each check runs in a fresh interpreter (``sys.modules`` of this one is full
of everything the other tests imported).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: What a sans-I/O import must not bring along: ports, buses, event loops, threads.
IO_MODULES = ("serial", "serial_asyncio", "can", "asyncio", "threading")


def imported_after(code: str) -> set[str]:
    """The top-level modules present in a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)
    return {name.partition(".")[0] for name in json.loads(res.stdout.splitlines()[-1])}


@pytest.mark.parametrize(
    "code",
    [
        "import fwbridge",
        "import fwbridge.protocols",
        # every module of the protocol floor
        "import importlib, pkgutil, fwbridge.protocols as p\n"
        "for m in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module(f'fwbridge.protocols.{m.name}')",
        "import fwbridge.bridge.base_core",
        "import fwbridge.bridge.odometry",
        "import fwbridge.bridge.config",
        "import fwbridge.bridge.sinks, fwbridge.bridge.backoff",
    ],
    ids=["fwbridge", "protocols-package", "protocols-all", "base_core", "odometry", "config",
         "sinks-backoff"],
)
def test_pure_imports_pull_no_io(code: str) -> None:
    assert imported_after(code) & set(IO_MODULES) == set()


def test_package_roots_are_cheap() -> None:
    # `import fwbridge` (the error tree) and the protocols package name load
    # no third-party library at all; heavy names load on first use.
    third_party = {"numpy", "construct", "crcmod", "click", "rich", *IO_MODULES}
    assert imported_after("import fwbridge, fwbridge.protocols") & third_party == set()


def test_a_control_that_can_fail() -> None:
    # The probe does see an I/O import when there is one.
    assert "serial" in imported_after("import fwbridge.bridge.transports")


def test_no_test_module_imports_another() -> None:
    # Shared test parts live in tests/helpers.py; test modules do not import each other.
    import ast
    from pathlib import Path

    offenders = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.test_"):
                offenders.append(f"{path.name}: from {node.module} import …")
    assert offenders == []


def test_no_private_name_is_imported_across_modules() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for folder in ("protocols", "bridge", "can_bus", "cli_verbs", "bench", "fuzz", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                        ("fwbridge", "tests", "bench", "fuzz")):
                    offenders += [f"{path.relative_to(root)}: {node.module}.{a.name}"
                                  for a in node.names if a.name.startswith("_")]
    assert offenders == []


def test_no_folder_imports_under_a_second_name() -> None:
    # From the repository root (the current directory is on sys.path), each client
    # folder and cli.py refuse their bare names: otherwise `protocols.errors.Error`
    # would be a second class that `except fwbridge.Error` does not catch.
    from tests.layout import ROOT, tool

    t = tool()
    bare = [folder for folder in t["setuptools"]["package-dir"].values() if "/" not in folder
            and (ROOT / folder / "__init__.py").exists() and folder != "fwbridge"]
    bare += [Path(file).stem for file in t["fwbridge-build"]["modules"].values()]
    assert {"protocols", "bridge", "can_bus", "cli_verbs", "codegen", "cli"} <= set(bare)
    probe = (
        "import importlib, json, sys\n"
        "out = {}\n"
        f"for name in {[*bare, 'protocols.errors', 'bridge.sim.fish']!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        out[name] = 'imported'\n"
        "    except ImportError as exc:\n"
        "        out[name] = str(exc)\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    for name, outcome in json.loads(res.stdout).items():
        top = name.partition(".")[0]
        # The folders' own refusal; with fwbridge installed (not editable) from elsewhere,
        # ./fwbridge of the root shadows it and lacks the folders: refused all the same.
        assert outcome in (f"{top} is part of fwbridge: import it as fwbridge.{top}",
                           "No module named 'fwbridge.protocols'"), (name, outcome)


def test_every_module_is_its_real_file() -> None:
    # Imported by its one name, each module is the repository's own file (not a link, not
    # a copy): python -I, so only the installed package (here editable) is on the path.
    from tests.layout import ROOT, package_modules

    modules = {name: str(path) for name, path in package_modules().items()}
    assert {"fwbridge.cli", "fwbridge.protocols.errors", "fwbridge.bridge.sim.fish"} <= set(modules)
    probe = (
        "import importlib.util, json, sys\n"
        f"names = {sorted(modules)!r}\n"
        "print(json.dumps({n: importlib.util.find_spec(n).origin for n in names}))\n"
    )
    res = subprocess.run([sys.executable, "-I", "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    origins = json.loads(res.stdout)
    if not origins["fwbridge"].startswith(str(ROOT)):
        pytest.skip(f"fwbridge is installed from {origins['fwbridge']}, not this repository")
    assert origins == modules
    assert all(Path(p).resolve() == Path(p) for p in origins.values())  # no link on the way
