"""Run a robot model as a Webots controller, on the real Emitter/Receiver devices.

Inside a Webots installation (the ``controller`` module importable), a
controller file of two lines runs the same model the emulation runs::

    # controllers/fwbridge_mecanum/fwbridge_mecanum.py
    from fwbridge.bridge.sim.webots_adapter import main
    main(["mecanum"])

The robot node needs the serial devices of PROTOCOLS.md 5 (the adapter sets
their channels): ``Emitter { name "serialComTx" type "serial" }``,
``Receiver { name "serialComRx" type "serial" }``, and optionally
``supervisorComTx``/``supervisorComRx``. When the robot node also has the
Zumo's or the mecanum base's motors and encoders
(:mod:`fwbridge.bridge.sim.webots_devices`), the model drives them and reads
its encoders, line sensors, buttons, keyboard and heading from Webots, and
its LED and buzzer play on Webots' LED and Speaker; otherwise the model keeps
its own body (motors, encoders, IMU, pose), advanced once per
``Robot.step``.

Time: the board's clock steps ``Robot.step(basicTimeStep)``, so ``millis``,
``delay`` and the HAL's blocking calls behave as ZumoHALWebots' ``SimTime``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

from fwbridge.bridge.sim.clock import SimClock
from fwbridge.bridge.sim.models import MODELS, create_model
from fwbridge.bridge.sim.webots_devices import MecanumDevices, ZumoDevices, devices_for
from fwbridge.bridge.sim.world import RobotModel

__all__ = ["WebotsBoard", "controller_available", "main", "run_controller"]


def controller_available() -> bool:
    """True when Webots' Python ``controller`` module can be imported here."""
    return importlib.util.find_spec("controller") is not None


class WebotsBoard:
    """The :class:`~bridge.sim.world.Board` of a model on a real (or stand-in) Webots robot."""

    def __init__(self, robot: Any, time_step_ms: int | None = None) -> None:
        self.robot = robot
        step = int(time_step_ms or robot.getBasicTimeStep())
        self.clock = SimClock(step, stepper=self._step)
        self.model: RobotModel | None = None
        self.devices: ZumoDevices | MecanumDevices | None = None
        self.ended = False

    def getDevice(self, name: str) -> Any:
        return self.robot.getDevice(name)

    def getBasicTimeStep(self) -> float:
        return float(self.clock.basic_time_step_ms)

    def _step(self) -> int:
        if self.ended or self.robot.step(self.clock.basic_time_step_ms) == -1:
            self.ended = True
            return -1
        self.clock.advance()
        dev = self.devices
        if dev is not None:
            dev.sense(self.clock.dt)
        if self.model is not None and (dev is None or dev.keeps_physics):
            self.model.physics(self.clock.dt)
        return 0


def run_controller(
    model: str | RobotModel = "mecanum", robot: Any = None, max_steps: int | None = None
) -> RobotModel:
    """The model's setup, then its loop after every step until Webots ends the run.

    ``robot``: a ``controller.Robot`` (default: a new one from the importable
    ``controller`` module). Returns the model (its counters and pose).
    """
    if robot is None:
        controller = importlib.import_module("controller")
        robot = controller.Robot()
    board = WebotsBoard(robot)
    m: RobotModel = create_model(model) if isinstance(model, str) else model
    m.setup(board)
    board.model = m
    board.devices = devices_for(board, m)
    steps = 0
    while board.clock.step() != -1:
        m.loop()
        if board.devices is not None:
            board.devices.actuate()
        steps += 1
        if max_steps is not None and steps >= max_steps:
            break
    return m


def main(argv: Sequence[str] | None = None) -> None:
    """Controller entry point: the model name from ``argv`` (Webots' controllerArgs),
    else ``$FWBRIDGE_SIM_MODEL``, else ``mecanum``."""
    args = list(sys.argv[1:] if argv is None else argv)
    name = args[0] if args else os.environ.get("FWBRIDGE_SIM_MODEL", "mecanum")
    if name not in MODELS:
        known = ", ".join(MODELS)
        raise SystemExit(f"fwbridge controller: unknown model {name!r} (known: {known})")
    if not controller_available():
        raise SystemExit(
            "fwbridge controller: Webots' 'controller' module is not importable; run this "
            "as a Webots controller (or use 'fwbridge sim' for the emulation)"
        )
    run_controller(name)
