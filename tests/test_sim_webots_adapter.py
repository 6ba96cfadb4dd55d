"""The Webots controller adapter, run against a stand-in of Webots' ``controller`` module.

Webots itself is not installed here: ``tests/webots_standin/controller.py``
implements the documented subset of the API (Robot, Emitter, Receiver) and
plays the other robots, and the adapter imports it exactly as it would
import the real module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fwbridge.bridge.sim import webots_adapter
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from tests.helpers import STANDIN, drain, world


def test_controller_module_is_the_stand_in(controller: ModuleType) -> None:
    assert webots_adapter.controller_available()
    assert Path(controller.__file__).parent == STANDIN


def test_mecanum_runs_as_a_webots_controller(controller: ModuleType) -> None:
    sim, host, sup = world(controller, end_ms=2000)
    received = bytearray()
    status = bytearray()
    cmd = CmdFrame(0.3, -0.1, 0.4)

    def peer(now: int) -> None:
        if now == 96:
            assert host.devices["tx"].send(cmd_frame.encode(cmd)) == 1
        received.extend(drain(host.devices["rx"]))
        status.extend(drain(sup.devices["rx"]))

    sim.on_step.append(peer)
    # one command, kept for the whole run: the seed's firmware, without the watchdog
    model = webots_adapter.run_controller(MecanumBase(MecanumParams(cmd_timeout_ms=0)))
    assert sim.time_ms >= 2000  # ran until the simulator ended the run (step() == -1)
    frames = [r.frame for r in Sum8Receiver(odom_frame.CODEC).feed(bytes(received))]
    # 50 Hz of simulated time on average, each frame on the first 8 ms step at or after it is due
    assert 95 <= len(frames) <= 100
    last = frames[-1]
    assert last.vx == pytest.approx(0.3, abs=0.02)
    assert last.vy == pytest.approx(-0.1, abs=0.02)
    assert last.wz == pytest.approx(0.4, abs=0.05)
    _x, _y, yaw = model.pose
    assert last.yaw_deg == pytest.approx(yaw * 57.29577951308232, abs=1.0)
    assert model.counters.cmd_applied == 1  # type: ignore[attr-defined]
    lines = [json.loads(s) for s in status.decode().splitlines()]
    assert (
        lines
        and lines[-1]["model"] == "mecanum"
        and lines[-1]["cmd"] == pytest.approx([0.3, -0.1, 0.4], abs=1e-6)
    )


def test_zumo_runs_as_a_webots_controller_and_takes_a_button(controller: ModuleType) -> None:
    sim, host, sup = world(controller, end_ms=600, step=4.0)

    def peer(now: int) -> None:
        if now == 40:
            host.devices["tx"].send(cmd_frame.encode(CmdFrame(0.05, 0.0, 0.0)))
            sup.devices["tx"].send(b'{"cmd": "press", "button": "B", "ms": 50}\n')

    sim.on_step.append(peer)
    model = webots_adapter.run_controller("zumo")
    assert model.motors.speeds == [256, 256]  # type: ignore[attr-defined]  # 0.05 / 0.0195 / 0.01
    assert model.button_b.wasPressed()  # type: ignore[attr-defined]
    assert model.motors.getCountsLeft() > 0  # type: ignore[attr-defined]


def test_main_refuses_without_webots(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.modules.pop("controller", None)
    monkeypatch.setattr(webots_adapter, "controller_available", lambda: False)
    with pytest.raises(SystemExit, match="not importable"):
        webots_adapter.main(["mecanum"])
    with pytest.raises(SystemExit, match="unknown model"):
        webots_adapter.main(["tank"])
