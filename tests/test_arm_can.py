"""The SCARA arm end to end on the simulated CAN bus: actuator structs out, feedback in."""

from __future__ import annotations

import math

import can
import pytest

from fwbridge.bridge.robots.arm.can_arm import ArmLink, JointModule, arm_specs, run_pick_place
from fwbridge.bridge.robots.arm.kinematics import Joints, Pose, ScaraGeometry
from fwbridge.bridge.robots.arm.pick_place import Phase, PickPlaceConfig
from fwbridge.can_bus.ids import from_message
from fwbridge.protocols.families.actuator import fine_position

GEOM = ScaraGeometry(z_min=0.0, z_max=0.4)  # the earlier slide, with the precise settings


def test_seed_pick_and_place_on_the_bus() -> None:
    cfg = PickPlaceConfig(pick=(0.45, 0.15, 0.12), place=(0.2, -0.25, 0.15)).precise()
    start = Pose(0.5, 0.3, 0.2)
    run = run_pick_place(cfg, GEOM, start=start)
    task = run.task
    assert task.phase is Phase.DONE, task.failure
    assert [r.phase for r in task.reached] == [p for p in Phase
                                               if p not in (Phase.DONE, Phase.FAILED)]
    assert all(r.error_m <= 0.001 for r in task.reached)  # joint feedback, Cartesian terms
    # The Z rule on the measured path: below the safe height only above start/pick/place.
    spots = [start[:2], cfg.pick[:2], cfg.place[:2]]
    low = [p for _, p, _ in run.trace if p.z < cfg.safe_z - cfg.tolerance]
    assert low
    assert all(min(math.dist(p[:2], s) for s in spots) <= cfg.tolerance for p in low)
    assert run.bus_frames > 1000


def test_modules_speak_actuator_structs_with_fine_positions() -> None:
    kw = {"interface": "fwbridge", "channel": "arm-structs", "bitrate": 1_000_000,
          "pacing": "afap"}
    specs = arm_specs(GEOM)
    host, mod_bus, spy = can.Bus(**kw), can.Bus(**kw), can.Bus(**kw)
    try:
        module = JointModule(mod_bus, specs[0], 0.0)
        link = ArmLink(host, specs)
        link.send(Joints(math.radians(123.45), 0.0, 0.1, 0.0), 0.0)
        now = 0.0
        for _ in range(500):  # 2.5 s: the joint moves at up to 2 rad/s
            now += 0.005
            host.advance_to(now)  # type: ignore[attr-defined]
            module.step(now)
            link.poll(now)
        assert module.target == pytest.approx(math.radians(123.45), abs=1e-4)
        assert link.values[1] == pytest.approx(math.radians(123.45), abs=2e-4)
        seen = []
        while (msg := spy.recv(0)) is not None:
            got = from_message(msg)
            if got is not None:
                seen.append((msg.arbitration_id, got.struct))
        cmd = next(s for i, s in seen if i == 0x101)
        assert cmd.command == 0x38 and fine_position(cmd) == 12345
        assert cmd.angle == 123  # the coarse field still says whole degrees
        assert any(i == 0x201 for i, _ in seen)
    finally:
        for b in (host, mod_bus, spy):
            b.shutdown()


def test_a_missing_module_is_named() -> None:
    kw = {"interface": "fwbridge", "channel": "arm-silent", "bitrate": 500_000, "pacing": "afap"}
    specs = arm_specs(GEOM)
    host, mod_bus = can.Bus(**kw), can.Bus(**kw)
    try:
        module = JointModule(mod_bus, specs[1], 0.0)
        link = ArmLink(host, specs)
        now = 0.0
        for _ in range(100):
            now += 0.005
            host.advance_to(now)  # type: ignore[attr-defined]
            module.step(now)
            link.poll(now)
        assert link.joints is None
        assert link.silent(now) == ["theta1", "d3", "theta4", "gripper"]
    finally:
        host.shutdown()
        mod_bus.shutdown()
