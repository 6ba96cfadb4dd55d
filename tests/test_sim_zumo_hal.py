"""ZumoHALWebots' HAL semantics on the simulated Zumo (seed 000)."""

from __future__ import annotations

import math

from fwbridge.bridge.sim.models.zumo import Zumo, ZumoParams
from fwbridge.bridge.sim.models.zumo_hal import FloorMap
from fwbridge.bridge.sim.world import World


def zumo(step_ms: int = 1, **params: object) -> tuple[World, Zumo]:
    world = World(step_ms)
    z = Zumo(ZumoParams(**params))  # type: ignore[arg-type]
    world.add_robot(z)
    return world, z


def test_motor_speed_maps_to_wheel_velocity_and_clamps() -> None:
    world, z = zumo()
    z.motors.setSpeeds(200, -500)
    world.step()
    assert z.body.velocity == [2.0, -4.0]  # speed * 0.01 rad/s, clamped to -400
    assert z.motors.speeds == [200, -400]


def test_encoder_counts_are_the_integral_of_the_commanded_speed() -> None:
    _world, z = zumo(step_ms=4)
    cpr = z.params.cpr
    schedule = [(150, 300, 400), (-100, 250, 600), (400, 400, 200), (0, -37, 500)]
    want_left = want_right = 0.0
    for left, right, ms in schedule:
        z.motors.setSpeeds(left, right)
        z.clock.delay(ms)
        want_left += left * 0.01 * ms / 1000 * cpr / (2 * math.pi)
        want_right += right * 0.01 * ms / 1000 * cpr / (2 * math.pi)
    assert z.motors.getCountsLeft() == math.floor(want_left + 1e-9)
    assert z.motors.getCountsRight() == math.floor(want_right + 1e-9)
    z.motors.resetCounts()
    assert z.motors.getCountsLeft() == 0 and z.motors.getCountsRight() == 0


def test_brake_stops_at_once_coast_spins_down() -> None:
    world, z = zumo()
    z.motors.setSpeeds(300, 300)
    world.run_for(10)
    z.motors.setCoast()
    world.run_for(100)
    coasting = z.body.velocity[0]
    assert 0.0 < coasting < 3.0
    z.motors.setBrake()
    world.step()
    assert z.body.velocity == [0.0, 0.0]


def test_buttons_was_pressed_and_wait_for_press_step_time() -> None:
    world, z = zumo()
    b = z.button_a
    assert not b.isPressed() and not b.wasPressed()
    z.body.press("A", ms=30)
    assert b.isPressed()
    world.run_for(50)
    assert not b.isPressed()
    assert b.wasPressed()  # the press happened since the last call ...
    assert not b.wasPressed()  # ... once
    presser = lambda now: z.body.press("B", 20) if now == 300 else None  # noqa: E731
    world.post_step.append(presser)
    t0 = z.clock.millis()
    z.button_b.waitForPress()  # steps simulated time until the press
    assert z.clock.millis() == 300 and z.clock.millis() > t0
    z.button_b.waitForRelease()
    assert z.clock.millis() == 320


def test_buzzer_is_playing_until_process_after_the_sound() -> None:
    world, z = zumo()
    world.robots[0].blocked += 1  # keep the firmware's own loop (which calls process) out
    z.buzzer.playFrequency(440, 50)
    assert z.buzzer.isPlaying() and z.buzzer.isSoundPlaying()
    world.run_for(60)
    assert not z.buzzer.isSoundPlaying()
    assert z.buzzer.isPlaying()  # the seed's pitfall: nobody called process()
    t = z.clock.millis()
    z.buzzer.process()
    assert not z.buzzer.isPlaying()
    assert z.clock.millis() == t + 1  # process() stepped the simulation once
    z.buzzer.playNote(57 + 12, 10)  # A5
    assert z.body.sound_log[-1][1] == 880.0


def test_reflectance_calibrate_and_read_over_the_line() -> None:
    world, z = zumo(floor=FloorMap())  # black tape along the x axis
    s = z.sensors
    raw = s.read()
    assert len(raw) == 6 and all(0 <= v <= 1023 for v in raw)
    assert raw[2] > 800 and raw[3] > 800  # the middle sensors see the tape
    assert raw[0] < 300 and raw[5] < 300  # the outer ones see the floor
    assert s.readCalibrated(0) == 0  # not calibrated yet
    # Sweep over the tape while calibrating, as the examples do.
    z.motors.setSpeeds(-200, 200)
    for _ in range(400):
        s.calibrate()
        world.run_for(5)
    z.motors.setSpeeds(0, 0)
    z.body.yaw = 0.0
    z.body.x = z.body.y = 0.0
    cal = [s.readCalibrated(i) for i in range(6)]
    assert all(0 <= v <= 1000 for v in cal)
    assert cal[2] > 900 and cal[3] > 900 and cal[0] < 100 and cal[5] < 100
    assert 2000 < s.readLine() < 3000  # centred on the line
    z.body.y = 0.02  # the robot moved left: the line is to its right
    assert s.readLine() > 3000
