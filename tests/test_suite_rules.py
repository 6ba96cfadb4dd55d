"""Rules the test suite keeps about itself.

No fixed sleep waits for a process, a port or a thread to be ready: that
holds on an idle machine and fails on a loaded one. Wait for the process's
readiness line (``tests.helpers.wait_for_line``) or for a condition with a
bound (``wait_until``, ``FirmwarePeer.wait_for``, ``FirmwarePeer.settle``).

A sleep that is not such a wait says why, in a comment on its line or on
the line above, starting with one of the markers:

- ``# pacing:`` a sender at a rate, or the real time a test is about (the
  gaps a replay must reproduce, a pause that splits a frame across reads);
- ``# polling:`` the pause between two checks of a bounded wait;
- ``# not a readiness wait:`` anything else (the simulated world runs on
  meanwhile, a watchdog needs silence), with the reason after it.

``tests/third_party`` (test suites kept as their projects wrote them) is left out.

The kinds of test (``tests/kinds.py``: ``process``, ``pty``, ``qemu``, ``netns``)
are registered markers, and ``make test-fast`` leaves out exactly them and ``slow``.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fwbridge.protocols import cmd_frame
from tests import kinds
from tests.helpers import run_cli
from tests.qemu_fw import fw_run

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser before 3.11
    import tomli as tomllib

TESTS = Path(__file__).resolve().parent
VENDORED = TESTS / "third_party"
SLEEP = re.compile(r"(?<![\w.])(?:time\.|asyncio\.)?sleep\(")
MARKER = re.compile(r"#\s*(?:pacing|polling|not a readiness wait):")


def unmarked_sleeps(text: str) -> list[int]:
    """Line numbers (from 1) of the sleeps in ``text`` with no marker on their line or above."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not SLEEP.search(line) or line.lstrip().startswith(("def ", "async def ")):
            continue
        if not (MARKER.search(line) or (i > 0 and MARKER.search(lines[i - 1]))):
            out.append(i + 1)
    return out


def test_every_sleep_in_the_tests_says_why_it_is_not_a_readiness_wait() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if VENDORED in path.parents:
            continue
        found += [f"{path.relative_to(TESTS.parent)}:{n}"
                  for n in unmarked_sleeps(path.read_text())]
    assert not found, ("sleeps without a '# pacing:', '# polling:' or '# not a readiness "
                       "wait:' comment (wait for a readiness line or a condition instead; "
                       "see this module's docstring):\n" + "\n".join(found))


def test_the_rule_catches_a_readiness_sleep_and_accepts_the_markers() -> None:
    call = "sle" "ep("  # written apart, so that this file's own scan does not see them
    bad = f"proc = spawn()\ntime.{call}1.5)  # both verbs have opened their ports\n"
    assert unmarked_sleeps(bad) == [2]
    assert unmarked_sleeps(f"await asyncio.{call}0.1)\n{call}2)\n") == [1, 2]
    good = (f"time.{call}0.02)  # pacing: 50 Hz\n"
            f"# not a readiness wait: the world runs meanwhile\ntime.{call}0.3)\n"
            f"await asyncio.{call}0.01)  # polling: a bounded wait\n"
            f"def {call}self, s: float) -> None: ...\n"
            f"clock.{call}1.0)\n")  # another object's sleep (a simulated clock): not the rule's
    assert unmarked_sleeps(good) == []


# -- the kinds of test (tests/kinds.py) and the fast tier ------------------------------------
def _registered_markers() -> dict[str, str]:
    table = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    lines = table["tool"]["pytest"]["ini_options"]["markers"]
    return {line.partition(":")[0].partition("(")[0].strip(): line for line in lines}


def test_every_marker_the_suite_uses_is_registered() -> None:
    # pytest's own marks, and the one conftest.py registers for python-can's vendored suite
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings",
               "timeout"}
    used: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for name in re.findall(r"pytest\.mark\.(\w+)", path.read_text()):
            used.setdefault(name, set()).add(path.name)
    unknown = {n: sorted(files) for n, files in used.items()
               if n not in builtin and n not in _registered_markers()}
    assert not unknown, f"markers used but not registered in pyproject.toml: {unknown}"


def test_the_kinds_are_registered_and_the_fast_tier_leaves_out_exactly_them() -> None:
    registered = _registered_markers()
    assert set(kinds.FAST_EXCLUDES) == {*kinds.KINDS, "slow"}
    assert set(kinds.FAST_EXCLUDES) <= set(registered)
    makefile = (TESTS.parent / "Makefile").read_text()
    fast = re.search(r"^FAST\s*:=\s*not \((.*)\)\s*$", makefile, re.M)
    assert fast, "the Makefile's FAST selection"
    assert sorted(fast.group(1).split(" or ")) == sorted(kinds.FAST_EXCLUDES)
    # override: `make test-fast PYTEST_ARGS=-x` adds to the selection, never drops it
    assert re.search(r'^test-fast: override PYTEST_ARGS \+= -m "\$\(FAST\)"$', makefile, re.M)


def test_the_package_calls_of_each_kind_still_name_something() -> None:
    for key in kinds.PACKAGE_CALLS:
        module, _, name = key.rpartition(".")
        assert hasattr(importlib.import_module(module), name), key


def _runs_the_cli() -> None:
    run_cli(["--version"])


def _opens_a_pty() -> None:
    os.close(os.openpty()[0])


def _qemu() -> None:
    with fw_run():
        pass


def _decodes() -> None:
    cmd_frame.decode(b"")


def test_a_test_is_of_the_kinds_of_what_its_code_reaches() -> None:
    reader = kinds._Reader()
    assert reader.function(_runs_the_cli) == {"process"}  # through tests/helpers.py
    assert reader.function(_opens_a_pty) == {"pty"}
    assert reader.function(_qemu) >= {"qemu", "process"}
    assert reader.function(_decodes) == set()

    def local_import() -> None:
        from fwbridge.codegen.lua_check import lua_loads

        lua_loads(Path("x.lua"))

    assert reader.function(local_import) == {"process"}


class _Item:
    """What the guard reads of a test item: its marks."""

    def __init__(self, *marks: str) -> None:
        self.marks = [pytest.Mark(m, (), {}, _ispytest=True) for m in marks]

    def iter_markers(self) -> list[pytest.Mark]:
        return self.marks


_EXECUTE_CHILD = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def test_the_guard_fails_a_test_that_starts_a_process_or_opens_a_pty_unmarked() -> None:
    guard = kinds.Guard()
    guard.install()
    try:
        guard.watching(_Item("slow"))  # type: ignore[arg-type]
        with pytest.raises(pytest.fail.Exception, match=r"starts a process \(true "
                           r"\(subprocess\).*: mark it `process`"):
            subprocess.run(["true"], check=True)
        with pytest.raises(pytest.fail.Exception, match=r"opens a pty .*mark it `pty`"):
            os.openpty()
        assert guard.done() is not None  # seen also when the test swallows it
        guard.watching(_Item("pty"))  # type: ignore[arg-type]
        for fd in os.openpty():
            os.close(fd)
        assert guard.done() is None
    finally:
        guard.uninstall()
    assert subprocess.Popen._execute_child is _EXECUTE_CHILD  # as it found it


def test_this_run_is_guarded_and_a_hidden_start_fails_the_test() -> None:
    # getattr hides the calls from the reading of the code, so this test is unmarked
    start, openpty = getattr(subprocess, "run"), getattr(os, "openpty")  # noqa: B009
    try:
        with pytest.raises(pytest.fail.Exception, match=r"this test starts a process"):
            start(["true"])
        with pytest.raises(pytest.fail.Exception, match=r"this test opens a pty"):
            openpty()
        assert len(kinds.GUARD.caught) == 2
    finally:
        kinds.GUARD.caught.clear()  # what this test caused on purpose does not fail it


#: Verbs still to be made thin (their runs not yet library functions), by module.function.
LONG_VERBS_PENDING: set[str] = set()


def test_no_verb_function_is_longer_than_60_lines() -> None:
    """A verb parses options, builds a config, calls one library function and prints: the
    run itself (links, nodes, sinks, the loop, the teardown) is library API."""
    import ast

    root = Path(__file__).resolve().parent.parent
    long: dict[str, int] = {}
    for path in [*sorted((root / "cli_verbs").glob("*.py")), root / "cli.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 60:
                    long[f"{path.stem}.{node.name}"] = lines
    assert set(long) - LONG_VERBS_PENDING == set(), long
    assert LONG_VERBS_PENDING - set(long) == set(), "made thin: strike it from the list"
