"""Portable where it can be: the library and the verbs that open no port run where
POSIX does not (Windows), and what needs POSIX says so in one line when it runs.

A fresh interpreter is made to look like Windows to fwbridge's own code: the
POSIX-only modules (pty, termios, tty, fcntl, resource, grp, pwd, ...) refuse
to import, and the POSIX-only names of ``os``, ``signal``, ``socket`` and
``select`` (``os.openpty``, ``signal.SIGHUP``, ``socket.AF_UNIX``,
``select.poll``, ...) are missing, as a fwbridge module sees them. Third-party
libraries keep their own platform choice (pyserial picks its Windows backend
there, python-can and Zenoh have none to make), so they see the real modules.
Then every module of the package is imported and a few verbs run in-process,
through the console script's entry point inside click's ``CliRunner``.

The probe is this file run as a script; the tests read its JSON answer.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Modules Windows does not have (the ones a robot's tools would reach for).
POSIX_MODULES = frozenset({
    "pty", "termios", "tty", "fcntl", "resource", "grp", "pwd", "posix", "curses",
    "readline", "syslog", "_posixsubprocess", "_posixshmem",
})

#: Names Windows' ``os`` lacks (Python 3.10 to 3.12).
POSIX_OS = frozenset({
    "openpty", "forkpty", "login_tty", "fork", "ttyname", "ctermid", "setsid", "getsid",
    "killpg", "getpgid", "setpgid", "getpgrp", "setpgrp", "tcgetpgrp", "tcsetpgrp",
    "getuid", "geteuid", "getgid", "getegid", "getgroups", "setuid", "setgid", "getresuid",
    "mkfifo", "mknod", "fchmod", "fchown", "chown", "lchown", "lchmod", "chroot",
    "set_blocking", "get_blocking", "pipe2", "wait", "wait3", "wait4", "waitid", "WNOHANG",
    "WUNTRACED", "WCONTINUED", "sched_getaffinity", "sched_setaffinity", "uname", "statvfs",
    "fstatvfs", "sync", "getloadavg", "nice", "pread", "pwrite", "preadv", "pwritev",
    "sendfile", "posix_fadvise", "posix_fallocate", "fdatasync", "sysconf", "pathconf",
    "fpathconf", "confstr", "major", "minor", "makedev", "memfd_create", "eventfd", "splice",
    "O_NOCTTY", "O_NONBLOCK", "O_NOFOLLOW", "O_CLOEXEC", "O_DIRECTORY", "O_SYNC", "O_DSYNC",
    "O_NDELAY", "O_ASYNC", "O_DIRECT", "O_NOATIME", "O_PATH", "O_TMPFILE", "O_EXLOCK",
    "O_SHLOCK", "O_RSYNC", "O_LARGEFILE",
})

#: What Windows' ``signal`` has; every other ``SIG*`` name is POSIX's.
WINDOWS_SIGNALS = frozenset({
    "SIGABRT", "SIGFPE", "SIGILL", "SIGINT", "SIGSEGV", "SIGTERM", "SIGBREAK", "SIG_DFL",
    "SIG_IGN",
})
POSIX_SIGNAL_CALLS = frozenset({
    "alarm", "pause", "setitimer", "getitimer", "siginterrupt", "pthread_kill",
    "pthread_sigmask", "sigpending", "sigwait", "sigwaitinfo", "sigtimedwait",
    "pidfd_send_signal", "ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF", "ItimerError",
})

#: Windows' ``select`` has select() (of sockets only) and its error: no poll, no epoll.
WINDOWS_SELECT = frozenset({"select", "error"})

#: Unix-domain sockets, CAN and packet sockets, and flags Windows' ``socket`` lacks.
POSIX_SOCKET = frozenset({
    "AF_UNIX", "SO_REUSEPORT", "MSG_NOSIGNAL", "MSG_DONTWAIT", "SCM_RIGHTS", "SCM_CREDENTIALS",
    "CMSG_LEN", "CMSG_SPACE", "sethostname",
})
POSIX_SOCKET_PREFIXES = ("AF_CAN", "PF_CAN", "CAN_", "SOL_CAN", "AF_PACKET", "PF_PACKET",
                         "AF_NETLINK", "AF_ALG", "AF_VSOCK", "AF_TIPC", "AF_RDS")


def hidden(module: str, name: str) -> bool:
    """``module.name`` is missing on Windows."""
    if module == "os":
        return name in POSIX_OS
    if module == "signal":
        return (name.startswith("SIG") and name not in WINDOWS_SIGNALS) or (
            name in POSIX_SIGNAL_CALLS)
    if module == "select":
        return not name.startswith("__") and name not in WINDOWS_SELECT
    if module == "socket":
        return name in POSIX_SOCKET or name.startswith(POSIX_SOCKET_PREFIXES)
    return False


class WindowsView(types.ModuleType):
    """A module as Windows has it: its POSIX-only names are missing."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__, real.__doc__)
        self.__real = real

    def __getattr__(self, name: str) -> Any:
        if hidden(self.__name__, name):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} "
                                 "(not on Windows)")
        return getattr(self.__real, name)


def restrict() -> Callable[[], None]:
    """From now on, fwbridge's modules see this interpreter as Windows shows it to them;
    returns what undoes it."""
    real_import: Callable[..., types.ModuleType] = builtins.__import__
    views: dict[str, WindowsView] = {}

    def guarded_import(name: str, globals: Mapping[str, Any] | None = None,
                       locals: Mapping[str, Any] | None = None,
                       fromlist: tuple[str, ...] | None = (), level: int = 0) -> Any:
        importer = str((globals or {}).get("__name__", ""))
        ours = not level and importer.partition(".")[0] == "fwbridge"
        if ours and name.partition(".")[0] in POSIX_MODULES:
            # Refused before the real import: nothing POSIX-only is loaded for it.
            raise ModuleNotFoundError(f"No module named {name!r} (not on Windows)", name=name)
        module = real_import(name, globals, locals, fromlist, level)
        if ours and module.__name__ in ("os", "signal", "select", "socket"):
            return views.setdefault(module.__name__, WindowsView(module))
        return module

    builtins.__import__ = guarded_import

    def undo() -> None:
        builtins.__import__ = real_import

    return undo


# -- the probe (this file run as a script) ----------------------------------------------------

def help_paths() -> Iterator[list[str]]:
    """Every command and group under ``fwbridge``, by its path of names."""
    from tests.layout import cli_commands

    return (path for path, _ in cli_commands())


def run_verb(args: list[str], stdin: bytes = b"") -> dict[str, Any]:
    """``fwbridge ARGS`` through the entry point, in this interpreter: exit code, output."""
    from click.testing import CliRunner

    runner = CliRunner()
    code: Any = 0
    with runner.isolation(input=stdin) as (out, err, _):
        try:
            from fwbridge.cli import main

            main(args)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # the answer names it
            code = f"{type(exc).__name__}: {exc}"
        stdout, stderr = out.getvalue(), err.getvalue() if err is not None else b""
    return {"args": args, "code": code if code is not None else 0,
            "stdout": stdout.decode(errors="replace"), "stderr": stderr.decode(errors="replace")}


def probe(work: Path) -> dict[str, Any]:
    """Import every module, then run the verbs; what failed, and the verbs' output."""
    import importlib
    import traceback

    sys.path.insert(0, str(ROOT))
    os.environ["FWBRIDGE_RUNTIME_DIR"] = str(work / "run")  # never the user's buses
    from tests.layout import package_modules

    assert not [m for m in sys.modules if m.partition(".")[0] == "fwbridge"], "imported early"
    restrict()
    failed: dict[str, str] = {}
    for name in package_modules():
        try:
            importlib.import_module(name)
        except BaseException as exc:  # the answer names it
            frames = traceback.extract_tb(exc.__traceback__)
            where = [f for f in frames if f.filename != __file__ and f.lineno][-1:] or frames
            failed[name] = (f"{type(exc).__name__}: {exc} "
                            f"({Path(where[-1].filename).name}:{where[-1].lineno})")
    log = work / "bus.log"
    log.write_text("".join(f"({1_780_000_000.5 + 0.02 * k:.6f}) can0 201#0A00010100000000\n"
                           for k in range(3)))
    verbs = {"encode": run_verb(["encode", "cmd", "--vx", "0.2", "--vy", "0", "--wz", "0.5"])}
    frame = bytes.fromhex(verbs["encode"]["stdout"]) if verbs["encode"]["code"] == 0 else b""
    (work / "cmd.bin").write_bytes(frame * 3)
    verbs |= {
        "decode file": run_verb(["decode", "-p", "cmd", str(work / "cmd.bin")]),
        "decode stdin": run_verb(["decode", "-p", "cmd", "--json", "-"], stdin=frame),
        "gen c": run_verb(["gen", "c", "odom", "cmd", "-o", str(work / "c"), "--name", "robot"]),
        "can decode": run_verb(["can", "decode", str(log)]),
        "can sim": run_verb(["can", "sim", "2", "--duration", "0.2", "--pacing", "afap"]),
        "can bus list": run_verb(["can", "bus", "list"]),
        "frames": run_verb(["frames"]),
        "ports": run_verb(["ports"]),
        # The simulated firmware in-process (a sim:// URL, no pty), as pyserial opens it.
        "sniff sim": run_verb(["sniff", "sim://mecanum", "-p", "odom", "--duration", "0.3"]),
        "bridge sim": run_verb(["bridge", str(ROOT / "examples" / "mecanum.toml"), "--sim",
                                "--duration", "0.5", "--json", "--record",
                                str(work / "bridge.mcap")]),
        "fish sim": run_verb(["fish", "-p", "sim://fish", "status", "--json"]),
        "convert": run_verb(["convert", str(log), str(work / "bus.mcap")]),
        "arm": run_verb(["arm", "pick-place"]),  # its arm simulated on this process's bus
    }
    # What needs POSIX says so, in one line, when it is used.
    posix = [run_verb(["sim", "mecanum", "--duration", "0.2"]),
             run_verb(["can", "bus", "up", "portable-probe"]),
             run_verb(["can", "-i", "fwbridge", "-c", "shared:portable-probe", "sniff",
                       "--duration", "0.1"]),
             run_verb(["arm", "pick-place", "-i", "fwbridge", "-c", "shared:portable-probe"]),
             run_verb(["teleop", str(work / "no-such-port")])]
    try:
        helps = [run_verb([*path, "--help"]) for path in help_paths()]
    except Exception as exc:  # the answer names it
        helps = [{"args": ["--help"], "code": f"{type(exc).__name__}: {exc}"}]
    return {"failed": failed, "verbs": verbs, "posix": posix, "helps": helps}


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]))))
    sys.stdout.flush()
    os._exit(0)  # no exit hook of a library loaded above runs under the restriction


# -- the tests --------------------------------------------------------------------------------

import pytest  # noqa: E402 - the probe above runs without pytest


@pytest.fixture(scope="module")
def answer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("portable")
    res = subprocess.run([sys.executable, __file__, str(work)], capture_output=True, text=True,
                         timeout=300, cwd=work, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    found: dict[str, Any] = json.loads(res.stdout.splitlines()[-1])
    return found


def test_every_module_imports_without_posix(answer: dict[str, Any]) -> None:
    # Each failure names the module, the error and the line that raised it.
    assert answer["failed"] == {}


def test_the_verbs_that_open_no_port_run_without_posix(answer: dict[str, Any]) -> None:
    verbs = answer["verbs"]
    assert {k: (v["code"], v["stderr"]) for k, v in verbs.items() if v["code"] != 0} == {}
    assert verbs["encode"]["stdout"].startswith("aa 55 ")
    assert verbs["decode file"]["stdout"].count("0.2") == 3  # the file's three frames
    assert json.loads(verbs["decode stdin"]["stdout"])["wz"] == 0.5
    assert "robot.h" in verbs["gen c"]["stderr"]
    assert len(verbs["can decode"]["stdout"].splitlines()) == 3
    assert "module" in verbs["can sim"]["stdout"]  # its table: python-can's bus, in-process
    assert "no shared bus is up" in verbs["can bus list"]["stderr"]
    assert "odom" in verbs["frames"]["stdout"]
    assert "yaw_deg=" in verbs["sniff sim"]["stdout"]
    assert json.loads(verbs["bridge sim"]["stdout"].splitlines()[0])["frame_id"] == "odom"
    assert "recording the link" in verbs["bridge sim"]["stderr"]
    assert json.loads(verbs["fish sim"]["stdout"])["bank"] == "A"
    assert "converted" in verbs["convert"]["stderr"]
    assert "reached" in verbs["arm"]["stdout"]


def test_every_help_renders_without_posix(answer: dict[str, Any]) -> None:
    helps = answer["helps"]
    assert len(helps) > 40  # every group and verb, not a walk that stopped early
    assert [(h["args"], h["code"]) for h in helps if h["code"] != 0] == []
    assert all(h["stdout"].startswith("Usage: fwbridge") for h in helps)


def test_what_needs_posix_says_so_in_one_line(answer: dict[str, Any]) -> None:
    for run in answer["posix"]:
        lines = run["stderr"].splitlines()
        assert (run["code"], len(lines)) == (2, 1), run
        assert lines[0].startswith("error: ") and "needs Linux/macOS: " in lines[0], run


def test_the_restriction_bites() -> None:
    # The control: a fwbridge module is refused the POSIX-only modules and names; anyone
    # else (the libraries) still gets them.
    undo = restrict()
    try:
        def ours(code: str) -> None:
            exec(code, {"__name__": "fwbridge.control"})

        refused: list[tuple[str, type[Exception]]] = [
            ("import termios", ModuleNotFoundError), ("import pty", ModuleNotFoundError),
            ("from fcntl import fcntl", ModuleNotFoundError),
            ("import signal; signal.SIGHUP", AttributeError),
            ("from signal import SIGWINCH", ImportError),
            ("import os; os.openpty", AttributeError),
            ("import os.path; os.set_blocking", AttributeError),
            ("import socket; socket.AF_UNIX", AttributeError),
            ("import select; select.poll", AttributeError)]
        for code, error in refused:
            with pytest.raises(error):
                ours(code)
        ours("import os, signal, socket, select\n"
             "assert os.getcwd() and signal.SIGINT and socket.AF_INET and select.select\n"
             "assert getattr(os, 'O_NOFOLLOW', 0) == 0 and not hasattr(signal, 'SIGHUP')")
        exec("import termios, signal, socket; signal.SIGHUP; socket.AF_UNIX",
             {"__name__": "serial.serialposix"})
    finally:
        undo()


@pytest.mark.parametrize("target", ["/dev/pts/4093", "/dev/ttys4093"], ids=["linux", "macos"])
def test_a_stale_link_to_a_pty_is_replaced_on_linux_and_macos(tmp_path: Path,
                                                               target: str) -> None:
    # macOS names its ptys /dev/ttysN: a link a killed simulation left there is stale too.
    from fwbridge.bridge.link.transports import LinkPathTaken, claim_pty_link

    assert not os.path.exists(target)
    (tmp_path / "port").symlink_to(target)
    claim_pty_link(tmp_path / "port")
    (tmp_path / "tty").symlink_to("/dev/tty4093")  # not a pty: refused, as before
    with pytest.raises(LinkPathTaken, match="not to a pty"):
        claim_pty_link(tmp_path / "tty")
