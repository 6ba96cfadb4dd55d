"""What ``sim --pacing afap`` means with a host on the port: simulated time never waits for
the host, and the run says so (at its start, in --help, in its end report)."""

from __future__ import annotations

import contextlib
import json
import subprocess

import serial

from fwbridge.protocols import cmd_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from tests.helpers import reaped, run_verb, spawn_verb

WAITS_FOR_NO_HOST = "never waits for the host"


def test_afap_with_a_real_time_host_says_what_it_does() -> None:
    proc = spawn_verb("sim", "mecanum", "--pacing", "afap", "--wait-for-host", "--duration", "10",
                      "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    with reaped(proc):
        ready = json.loads(proc.stdout.readline())
        port = serial.Serial(ready["port"], timeout=0.02)
        sent = 0
        try:  # a host that talks in real time: a command every 20 ms, until the port goes
            while proc.poll() is None:
                port.write(cmd_frame.encode(CmdFrame(0.2, 0.0, 0.0)))
                sent += 1
                port.read(4096)
        except serial.SerialException:
            pass  # the simulation ended and took its pty along
        finally:
            with contextlib.suppress(serial.SerialException):
                port.close()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    end = json.loads(out.decode().splitlines()[-1])
    assert end["event"] == "end" and end["t"] == 10_000  # all of --duration, simulated
    assert "wall_s" in end  # and how long the host had: the end report puts both side by side
    assert sent >= 1
    text = err.decode()
    assert WAITS_FOR_NO_HOST in text and "--pacing realtime" in text, text


def test_help_says_what_afap_means_with_a_host() -> None:
    text = " ".join(run_verb("sim", "--help").stdout.decode().split())
    assert "afap never waits for the host" in text
    assert "a host that talks in real time sees all of --duration pass" in text
