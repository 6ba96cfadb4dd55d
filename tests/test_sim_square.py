"""The demo's square, end to end: mecanum firmware on a pty, the base node, the driver.

Runs in real time (about 12 s): the base node integrates odometry over its
own clock, as the seed's host does, so simulated time must follow it.
"""

from __future__ import annotations

import math

import pytest

from fwbridge.bridge.robots.square import SquareDriver, run_square, square_tolerance
from fwbridge.bridge.sim.models.mecanum import MecanumParams


def test_square_tolerance_comes_from_the_model() -> None:
    driver = SquareDriver(side=1.0, speed=0.3)
    p = MecanumParams()
    tol = square_tolerance(driver, p)
    count = p.geometry.wheel_radius * 2 * math.pi / p.cpr
    assert tol == pytest.approx(driver.pos_tol + 4 * (count + driver.speed * 0.02))
    finer = MecanumParams(cpr=p.cpr * 10, odom_period_ms=10)
    assert square_tolerance(driver, finer) < tol


def test_driver_closes_a_square_on_a_perfect_pose() -> None:
    """The control logic alone, on an ideal kinematic body (no link, no lag)."""
    driver = SquareDriver(side=0.5)
    x = y = yaw = 0.0
    dt = 0.02
    for _ in range(5000):
        vx, vy, wz = driver.update((x, y, yaw), dt)
        c, s = math.cos(yaw), math.sin(yaw)
        x += (vx * c - vy * s) * dt
        y += (vx * s + vy * c) * dt
        yaw += wz * dt
        if driver.done:
            break
    assert driver.done
    assert math.hypot(x, y) < driver.pos_tol * 1.5
    assert abs(math.remainder(yaw, 2 * math.pi)) < driver.yaw_tol


def test_square_closes_within_the_model_tolerance() -> None:
    driver = SquareDriver(side=0.5, speed=0.5, turn_rate=3.0, accel=1.5, turn_accel=8.0)
    res = run_square(driver=driver, timeout_s=45)
    lag = res.sim_status.get("lag_resets", 0)
    if lag:
        pytest.skip(f"the machine could not keep the simulation in real time ({lag} lag resets)")
    assert res.completed
    assert res.node_stats["checksum_errors"] == 0 and res.node_stats["watchdog_trips"] == 0
    assert res.odom_closing <= res.tolerance
    assert res.truth_closing <= res.tolerance
    assert res.odom_error <= res.tolerance - driver.pos_tol
    assert abs(res.truth_yaw_error) < 1.0  # degrees: back facing where it started
    xs = [p[1] for p in res.truth_path]
    ys = [p[2] for p in res.truth_path]
    assert max(xs) == pytest.approx(0.5, abs=0.02) and max(ys) == pytest.approx(0.5, abs=0.02)
