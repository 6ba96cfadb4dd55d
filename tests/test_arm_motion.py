"""Motion profiles and the pick-and-place task on a first-order arm model."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fwbridge.bridge.robots.arm.kinematics import Joints, Pose, ScaraGeometry, forward, inverse
from fwbridge.bridge.robots.arm.motion import JointMove, Limits, LinearMove, Trapezoid
from fwbridge.bridge.robots.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig

# The earlier 0.4 m slide and the precise settings (PickPlaceConfig.precise()).
GEOM = ScaraGeometry(z_min=0.0, z_max=0.4)


@given(st.floats(-3, 3), st.floats(-3, 3), st.floats(0.1, 6), st.floats(0.5, 30),
       st.floats(0, 5))
def test_trapezoid_respects_limits_and_ends_at_goal(
    start: float, goal: float, vmax: float, amax: float, extra: float
) -> None:
    # A move of under a nanometre (a subnormal distance) has no time to take.
    assume(start == goal or abs(goal - start) > 1e-9)
    prof = Trapezoid.plan(start, goal, vmax, amax)
    prof = prof.stretched(prof.duration + extra)
    assert prof.position(0.0) == start
    assert prof.position(prof.duration) == goal
    dt = max(prof.duration / 200, 1e-4)
    prev = start
    for k in range(1, 202):
        pos = prof.position(k * dt)
        assert abs(pos - prev) <= vmax * dt * (1 + 1e-6) + 1e-12
        prev = pos


def test_joint_move_finishes_together_and_within_speed() -> None:
    a = inverse(GEOM, Pose(0.4, 0.0, 0.35))
    b = inverse(GEOM, Pose(0.2, -0.25, 0.35), a)
    limits = Limits()
    move = JointMove(a, b, limits)
    assert move.sample(move.duration) == pytest.approx(b)
    period = 0.016
    prev = a
    for k in range(1, math.ceil(move.duration / period) + 1):
        j = move.sample(k * period)
        for d, v in zip((j.theta1 - prev.theta1, j.theta2 - prev.theta2, j.d3 - prev.d3),
                        limits.vmax):
            assert abs(d) <= v * period * 1.001
        prev = j


def test_move_l_is_a_straight_line() -> None:
    p0, p1 = Pose(0.45, 0.15, 0.35), Pose(0.3, -0.1, 0.12)
    start = inverse(GEOM, p0)
    move = LinearMove(GEOM, p0, p1, start, Limits(), 0.016)
    for k in range(math.ceil(move.duration / 0.016) + 1):
        p = forward(GEOM, move.sample(k * 0.016))
        # Distance from the segment p0-p1.
        u = [b - a for a, b in zip(p0[:3], p1[:3])]
        w = [c - a for a, c in zip(p0[:3], p[:3])]
        t = sum(x * y for x, y in zip(u, w)) / sum(x * x for x in u)
        closest = [a + t * d for a, d in zip(p0[:3], u)]
        assert math.dist(closest, p[:3]) < 1e-9
    assert forward(GEOM, move.sample(move.duration)).distance(p1) < 1e-9


def run_task(task: PickAndPlace, start: Joints, tau: float = 0.05) -> list[tuple[float, Pose]]:
    """Drive the task against joints that follow their setpoints with lag ``tau``."""
    fb = start
    now = 0.0
    trace = []
    alpha = 1.0 - math.exp(-task.cfg.period / tau)
    for _ in range(5000):
        sp = task.step(now, fb)
        if task.done:
            break
        fb = Joints(*(f + (s - f) * alpha for f, s in zip(fb, sp.joints)))
        trace.append((now, forward(GEOM, fb)))
        now += task.cfg.period
    return trace


def test_pick_and_place_reaches_every_waypoint_within_1mm_and_keeps_safe_z() -> None:
    task = PickAndPlace(GEOM, PickPlaceConfig().precise())
    start = Pose(0.5, 0.3, 0.2)  # below the safe height: the reset lifts straight up
    trace = run_task(task, inverse(GEOM, start))
    assert task.phase is Phase.DONE, task.failure
    phases = [r.phase for r in task.reached]
    assert phases == [p for p in Phase if p not in (Phase.DONE, Phase.FAILED)]
    assert all(r.error_m <= 0.001 for r in task.reached)
    # Safe-Z on the *measured* path: below the safe height (less 1 mm), the tool
    # is only ever above the start, pick or place spot (within the 1 mm tolerance).
    safe, tol = task.cfg.safe_z, task.cfg.tolerance
    spots = [start[:2], task.cfg.pick[:2], task.cfg.place[:2]]
    low = [p for _, p in trace if p.z < safe - tol]
    assert low, "the tool never went down"
    for p in low:
        assert min(math.dist((p.x, p.y), s) for s in spots) <= tol


def test_task_fails_with_a_reason_when_the_arm_does_not_follow() -> None:
    task = PickAndPlace(GEOM, PickPlaceConfig(settle_timeout=0.5).precise())
    stuck = inverse(GEOM, Pose(0.4, 0.0, 0.1))
    for k in range(2000):
        task.step(k * 0.016, stuck)  # feedback never moves
        if task.done:
            break
    assert task.phase is Phase.FAILED
    assert "reset-lift" in (task.failure or "") and "mm from the waypoint" in (task.failure or "")


def test_targets_are_checked_up_front() -> None:
    with pytest.raises(ValueError, match="above the safe height"):
        PickAndPlace(GEOM, PickPlaceConfig(pick=(0.45, 0.15, 0.4)).precise())
    with pytest.raises(ValueError, match="outside the workspace"):
        PickAndPlace(GEOM, PickPlaceConfig(place=(1.5, 0.0, 0.1)))


def test_the_wrist_goes_the_way_its_limits_allow_and_samples_stay_reachable() -> None:
    """theta4 from 3.0 to -3.0 rad: the short way crosses the +-pi stop, so the wrist
    goes the long way, and every sample is a target the module can reach as sent."""
    limits = Limits()
    a, b = Joints(0.3, 1.0, 0.2, 3.0), Joints(0.3, 1.0, 0.2, -3.0)
    move = JointMove(a, b, limits)
    period = 0.016
    prev = a.theta4
    samples = [move.sample(k * period) for k in range(math.ceil(move.duration / period) + 1)]
    for j in samples:
        assert abs(j.theta4) <= GEOM.limit4  # the module's clamp never changes the target
        assert abs(j.theta4 - prev) <= limits.vmax[3] * period * 1.001  # no 6 rad jump
        prev = j.theta4
    assert samples[-1].theta4 == pytest.approx(-3.0)
    # The plan's length is the travel the module makes: 6 rad, not 0.28.
    assert move.duration >= 6.0 / limits.vmax[3]


def test_arrival_includes_the_tool_yaw() -> None:
    """Feedback at the right place with the wrist turned is not 'reached'."""
    task = PickAndPlace(GEOM, PickPlaceConfig(settle_timeout=0.5))
    start = inverse(GEOM, Pose(0.4, 0.0, 0.35))
    turned = Joints(start.theta1, start.theta2, start.d3, start.theta4 + 1.0)
    assert forward(GEOM, turned).distance(forward(GEOM, start)) < 1e-12  # phi ignored there
    for k in range(400):
        task.step(k * 0.016, start if k == 0 else turned)
        if task.done:
            break
    assert task.phase is Phase.FAILED
    assert [r.phase for r in task.reached] == [Phase.RESET_LIFT]  # a zero-length move at t=0
    assert "tool yaw 57.3 deg off" in (task.failure or "")


def _across_the_wrist_stop(geom: ScaraGeometry, xy0: tuple[float, float],
                           xy1: tuple[float, float], z0: float, z1: float) -> tuple[Pose, Pose]:
    """A line whose tool yaw takes theta4 from 3.0 to -3.0 rad: the short way round in
    phi would take the wrist across its +-pi stop."""
    j0 = inverse(geom, Pose(*xy0, z0))
    j1 = inverse(geom, Pose(*xy1, z1), j0)
    return (forward(geom, Joints(j0.theta1, j0.theta2, z0, 3.0)),
            forward(geom, Joints(j1.theta1, j1.theta2, z1, -3.0)))


def test_move_l_across_the_wrist_stop_stays_within_the_limits() -> None:
    """The tool yaw of a straight move turns the way the wrist can go: every sample's
    theta4 within +-pi, sent unwrapped, no step faster than the joints' limits."""
    p0, p1 = _across_the_wrist_stop(GEOM, (0.45, 0.15), (0.3, -0.1), 0.3, 0.2)
    start = inverse(GEOM, p0)
    assert start.theta4 == pytest.approx(3.0)
    limits, period = Limits(), 0.016
    move = LinearMove(GEOM, p0, p1, start, limits, period)
    samples = [move.sample(k * period) for k in range(math.ceil(move.duration / period) + 1)]
    prev = start
    for j in samples:
        assert abs(j.theta4) <= GEOM.limit4
        for a, b, v in zip(prev, j, limits.vmax):
            assert abs(b - a) <= v * period * 1.001  # the wrist's real travel, not wrapped
        prev = j
    assert samples[-1].theta4 == pytest.approx(-3.0)
    assert forward(GEOM, samples[-1]).distance(p1) < 1e-9
    assert forward(GEOM, samples[-1]).turn(p1) < 1e-9
    # Still the line: the tool's XYZ on the segment.
    u = [b - a for a, b in zip(p0[:3], p1[:3])]
    for j in samples:
        p = forward(GEOM, j)
        w = [c - a for a, c in zip(p0[:3], p[:3])]
        t = sum(x * y for x, y in zip(u, w)) / sum(x * x for x in u)
        assert math.dist([a + t * d for a, d in zip(p0[:3], u)], p[:3]) < 1e-9
    # The plan's length is the wrist's travel: about 6 rad at the wrist's top speed.
    assert move.duration >= 5.5 / limits.vmax[3]


@pytest.mark.parametrize("z1", [0.3, 0.3 + 1e-6])
def test_a_turn_in_place_across_the_wrist_stop_is_a_wrist_move(z1: float) -> None:
    """No travel (or a micrometre), only the yaw: the wrist turns the long way, at no
    more than its top speed."""
    p0, p1 = _across_the_wrist_stop(GEOM, (0.4, 0.0), (0.4, 0.0), 0.3, z1)
    start, limits, period = inverse(GEOM, p0), Limits(), 0.016
    move = LinearMove(GEOM, p0, p1, start, limits, period)
    assert move.duration >= 6.0 / limits.vmax[3]
    prev = start.theta4
    for k in range(math.ceil(move.duration / period) + 1):
        t4 = move.sample(k * period).theta4
        assert abs(t4) <= GEOM.limit4 and abs(t4 - prev) <= limits.vmax[3] * period * 1.001
        prev = t4
    assert prev == pytest.approx(-3.0)
