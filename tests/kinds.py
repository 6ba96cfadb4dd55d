"""The kinds of test the fast tier (``make test-fast``) leaves out, and the guard
that keeps the marks true.

A test is of a kind when it does what the kind names:

- ``process``: starts a process (the CLI, a compiler, a daemon, ``bash`` for the
  docs' ``sh`` blocks); ``qemu`` and ``netns`` tests are ``process`` tests too;
- ``pty``: opens a pseudo-terminal;
- ``qemu``: runs the firmware on the emulated board (``tests/qemu_fw.py``);
- ``netns``: makes Linux network namespaces (``tests/netns.py``).

Most tests are marked from what they visibly do (:func:`kinds_of`): the code of
the test function and of the fixtures it uses is read, following the functions
and classes of ``tests/``, for the calls that start a process or open a pty
(``subprocess.run``, ``os.openpty``, ``run_cli``, ``Terminal``, the ``pair``
fixture, ...), and for the package's own openers (:data:`PACKAGE_CALLS`). What
cannot be seen that way (a pty the package opens for a ``sim://`` URL) takes a
mark by hand: ``@pytest.mark.pty``, or a module's ``pytestmark``. The README and
``docs/*.md`` are ``process`` tests (their ``sh`` blocks run with ``bash``).

:class:`Guard` makes the marks hold: while a test sets up and runs, starting a
process or opening a pty without the mark fails it, naming the mark it needs.
So a test marked short of what it does fails in every run, the fast tier's
included, and the fast tier is fast because nothing in it can wait on a process.
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import contextlib
import dis
import inspect
import multiprocessing
import os
import pty
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from types import CodeType, FunctionType, ModuleType
from typing import Any

import pytest

#: Each kind, what makes a test of it (the markers' help in pyproject.toml says the same).
KINDS = ("process", "pty", "qemu", "netns")
#: Kinds that are also ``process``: their tools are processes.
STARTS_PROCESSES = ("qemu", "netns")
#: What ``make test-fast`` leaves out: the kinds and ``slow``.
FAST_EXCLUDES = (*KINDS, "slow")

PROCESS = frozenset({"process"})
PTY = frozenset({"pty"})
BOTH = PROCESS | PTY

#: The calls that start a process or open a pty, by identity.
CALLS: dict[object, frozenset[str]] = {
    **{getattr(subprocess, n): PROCESS for n in (
        "Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput")},
    **{getattr(os, n): PROCESS for n in (
        "fork", "posix_spawn", "posix_spawnp", "system", "popen", "spawnv", "spawnve",
        "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe")},
    os.forkpty: BOTH, os.openpty: PTY, pty.openpty: PTY, pty.fork: BOTH, pty.spawn: BOTH,
    asyncio.create_subprocess_exec: PROCESS, asyncio.create_subprocess_shell: PROCESS,
    multiprocessing.Process: PROCESS, multiprocessing.Pool: PROCESS,
    # A test that looks for a program on PATH runs it (tshark, a compiler, ip).
    shutil.which: PROCESS,
}
#: What in the package opens a pty or starts a process, by ``module.qualname``
#: (tests/test_suite_rules.py checks that each still names something).
PACKAGE_CALLS: dict[str, frozenset[str]] = {
    "fwbridge.bridge.link.transports.PtyPair": PTY,
    "fwbridge.bridge.link.pty_relay.PtyRelay": PTY,
    "fwbridge.bridge.sim.pty_link.PtyLink": PTY,
    "fwbridge.bridge.node.aio.AsyncBaseNode": PTY,  # reads its link (a simulation's too) on a pty
    "fwbridge.bridge.robots.square.run_square": PTY,  # the demo's simulation, on a pty
    "fwbridge.cli_verbs.fw.QemuBoard": frozenset({"qemu", "process", "pty"}),
    "fwbridge.cli_verbs.fw.build_elf": PROCESS,  # make, the cross compiler
    "fwbridge.cli_verbs.can_daemon.up_cmd": PROCESS,  # the bus daemon
    "fwbridge.codegen.lua_check.lua_loads": PROCESS,  # tshark
}
#: Test helper modules whose every use is of a kind.
MODULES: dict[str, frozenset[str]] = {
    "tests.qemu_fw": frozenset({"qemu", "process"}),
    "tests.netns": frozenset({"netns", "process"}),
}
#: The modules and names that can lead to a call of a kind (what makes code worth reading).
_REACHING_MODULES = frozenset({
    *(getattr(o, "__module__", "") for o in CALLS), "os", "posix", "pty", "subprocess",
    "asyncio", "multiprocessing", "shutil", *(k.rpartition(".")[0] for k in PACKAGE_CALLS)})
_REACHING_NAMES = frozenset({
    *(getattr(o, "__name__", "") for o in CALLS), *_REACHING_MODULES,
    *(k.rpartition(".")[2] for k in PACKAGE_CALLS)})
_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}


def _ours(obj: object) -> bool:
    """A function or class of ``tests/`` (followed into), not of a library."""
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == "tests" or module.startswith("tests.")
                                        or module == "conftest")


def _key(obj: object) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


class _Reader:
    """What code does, read from its bytecode (memoised per code object)."""

    def __init__(self) -> None:
        self.memo: dict[int, frozenset[str]] = {}

    def object(self, obj: object) -> frozenset[str]:
        if isinstance(obj, _Unloaded):
            return PACKAGE_CALLS.get(obj, frozenset())
        try:
            hit = CALLS.get(obj)
        except TypeError:  # unhashable
            hit = None
        if hit is not None:
            return hit
        if isinstance(obj, ModuleType):
            return frozenset()
        if not _ours(obj):
            return PACKAGE_CALLS.get(_key(obj), frozenset())
        found = set(MODULES.get(getattr(obj, "__module__", ""), frozenset()))
        if isinstance(obj, type):
            for cls in obj.__mro__:
                if _ours(cls):
                    for member in vars(cls).values():
                        found |= self.member(member)
                else:
                    found |= PACKAGE_CALLS.get(_key(cls), frozenset())
        else:
            found |= self.function(obj)
        return frozenset(found)

    def member(self, member: object) -> frozenset[str]:
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if isinstance(member, property):
            return frozenset().union(*(self.function(f) for f in
                                       (member.fget, member.fset, member.fdel) if f))
        return self.function(member) if isinstance(member, FunctionType) else frozenset()

    def function(self, fn: Any) -> frozenset[str]:
        fn = _underlying(fn)
        code = getattr(fn, "__code__", None)
        if not isinstance(code, CodeType):
            return frozenset()
        return self.code(code, getattr(fn, "__globals__", {}), fn)

    def code(self, code: CodeType, globs: dict[str, Any], fn: Any = None) -> frozenset[str]:
        if id(code) in self.memo:
            return self.memo[id(code)]
        self.memo[id(code)] = frozenset()  # a cycle reads as nothing more
        found: set[str] = set()
        closure = _closure(fn)
        if self.worth_reading(code, globs, closure):
            found |= self.instructions(code, globs, closure)
        for const in code.co_consts:
            if isinstance(const, CodeType):
                found |= self.code(const, globs)
        self.memo[id(code)] = frozenset(found)
        return self.memo[id(code)]

    def worth_reading(self, code: CodeType, globs: dict[str, Any],
                      closure: dict[str, Any]) -> bool:
        """Whether a name of ``code`` can lead anywhere (reading every instruction of
        every test costs seconds; most name only the package)."""
        for name in (*code.co_names, *closure):
            if name in _REACHING_NAMES or name.startswith("tests"):
                return True
            obj = closure.get(name, globs.get(name))
            if obj is None or isinstance(obj, (int, float, str, bytes, tuple)):
                continue
            if isinstance(obj, ModuleType):
                if obj.__name__ in _REACHING_MODULES or obj.__name__.startswith("tests"):
                    return True
            elif _ours(obj) or self.object(obj):
                return True
        return False

    def instructions(self, code: CodeType, globs: dict[str, Any],
                     closure: dict[str, Any]) -> set[str]:
        found: set[str] = set()
        local: dict[str, object] = {}  # the names local imports bound
        loaded: object = None  # what the instruction before put on the stack
        importing: object = None  # the module of the last import, for its names
        for ins in dis.get_instructions(code):
            op, arg = ins.opname, ins.argval
            if op in ("STORE_FAST", "STORE_DEREF"):
                if loaded is not None:
                    local[arg] = loaded
                loaded = None
                continue
            obj: object = None
            if op in _LOADS:
                obj = closure.get(arg, globs.get(arg, local.get(arg)))
            elif op == "LOAD_FAST":
                obj = local.get(arg)
            elif op in _ATTRS:
                obj = _attr(loaded, arg)
            elif op == "IMPORT_NAME":
                obj = importing = sys.modules.get(arg) or _Unloaded(arg)
            elif op == "IMPORT_FROM":
                obj = _attr(importing, arg)
            if obj is not None:
                found |= self.object(obj)
            loaded = obj
        return found


class _Unloaded(str):
    """The dotted name of what a local import names, when it is not imported yet."""


def _attr(base: object, name: str) -> object:
    if isinstance(base, ModuleType):
        got = getattr(base, name, None)
        return got if got is not None else _Unloaded(f"{base.__name__}.{name}")
    return _Unloaded(f"{base}.{name}") if isinstance(base, _Unloaded) else None


def _underlying(fn: Any) -> Any:
    inner = getattr(getattr(fn, "hypothesis", None), "inner_test", None)
    fn = inner if inner is not None else fn
    fn = getattr(fn, "__func__", fn)
    try:
        return inspect.unwrap(fn)
    except ValueError:
        return fn


def _closure(fn: Any) -> dict[str, Any]:
    cells = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    out = {}
    for name, cell in zip(names, cells):
        with contextlib.suppress(ValueError):  # an empty cell
            out[name] = cell.cell_contents
    return out


_READER = _Reader()


def kinds_of(item: pytest.Item) -> frozenset[str]:
    """The kinds ``item`` visibly is: its function's code and its fixtures' code."""
    if item.path.suffix == ".md":  # a README or docs/*.md block: their sh blocks run bash
        return PROCESS
    roots: list[Any] = [getattr(item, "obj", None)]
    cls = getattr(item, "cls", None)
    if cls is not None:  # the class's own helpers (not its other tests)
        roots += [m for n, m in vars(cls).items() if not n.startswith("test")]
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        roots += [d.func for d in defs if _ours(_underlying(d.func))]
    found: set[str] = set()
    for root in roots:
        found |= (_READER.member(root) if isinstance(root, (staticmethod, classmethod, property))
                  else _READER.function(root))
    return frozenset(found)


def mark(items: Iterable[pytest.Item]) -> None:
    """Each item marked with the kinds it visibly is, and ``process`` for qemu and netns."""
    for item in items:
        have = {m.name for m in item.iter_markers()}
        kinds = set(kinds_of(item)) | (have & set(KINDS))
        if kinds & set(STARTS_PROCESSES):
            kinds.add("process")
        for kind in sorted(kinds - have):
            item.add_marker(kind)


class Guard:
    """Starting a process or opening a pty without the mark fails the test."""

    PATCHED: tuple[tuple[Any, str, str], ...] = (
        (subprocess.Popen, "_execute_child", "process"),  # every Popen: run, check_output, ...
        (_posixsubprocess, "fork_exec", "process"),  # multiprocessing's spawn
        (os, "fork", "process"), (os, "forkpty", "process"), (os, "posix_spawn", "process"),
        (os, "posix_spawnp", "process"), (os, "system", "process"), (os, "openpty", "pty"),
    )

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.allowed: frozenset[str] = frozenset()
        self.caught: list[str] = []
        self.originals: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        for module, name, kind in self.PATCHED:
            original = getattr(module, name, None)
            if original is not None:
                self.originals.append((module, name, original))
                setattr(module, name, self._guarded(original, name, kind))

    def uninstall(self) -> None:
        for module, name, original in reversed(self.originals):
            setattr(module, name, original)
        self.originals.clear()

    def _guarded(self, original: Callable[..., Any], name: str, kind: str) -> Callable[..., Any]:
        kinds = {kind, "pty"} if name == "forkpty" else {kind}

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.item is not None and not kinds <= self.allowed and not _probe():
                missing = sorted(kinds - self.allowed)
                what = "starts a process" if "process" in missing else "opens a pty"
                message = (f"this test {what} ({_call(name, args)}, in thread "
                           f"{threading.current_thread().name}): mark it "
                           + " and ".join(f"`{k}`" for k in missing)
                           + f" (@pytest.mark.{missing[0]}, or the module's pytestmark); "
                           "tests/kinds.py says why")
                self.caught.append(message)
                pytest.fail(message, pytrace=False)
            return original(*args, **kwargs)
        return guarded

    def watching(self, item: pytest.Item) -> None:
        self.item = item
        self.allowed = frozenset(m.name for m in item.iter_markers() if m.name in KINDS)
        self.caught = []

    def done(self) -> str | None:
        """The first thing caught since :meth:`watching`, and stop watching."""
        self.item = None
        return self.caught[0] if self.caught else None


#: The guard of this run (tests/conftest.py installs it).
GUARD = Guard()

#: Libraries that run a program to read the machine (platform's ``uname -p``, ctypes.util's
#: ``ldconfig -p``): what the library does inside, in milliseconds, not what the test does.
PROBES = frozenset({"platform", "ctypes.util"})


def _probe() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") in PROBES:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _call(name: str, args: tuple[Any, ...]) -> str:
    try:
        if name == "_execute_child":
            argv = args[1]
            program = argv if isinstance(argv, (str, bytes)) else argv[0]
            return f"{os.path.basename(os.fsdecode(program).split()[0])} (subprocess)"
        if name == "fork_exec":
            return f"{os.path.basename(os.fsdecode(args[0][0]))} (multiprocessing)"
        if name in ("posix_spawn", "posix_spawnp"):
            return f"{os.path.basename(os.fsdecode(args[1][0]))} (os.{name})"
    except (IndexError, TypeError, ValueError):
        pass
    return f"os.{name}"
