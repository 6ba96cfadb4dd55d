"""The firmware's command watchdog, end to end: the host dies, the base stops.

In simulated time for the mecanum model (``sim://`` in fast pacing, and the
``fwbridge sim`` CLI with a host process that is killed), and over a pty for
the compiled C firmware (``firmware_ref``'s harness). The seed's behaviour,
no watchdog, stays available by option and is checked too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tty
from typing import Any

import pytest
import serial

from fwbridge.bridge.link.transports import open_link
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from tests.fwref import Firmware
from tests.fwref import firmware as firmware  # the session fixture
from tests.helpers import spawn_verb

DEADLINE = 20.0
GO = cmd_frame.encode(CmdFrame(0.3, 0.0, 0.0))


def _odometry_vx(link: Any, sim_seconds: float) -> list[float]:
    """The vx of every odometry frame over ``sim_seconds`` of a fast ``sim://`` link."""
    rx = Sum8Receiver(odom_frame.CODEC)
    out: list[float] = []
    want = round(sim_seconds * 50)  # 50 Hz odometry
    while len(out) < want:
        out += [item.frame.vx for item in rx.feed(link.read(19))]
    return out


@pytest.mark.parametrize("query,stops", [("", True), ("&watchdog=0", False)],
                         ids=["default", "seed-behaviour"])
def test_simulated_base_stops_when_commands_stop(query: str, stops: bool) -> None:
    offer_sim()
    link = open_link(f"sim://mecanum?pacing=afap{query}", 115200)
    try:
        for _ in range(25):  # 0.5 s of commands at 50 Hz, then the host is gone
            link.write(GO)
            _odometry_vx(link, 0.02)
        moving = _odometry_vx(link, 0.1)
        assert moving[-1] == pytest.approx(0.3, abs=0.02)
        after = _odometry_vx(link, 1.5)  # 1.5 s of simulated silence
    finally:
        link.close()
    if stops:
        assert after[-1] == 0.0 and all(v == 0.0 for v in after[-10:])
        # the motors spin down after 0.5 s of silence (not before: 25 frames of 20 ms)
        assert after[:20] == pytest.approx([0.3] * 20, abs=0.02)
    else:
        assert all(v == pytest.approx(0.3, abs=0.02) for v in after)  # drives on for ever


def _supervisor_lines(port: serial.Serial) -> Any:
    while True:
        line = port.readline()
        assert line, "the simulation stopped reporting"
        yield json.loads(line)


@pytest.mark.parametrize("watchdog", [None, "0"], ids=["default", "seed-behaviour"])
def test_cli_sim_base_stops_when_the_host_process_dies(watchdog: str | None) -> None:
    extra = [] if watchdog is None else ["--watchdog", watchdog]
    sim = spawn_verb("sim", "mecanum", "--json", "--speed", "4", *extra,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    host = None
    try:
        assert sim.stdout is not None
        ready = json.loads(sim.stdout.readline())
        sup = serial.Serial(ready["supervisor_port"], timeout=DEADLINE)
        host = spawn_verb("send", ready["port"], "cmd", "--vx", "0.3", "--count", "0",
                          "--rate", "50", stderr=subprocess.DEVNULL)
        lines = _supervisor_lines(sup)
        status = next(s for s in lines if max(map(abs, s["wheels"])) > 1.0)
        host.kill()  # SIGKILL: no clean-up, no zero command: the host just dies
        host.wait(DEADLINE)
        # 1.5 s of simulated silence after the last command the firmware saw
        status = next(s for s in lines if s["cmd_t"] >= 0 and s["t"] - s["cmd_t"] > 1500)
        sup.close()
    finally:
        if host is not None and host.poll() is None:
            host.kill()
            host.wait()
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=DEADLINE)
    if watchdog is None:
        assert status["watchdog_ms"] == 500 and status["watchdog_trips"] == 1
        assert status["wheels"] == [0.0, 0.0, 0.0, 0.0]
    else:
        assert status["watchdog_trips"] == 0
        assert min(map(abs, status["wheels"])) > 1.0  # the seed's base drives on


_HOST = """
import os, sys, time
fd = int(sys.argv[1]); frame = bytes.fromhex(sys.argv[2])
while True:
    os.write(fd, frame)
    time.sleep(0.02)  # pacing: a host sending at 50 Hz
"""


@pytest.mark.parametrize("timeout_ms", [None, "0"], ids=["default", "seed-behaviour"])
def test_c_firmware_stops_when_the_host_process_dies(firmware: Firmware,
                                                     timeout_ms: str | None) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    extra = [] if timeout_ms is None else ["--cmd-timeout", timeout_ms]
    fw = subprocess.Popen([str(firmware.harness), "--rate", "100", "--no-action", *extra,
                           os.ttyname(slave)], stderr=subprocess.PIPE, text=True)
    host = subprocess.Popen([sys.executable, "-c", _HOST, str(master), GO.hex()],
                            pass_fds=[master])
    rx = Sum8Receiver(odom_frame.CODEC)

    def next_vx() -> float:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            frames = rx.feed(os.read(master, 4096))
            if frames:
                return float(frames[-1].frame.vx)
        raise AssertionError("no odometry from the firmware")

    try:
        while next_vx() != pytest.approx(0.3):
            pass
        host.kill()  # the host dies mid-stream
        host.wait(DEADLINE)
        if timeout_ms is None:
            while next_vx() != 0.0:  # bounded by DEADLINE: the base must stop
                pass
        else:
            quiet_until = time.monotonic() + 1.0  # twice the default timeout
            while time.monotonic() < quiet_until:
                assert next_vx() == pytest.approx(0.3)  # the seed's base drives on
        fw.send_signal(signal.SIGTERM)
        _, err = fw.communicate(timeout=DEADLINE)
    finally:
        for p in (host, fw):
            if p.poll() is None:
                p.kill()
                p.wait()
        os.close(master)
        os.close(slave)
    report = json.loads(err.strip().splitlines()[-1])
    assert report["watchdog_trips"] == (1 if timeout_ms is None else 0)
