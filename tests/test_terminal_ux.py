"""What a person sees at a terminal: live lines, rows that fit, errors, the docs' tour.

The live-line tests run the verbs on a real pty (tests/terminal.py) and replay
everything they drew (the terminal's own ``^C`` echo included) through
:class:`Screen`, a small VT100 model with the wrap rules of xterm, to read
the screen a person is left with.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT, reaped, run_cli, spawn_verb
from tests.terminal import Terminal, cursor_restored

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")

_CSI = re.compile(
    r"\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-B]?")


class Screen:
    """The lines a terminal of ``cols`` columns shows after ``raw`` (all of them: no
    scroll-back limit) and where its cursor is. Printing into the last column leaves
    the cursor there with a wrap pending, as xterm does: the next character starts a
    new line; a carriage return cancels the wrap."""

    def __init__(self, raw: bytes, cols: int) -> None:
        self.cols = cols
        self.lines: list[list[str]] = [[]]
        self.row = self.col = 0
        self.wrap = False
        text = raw.decode("utf-8", "replace")
        i = 0
        while i < len(text):
            m = _CSI.match(text, i)
            if m:
                self._csi(m.group(1) or "", m.group(2) or "")
                i = m.end()
                continue
            self._char(text[i])
            i += 1

    def _line(self) -> list[str]:
        while len(self.lines) <= self.row:
            self.lines.append([])
        return self.lines[self.row]

    def _csi(self, arg: str, op: str) -> None:
        n = int(arg) if arg.isdigit() else None
        line = self._line()
        if op == "K":
            if n == 2:
                line.clear()
            elif not n:
                del line[self.col:]
            self.wrap = False
        elif op == "A":
            self.row = max(self.row - (n or 1), 0)
            self.wrap = False
        elif op == "G":
            self.col = (n or 1) - 1
            self.wrap = False

    def _char(self, c: str) -> None:
        if c == "\r":
            self.col, self.wrap = 0, False
        elif c == "\n":
            self.row += 1
            self.wrap = False
        elif c == "\b":
            self.col, self.wrap = max(self.col - 1, 0), False
        elif c.isprintable():
            if self.wrap:
                self.row, self.col, self.wrap = self.row + 1, 0, False
            line = self._line()
            line.extend(" " * (self.col + 1 - len(line)))
            line[self.col] = c
            if self.col == self.cols - 1:
                self.wrap = True
            else:
                self.col += 1

    @property
    def text(self) -> list[str]:
        return ["".join(line).rstrip() for line in self.lines]


def test_screen_model_wraps_as_xterm() -> None:
    s = Screen(b"abcd\r\x1b[2Kxy\r\nef", 4)
    assert s.text == ["xy", "ef"]
    full = Screen(b"abcd^C\r\x1b[2K", 4)  # a full-width line: the echo wraps, the erase
    assert full.text == ["abcd", ""]  # clears the new line, the old one stays


# -- the live line ------------------------------------------------------------------------
def _stopped(term: Terminal) -> list[str]:
    """Ctrl-C, exit 130, the cursor back: the screen's lines."""
    term.interrupt()
    assert term.wait(30) == 130, term.text
    assert cursor_restored(term.raw) and term.attrs_restored()
    return Screen(term.raw, term_cols(term)).text


def term_cols(term: Terminal) -> int:
    import fcntl
    import struct
    import termios

    return int(struct.unpack("HHHH", fcntl.ioctl(term.master, termios.TIOCGWINSZ,
                                                 b"\0" * 8))[1])


def test_can_sniff_rows_scroll_above_its_live_line() -> None:
    """Each frame's row on a line of its own; the live line only ever on the last."""
    with Terminal("can", "--modules", "2", "sniff") as term:
        term.expect(r"sim0: [1-9]\d* frames, [1-9]\d* actuator")
        term.expect(r"(module\s+\d feedback.*\n.*){40}")  # 40 rows under a drawn live line
        screen = Screen(term.raw, 100)
        rows = screen.text[:screen.row]
        assert rows and not [r for r in rows if "frames," in r], rows
        assert re.fullmatch(r"sim0: \d+ frames, \d+ actuator, 0 errors",
                            screen.text[screen.row]), screen.text[-3:]
        lines = _stopped(term)
    assert not [r for r in lines if "frames," in r and "counters" not in r], lines[-5:]


@pytest.mark.parametrize("cols", [30, 61])
def test_ctrl_c_on_a_full_width_live_line_leaves_no_stale_line(cols: int) -> None:
    """The sim's live line is longer than the window: cut, Ctrl-C's echo must not wrap
    past it and leave it (or a ``^``) on the screen."""
    with Terminal("sim", "mecanum", cols=cols) as term:
        term.expect(r"odom=[1-9]|…")
        term.expect(r"t=\s+\d\.\d+s.*\r.*t=\s+\d\.\d+s")  # drawn twice: live
        lines = _stopped(term)
    assert not [r for r in lines if "^" in r or "…" in r], lines


def test_sniff_ctrl_c_on_a_narrow_window_leaves_no_stale_line(mecanum: str) -> None:
    with Terminal("sniff", mecanum, "-p", "odom", cols=40) as term:
        term.expect(r"odom: [1-9]\d* frames")
        lines = _stopped(term)
    assert not [r for r in lines if "^" in r or "…" in r or "bytes discarded" in r], lines


def test_replay_message_on_its_own_line_above_its_bar(mecanum: str, tmp_path: Path) -> None:
    capture = tmp_path / "run.pcapng"
    assert run_cli("record", mecanum, str(capture), "--duration", "1").returncode == 0
    with Terminal("replay", str(capture), mecanum, "--loop", cols=250) as term:  # the path
        term.expect(r"replay \[[-#]+\] [1-9]\d* packets")
        screen = Screen(term.raw, 250)
        said = [r for r in screen.text if "replaying" in r]
        assert len(said) == 1 and re.fullmatch(
            r"replaying \d+ rx packets from .*run\.pcapng to \S+, in a loop", said[0]), said
        assert screen.text[screen.row].startswith("replay [")
        lines = _stopped(term)
    assert not [r for r in lines if r.startswith("replay [")], lines


# -- bridge on a terminal --------------------------------------------------------------------
def test_bridge_on_a_terminal_is_one_live_line_and_says_where_it_records(
        tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text('use_sim = true\n[link]\nurl = "/dev/null"\n'
                   '[sim]\nurl = "sim://mecanum?pacing=realtime"\n')
    out = tmp_path / "run.pcapng"
    with Terminal("bridge", str(cfg), "--record", str(out), cols=250) as term:
        term.expect(r"link up  odom [1-9]\d*/s  x=[-+]\d\.\d{3} y=[-+]\d\.\d{3} yaw=")
        screen = Screen(term.raw, 250)
        assert '"seq"' not in term.text  # no JSON lines on a terminal
        assert [r for r in screen.text if r == f"bridge: recording the link to {out}"]
        assert screen.text[screen.row].startswith("link up")
        lines = _stopped(term)
    assert not [r for r in lines if r.startswith("link ")], lines
    piped = run_cli("bridge", str(cfg), "--duration", "0.5")  # piped: JSON lines
    assert piped.returncode == 0 and b'"seq":' in piped.stdout


def test_bridge_port_connects_to_the_simulator_started(tmp_path: Path) -> None:
    """The README tour: `bridge examples/mecanum.toml --port PTY` drives that simulator."""
    proc = spawn_verb("sim", "mecanum", "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    with reaped(proc):
        port = str(json.loads(proc.stdout.readline())["port"])
        res = run_cli("bridge", "examples/mecanum.toml", "--port", port, "--duration", "1")
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert res.returncode == 0, res.stderr
    assert f"port {port} active".encode() in res.stderr and b'"seq":' in res.stdout
    end = [json.loads(line) for line in proc.stdout.read().splitlines()][-1]
    assert end["event"] == "end" and end["firmware"]["cmd_applied"] > 0  # it was driven
    bad = run_cli("bridge", "examples/mecanum.toml", "--port", "http://x")
    assert bad.returncode == 2 and bad.stderr.decode().startswith("error: --port http://x:")


# -- one name per meaning ------------------------------------------------------------------
def _options() -> dict[str, set[str]]:
    """Every visible option name -> the verbs that have it."""
    import click

    from fwbridge.cli import fwbridge

    seen: dict[str, set[str]] = {}

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, f"{path} {name}".strip())
        ctx = click.Context(cmd)
        for p in cmd.params:
            record = p.get_help_record(ctx) if isinstance(p, click.Option) else None
            if record is not None:
                for name in re.findall(r"--[\w-]+", record[0]):
                    seen.setdefault(name, set()).add(path)

    walk(fwbridge, "")
    return seen


def test_one_spelling_per_meaning_old_ones_hidden_but_accepted() -> None:
    from fwbridge.cli import fwbridge

    seen = _options()
    assert "--times" not in seen and "--capture" not in seen, seen.get("--times", seen)
    assert "ros2 pub" in seen["--count"] and "can sim" in seen["--record"]
    can = fwbridge.get_command(None, "can")  # type: ignore[arg-type]
    sim = can.get_command(None, "sim")  # type: ignore[union-attr]
    ctx = sim.make_context("sim", ["2", "--capture", "bus.log"])  # type: ignore[union-attr]
    assert ctx.params["capture"] == "bus.log"
    ros2 = fwbridge.get_command(None, "ros2")  # type: ignore[arg-type]
    pub = ros2.get_command(None, "pub")  # type: ignore[union-attr]
    ctx = pub.make_context("pub", ["/t", "std_msgs/msg/String", "{}",  # type: ignore[union-attr]
                                   "--times", "3"])
    assert ctx.params["times"] == 3


# -- failed starts: one line -----------------------------------------------------------------
def test_sim_fish_on_a_link_in_use_is_one_error_line(tmp_path: Path) -> None:
    taken = tmp_path / "robot"
    taken.write_text("mine")
    res = run_cli("sim", "fish", "--link", str(taken))
    err = res.stderr.decode()
    assert res.returncode == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert taken.read_text() == "mine"


# -- your own description from Python -----------------------------------------------------
def test_codec_and_receiver_for_take_a_description_file(tmp_path: Path) -> None:
    import fwbridge
    from fwbridge.protocols import codec_for, load_description, receiver_for

    imu = ROOT / "tests" / "fixtures" / "frames" / "imu.toml"
    codec = codec_for(str(imu))
    assert codec.desc == load_description(imu) and codec_for(imu).desc == codec.desc
    frame = codec.from_mapping({"seq": 1, "mode": 1, "ax": 0.5, "ay": 0, "az": 9.81,
                                "gz": 0.1, "temp": 25.0, "status": 7})
    wire = codec.encode(frame)
    assert [item.frame for item in receiver_for(imu).feed(b"\x00" + wire)] == [frame]
    with pytest.raises(fwbridge.ConfigError, match=r"^missing\.toml: no such file$"):
        codec_for("missing.toml")
    with pytest.raises(fwbridge.ConfigError, match=r"missing\.toml"):
        receiver_for(Path("missing.toml"))


# -- the example robot file, for every verb that takes one --------------------------------
EXAMPLE = "examples/mecanum.toml"


def _config_verbs() -> set[str]:
    """The verbs that take a robot file: a ``--config`` option or a CONFIG argument."""
    return {v for name, verbs in _options().items() if name == "--config" for v in verbs} | {
        "bridge"}


def test_the_example_robot_file_loads_for_every_verb_that_takes_it() -> None:
    from fwbridge.bridge.node.config import load_config
    from fwbridge.bridge.robots.arm.config import load_arm_config
    from fwbridge.bridge.ros2.config import load_ros2

    ros2 = {"fish serve", "fleet", "ros2 call", "ros2 echo", "ros2 pub", "ros2 topics"}
    assert _config_verbs() == ros2 | {"arm ik", "arm pick-place", "bridge"}
    load_config(ROOT / EXAMPLE)
    load_ros2(str(ROOT / EXAMPLE))
    load_arm_config(ROOT / EXAMPLE)
    assert run_cli("bridge", EXAMPLE, "--duration", "0.3").returncode == 0
    assert run_cli("arm", "ik", "0.5", "0.2", "0.2", "--config", EXAMPLE).returncode == 0
    res = run_cli("arm", "pick-place", "--config", EXAMPLE, timeout=120)
    assert res.returncode == 0, res.stderr
