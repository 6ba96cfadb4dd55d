"""The docs are executed: README.md, docs/*.md and firmware_ref/README.md, their code
blocks as written.

sybil collects the blocks (the root conftest.py hands it DOCUMENTS):

- ```python blocks run in order, one namespace per document; a block written as
  a doctest (``>>>``) has its output checked (``...`` stands for anything).
- ```toml blocks must parse; one whose first line is ``# NAME.toml`` is also
  written as NAME in the document's scratch directory, for the commands after it.
- ```sh blocks run line by line with bash in the document's scratch directory
  (``examples/``, ``docs/``, ``tests/`` and ``firmware_ref/`` of the repository
  reachable there),
  this interpreter's bin directory first on PATH. A line must exit 0; a
  comment ``# -> TEXT`` is what it prints, stdout then stderr (``…`` stands
  for anything); a ``# -> error: …`` line must print that on stderr and exit 2.
  Commands that run until Ctrl-C (``SERVES``, ``UNTIL_STOPPED``) run in the
  background: each is stopped with SIGINT (and must exit 130, without
  ``error:`` or a traceback) once it has started (``STARTED``; else its first
  line of output, ``FIRST_LINE`` seconds at most), except a simulation that
  records nothing (``SERVES``), which serves the lines after it until the end
  of its block. ``/dev/pts/7`` stands for the port the last simulation printed.
- ``<!-- skip: next "reason" -->`` (sybil's) skips the next block; the doc then
  says so visibly in an italic line (tests/test_docs.py holds it to that).
- Well-known ports are never the ones used (a developer's own Zenoh router or
  Foxglove bridge may hold them): a line's (or a written toml's) ``7447`` becomes a
  free port of the document's, a verb that would reach Zenoh's port by default is
  given that port (``ros2 router`` ``--listen``; ``fleet``, ``fish … serve`` and the
  ``ros2`` tools ``--connect``), and ``--foxglove`` without a port gets
  ``--foxglove-port 0`` (any free one): the docs read as the user types them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from doctest import ELLIPSIS
from pathlib import Path
from typing import Any

from sybil import Document, Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/*.md", "firmware_ref/README.md")
STATE = "_doc_state"  # the document namespace's key of its DocState

# Until Ctrl-C, serving the lines after them: the simulations (one that records is a
# recorder: stopped before the next line, so the lines after it read a whole file).
CAN = r"can(?: -[icb] \S+| --modules \d+)*"  # the can group and its bus options
SERVES = re.compile(rf"^fwbridge (sim|{CAN} sim|fw run)\b(?!.*(--duration|--record|--capture))")
# Until Ctrl-C: stopped once they printed their first line.
UNTIL_STOPPED = re.compile(
    rf"^(fwbridge (sim|{CAN} sim|sniff|bridge|record|{CAN} sniff|{CAN} busload|{CAN} record"
    r"|fleet)\b"
    r"(?!.*--duration)"
    r"|fwbridge ros2 (echo|pub)\b(?!.*--count)"
    r"|fwbridge ros2 router\b"
    r"|fwbridge fish .*\bserve\b(?!.*--duration)"
    r"|python -m can\.logger\b"
    r"|qemu-system-arm\b)"
)
# Started, for the commands whose first line of output comes before they are: the
# bridge prints odometry while it starts, and says "active" once it runs.
# can.logger is in its loop (where Ctrl-C ends it quietly) once it prints a frame; QEMU
# runs the board once it names its UART's pty.
STARTED = {"fwbridge bridge": re.compile(r"^bridge: .* active,", re.M),
           "fwbridge ros2 router": re.compile(r"^router: listening on", re.M),
           "python -m can.logger": re.compile(r"^Timestamp:", re.M),
           "qemu-system-arm": re.compile(r"char device redirected to /dev/pts/")}
#: What a block that names the emulated board or the C firmware's build needs: it skips
#: without them and says why, as the firmware tests do.
TOOLS = (("fwbridge fw ", "the emulated board", ("qemu-system-arm", "arm-none-eabi-gcc")),
         ("make -C firmware_ref", "the C firmware", ("make", "cc")))
PLACEHOLDER_PTY = "/dev/pts/7"
PTY = re.compile(r"/dev/pts/\d+")
READY_TIMEOUT = 30.0  # seconds for a simulation's first line (its port)
FIRST_LINE = 5.0  # seconds a command that runs until Ctrl-C may take to print its first line
RUN_TIMEOUT = 90.0  # seconds for a command that ends by itself
STOP_TIMEOUT = 15.0  # seconds from SIGINT to exit

# Lines that fail today through a bug fixed elsewhere: (document, line as written) -> why.
# A listed line that fails makes its block xfail; one that passes fails the block, so
# the entry is removed once the fix is in.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


@dataclass
class Command:
    """One line of a sh block: the command as written, its line, what it prints."""

    text: str
    line: int
    expected: str | None


@dataclass
class DocState:
    """What a document's blocks share: a scratch directory, the simulation's port, the
    free port standing for Zenoh's 7447."""

    name: str
    scratch: Path
    env: dict[str, str]
    pty: str | None = None
    serving: list[Background] = field(default_factory=list)
    zenoh_port: int = field(default_factory=lambda: free_port())


#: Zenoh's well-known port (rmw_zenohd's, fwbridge ros2 router's): never the tests'.
ZENOH_PORT = "7447"
# Verbs that reach the Zenoh port by default, and the option that names another.
ZENOH_DEFAULTS = (
    (re.compile(r"^(fwbridge ros2 router)\b(?!.*--listen)"), "--listen"),
    (re.compile(r"^(fwbridge (?:fleet|ros2 (?:topics|echo|pub|call))\b)(?!.*--connect)"),
     "--connect"),
    (re.compile(r"^(fwbridge fish\b.*?\bserve)\b(?!.*--connect)"), "--connect"),
)
FOXGLOVE = re.compile(r"(--foxglove)(?=\s|$)(?!.*--foxglove-port)")


def free_port() -> int:
    """A TCP port free on loopback now (the OS's choice)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(text: str, state: DocState) -> str:
    """``text`` (a command or a toml block) on the document's free ports instead of the
    well-known ones (see the module)."""
    port = str(state.zenoh_port)
    text = re.sub(rf"(?<=:){ZENOH_PORT}\b", port, text)
    for pattern, option in ZENOH_DEFAULTS:
        text = pattern.sub(rf"\1 {option} tcp/127.0.0.1:{port}", text, count=1)
    return FOXGLOVE.sub(r"\1 --foxglove-port 0", text)


class Background:
    """A command run in its own process group, its output collected by threads."""

    def __init__(self, text: str, state: DocState) -> None:
        self.text = text
        self.proc = subprocess.Popen(
            ["bash", "-c", text], cwd=state.scratch, env=state.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self.first = threading.Event()  # a line on stdout or stderr
        self.first_out = threading.Event()  # a line on stdout
        self.threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out, self.first_out),
                             daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err, None),
                             daemon=True)]
        for t in self.threads:
            t.start()

    def _read(self, stream: Any, into: list[str], event: threading.Event | None) -> None:
        for raw in stream:
            into.append(raw.decode(errors="replace"))
            self.first.set()
            if event is not None:
                event.set()
        self.first.set()  # closed: nothing more will come
        if event is not None:
            event.set()

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> bool:
        """Until PATTERN is in the output or the process ended; whether it is."""
        deadline = time.monotonic() + timeout
        while not pattern.search("".join(self.err) + "".join(self.out)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.02)  # polling: the output, within the deadline above
        return True

    def stop(self) -> int:
        """SIGINT to its process group, as Ctrl-C on a terminal; its exit status."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"{self.text!r} did not stop on SIGINT") from None
        for t in self.threads:
            t.join(5)
        return rc

    def output(self) -> str:
        return f"stdout:\n{clip(''.join(self.out))}stderr:\n{clip(''.join(self.err))}"


def clip(text: str, keep: int = 2000) -> str:
    """The start and the end of a long output."""
    return text if len(text) <= 2 * keep else f"{text[:keep]}\n[…]\n{text[-keep:]}"


def split_comment(line: str) -> tuple[str, str | None]:
    """A shell line -> (command, comment after ``#``), quotes respected."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), None


def commands(source: str, first_line: int) -> Iterator[Command]:
    for n, raw in enumerate(source.splitlines()):
        text, comment = split_comment(raw)
        if not text:
            continue
        expected = comment[2:].strip() if comment and comment.startswith("->") else None
        yield Command(text, first_line + n, expected)


def matches(expected: str, output: str) -> bool:
    """Whether OUTPUT is EXPECTED, ``…`` (or ``...``) standing for anything."""
    parts = re.split(r"…|\.\.\.", expected)
    pattern = ".*".join(r"\s+".join(map(re.escape, p.split())) for p in parts)
    return re.fullmatch(r"\s*" + pattern + r"\s*", output, re.S) is not None


def run_line(cmd: Command, state: DocState) -> str | None:
    """Run one command as the doc says; a failure's description, or None."""
    text = free_ports(cmd.text, state)
    where = f"{state.name}:{cmd.line}: {cmd.text}"
    if PLACEHOLDER_PTY in text:
        if state.pty is None:  # never the real /dev/pts/7: another program's terminal
            return f"{where}\n{PLACEHOLDER_PTY} stands for a simulation's port: none runs here"
        text = text.replace(PLACEHOLDER_PTY, state.pty)
    if SERVES.match(text) or UNTIL_STOPPED.match(text):
        bg = Background(text, state)
        if SERVES.match(text):
            if not bg.first.wait(READY_TIMEOUT):
                bg.stop()
                return f"{where}\nprinted nothing in {READY_TIMEOUT:.0f} s\n{bg.output()}"
            if bg.proc.poll() is not None:
                return f"{where}\nended at once ({bg.proc.returncode})\n{bg.output()}"
            if text.startswith(("fwbridge sim", "fwbridge fw run")):
                if not bg.wait_for(PTY, READY_TIMEOUT):
                    bg.stop()
                    return f"{where}\nprinted no port\n{bg.output()}"
                found = PTY.search("".join(bg.err) + "".join(bg.out))
                assert found is not None
                state.pty = found.group()
            state.serving.append(bg)
            return None
        started = next((p for verb, p in STARTED.items() if text.startswith(verb)), None)
        if started is None:
            bg.first_out.wait(FIRST_LINE)  # a recorder may say nothing before it stops
        elif not bg.wait_for(started, READY_TIMEOUT):
            bg.stop()
            return f"{where}\ndid not start in {READY_TIMEOUT:.0f} s\n{bg.output()}"
        return stopped_failure(where, bg, bg.stop())
    proc = subprocess.Popen(["bash", "-c", text], cwd=state.scratch, env=state.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole pipeline, not only bash
        proc.communicate()
        return f"{where}\ndid not end in {RUN_TIMEOUT:.0f} s"
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    output = f"exit {done.returncode}\nstdout:\n{clip(done.stdout)}stderr:\n{clip(done.stderr)}"
    want_error = cmd.expected is not None and cmd.expected.startswith("error:")
    if done.returncode != (2 if want_error else 0) or "Traceback" in done.stderr:
        return f"{where}\n{output}"
    if cmd.expected is not None:
        got = done.stderr if want_error else done.stdout + done.stderr
        if not matches(cmd.expected, got):
            return f"{where}\nexpected: {cmd.expected}\n{output}"
    return None


def stopped_failure(where: str, bg: Background, rc: int) -> str | None:
    # fwbridge's verbs exit 130 after Ctrl-C (README); other programs (python-can's
    # tools, QEMU) as they do: 0 for can.logger, QEMU dies of the signal.
    ours = bg.text.startswith("fwbridge")
    want = {130} if ours else {0, 130, -signal.SIGINT}
    err = "".join(bg.err)
    if rc not in want or "error:" in err or "Traceback" in err:
        return f"{where}\nexit {rc} after SIGINT (want {130 if ours else 0})\n{bg.output()}"
    return None


def evaluate_sh(example: Example) -> None:
    import pytest

    state: DocState = example.namespace[STATE]
    for marker, what, tools in TOOLS:
        missing = [t for t in tools if shutil.which(t) is None]
        if marker in str(example.parsed) and missing:
            pytest.skip(f"{what} needs {', '.join(missing)} (Debian packages)")
    failures: list[str] = []
    known: list[str] = []
    passed_known: list[str] = []
    try:
        for cmd in commands(example.parsed, example.line + 1):
            failure = run_line(cmd, state)
            reason = KNOWN_FAILURES.get((state.name, cmd.text))
            if reason is not None:
                (known if failure else passed_known).append(f"{cmd.text}: {reason}")
            elif failure:
                failures.append(failure)
                break
    finally:
        while state.serving:
            bg = state.serving.pop()
            failure = stopped_failure(f"{state.name}: {bg.text}", bg, bg.stop())
            if failure and not failures:
                failures.append(failure)
        state.pty = None
    if failures:
        raise AssertionError("\n\n".join(failures))
    if passed_known:
        raise AssertionError("passes now; remove from KNOWN_FAILURES: " + "; ".join(passed_known))
    if known:
        pytest.xfail("; ".join(known))


TOML_NAME = re.compile(r"#\s*([\w.-]+\.toml)\s*$")


def evaluate_toml(example: Example) -> None:
    source = str(example.parsed)
    tomllib.loads(source)
    first = source.splitlines()[0] if source else ""
    named = TOML_NAME.match(first)
    if named:
        state: DocState = example.namespace[STATE]
        (state.scratch / named.group(1)).write_text(free_ports(source, state))


class Markdown(Document):
    """A document whose namespace knows its path (for its setup)."""

    def __init__(self, text: str, path: str) -> None:
        super().__init__(text, path)
        self.namespace["__file__"] = path


def setup(namespace: dict[str, Any]) -> None:
    path = Path(namespace["__file__"])
    scratch = Path(tempfile.mkdtemp(prefix="fwbridge-doc-"))
    for name in ("examples", "docs", "tests", "firmware_ref"):
        (scratch / name).symlink_to(ROOT / name)
    run = scratch / ".run"
    run.mkdir(mode=0o700)
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join((bindir, os.environ.get("PATH", ""))),
           "FWBRIDGE_RUNTIME_DIR": str(run), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    namespace[STATE] = DocState(name, scratch, env)
    namespace["_old_runtime_dir"] = os.environ.get("FWBRIDGE_RUNTIME_DIR")
    os.environ["FWBRIDGE_RUNTIME_DIR"] = str(run)  # the python blocks' buses too


def teardown(namespace: dict[str, Any]) -> None:
    state: DocState = namespace[STATE]
    for sock in (state.scratch / ".run").glob("*.sock"):  # a bus a failed block left up
        subprocess.run(["fwbridge", "can", "bus", "down", sock.stem], env=state.env,
                       capture_output=True, timeout=STOP_TIMEOUT, check=False)
    old = namespace["_old_runtime_dir"]
    if old is None:
        os.environ.pop("FWBRIDGE_RUNTIME_DIR", None)
    else:
        os.environ["FWBRIDGE_RUNTIME_DIR"] = old
    shutil.rmtree(state.scratch, ignore_errors=True)


def is_document(path: Path) -> bool:
    """The DOCUMENTS of this repository, nothing else."""
    return any(path.match(str(ROOT / pattern)) for pattern in DOCUMENTS)


def documents_sybil() -> Sybil:
    return Sybil(
        parsers=[
            PythonCodeBlockParser(doctest_optionflags=ELLIPSIS),
            CodeBlockParser("sh", evaluate_sh),
            CodeBlockParser("toml", evaluate_toml),
            SkipParser(),
        ],
        patterns=list(DOCUMENTS),
        path=str(ROOT),
        setup=setup,
        teardown=teardown,
        document_types={".md": Markdown},
        name="docs",
    )
