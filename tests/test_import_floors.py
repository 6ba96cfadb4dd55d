"""Floors hold: no import circle, imports point down the floors of docs/DESIGN.md, and
at import time the pure parts import no I/O machinery.

The import checks run in a fresh interpreter (``sys.modules`` of this one is full
of everything the other tests imported); the graph checks read the sources' ASTs.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
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
        "import fwbridge.bridge.node.base_core",
        "import fwbridge.bridge.node.odometry",
        "import fwbridge.bridge.node.config",
        "import fwbridge.bridge.node.sinks, fwbridge.bridge.node.backoff",
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
    assert "serial" in imported_after("import fwbridge.bridge.link.transports")


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
            offenders += private_uses_of_modules(path, root)
    assert offenders == []


def private_uses_of_modules(path: Path, root: Path) -> list[str]:
    """``alias._name`` where ``alias`` is a fwbridge module this file imported
    (``import fwbridge.x as alias``, ``from fwbridge.pkg import module as alias``)."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.asname and a.name.startswith("fwbridge")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fwbridge"):
            modules |= {a.asname or a.name for a in node.names
                        if f"{node.module}.{a.name}" in module_names()}
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in modules and node.attr.startswith("_")
            and not node.attr.startswith("__")]


def test_a_private_name_reached_through_a_module_is_found(tmp_path: Path) -> None:
    # The control: both import forms, a dunder left alone, a private name of a class.
    (tmp_path / "m.py").write_text(
        "import fwbridge.can_bus.bits as b\nfrom fwbridge.can_bus import fd\n"
        "b._x, fd._y, fd.__name__, b.Frame._z\n")
    assert private_uses_of_modules(tmp_path / "m.py", tmp_path) == ["m.py:3: b._x",
                                                                      "m.py:3: fd._y"]


@functools.cache
def module_names() -> frozenset[str]:
    from tests.layout import package_modules

    return frozenset(package_modules())


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


# -- the module graph: no circle, arrows down the floors -------------------------------------
#
# Every `import fwbridge...` and `from fwbridge... import` of every module counts, at the top,
# inside a function (deferred) or under `if TYPE_CHECKING:` (types only): a circle of any of
# them is one design bug, whichever import is made late to hide it. The one exception is a
# package __init__'s `if TYPE_CHECKING:` imports of its own modules: they type its lazy export
# table (fwbridge/lazy.py), and the package loads none of them at import. They are arrows all
# the same for the floors: a package re-exports nothing from a floor above it.

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "DESIGN.md"


@dataclass(frozen=True)
class Import:
    """One fwbridge import of a module, resolved to the module it loads."""

    source: str
    target: str
    line: int
    type_checking: bool  # under `if TYPE_CHECKING:`
    package_name: bool  # `from PACKAGE import NAME` with NAME not a module: the package's exports


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _owner(name: str, modules: Mapping[str, object]) -> str | None:
    """The module that ``name`` is, or the innermost one it is inside."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(modules: Mapping[str, Path]) -> list[Import]:
    """Every fwbridge import of every module (top level, deferred and type-only)."""
    found: list[Import] = []

    def visit(name: str, node: ast.AST, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(name, stmt, True)
                for stmt in child.orelse:
                    visit_one(name, stmt, type_checking)
            else:
                visit_one(name, child, type_checking)

    def visit_one(name: str, node: ast.AST, type_checking: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _owner(alias.name, modules)
                if target is not None:
                    found.append(Import(name, target, node.lineno, type_checking, False))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                target = sub if sub in modules else _owner(node.module, modules)
                if target is not None:
                    exports = (sub not in modules and target == node.module
                               and modules[target].name == "__init__.py")
                    found.append(Import(name, target, node.lineno, type_checking, exports))
        visit(name, node, type_checking)

    for name, path in modules.items():
        visit(name, ast.parse(path.read_text(), str(path)), False)
    return found


def module_graph(modules: Mapping[str, Path], *, lazy_tables: bool = False,
                 ) -> dict[str, set[str]]:
    """Module -> the modules it imports (a package __init__'s lazy-export types left out
    unless ``lazy_tables``)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for imp in module_imports(modules):
        lazy_table = (imp.type_checking and modules[imp.source].name == "__init__.py"
                      and imp.target.startswith(imp.source + "."))
        if lazy_tables or not lazy_table:
            graph[imp.source].add(imp.target)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module, and each self-import
    (Tarjan's algorithm, iterative: no recursion limit on a long chain)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(component)
    return found


def test_the_circle_finder_finds_circles() -> None:
    # The control: a synthetic graph with a three-module circle, a self-import, a module
    # that reaches the circle without being in it, and a long chain (no recursion limit).
    graph: dict[str, set[str]] = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(),
                                  "e": {"a"}, "s": {"s"}}
    chain = {f"n{k}": {f"n{k + 1}"} for k in range(5000)}
    graph |= chain | {"n5000": {"n0"}}
    found = circles(graph)
    assert len(found) == 3
    assert set(map(frozenset, found)) == {frozenset("abc"), frozenset("s"),
                                          frozenset([*chain, "n5000"])}
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_deferred_and_type_only_imports(tmp_path: Path) -> None:
    # The control for the walker: a deferred import and a type-only one make the circle;
    # a package's own lazy-export types do not; `from pkg import mod` is the module.
    files = {
        "fw": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fw.a import A\n",
        "fw.a": "def f():\n    from fw.b import g\n",
        "fw.b": "import typing\nif typing.TYPE_CHECKING:\n    from fw import a\n",
        "fw.c": "from fw import X\nfrom fw.a import f\n",
    }
    (tmp_path / "fw").mkdir()
    modules = {name: tmp_path / "fw" / f"{name.partition('.')[2] or '__init__'}.py"
               for name in files}
    for name, text in files.items():
        modules[name].write_text(text)
    graph = module_graph(modules)
    assert graph == {"fw": set(), "fw.a": {"fw.b"}, "fw.b": {"fw.a"}, "fw.c": {"fw", "fw.a"}}
    assert circles(graph) == [{"fw.a", "fw.b"}]
    assert [(i.source, i.line) for i in module_imports(modules) if i.package_name] == [("fw.c", 1)]


def test_no_import_circle() -> None:
    from tests.layout import package_modules

    found = [sorted(c) for c in circles(module_graph(package_modules()))]
    assert found == [], f"import circles (move the shared part down): {found}"


def test_no_module_imports_its_own_package_s_exports() -> None:
    # `from fwbridge.can_bus import Frame` inside fwbridge/can_bus/...: the name comes through
    # the package's lazy table, whose TYPE_CHECKING block imports the package's modules, so
    # a module of the package reaches itself. Import from the defining module instead.
    from tests.layout import package_modules

    offenders = [f"{i.source}:{i.line}: from {i.target} import …"
                 for i in module_imports(package_modules())
                 if i.package_name and i.source.startswith(i.target + ".")]
    assert offenders == []


# -- the floors, as docs/DESIGN.md draws them ------------------------------------------------

@dataclass
class Room:
    """A module and everything under it (but what a room of a longer name claims), with
    the floors of its own sub-rooms, top first."""

    name: str
    floors: list[list[Room]] = field(default_factory=list)


def parse_floors(text: str) -> list[list[Room]]:
    """The floors of a ``floors`` block: one line a floor, top first; ``|`` between rooms
    side by side; lines indented under a line are the floors inside one of its rooms
    (each named under that room); ``#`` starts a comment."""
    lines = []
    for raw in text.splitlines():
        body = raw.partition("#")[0].rstrip()
        if body:
            names = [n.strip() for n in body.split("|")]
            assert all(re.fullmatch(r"\w+(\.\w+)*", n) for n in names), f"a floor: {raw!r}"
            lines.append((len(body) - len(body.lstrip()), names))

    def floors_at(pos: int, indent: int) -> tuple[list[list[Room]], int]:
        floors: list[list[Room]] = []
        while pos < len(lines) and lines[pos][0] == indent:
            floor = [Room(n) for n in lines[pos][1]]
            floors.append(floor)
            pos += 1
            if pos < len(lines) and lines[pos][0] > indent:
                inner, pos = floors_at(pos, lines[pos][0])
                for room in floor:
                    room.floors = [f for f in ([r for r in level
                                                if r.name.startswith(room.name + ".")]
                                               for level in inner) if f]
                strays = [r.name for level in inner for r in level
                          if not any(r.name.startswith(p.name + ".") for p in floor)]
                assert strays == [], f"sub-rooms under no room of their line: {strays}"
        assert pos == len(lines) or lines[pos][0] < indent, f"indentation at {lines[pos][1]}"
        return floors, pos

    floors, end = floors_at(0, lines[0][0] if lines else 0)
    assert end == len(lines), f"indentation at {lines[end][1]}"
    names = [n for _, line in lines for n in line]
    assert len(names) == len(set(names)), "a room named twice"
    return floors


def room_path(module: str, floors: list[list[Room]]) -> list[tuple[int, str]]:
    """(floor, room) at each depth for ``module``: the room of the longest name that is it
    or holds it, then the same among that room's sub-rooms."""
    path: list[tuple[int, str]] = []
    while True:
        here = [(len(r.name), k, r) for k, floor in enumerate(floors) for r in floor
                if module == r.name or module.startswith(r.name + ".")]
        if not here:
            return path
        _, k, room = max(here, key=lambda t: t[0])
        path.append((k, room.name))
        floors = room.floors


def floor_breaches(graph: Mapping[str, set[str]], floors: list[list[Room]]) -> list[str]:
    """Every import up a floor, or sideways between rooms side by side. Where two modules'
    rooms part, the importer's must be on a higher floor; a module of a room in none of
    its sub-rooms (e.g. the package __init__) stands above them."""
    out = []
    for source, targets in sorted(graph.items()):
        src = room_path(source, floors)
        assert src, f"{source} is in no room of the floors"
        for target in sorted(targets):
            dst = room_path(target, floors)
            depth = 0
            while depth < min(len(src), len(dst)) and src[depth] == dst[depth]:
                depth += 1
            if depth == len(dst) and depth < len(src):
                out.append(f"{source} -> {target}: up, to the room above its sub-room")
            elif depth < len(src) and depth < len(dst):
                (up, src_room), (down, dst_room) = src[depth], dst[depth]
                if up == down:
                    out.append(f"{source} -> {target}: sideways, {src_room} | {dst_room}")
                elif up > down:
                    out.append(f"{source} -> {target}: up, {src_room} under {dst_room}")
    return out


def design_floors() -> str:
    blocks = re.findall(r"^```floors\n(.*?)^```", DESIGN.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/DESIGN.md draws the floors in one ```floors block"
    return str(blocks[0])


def test_the_floor_checker_finds_breaches() -> None:
    # The control, on a synthetic house: one arrow of each kind the checker refuses,
    # and the arrows it lets pass.
    floors = parse_floors(
        "top\n"
        "left | right   # side by side\n"
        "    right.node\n"
        "    right.link\n"
        "bottom\n")
    assert [[r.name for r in f] for f in floors] == [["top"], ["left", "right"], ["bottom"]]
    assert [[r.name for r in f] for f in floors[1][1].floors] == [["right.node"], ["right.link"]]
    assert room_path("right.link.wire", floors) == [(1, "right"), (1, "right.link")]
    graph = {
        "top": {"left", "right.node.x", "bottom"},  # down, and down past a floor
        "left": {"right.link", "top"},  # sideways, up
        "right": {"right.node", "left.x"},  # the room's own module to its sub-room; sideways
        "right.node.x": {"right.link", "bottom.y"},  # down inside the room, and out of it
        "right.link": {"right.node.x", "right"},  # up inside the room; up to its own room
        "bottom": {"bottom.y"}, "bottom.y": {"bottom"},  # inside one room anything goes
        "left.x": set(), "right.node": set(), "bottom.z": {"left"},  # up past a floor
    }
    assert floor_breaches(graph, floors) == [
        "bottom.z -> left: up, bottom under left",
        "left -> right.link: sideways, left | right",
        "left -> top: up, left under top",
        "right -> left.x: sideways, right | left",
        "right.link -> right: up, to the room above its sub-room",
        "right.link -> right.node.x: up, right.link under right.node",
    ]


def test_imports_point_down_the_floors_of_the_design() -> None:
    from tests.layout import package_modules

    modules = package_modules()
    floors = parse_floors(design_floors())
    rooms = [r.name for floor in floors for r in floor]
    assert {"fwbridge", "fwbridge.cli", "fwbridge.protocols"} <= set(rooms)
    assert all(name in modules for name in rooms), "a room of DESIGN.md that is no module"
    assert floor_breaches(module_graph(modules, lazy_tables=True), floors) == []


def libraries_by_room(modules: Mapping[str, Path], floors: list[list[Room]]) -> dict[str, set[str]]:
    """Top-level import name of every non-fwbridge import (at any level) -> the rooms
    (names without ``fwbridge.``) whose modules make it."""
    names: list[str] = []

    def walk(fl: list[list[Room]]) -> None:
        for floor in fl:
            for room in floor:
                names.append(room.name)
                walk(room.floors)

    walk(floors)
    by_length = sorted(names, key=len, reverse=True)
    out: dict[str, set[str]] = {}
    for module, path in modules.items():
        room = next((r for r in by_length if module == r or module.startswith(r + ".")), None)
        if room is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                tops = {node.module.split(".")[0]}
            else:
                continue
            for top in tops - {"fwbridge"}:
                out.setdefault(top, set()).add(room.removeprefix("fwbridge."))
    return out


def design_libraries() -> dict[str, set[str]]:
    blocks = re.findall(r"^```libraries\n(.*?)^```", DESIGN.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/DESIGN.md lists the libraries in one ```libraries block"
    table: dict[str, set[str]] = {}
    for line in str(blocks[0]).splitlines():
        line = line.split("#")[0].strip()
        if line:
            lib, _, rooms = line.partition(":")
            table[lib.strip()] = set(rooms.split())
    return table


def test_the_libraries_block_is_what_the_rooms_import() -> None:
    from tests.layout import package_modules

    table = design_libraries()
    found = libraries_by_room(package_modules(), parse_floors(design_floors()))
    assert {lib: found.get(lib, set()) for lib in table} == table


def test_the_library_reader_sees_deferred_imports(tmp_path: Path) -> None:
    # The control: two rooms, one importing numpy inside a function.
    (tmp_path / "a.py").write_text("import json\n")
    (tmp_path / "b.py").write_text("def f():\n    from numpy import zeros\n")
    floors = parse_floors("fwbridge.b\nfwbridge.a\n")
    found = libraries_by_room({"fwbridge.a": tmp_path / "a.py", "fwbridge.b": tmp_path / "b.py"},
                              floors)
    assert found == {"json": {"a"}, "numpy": {"b"}}


# -- no string imports -------------------------------------------------------------------
#: Calls that load a module named by their first argument.
_IMPORT_CALLS = frozenset({"import_module", "__import__", "find_spec", "resolve_name"})

#: Strings that may name a fwbridge module, by the module holding them (beside the lazy
#: tables, ``_EXPORTS`` of a package ``__init__``): the command's verb registry, each
#: verb's module imported when the verb is asked for (``fwbridge --help`` imports none).
STRING_IMPORTS_ALLOWED = {"fwbridge.cli": {"f'fwbridge.cli_verbs.{module}'"}}


def _is_logger_call(node: ast.Call) -> bool:
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "getLogger") or (
        isinstance(func, ast.Name) and func.id == "getLogger")


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)


def string_imports(modules: Mapping[str, Path]) -> list[str]:
    """``module:line: text`` for each string that names a module of ``modules`` the way
    an import would: a literal naming one (a table of module names, say), or the name
    given to ``importlib.import_module``/``__import__``/``find_spec`` when it starts with
    one. Left out: the root's bare name (the command, loggers, the CAN interface), a
    logger's name, a package ``__init__``'s ``_EXPORTS`` table, docstrings, and
    :data:`STRING_IMPORTS_ALLOWED`."""
    roots = {n for n in modules if "." not in n}
    named = set(modules) - roots
    found: list[str] = []

    def skipped(tree: ast.AST, path: Path) -> set[int]:
        """ids of the nodes whose strings are not imports."""
        out: set[int] = set()
        for node in ast.walk(tree):
            subtrees: list[ast.AST] = []
            if isinstance(node, ast.Call) and _is_logger_call(node):
                subtrees = [node]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and path.name == "__init__.py":
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets):
                    subtrees = [node]
            elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                   ast.AsyncFunctionDef)) and ast.get_docstring(node):
                subtrees = [node.body[0]]
            for sub in subtrees:
                out |= {id(n) for n in ast.walk(sub)}
        return out

    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = skipped(tree, path)
        allowed = STRING_IMPORTS_ALLOWED.get(name, set())
        for node in ast.walk(tree):
            hit: ast.expr | None = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in named and id(node) not in skip:
                    hit = node
            elif (isinstance(node, ast.Call) and _call_name(node) in _IMPORT_CALLS
                  and node.args and isinstance(node.args[0], ast.JoinedStr)):
                head = node.args[0].values[0] if node.args[0].values else None
                if (isinstance(head, ast.Constant) and isinstance(head.value, str)
                        and head.value.partition(".")[0] in roots):
                    hit = node.args[0]
            if hit is not None and ast.unparse(hit) not in allowed:
                found.append(f"{name}:{hit.lineno}: {ast.unparse(hit)}")
    return sorted(found)


def test_no_module_imports_another_by_a_string() -> None:
    # An import by string is an arrow the floors cannot see (link/ once served sim:// by
    # naming the simulated firmware's package; the engine once loaded the frame modules
    # by name): register or pass the thing in from above instead.
    from tests.layout import package_modules

    assert string_imports(package_modules()) == []


def test_the_string_import_finder_finds_them(tmp_path: Path) -> None:
    # The control: a table of module names and both import calls are found; a logger's
    # name, the lazy table of a package __init__, a docstring, the bare root, a name that
    # is no module and an import call on a third-party name are not.
    (tmp_path / "fw").mkdir()
    files = {
        "fw": ('"""fw.a is here."""\n_EXPORTS = {"A": "fw.a"}\n', "__init__"),
        "fw.a": ('import importlib, logging\nlog = logging.getLogger("fw.a")\n'
                 'HANDLERS = {"x": "fw.b"}\nNAME = "fw"\nOTHER = "fw.nothing"\n'
                 'importlib.import_module("controller")\n', "a"),
        "fw.b": ('import importlib\ndef f(n):\n    """Loads fw.a."""\n'
                 '    return importlib.import_module(f"fw.{n}"), __import__("fw.a")\n', "b"),
    }
    modules = {}
    for name, (text, stem) in files.items():
        modules[name] = tmp_path / "fw" / f"{stem}.py"
        modules[name].write_text(text)
    assert string_imports(modules) == ["fw.a:3: 'fw.b'", "fw.b:4: 'fw.a'",
                                       "fw.b:4: f'fw.{n}'"]


#: protocols/'s modules at its root that import no room of it: errors, checksums, formats.
PROTOCOL_BASICS = frozenset({"errors", "checksums", "crc", "counters", "config_text", "hextext",
                             "pacing", "pcapng", "bus_wire"})
#: The one arrow from the engine to a frame module: the action kernel reads the action
#: frame's tables and makes its records (the factory reads the alternative headers from
#: the description, not from the frame module).
ENGINE_TO_FRAMES = {("fwbridge.protocols.engine.kernels.action_receiver",
                     "fwbridge.protocols.action_frame")}


def protocol_room(module: str) -> str:
    """``basics``, ``descriptions``, ``engine`` (its kernels included), ``families``, or
    ``top`` (the frame modules, ``described``, the package's exports)."""
    parts = module.split(".")[2:]
    if not parts:
        return "top"
    if parts[0] in ("descriptions", "engine", "families"):
        return parts[0]
    return "basics" if parts[0] in PROTOCOL_BASICS else "top"


def test_protocols_rooms_import_down() -> None:
    """docs/DESIGN.md's protocols/ picture: basics < descriptions < engine < families, top."""
    from tests.layout import package_modules

    below = {"basics": {"basics"}, "descriptions": {"basics", "descriptions"},
             "engine": {"basics", "descriptions", "engine"},
             "families": {"basics", "descriptions", "engine", "families", "top"},
             "top": {"basics", "descriptions", "engine", "families", "top"}}
    modules = {k: v for k, v in package_modules().items() if k.startswith("fwbridge.protocols")}
    assert {"fwbridge.protocols.descriptions.loader", "fwbridge.protocols.engine.codec",
            "fwbridge.protocols.engine.kernels.sum8",
            "fwbridge.protocols.families.arq"} <= set(modules)
    breaches = sorted(
        f"{i.source} -> {i.target}" for i in module_imports(modules)
        if i.target.startswith("fwbridge.protocols")
        and not (modules[i.source].name == "__init__.py" and i.source == "fwbridge.protocols")
        and protocol_room(i.target) not in below[protocol_room(i.source)]
        and (i.source, i.target) not in ENGINE_TO_FRAMES)
    assert breaches == []
    assert all(protocol_room(f"fwbridge.protocols.{b}") == "basics" for b in PROTOCOL_BASICS)
    assert all(f"fwbridge.protocols.{b}" in modules for b in PROTOCOL_BASICS)
