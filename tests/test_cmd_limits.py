"""Velocity limits on the command line: ``send PORT cmd`` and ``bridge --cmd-stdin``.

Both apply the ROS 2 cmd_vel path's limits (10 m/s, 20 rad/s; one definition,
``bridge.node.numbers``), changed with ``--max-linear`` / ``--max-angular``.
A one-shot ``send`` refuses with one ``error:`` line naming the field and the
value, exit 2, before the port is opened; a ``--cmd-stdin`` line that cannot be
followed gets one error line and stops the base until the next good line:
the firmware never sees the bad value.
"""

from __future__ import annotations

import math
import struct
import subprocess
from pathlib import Path

import pytest

from fwbridge.bridge.node import numbers
from fwbridge.bridge.rosmsg import topics
from fwbridge.cli_verbs.bridge_run import MAX_LINE, parse_request
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.errors import ConfigError
from tests.helpers import FirmwarePeer, reaped, run_verb, spawn_verb

DEADLINE = 20.0


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def test_one_definition_of_the_limits() -> None:
    """cmd_vel and the command line take the same numbers from the same place."""
    assert topics.MAX_LINEAR is numbers.MAX_LINEAR and numbers.MAX_LINEAR == 10.0
    assert topics.MAX_ANGULAR is numbers.MAX_ANGULAR and numbers.MAX_ANGULAR == 20.0


@pytest.mark.parametrize(("args", "needle"), [
    (("--wz", "1e30"), "--wz = 1e+30 is beyond ±20 rad/s (--max-angular)"),
    (("--wz", "-8e9"), "--wz = -8e+09 is beyond ±20 rad/s (--max-angular)"),
    (("--vx", "10.5"), "--vx = 10.5 is beyond ±10 m/s (--max-linear)"),
    (("--vy", "-3e38"), "--vy = -3e+38 is beyond ±10 m/s (--max-linear)"),
    (("--vx", "3", "--max-linear", "2.5"), "--vx = 3 is beyond ±2.5 m/s (--max-linear)"),
    (("--wz", "nan"), "'--wz': must be a finite number, not nan"),
    (("--wz", "inf"), "'--wz': must be a finite number, not inf"),
    (("--max-angular", "nan"), "'--max-angular': must be a finite number"),
])
def test_send_cmd_refuses_with_one_error_line_and_sends_nothing(
        peer: FirmwarePeer, args: tuple[str, ...], needle: str) -> None:
    proc = run_verb("send", peer.pair.path, "cmd", *args, "--count", "3")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    peer.settle()
    assert peer.raw == b"" and peer.frames() == []  # the port was never written


def test_send_cmd_limits_can_be_raised(peer: FirmwarePeer) -> None:
    proc = run_verb("send", peer.pair.path, "cmd", "--vx", "12", "--wz", "-25",
                    "--max-linear", "15", "--max-angular", "30", "--count", "2", "--rate", "100")
    assert proc.returncode == 0, proc.stderr.decode()
    peer.settle()
    assert peer.frames() == [CmdFrame(12.0, 0.0, -25.0)] * 2


def test_parse_request_names_the_field_and_the_value() -> None:
    assert parse_request("0.5 -0.25 1.5") == (0.5, -0.25, 1.5)
    assert parse_request('{"wz": 19.5}') == (0.0, 0.0, 19.5)
    assert parse_request("  # a comment") is None
    for line, needle in [("0 0 1e30", "wz = 1e+30 is beyond ±20 rad/s (--max-angular)"),
                         ('{"vy": -1e999}', "vy is not finite (-inf)"),
                         ("nan 0 0", "vx is not finite (nan)"),
                         ("11 0 0", "vx = 11 is beyond ±10 m/s (--max-linear)"),
                         ('{"vx": 1' + "0" * 400 + "}", "not a request"),
                         ("[" * 100_000, f"longer than {MAX_LINE}"),
                         ("1 2", "expected three numbers")]:
        with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")
                           .replace("+", r"\+")):
            parse_request(line)
    assert parse_request("0 0 25", max_angular=30.0) == (0.0, 0.0, 25.0)


def _bridge(peer: FirmwarePeer, tmp_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{peer.pair.path}"\n[control]\nrate_hz = 50\n'
                   "[watchdog]\ncmd_timeout = 30\n")
    return spawn_verb("bridge", str(cfg), "--cmd-stdin", *extra, stdin=subprocess.PIPE,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _say(proc: subprocess.Popen[bytes], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()


def _commanded(peer: FirmwarePeer, want: CmdFrame, after: int) -> int:
    """Waits until the peer has received ``want`` after arrival ``after``; its index."""
    assert peer.wait_for(lambda arrivals: any(a.frame == want for a in arrivals[after:]),
                         timeout=DEADLINE), f"no {want} on the link; last {peer.frames()[-1:]}"
    return next(i for i, a in enumerate(peer.arrivals) if i >= after and a.frame == want)


def test_cmd_stdin_bad_line_stops_the_base_and_never_reaches_it(
        peer: FirmwarePeer, tmp_path: Path) -> None:
    moving, later = CmdFrame(f32(0.2), 0.0, f32(0.5)), CmdFrame(f32(0.1), 0.0, 0.0)
    proc = _bridge(peer, tmp_path)
    with reaped(proc):
        _say(proc, "0.2 0 0.5")
        k = _commanded(peer, moving, 0)
        _say(proc, "0 0 1e30")  # beyond the limit: refused, and the base stops
        k = _commanded(peer, CmdFrame(0.0, 0.0, 0.0), k)
        _say(proc, '{"vx": NaN}')  # not finite (JSON's NaN)
        _say(proc, "0.1 0 0")  # the next good line drives again
        _commanded(peer, later, k)
        proc.terminate()
        _, err = proc.communicate(timeout=DEADLINE)
    text = err.decode()
    errors = [ln for ln in text.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 2, text
    assert "stdin line 2" in errors[0] and "wz = 1e+30 is beyond ±20 rad/s" in errors[0]
    assert "stdin line 3" in errors[1] and "vx is not finite (nan)" in errors[1]
    assert "stdin_refused=2" in text and "Traceback" not in text
    frames = peer.frames()
    assert all(math.isfinite(v) and abs(v) <= 20 for f in frames for v in (f.vx, f.vy, f.wz))
    assert frames[-1] == CmdFrame(0.0, 0.0, 0.0)  # the safe stop at the end


def test_cmd_stdin_limits_can_be_changed(peer: FirmwarePeer, tmp_path: Path) -> None:
    proc = _bridge(peer, tmp_path, "--max-angular", "25", "--max-linear", "0.3")
    with reaped(proc):
        _say(proc, "0 0 22")
        k = _commanded(peer, CmdFrame(0.0, 0.0, 22.0), 0)
        _say(proc, "0.4 0 0")  # beyond --max-linear 0.3
        _commanded(peer, CmdFrame(0.0, 0.0, 0.0), k)
        proc.terminate()
        _, err = proc.communicate(timeout=DEADLINE)
    text = err.decode()
    assert "vx = 0.4 is beyond ±0.3 m/s (--max-linear)" in text, text
    assert all(abs(f.vx) <= 0.3 for f in peer.frames())


def test_stdin_line_without_an_end_is_bounded(peer: FirmwarePeer, tmp_path: Path) -> None:
    """A huge line is read in bounded pieces, refused once, and the stream goes on."""
    proc = _bridge(peer, tmp_path)
    with reaped(proc):
        assert proc.stdin is not None
        proc.stdin.write(b"1" * (MAX_LINE * 50) + b"\n0.25 0 0\n")
        proc.stdin.flush()
        _commanded(peer, CmdFrame(0.25, 0.0, 0.0), 0)
        proc.terminate()
        _, err = proc.communicate(timeout=DEADLINE)
    text = err.decode()
    assert text.count("error: ") == 1 and f"longer than {MAX_LINE}" in text, text
