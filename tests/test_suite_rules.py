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
"""

from __future__ import annotations

import re
from pathlib import Path

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
