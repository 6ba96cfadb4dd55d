"""Action groups as the patent defines them, timed against the simulated servos.

Action type, repeat count, the sync byte (steps that start together), the
per-step timeout and the wait mask, executed by the fish behind
``sim://fish?pacing=afap``: every time below is simulated time (the CAN bus's
clock), so the checks are exact functions of the servo model in
``can_bus.sim.nodes`` (a first-order lag, tau 80 ms, rate-limited to 300 °/s at
speed 100 %), the 20 ms command refresh and the 20 ms feedback period.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from fwbridge.can_bus.sim.nodes import DYNAMICS, Kind
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.families import action_group
from fwbridge.protocols.families.action_group import ActionGroup, ServoEntry, Step
from fwbridge.protocols.families.fish_commands import Scene, SceneOp, SceneSensor, UserConfig
from fwbridge.protocols.families.fish_payloads import action_code
from tests.helpers import Fish

PERIOD = 0.02  # s: command refresh and feedback period of the fish's CAN bus
DYN = DYNAMICS[Kind.SERVO]


def sync_time(angle: float, speed: int, tolerance: float = 2.0) -> float:
    """When a servo starting at rest at 0° reports (rounded to whole degrees, as the
    CAN struct carries it) an angle within ``tolerance`` of ``angle``, by the model."""
    limit = DYN.max_rate * speed / 100.0
    knee = DYN.tau * limit  # below this error the lag, above it the rate limit, rules
    err = tolerance + 0.5  # the error left when the rounded feedback is within tolerance
    if abs(angle) <= knee:
        return DYN.tau * math.log(abs(angle) / err)
    return (abs(angle) - knee) / limit + DYN.tau * math.log(knee / err)


@pytest.fixture
def fish() -> Iterator[Fish]:
    f = Fish()
    yield f
    f.close()


def run(fish: Fish, group: ActionGroup) -> None:
    frame = ActionFrame(0, InstructionType.WRITE_PC, SubCommand.TEST_ACTION_GROUP,
                        action_group.encode(group))
    assert fish.link.send(frame).delivered


def phase_starts(fish: Fish) -> list[tuple[float, int, int]]:
    return list(fish.model.controller.player.log)


def test_next_step_starts_when_the_servo_reaches_its_target(fish: Fish) -> None:
    group = ActionGroup.timed((Step.timed((ServoEntry(1, 80, 60),)),
                               Step.timed((ServoEntry(1, 80, 0),))))
    run(fish, group)
    fish.run_until_group_done()
    (t0, _, s0), (t1, _, s1) = phase_starts(fish)
    assert (s0, s1) == (0, 1)
    expected = sync_time(60, 80)
    # The servo gets its first command within one refresh, reports within one feedback
    # period after it gets there, and the controller sees it at its next step.
    assert expected <= t1 - t0 <= expected + 3 * PERIOD
    assert fish.model.controller.player.stats.step_timeouts == 0


def test_a_step_timeout_moves_on_and_is_counted(fish: Fish) -> None:
    slow = Step.timed((ServoEntry(1, 5, 90),), timeout_ms=150)  # 15 °/s: 6 s to get there
    group = ActionGroup.timed((slow, Step.timed((ServoEntry(1, 80, 0),))))
    run(fish, group)
    fish.run_until_group_done()
    (t0, _, _), (t1, _, _) = phase_starts(fish)
    assert 0.15 <= t1 - t0 <= 0.15 + PERIOD
    assert fish.model.controller.player.stats.step_timeouts == 1
    assert fish.model.modules[1].angle < 10  # it never got there


def test_steps_with_the_same_sync_byte_start_together(fish: Fish) -> None:
    a = Step.timed((ServoEntry(1, 80, 40),), sync=7)
    b = Step.timed((ServoEntry(2, 20, 40),), sync=7)  # slower: 60 °/s
    c = Step.timed((ServoEntry(3, 80, 30),))
    run(fish, ActionGroup.timed((a, b, c)))
    fish.run_until_group_done()
    log = phase_starts(fish)
    assert [s for _, _, s in log] == [0, 2]  # steps 0 and 1 are one phase
    cmds = fish.commands()
    first = {k: min(t for t, m, _, angle in cmds if m == k and angle != 0) for k in (1, 2, 3)}
    assert abs(first[1] - first[2]) < PERIOD  # the same refresh carries both
    # Step 2 waited for the slower of the two.
    gap = log[1][0] - log[0][0]
    assert sync_time(40, 20) <= gap <= sync_time(40, 20) + 3 * PERIOD
    assert gap > sync_time(40, 80) + 3 * PERIOD


def test_without_sync_the_steps_run_one_after_the_other(fish: Fish) -> None:
    a = Step.timed((ServoEntry(1, 80, 40),))
    b = Step.timed((ServoEntry(2, 20, 40),))
    run(fish, ActionGroup.timed((a, b)))
    fish.run_until_group_done()
    (t0, _, _), (t1, _, _) = phase_starts(fish)
    assert sync_time(40, 80) <= t1 - t0 <= sync_time(40, 80) + 3 * PERIOD


def test_the_wait_mask_names_the_servos_a_step_waits_for(fish: Fish) -> None:
    both = (ServoEntry(1, 80, 40), ServoEntry(2, 5, 40))  # servo 2 alone would take 3 s
    run(fish, ActionGroup.timed((Step.timed(both, wait_mask=0b01),
                                 Step.timed((ServoEntry(1, 80, 0),)))))
    fish.run_until_group_done()
    (t0, _, _), (t1, _, _) = phase_starts(fish)
    assert t1 - t0 <= sync_time(40, 80) + 3 * PERIOD
    assert fish.model.controller.player.stats.step_timeouts == 0


def test_repeat_count_runs_the_group_again(fish: Fish) -> None:
    steps = (Step.timed((ServoEntry(1, 80, 30),)), Step.timed((ServoEntry(1, 80, -30),)))
    run(fish, ActionGroup.timed(steps, repeat=3))
    fish.run_until_group_done()
    st = fish.model.controller.player.stats
    assert (st.groups_done, st.runs_done, st.steps_done) == (1, 3, 6)
    assert [(r, s) for _, r, s in phase_starts(fish)] == [(0, 0), (0, 1), (1, 0), (1, 1),
                                                         (2, 0), (2, 1)]


def test_a_continuous_group_runs_until_another_command(fish: Fish) -> None:
    steps = (Step.timed((ServoEntry(1, 80, 30),)), Step.timed((ServoEntry(1, 80, -30),)))
    run(fish, ActionGroup.timed(steps, action_type=1))
    player = fish.model.controller.player
    assert fish.world.run_until(lambda: player.stats.runs_done >= 4, 10_000)
    assert player.running
    idle = ActionFrame(0, InstructionType.CONTROL_PHONE, SubCommand.ENTER_IDLE)
    assert fish.link.send(idle).delivered
    assert not player.running and player.stats.groups_done == 0


def test_scenes_for_free_action_come_from_the_user_configuration(fish: Fish) -> None:
    # Any depth above -1 cm: the scene always matches, so free mode runs its action.
    cfg = UserConfig(scenes=(Scene(SceneSensor.DEPTH_CM, SceneOp.ABOVE, -1,
                                   action_code("glide")),))
    frame = ActionFrame(0, InstructionType.WRITE_PC, SubCommand.WRITE_USER_CONFIG, cfg.pack())
    assert fish.link.send(frame).delivered
    free = ActionFrame(0, InstructionType.CONTROL_PHONE, SubCommand.FREE_SWIMMING)
    assert fish.link.send(free).delivered
    fish.world.run_for(300)
    d = fish.model.controller.last_decision
    assert d is not None and (d.source, d.action) == ("scene", "glide")
    assert d.reason == "scene-0:depth_cm>-1"


def _config(fish: Fish, *scenes: Scene) -> None:
    frame = ActionFrame(0, InstructionType.WRITE_PC, SubCommand.WRITE_USER_CONFIG,
                        UserConfig(scenes=scenes).pack())
    assert fish.link.send(frame).delivered
    free = ActionFrame(0, InstructionType.CONTROL_PHONE, SubCommand.FREE_SWIMMING)
    assert fish.link.send(free).delivered


def test_a_laser_on_a_receiver_triggers_its_scene(fish: Fish) -> None:
    _config(fish, Scene(SceneSensor.LASER, SceneOp.EQUAL, 2, action_code("dive")))
    fish.world.run_for(300)
    assert fish.model.controller.last_decision.source != "scene"  # type: ignore[union-attr]
    fish.model.supervisor_command({"cmd": "laser", "receiver": 2})
    fish.world.run_for(200)
    d = fish.model.controller.last_decision
    assert d is not None and (d.source, d.action, d.reason) == ("scene", "dive",
                                                               "scene-0:laser=2")
    with pytest.raises(ValueError, match="laser receiver 7"):
        fish.model.supervisor_command({"cmd": "laser", "receiver": 7})


def test_side_light_sensors_see_a_light_and_steer_by_scene(fish: Fish) -> None:
    senses = fish.model.senses
    # The fish at the origin facing +x: a 100 lux-at-1-m light 2 m to its left.
    fish.model.supervisor_command({"cmd": "light", "x": 0.0, "y": 2.0, "lux": 100.0})
    left, right = senses.light_levels(0.0, 0.0, 0.0)
    assert (left, right) == (pytest.approx(25.0), 0.0)  # 100 / 2^2, cos 0; nothing on the right
    # 45° ahead-left at 2 m: cos 45° / 4 on the left only.
    assert senses.light_levels(0.0, 2.0 - math.sqrt(2), -math.pi / 4)[0] > 0
    # Phototaxis as a scene: light on the left above 10 lux -> turn left.
    body = fish.model.body
    body.x = body.y = body.yaw = 0.0
    _config(fish, Scene(SceneSensor.LIGHT_LEFT_LUX, SceneOp.ABOVE, 10, action_code("turn-left")))
    fish.world.run_for(150)
    d = fish.model.controller.last_decision
    assert d is not None and (d.source, d.action) == ("scene", "turn-left")
