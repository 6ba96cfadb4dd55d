"""The Zumo and mecanum models on Webots devices (motors, encoders, sensors, LED, speaker),
run as Webots controllers against the stand-in ``controller`` module.

Real Webots is not installed here: the stand-in (``tests/webots_standin``)
implements the reference manual's Motor, PositionSensor, DistanceSensor,
TouchSensor, InertialUnit, LED, Speaker and Keyboard, and moves each motor
itself (velocity control after ``setPosition(inf)``), so what the model
reads back is what Webots would have measured, not its own bookkeeping.
"""

from __future__ import annotations

import math
from types import ModuleType

import pytest

from fwbridge.bridge.sim import webots_adapter
from fwbridge.bridge.sim.webots_devices import BUZZER_SOUND
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from tests.helpers import controller, drain, world

__all__ = ["controller"]


def zumo_devices(c: ModuleType, sim: object) -> dict[str, object]:
    robot = next(r for r in sim.robots if r.name == "robot")  # type: ignore[attr-defined]
    add = sim.add_device  # type: ignore[attr-defined]
    devs: dict[str, object] = {}
    for side in ("left", "right"):
        m = add(robot, c.Motor(f"motor_{side}", robot, max_velocity=5.0))
        devs[f"motor_{side}"] = m
        devs[f"enc_{side}"] = add(robot, c.PositionSensor(f"position_sensor_{side}", robot, m))
    for i in range(6):
        devs[f"line{i}"] = add(robot, c.DistanceSensor(f"lightsensor_{i}", robot, 150.0))
    for b in "abc":
        devs[f"button_{b}"] = add(robot, c.TouchSensor(f"button_{b}", robot))
    devs["led"] = add(robot, c.LED("led", robot))
    devs["speaker"] = add(robot, c.Speaker("speaker", robot))
    devs["keyboard"] = robot.keyboard
    return devs


def test_zumo_drives_webots_motors_and_reads_webots_encoders(
        controller: ModuleType) -> None:
    sim, host, _sup = world(controller, end_ms=600, step=4.0)
    devs = zumo_devices(controller, sim)
    received = bytearray()
    seen: dict[str, object] = {}

    def peer(now: int) -> None:
        if now == 40:
            host.devices["tx"].send(cmd_frame.encode(CmdFrame(0.05, 0.0, 0.0)))
        if now == 300:
            seen["velocity"] = devs["motor_left"].getVelocity()  # type: ignore[attr-defined]
            seen["target"] = devs["motor_left"].getTargetPosition()  # type: ignore[attr-defined]
            seen["led"] = devs["led"].get()  # type: ignore[attr-defined]
        received.extend(drain(host.devices["rx"]))

    sim.on_step.append(peer)  # type: ignore[attr-defined]
    model = webots_adapter.run_controller("zumo")
    # The HAL's 256 -> 2.56 rad/s, on a velocity-controlled Webots motor.
    assert seen["velocity"] == pytest.approx(2.56) and math.isinf(seen["target"])  # type: ignore[arg-type]
    # The counts are Webots' wheel angle, not the model's own integration.
    angle = devs["motor_left"].position  # type: ignore[attr-defined]
    counts = model.motors.getCountsLeft()  # type: ignore[attr-defined]
    assert angle > 0 and abs(counts - angle * model.params.cpr / (2 * math.pi)) <= 2  # type: ignore[attr-defined]
    assert model.body.external  # type: ignore[attr-defined]
    frames = [r.frame for r in Sum8Receiver(odom_frame.CODEC).feed(bytes(received))]
    assert frames[-1].vx == pytest.approx(0.05, abs=0.005)
    assert seen["led"] == 0x00FF00  # the firmware's LED: green while driving
    # The wake beep (commands resumed) played on Webots' speaker at 880 Hz.
    spk = devs["speaker"]
    assert spk.played == [(BUZZER_SOUND, 1.0, 0.88, 0.0, False)]  # type: ignore[attr-defined]


def test_zumo_line_sensors_buttons_and_keyboard_come_from_webots(
        controller: ModuleType) -> None:
    sim, _host, _sup = world(controller, end_ms=200, step=4.0)
    devs = zumo_devices(controller, sim)
    readings = [120.0, 300.0, 900.0, 1100.0, 500.0, 80.0]
    seen: dict[str, object] = {}
    model_box: list[object] = []

    def peer(now: int) -> None:
        if now == 20:
            for i, v in enumerate(readings):
                devs[f"line{i}"].value = v  # type: ignore[attr-defined]
            devs["button_a"].touched = True  # type: ignore[attr-defined]
            devs["keyboard"].held = [ord("C")]  # type: ignore[attr-defined]
        if now == 60 and model_box:
            m = model_box[0]
            seen["raw"] = m.sensors.read()  # type: ignore[attr-defined]
            seen["one"] = m.sensors.read(2)  # type: ignore[attr-defined]
            seen["a"] = m.button_a.isPressed()  # type: ignore[attr-defined]
            seen["c"] = m.button_c.isPressed()  # type: ignore[attr-defined]
            devs["button_a"].touched = False  # type: ignore[attr-defined]
            devs["keyboard"].held = []  # type: ignore[attr-defined]

    sim.on_step.append(peer)  # type: ignore[attr-defined]
    from fwbridge.bridge.sim.models.zumo import Zumo

    model = Zumo()
    model_box.append(model)
    webots_adapter.run_controller(model)
    assert seen["raw"] == [120, 300, 900, 1023, 500, 80]  # clipped to the ADC's 0..1023
    assert seen["one"] == 900
    assert seen["a"] is True and seen["c"] is True
    assert model.button_a.wasPressed() and not model.button_a.isPressed()
    assert not model.button_c.isPressed()


def test_zumo_coast_runs_free_on_the_webots_motor(controller: ModuleType) -> None:
    sim, _host, _sup = world(controller, end_ms=200, step=4.0)
    devs = zumo_devices(controller, sim)
    from fwbridge.bridge.sim.models.zumo import Zumo

    model = Zumo()
    seen: list[float] = []

    def peer(now: int) -> None:
        if now == 8:
            model.motors.setSpeeds(300, 300)
        if now == 100:
            model.motors.setCoast()
        if now in (104, 196):
            seen.append(devs["motor_right"].getVelocity())  # type: ignore[attr-defined]

    sim.on_step.append(peer)  # type: ignore[attr-defined]
    webots_adapter.run_controller(model)
    assert seen == [pytest.approx(3.0), pytest.approx(3.0)]  # neither driven nor braked


def test_mecanum_on_webots_wheels_and_inertial_unit(controller: ModuleType) -> None:
    sim, host, _sup = world(controller, end_ms=1000, step=8.0)
    robot = next(r for r in sim.robots if r.name == "robot")
    motors = {}
    for w in ("fl", "fr", "rl", "rr"):
        m = sim.add_device(robot, controller.Motor(f"wheel_{w}", robot, max_velocity=30.0))
        motors[w] = m
        sim.add_device(robot, controller.PositionSensor(f"wheel_{w}_sensor", robot, m))
    imu = sim.add_device(robot, controller.InertialUnit("inertial unit", robot))
    received = bytearray()
    cmd = CmdFrame(0.2, 0.1, 0.0)

    def peer(now: int) -> None:
        if now % 96 == 0 and now:  # a host's command stream (the base has a watchdog)
            host.devices["tx"].send(cmd_frame.encode(cmd))
        imu.yaw = 0.5  # what Webots' inertial unit says, whatever the wheels did
        received.extend(drain(host.devices["rx"]))

    sim.on_step.append(peer)
    model = webots_adapter.run_controller("mecanum")
    targets = model.targets  # type: ignore[attr-defined]
    assert [motors[w].getVelocity() for w in ("fl", "fr", "rl", "rr")] == pytest.approx(targets)
    frames = [r.frame for r in Sum8Receiver(odom_frame.CODEC).feed(bytes(received))]
    last = frames[-1]
    assert (last.vx, last.vy) == (pytest.approx(0.2, abs=0.02), pytest.approx(0.1, abs=0.02))
    assert last.yaw_deg == pytest.approx(math.degrees(0.5), abs=0.01)


def test_models_without_the_devices_keep_their_own_body(controller: ModuleType) -> None:
    _sim, _host, _sup = world(controller, end_ms=40, step=4.0)
    model = webots_adapter.run_controller("zumo")
    assert not model.body.external  # type: ignore[attr-defined]
