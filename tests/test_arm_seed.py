"""SCARA motion as seed 001 writes it: MoveL(start, end, duration), its ramp speeds,
its joint tolerance, its 150 mm slide, its 20 N gripper and a grip/slip result."""

from __future__ import annotations

import itertools
import math

import can
import pytest

from fwbridge.bridge.robots.arm.can_arm import ArmLink, arm_specs, run_modules, run_pick_place
from fwbridge.bridge.robots.arm.config import ArmConfigError, parse_arm
from fwbridge.bridge.robots.arm.kinematics import Pose, ScaraGeometry, forward, inverse
from fwbridge.bridge.robots.arm.motion import MoveL, RampSpeeds
from fwbridge.bridge.robots.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig
from fwbridge.can_bus.ids import Direction, from_message
from fwbridge.protocols.families.actuator import fine_position

GEOM = ScaraGeometry()
A, B = Pose(0.45, 0.15, 0.25), Pose(0.2, -0.25, 0.25)


def test_seed_values_are_the_defaults() -> None:
    cfg = PickPlaceConfig()
    assert cfg.ramp == RampSpeeds(0.8, 1.0, 0.4) and cfg.joint_tolerance == 0.015
    assert round(GEOM.z_max - GEOM.z_min, 9) == 0.15  # the seed's stroke
    assert cfg.safe_z == GEOM.z_max  # the safe height: the top of the stroke
    assert (cfg.grip_force, cfg.friction, cfg.payload_kg) == (20.0, 0.8, 0.2)
    precise = cfg.precise()
    assert (precise.safe_z, precise.joint_tolerance, precise.ramp, precise.tolerance) == (
        0.35, None, None, 0.001)
    # Reset at 0.8 rad/s, moves at 1.0 rad/s, the slide at 0.4 m/s.
    assert cfg.phase_limits(Phase.RESET_HOME).vmax == (0.8, 0.8, 0.4, 0.8)
    assert cfg.phase_limits(Phase.ABOVE_PICK).vmax == (1.0, 1.0, 0.4, 1.0)
    assert precise.phase_limits(Phase.ABOVE_PICK).vmax == (2.0, 4.0, 0.5, 6.0)


def test_movel_takes_its_duration_on_the_line() -> None:
    start = inverse(GEOM, A)
    move = MoveL(GEOM, A, B, 2.0, start)
    assert move.steps == 125  # 2 s in 16 ms targets
    for k in range(move.steps + 1):
        t = k * 0.016
        p = forward(GEOM, move.sample(t))
        f = min(t / 2.0, 1.0)
        want = Pose(A.x + f * (B.x - A.x), A.y + f * (B.y - A.y), A.z, 0.0)
        assert p.distance(want) < 1e-9
    assert forward(GEOM, move.sample(2.0)).distance(B) < 1e-9
    assert forward(GEOM, move.sample(1.99)).distance(B) > 1e-3  # not there early
    assert move.sample(5.0) == move.sample(2.0)


def test_movel_refuses_a_duration_the_joints_cannot_keep() -> None:
    start = inverse(GEOM, A)
    with pytest.raises(ValueError, match=r"s at least") as info:
        MoveL(GEOM, A, B, 0.05, start)
    shortest = float(str(info.value).rsplit("; ", 1)[1].split(" s")[0])
    MoveL(GEOM, A, B, shortest, start)  # that one fits
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="positive"):
            MoveL(GEOM, A, B, bad, start)


def test_movel_duration_met_by_the_simulated_arm_on_can() -> None:
    """The joint modules on a simulated CAN bus follow MoveL's targets: the tool is at
    the end (within 1 mm) a few servo time constants after ``duration``, and not
    before the move's last target."""
    kw = {"interface": "fwbridge", "channel": "movel-test", "bitrate": 1_000_000,
          "pacing": "afap"}
    host = can.Bus(**kw)
    modules, buses = run_modules(lambda: can.Bus(**kw), GEOM, start=A)
    try:
        link = ArmLink(host, arm_specs(GEOM))
        move = MoveL(GEOM, A, B, 1.5, inverse(GEOM, A))
        now, arrived = 0.0, None
        while now < 3.0:
            host.advance_to(now)  # type: ignore[attr-defined]
            for m in modules:
                m.step(now)
            link.poll(now)
            fb = link.joints
            if fb is not None:
                link.send(move.sample(now), 0.0)
                if arrived is None and forward(GEOM, fb).distance(B) < 0.001:
                    arrived = now
            now += 0.016
        assert arrived is not None
        tau = max(s.tau for s in arm_specs(GEOM))
        assert 1.5 <= arrived <= 1.5 + 5 * tau + 0.05
    finally:
        for b in (host, *buses):
            b.shutdown()


def test_pick_and_place_with_the_seed_defaults_holds_the_block() -> None:
    cfg = PickPlaceConfig()
    run = run_pick_place(cfg, GEOM, start=Pose(0.4, 0.0, 0.2))
    task = run.task
    assert task.phase is Phase.DONE, task.failure
    assert task.grip is not None and task.grip.result == "held"
    assert task.grip.capacity_n == pytest.approx(32.0)  # 2 fingers x 0.8 x 20 N
    assert task.grip.needed_n == pytest.approx(0.2 * (9.81 + 1.6))  # slide accel 4 x 0.4
    # The commanded joint speeds keep to the seed's ramps (one control period apart).
    trace = run.trace
    for (t0, p0, _), (t1, p1, _) in itertools.pairwise(trace):
        assert abs(p1.z - p0.z) / (t1 - t0) <= 0.4 * 1.2 + 1e-9  # slide, m/s (+lag)
    # The seed checks the joints, not the tool: within 0.015 rad, the tool within ~15 mm.
    assert max(r.error_m for r in task.reached) < 0.015


def test_a_weak_grip_slips_and_fails_the_pick() -> None:
    cfg = PickPlaceConfig(grip_force=1.0)  # 1.6 N of friction for 2.3 N
    run = run_pick_place(cfg, GEOM, start=Pose(0.4, 0.0, 0.2))
    task = run.task
    assert task.phase is Phase.FAILED and task.grip is not None and not task.grip.held
    assert "slips" in (task.failure or "")
    assert [r.phase for r in task.reached][-1] is Phase.CLOSE_GRIPPER


def test_seed_inconsistency_safe_z_above_the_stroke_is_refused() -> None:
    # The seed's SAFE_Z 0.35 cannot be reached by its 150 mm stroke that reaches 0.12.
    with pytest.raises(ValueError, match="outside the slide's range"):
        PickAndPlace(GEOM, PickPlaceConfig(safe_z=0.35, pick=(0.45, 0.15, 0.30)))


def test_arm_table_chooses_the_earlier_values() -> None:
    geom, cfg = parse_arm({"z_min": 0.0, "z_max": 0.4, "safe_z": 0.35, "ramp": False,
                           "joint_tolerance": 0})
    assert (geom.z_max, cfg.safe_z, cfg.ramp, cfg.joint_tolerance) == (0.4, 0.35, None, None)
    with pytest.raises(ArmConfigError, match=r"arm\.ramp"):
        parse_arm({"ramp": 1})


def test_seed_movel_across_the_wrist_stop_goes_the_long_way() -> None:
    """MoveL(start, end, duration) turning the tool so that theta4 goes 3.0 -> -3.0 rad:
    every target within the wrist's +-pi, continuous, the duration kept; a duration
    too short for the real 6 rad of wrist travel is refused."""
    j0 = inverse(GEOM, A)
    j1 = inverse(GEOM, B, j0)
    a = forward(GEOM, j0._replace(theta4=3.0))
    b = forward(GEOM, j1._replace(theta4=-3.0))
    with pytest.raises(ValueError, match="s at least"):
        MoveL(GEOM, a, b, 0.5, j0._replace(theta4=3.0))  # 6 rad of wrist in 0.5 s
    move = MoveL(GEOM, a, b, 2.0, j0._replace(theta4=3.0))
    assert move.steps == 125
    bound = GEOM.vmax[3] * move.period * 1.0001
    targets = [move.sample(k * move.period) for k in range(move.steps + 1)]
    assert targets[0].theta4 == pytest.approx(3.0) and targets[-1].theta4 == pytest.approx(-3.0)
    for prev, j in itertools.pairwise(targets):
        assert abs(j.theta4) <= GEOM.limit4 and abs(j.theta4 - prev.theta4) <= bound
    assert forward(GEOM, move.sample(2.0)).distance(b) < 1e-9
    assert forward(GEOM, move.sample(2.0)).turn(b) < 1e-9


def test_pick_and_place_on_can_turns_the_wrist_within_its_stop() -> None:
    """The arm starts with theta4 at 3.0 rad and the task's tool yaw asks for -3.0 there:
    the reset's straight lift turns the wrist the long way. Every theta4 target on the
    bus is within +-pi and moves no faster than the ramp; the task completes."""
    j0 = inverse(GEOM, Pose(0.4, 0.0, 0.2))
    start = forward(GEOM, j0._replace(theta4=3.0))
    cfg = PickPlaceConfig(phi=forward(GEOM, j0._replace(theta4=-3.0)).phi)
    channel = f"wrist-stop-{id(cfg):x}"
    spy = can.Bus(interface="fwbridge", channel=channel, bitrate=1_000_000, pacing="afap")
    try:
        run = run_pick_place(cfg, GEOM, start=start, channel=channel)
        wrist = arm_specs(GEOM)[3]
        targets = []
        while (msg := spy.recv(0)) is not None:
            got = from_message(msg)
            if got is not None and got.direction is Direction.COMMAND and got.module == 4:
                targets.append(wrist.from_counts(fine_position(got.struct)))
    finally:
        spy.shutdown()
    task = run.task
    assert task.phase is Phase.DONE, task.failure
    assert targets[0] == pytest.approx(3.0, abs=1e-3)
    assert min(targets) < -2.9  # the lift's turn ended at -3.0
    assert cfg.ramp is not None
    bound = max(cfg.ramp.move, cfg.ramp.reset) * cfg.period * 1.001 + 2.0 / wrist.counts_per_unit
    for prev, t4 in itertools.pairwise(targets):
        assert abs(t4) <= GEOM.limit4 and abs(t4 - prev) <= bound
