"""The doc tests themselves (tests/doc_examples.py): they see every block, they fail
on a wrong example, and every skipped block says so to its readers."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from tests.doc_examples import (
    KNOWN_FAILURES,
    ROOT,
    SERVES,
    UNTIL_STOPPED,
    documents_sybil,
    is_document,
    matches,
    setup,
    split_comment,
    stopped_failure,
    teardown,
)

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "firmware_ref" / "README.md"]
SKIP = re.compile(r"<!-- skip: next \"(.+?)\" -->\n(.*?)\n```", re.S)


def run_doc(tmp_path: Path, text: str) -> list[BaseException | None]:
    """Parse TEXT as a doc with the docs' parsers, run its examples in order: what each raised."""
    path = tmp_path / "doc.md"
    path.write_text(text)
    document = documents_sybil().parse(path)
    out: list[BaseException | None] = []
    setup(document.namespace)
    try:
        for example in document.examples():
            try:
                example.evaluate()
            except BaseException as exc:  # what the example raised is the result
                out.append(exc)
            else:
                out.append(None)
    finally:
        teardown(document.namespace)
    return out


def test_the_docs_are_collected_and_nothing_else() -> None:
    assert all(is_document(p) for p in DOCS)
    assert not is_document(ROOT / "tests" / "README.md")
    assert not is_document(ROOT / "docs" / "foxglove" / "base.json")
    assert not is_document(ROOT / "docs" / "foxglove" / "README.md")
    sybil = documents_sybil()
    counts = {str(p.relative_to(ROOT)): len(list(sybil.parse(p).examples())) for p in DOCS}
    assert counts["README.md"] >= 15 and counts["docs/simulation.md"] >= 8, counts
    assert counts["firmware_ref/README.md"] >= 4, counts


def test_every_skipped_block_says_so_to_its_readers() -> None:
    skipped = 0
    for path in DOCS:
        text = path.read_text()
        assert text.count("<!-- skip:") == len(SKIP.findall(text)), path
        for reason, between in SKIP.findall(text):
            skipped += 1
            assert re.search(r"^\*Not run by the test suite: .+", between, re.M), (path, reason)
    assert skipped >= 10


def test_known_failures_name_lines_of_the_docs() -> None:
    for doc, line in KNOWN_FAILURES:
        lines = {split_comment(ln)[0] for ln in (ROOT / doc).read_text().splitlines()}
        assert line in lines, (doc, line)


def test_comments_and_outputs_are_read_as_written() -> None:
    assert split_comment("fwbridge encode cmd   # -> aa 55") == ("fwbridge encode cmd", "-> aa 55")
    assert split_comment("echo '#not' \"a # b\"") == ("echo '#not' \"a # b\"", None)
    assert split_comment("a#b") == ("a#b", None)
    assert matches("5a a5 01 00 32 …", "5a a5 01 00 32 00 ff\n")
    assert matches("aa 55  cd", "aa 55 cd")
    assert not matches("aa 55 cd", "aa 55 cc")
    assert not matches("aa 55", "aa 55 cd")  # the whole output, not a prefix
    assert SERVES.match("fwbridge sim fish --flash f.json")
    assert not SERVES.match("fwbridge sim mecanum --duration 10")
    assert not SERVES.match("fwbridge can sim 3 --capture bus.mcap")
    assert UNTIL_STOPPED.match("fwbridge can sim 3 --capture bus.mcap --foxglove")
    assert not UNTIL_STOPPED.match("fwbridge send /dev/pts/7 cmd --count 100")


def test_a_wrong_output_a_failing_command_and_a_missing_error_fail(tmp_path: Path) -> None:
    doc = (
        "```sh\nfwbridge encode cmd --vx 0.2 --vy 0 --wz 0.5   # -> aa 55 cd cc 4c 3e …\n```\n\n"
        "```sh\nfwbridge encode cmd --vx 0.2   # -> aa 55 00 …\n```\n\n"
        "```sh\nfwbridge encode cmd --vx nope\n```\n\n"
        "```sh\nfwbridge encode cmd --vx nan   # -> error: …vx…\n```\n\n"
        "```sh\nfwbridge encode cmd --vx 0.1   # -> error: …\n```\n\n"
        "```python\n>>> print(1 + 1)\n3\n\n```\n\n"
        "```python\nraise ValueError('shown')\n```\n\n"
        "```toml\n[frame\n```\n"
    )
    results = run_doc(tmp_path, doc)
    assert results[0] is None and results[3] is None, results
    assert "expected: aa 55 00" in str(results[1])
    assert "exit 2" in str(results[2])
    assert "exit 0" in str(results[4])  # the error the doc shows must happen
    assert results[5] is not None and "Expected" in str(results[5])
    assert isinstance(results[6], ValueError)
    assert results[7] is not None  # not TOML


def test_a_simulation_serves_its_block_with_its_port(tmp_path: Path) -> None:
    doc = (
        "```toml\n# imu.toml\n[frame]\nname = \"imu\"\nheader = \"5A A5\"\n\n"
        "[[field]]\nname = \"ax\"\ntype = \"i16\"\n```\n\n"
        "```sh\nfwbridge sim echo\n"
        "fwbridge send /dev/pts/7 imu.toml ax=3 --rate 100 --count 3\n"
        "fwbridge sniff /dev/pts/7 -p imu.toml\n```\n\n"
        "```sh\nfwbridge send /dev/pts/7 imu.toml ax=3 --count 1\n```\n"
    )
    results = run_doc(tmp_path, doc)
    assert results[:2] == [None, None], results
    # Its block over, no port stands for /dev/pts/7, and the real one is never opened.
    assert "stands for a simulation's port: none runs here" in str(results[2])


def test_a_verb_stopped_by_ctrl_c_must_exit_130_and_quietly() -> None:
    verb = SimpleNamespace(text="fwbridge sniff /dev/pts/7 -p odom", err=["counters: …\n"],
                           output=lambda: "")
    assert stopped_failure("doc.md:1", verb, 130) is None  # type: ignore[arg-type]
    assert "want 130" in str(stopped_failure("doc.md:1", verb, 0))  # type: ignore[arg-type]
    verb.err = ["error: the port went away\n"]
    assert stopped_failure("doc.md:1", verb, 130) is not None  # type: ignore[arg-type]
    tool = SimpleNamespace(text="python -m can.logger -i fwbridge", err=[], output=lambda: "")
    assert stopped_failure("doc.md:1", tool, 0) is None  # type: ignore[arg-type]


def test_the_firmware_pages_c_excerpts_name_what_src_has() -> None:
    """firmware_ref/README.md's ```c blocks are excerpts of an STM32 project (HAL calls,
    statements out of their functions) that no compiler takes alone: every ``fw_``/``FW_``
    name they use is one firmware_ref/src declares, so a renamed or removed one fails here."""
    firmware = ROOT / "firmware_ref"
    code = "\n".join(re.findall(r"^```c\n(.*?)^```", (firmware / "README.md").read_text(),
                                re.S | re.M))
    included = re.findall(r'^#include "(.+?)"', code, re.M)
    assert included and all((firmware / "src" / name).is_file() for name in included), included
    used = set(re.findall(r"\b(?:fw|FW)_\w+\b(?!\.h)", code))
    assert {"fw_cmd_plausible", "fw_wrap_deg", "FW_CMD_MAX_SPEED"} <= used, used
    src = "\n".join(p.read_text() for p in sorted((firmware / "src").glob("*.[ch]")))
    assert sorted(n for n in used if not re.search(rf"\b{n}\b(?!\.h)", src)) == []
