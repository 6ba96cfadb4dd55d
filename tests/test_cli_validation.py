"""Numbers and bus keywords are checked before a verb runs: one ``error:`` line, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.config import ConfigError, parse_config
from fwbridge.cli_verbs.params import RATE, Finite
from tests.helpers import FirmwarePeer, run_cli, spawn_verb


def one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2, proc.stderr.decode()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Error:" not in lines[0] and "Traceback" not in proc.stderr.decode()
    return lines[0]


@pytest.mark.parametrize("args, needle", [
    (["send", "{port}", "cmd", "--rate", "nan"], "--rate"),
    (["send", "{port}", "cmd", "--rate", "inf"], "--rate"),
    (["send", "{port}", "cmd", "--rate", "1e9"], "--rate"),
    (["send", "{port}", "cmd", "--vx", "nan"], "--vx"),
    (["send", "{port}", "cmd", "--vx", "1e300"], "--vx"),
    (["sniff", "{port}", "--duration", "nan"], "--duration"),
    (["sniff", "{port}", "--duration", "-inf"], "--duration"),
    (["sniff", "{port}", "--baud", "0"], "--baud"),
    (["sniff", "{port}", "--baud", "-5"], "--baud"),
    (["sniff", "{port}", "--baud", "99999999999"], "--baud"),
    (["sniff", "{port}", "--garbage-timeout", "nan"], "--garbage-timeout"),
    (["replay", "x.pcapng", "{port}", "--speed", "nan"], "--speed"),
    (["can", "busload", "--interval", "nan"], "--interval"),
    (["can", "send", "123#00", "--interval", "inf"], "--interval"),
    (["can", "-b", "0", "sniff", "--duration", "0.1"], "--bitrate"),
    (["can", "sniff", "--duration", "nan"], "--duration"),
    (["sim", "mecanum", "--duration", "nan"], "--duration"),
    (["sim", "mecanum", "--speed", "nan"], "--speed"),
    (["sim", "mecanum", "--baud", "0"], "--baud"),
    (["teleop", "{port}", "--linear", "nan"], "--linear"),
    (["demo", "--side", "nan"], "--side"),
    (["encode", "cmd", "--vx", "nan"], "--vx"),
    (["arm", "ik", "nan", "0", "0"], "X"),
    (["arm", "ik", "0.5", "0.2", "0.1", "--phi", "inf"], "--phi"),
])
def test_bad_numbers_are_refused_up_front(args: list[str], needle: str) -> None:
    with PtyPair() as pair:
        argv = [a.replace("{port}", pair.path) for a in args]
        line = one_error_line(run_cli(*argv, timeout=20))
        assert pair.read(timeout=0.05) == b""  # nothing was sent
    assert needle in line, line


def test_the_sim_baud_still_takes_minus_one_for_no_line_rate() -> None:
    proc = run_cli("sim", "echo", "--baud", "-1", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr


def test_negative_numbers_are_arguments() -> None:
    proc = run_cli("arm", "ik", "-0.5", "0.2", "0.1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert b'"solution":0' in proc.stdout
    assert b"No such option" not in proc.stderr


@pytest.mark.parametrize("kwarg, needle", [
    ("modules=2", "modules: the bus starts no simulated modules: use --modules N"),
    ("modlues=3", "the fwbridge bus has no such keyword (known: "),
    ("bit_error_rate=nan", "bit_error_rate must be a finite number"),
    ("pacing=slow", "pacing must be one of realtime, afap"),
])
def test_bus_kwargs_are_known_and_bounded(kwarg: str, needle: str) -> None:
    line = one_error_line(run_cli("can", "--bus-kwarg", kwarg, "sniff", "--duration", "0.2",
                                  timeout=20))
    assert line.startswith("error: --bus-kwarg ") and needle in line, line


def test_known_bus_kwargs_still_work() -> None:
    proc = run_cli("can", "--modules", "2", "--bus-kwarg", "pacing=afap",
                   "--bus-kwarg", "bit_error_rate=0", "sniff", "--count", "2", "--duration", "5")
    assert proc.returncode == 0, proc.stderr


def test_bus_kwargs_of_other_interfaces_are_their_named_parameters() -> None:
    line = one_error_line(run_cli("can", "-i", "virtual", "--bus-kwarg", "nosuch=1",
                                  "sniff", "--duration", "0.1"))
    assert "the virtual bus has no such keyword" in line and "rx_queue_size" in line
    ok = run_cli("can", "-i", "virtual", "--bus-kwarg", "rx_queue_size=10",
                 "sniff", "--duration", "0.1")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("section, value, needle", [
    ({"control": {"rate_hz": 1e9}}, None, "control.rate_hz: must be > 0 and <= 1000 Hz"),
    ({"control": {"rate_hz": float("nan")}}, None, "control.rate_hz: must be a finite number"),
    ({"watchdog": {"cmd_timeout": float("inf")}}, None, "watchdog.cmd_timeout"),
    ({"reconnect": {"max_delay": 1e300}}, None, "reconnect.max_delay"),
    ({"link": {"url": "/dev/x", "baud": 0}}, None, "link.baud: must be >= 50"),
    ({"link": {"url": "/dev/x", "baud": 99999999999}}, None, "link.baud"),
])
def test_config_numbers_are_finite_and_in_range(section: dict[str, dict[str, float]],
                                                value: None, needle: str) -> None:
    data: dict[str, dict[str, object]] = {"link": {"url": "/dev/x"}}
    for key, table in section.items():
        data.setdefault(key, {}).update(table)
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        parse_config(data)


def test_a_stdin_request_that_overflows_the_frame_is_a_refused_line(tmp_path: Path) -> None:
    with PtyPair() as pair:
        peer = FirmwarePeer(pair)
        peer.start()
        try:
            cfg = tmp_path / "robot.toml"
            cfg.write_text(f'[link]\nurl = "{pair.path}"\n[watchdog]\ncmd_timeout = 30\n')
            proc = spawn_verb("bridge", str(cfg), "--cmd-stdin", "--duration", "1.5",
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
            _, err = proc.communicate(b"1e300 0 0\n0.25 0 0\n", timeout=30)
        finally:
            peer.stop()
    text = err.decode()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "stdin line 1 ignored" in text
    assert "stdin_refused=1" in text
    assert any(f.vx == pytest.approx(0.25) for f in peer.frames())


def test_finite_param_type_messages() -> None:
    import click

    with pytest.raises(click.BadParameter, match="must be a finite number, not nan"):
        RATE.convert("nan", None, None)
    with pytest.raises(click.BadParameter, match="must be > 0 and <= 1000 Hz, not 0"):
        RATE.convert("0", None, None)
    assert Finite(-1, 1).convert("-0.5", None, None) == -0.5


@pytest.mark.parametrize("line, needle", [
    ("limit1 = 4.0", "arm.limit1: must be > 0 and <= 3.14159 rad"),
    ("l1 = 1e300", "arm.l1: must be > 0 and <= 10 m"),
    ("tolerance = 0", "arm.tolerance"),
])
def test_arm_config_numbers_are_ranged(tmp_path: Path, line: str, needle: str) -> None:
    cfg = tmp_path / "arm.toml"
    cfg.write_text(f"[arm]\n{line}\n")
    assert needle in one_error_line(run_cli("arm", "ik", "0.5", "0.2", "0.1",
                                            "--config", str(cfg)))
