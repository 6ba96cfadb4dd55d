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


def test_brake_stops_at_once_coast_runs_free() -> None:
    world, z = zumo()
    z.motors.setSpeeds(300, 300)
    world.run_for(10)
    z.motors.setCoast()  # free-running: neither driven to a new speed nor braked
    before = z.motors.getCountsLeft()
    world.run_for(100)
    assert z.body.velocity == [3.0, 3.0] and z.motors.speeds == [0, 0]
    # The encoder keeps counting at the same rate: 3 rad/s for 0.1 s.
    assert abs(z.motors.getCountsLeft() - before - 3.0 * 0.1 * z.params.cpr / (2 * math.pi)) <= 1
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


def calibrated_zumo(y: float) -> tuple[World, Zumo]:
    """A Zumo calibrated over a white line on a black floor, then put with its array
    centre ``y`` metres left of the line (the line then lies toward sensor 5)."""
    world, z = zumo()
    b = z.body
    b.floor = FloorMap(width=0.02)
    b.sensor_white, b.sensor_black = b.sensor_black, b.sensor_white  # a white line on black
    for k in range(-30, 31):  # sweep the array across the line
        b.y = k * 0.002
        z.sensors.calibrate()
    b.y = y
    return world, z


def by_hand(cal: list[int]) -> int:
    """The seed's formula, written out once more: whiteness over the noise floor."""
    white = [1000 - c for c in cal]
    num = den = 0
    for i, w in enumerate(white):
        if w > 50:
            num += 1000 * i * w
            den += w
    return num // den


def test_get_white_line_matches_the_formula_by_hand() -> None:
    # Fixed calibrated readings: the formula gives these by hand (see the comments).
    _world, z = zumo()
    s = z.sensors
    cases = [
        # white under sensor 2 only: (1000*2*1000) / 1000 = 2000
        ([1000, 1000, 0, 1000, 1000, 1000], 2000),
        # white between 2 and 3, evenly: (2000*1000 + 3000*1000) / 2000 = 2500
        ([1000, 1000, 0, 0, 1000, 1000], 2500),
        # 1: w=300, 2: w=900, 3: w=600, 4: w=40 (noise, ignored):
        # (1000*300 + 2000*900 + 3000*600) / 1800 = 3900000 / 1800 = 2166
        ([1000, 700, 100, 400, 960, 1000], 2166),
        # at the right edge: sensor 5 w=1000, sensor 4 w=250: (4000*250+5000*1000)/1250 = 4800
        ([1000, 1000, 1000, 1000, 750, 0], 4800),
    ]
    for cal, want in cases:
        s.readCalibrated = lambda i, cal=cal: cal[i]  # type: ignore[method-assign]
        assert s.getWhiteLine() == want == by_hand(cal)
    # Line lost (no whiteness above 200): the side it was last seen on.
    s.readCalibrated = lambda i: 1000  # type: ignore[method-assign]
    assert s.getWhiteLine() == 5000
    s.readCalibrated = lambda i: [0, 1000, 1000, 1000, 1000, 1000][i]  # type: ignore[method-assign]
    assert s.getWhiteLine() == 0
    s.readCalibrated = lambda i: 1000  # type: ignore[method-assign]
    assert s.getWhiteLine() == 0


def test_get_white_line_over_the_simulated_floor() -> None:
    _world, z = calibrated_zumo(0.0)
    centred = z.sensors.getWhiteLine()
    assert 2300 <= centred <= 2700  # the line between sensors 2 and 3
    cal = [z.sensors.readCalibrated(i) for i in range(6)]
    assert centred == by_hand(cal)
    _world, z = calibrated_zumo(0.011)  # the line one sensor pitch to the right
    right = z.sensors.getWhiteLine()
    assert right > centred + 500
    assert right == by_hand([z.sensors.readCalibrated(i) for i in range(6)])


def test_read_sensor_is_the_seeds_overload() -> None:
    _world, z = zumo()
    values: list[int] = [0] * 6
    assert z.sensors.read(values) == values and len(values) == 6
    assert [z.sensors.read(i) for i in range(6)] == values
    assert z.sensors.read(3) == z.sensors.readSensor(3)


def test_led_channels_and_keyboard_buttons() -> None:
    world, z = zumo()
    z.led.setColor(10, 300, -5)
    assert z.led.getColor() == (10, 255, 0) and z.led.rgb == 0x0AFF00
    z.led.setBlue(128)
    assert z.led.rgb == 0x0AFF80
    z.led.off()
    assert z.led.getColor() == (0, 0, 0)
    # A key held down presses the button of that name until it comes up.
    assert z.keyboard.getPressedButtons() == ()
    z.body.keys.add(ord("b"))
    assert z.keyboard.getPressedButtons() == ("B",)
    assert z.button_b.isPressed() and z.button_b.wasPressed()
    assert z.keyboard.getPressedButtons() == ("B",) and not z.button_b.wasPressed()
    z.body.keys.clear()
    assert z.keyboard.getPressedButtons() == () and not z.button_b.isPressed()
    # The firmware reads the keyboard in every loop (the seed's REQ-4).
    z.body.keys.add(ord("C"))
    world.run_for(5)
    assert z.button_c.isPressed()
    z.motors.setSpeeds(100, 100)
    world.run_for(5)
    assert z.led.getColor() == (0, 255, 0)  # the firmware's LED: green while driving
