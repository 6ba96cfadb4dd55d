"""The simulated robot fish end to end: host -> action frame -> answer -> CAN servo commands.

The fish runs behind ``sim://fish?pacing=afap`` (the world steps only inside the
port's calls, or when a test steps it), so everything below is a function of
its inputs: no wall-clock timing, no threads. What goes on the fish's CAN bus
is watched by a spy node on its channel, as a bus analyser would.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import serial

from fwbridge.bridge.sim.faults import FaultInjector, FaultSpec
from fwbridge.bridge.sim.fish.body import Obstacle
from fwbridge.bridge.sim.models.fish import RobotFish
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.bridge.sim.webots_serial import ROBOT_LINK
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.protocols import action_frame
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families import action_group
from fwbridge.protocols.families.actuator import Fault
from fwbridge.protocols.families.arq import Status
from fwbridge.protocols.families.fish_payloads import (
    FISH_SERVOS,
    BuoyancyInfo,
    CanErrorInfo,
    CanNodeInfo,
    Health,
    RobotInfo,
    ServoInfo,
    action_code,
    action_name,
    decode_result,
    encode_result,
    encode_servo_targets,
)
from tests.helpers import EXAMPLE, REPEAT, STEPS, Fish

offer_sim()  # serial.serial_for_url("sim://…") below


SIM_URL = "sim://fish?pacing=afap"


@pytest.fixture
def fish() -> Iterator[Fish]:
    f = Fish()
    yield f
    f.close()


def distinct_in_order(cmds: list[tuple[float, int, int, int]], module: int
                      ) -> list[tuple[int, int]]:
    """The (speed, angle) values a module was commanded, repeats (the periodic refresh) merged."""
    seq: list[tuple[int, int]] = []
    for _, k, speed, angle in cmds:
        if k == module and (not seq or seq[-1] != (speed, angle)):
            seq.append((speed, angle))
    return seq


def check_example_on_the_bus(fish: Fish) -> None:
    fish.world.run_for(300)  # the last step's targets hold: let the servos settle
    cmds = fish.commands()
    for k in (1, 2, 3):
        # The example's header asks for two runs (repeat count 2: two strokes).
        assert distinct_in_order(cmds, k) == [(s, a) for st in STEPS for i, s, a in st
                                              if i == k] * REPEAT
    # In step order: every servo got its step-1 command before any step-2 command went out.
    first_of: dict[tuple[int, int, int], float] = {}
    for t, k, speed, angle in cmds:
        first_of.setdefault((k, speed, angle), t)
    step1 = [first_of[e] for e in STEPS[0]]
    step2 = [first_of[e] for e in STEPS[1]]
    assert max(step1) < min(step2)
    # Within a step the lowest module ID wins arbitration: 1, 2, 3.
    assert step1 == sorted(step1) and step2 == sorted(step2)
    # No other module was commanded a position, and the servos end where step 2 says.
    assert {k for _, k, _, _ in cmds} == {1, 2, 3}
    for i, _, angle in STEPS[1]:
        assert fish.model.modules[i].angle == pytest.approx(angle, abs=0.5)


def test_worked_example_executes_end_to_end(fish: Fish) -> None:
    assert STEPS == [[(1, 80, 60), (2, 60, 50), (3, 30, 20)],
                     [(1, 80, -60), (2, 60, -50), (3, 30, -20)]]
    ex = fish.link.send(EXAMPLE)
    assert (ex.delivered, ex.attempts, ex.status) == (True, 1, Status.OK)
    assert ex.result is None and fish.link.sender.stats.retransmitted == 0
    fish.run_until_group_done()
    check_example_on_the_bus(fish)
    st = fish.model.controller.player.stats
    assert REPEAT == 2
    assert (st.groups_done, st.runs_done, st.steps_done, st.step_timeouts) == (1, 2, 4, 0)
    assert fish.model.responder.stats.as_dict() == {"answered": 1, "acks": 1, "naks": 0,
                                                    "duplicates": 0}


def test_lost_answer_is_retransmitted_and_counted_as_a_duplicate(fish: Fish) -> None:
    ether = fish.world.ether
    drop = FaultInjector(FaultSpec(drop=1.0), "robot->host")
    ether.set_faults(ROBOT_LINK.tx_channel, drop)

    def heal(now_ms: int) -> None:  # the line comes back once the first answer is lost
        if drop.stats.dropped:
            ether.set_faults(ROBOT_LINK.tx_channel, None)
            fish.world.post_step.remove(heal)

    fish.world.post_step.append(heal)
    ex = fish.link.send(EXAMPLE)
    assert drop.stats.dropped == 12  # the one-byte answer, whole: 11 + 1 bytes
    assert (ex.delivered, ex.attempts, ex.status) == (True, 2, Status.OK)
    sender = fish.link.sender.stats
    assert (sender.timeouts, sender.retransmitted, sender.delivered) == (1, 1, 1)
    assert fish.model.responder.stats.as_dict() == {"answered": 2, "acks": 2, "naks": 0,
                                                    "duplicates": 1}
    # The duplicate did not restart the group its first copy started.
    assert (fish.model.stats.groups_run, fish.model.stats.duplicates_skipped) == (1, 1)
    fish.run_until_group_done()
    check_example_on_the_bus(fish)
    assert fish.model.controller.player.stats.groups_started == 1
    info = fish.link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(info, RobotInfo) and info.duplicates == 1


@pytest.mark.parametrize(("obstacle_y", "turn", "fins", "other_fins", "sign"), [
    (0.12, "turn-right", (4, 6), (5, 7), -1),  # near the left sonar: turn right
    (-0.12, "turn-left", (5, 7), (4, 6), +1),  # near the right sonar: turn left
])
def test_free_mode_turns_away_from_the_nearer_sonar(
        fish: Fish, obstacle_y: float, turn: str, fins: tuple[int, int],
        other_fins: tuple[int, int], sign: int) -> None:
    fish.model.body.add_obstacle(Obstacle(0.6, obstacle_y, 0.1))
    before = fish.link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(before, RobotInfo)
    near, far = ((before.sonar_left_mm, before.sonar_right_mm) if sign < 0
                 else (before.sonar_right_mm, before.sonar_left_mm))
    assert 300 < near < 450 and far == 0xFFFF  # one beam on the obstacle, the other clear
    assert (before.mode, before.decision_source) == (0, 0)  # idle: no decision yet

    ex = fish.link.send(ActionFrame(0, InstructionType.CONTROL_PHONE, SubCommand.ENTER_FREE_MODE))
    assert ex.delivered
    fish.world.run_for(300)
    info = fish.link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(info, RobotInfo)
    assert (info.mode, info.decision_source, info.decision_action) == (1, 2, action_code(turn))
    servos = fish.link.query(SubCommand.QUERY_SERVO_INFO)
    assert isinstance(servos, tuple)
    by_id = {s.module_id: s for s in servos}
    assert by_id[3].target == sign * 30 and sign * by_id[3].angle > 20  # head turned that way
    assert all(abs(by_id[k].target) == 40 and abs(by_id[k].angle) > 10 for k in fins)
    assert all(by_id[k].angle == 0 for k in other_fins)  # the other side's fins keep still
    cmds = fish.commands()
    assert {k for _, k, _, _ in cmds} == {3, *fins}  # nothing else was commanded to move

    fish.run_until_group_done()
    after = fish.link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(after, RobotInfo)
    assert sign * after.heading_cdeg > 2000  # more than 20° away from the obstacle's side
    assert sign * fish.model.pose[2] > math.radians(20)  # and so says the true pose


def test_a_scene_mode_comes_before_avoidance(fish: Fish) -> None:
    fish.model.body.add_obstacle(Obstacle(0.6, 0.12, 0.1))
    fish.model.modules[6].faults = Fault.WATER_INGRESS  # the rear-left fin's servo leaks
    assert fish.link.send(ActionFrame(0, 7, SubCommand.ENTER_FREE_MODE)).delivered
    fish.world.run_for(500)
    info = fish.link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(info, RobotInfo)
    assert (info.decision_source, info.decision_action) == (1, action_code("surface"))
    buoy = fish.link.query(SubCommand.QUERY_BUOYANCY_INFO)
    assert isinstance(buoy, BuoyancyInfo)
    assert buoy.pump == -1 and buoy.fill_pct < 50 and buoy.water_out_ml > 0  # blowing ballast
    servos = fish.link.query(SubCommand.QUERY_SERVO_INFO, bytes([6]))
    assert isinstance(servos, tuple)
    assert (servos[0].health, servos[0].fault) == (Health.DEGRADED, Fault.WATER_INGRESS)


@pytest.mark.parametrize(("fault", "state"), [
    ({"stuck_dominant": True}, 2),  # bus-off (and stays there: every attempt fails)
    # Misreads every bit: bus-off again and again; it recovers by itself in between,
    # so which state a snapshot finds is not fixed, the bus-off count is.
    ({"bit_error_rate": 1.0}, None),
    ({"disconnected": True}, 1),  # nobody acknowledges it: error-passive
])
def test_a_module_off_the_bus_is_reported(fish: Fish, fault: dict[str, object],
                                          state: int | None) -> None:
    fish.world.run_for(200)
    healthy = fish.link.query(SubCommand.QUERY_CAN_ERROR_RATE)
    assert isinstance(healthy, CanErrorInfo)
    assert healthy.error_frames == 0 and healthy.frames > 100
    assert [(n.module_id, n.state, n.tec) for n in healthy.nodes[:8]] == [
        (k, 0, 0) for k in range(8)]  # the main controller (0) and the seven servos
    bus = fish.model.modules[2].bus
    assert isinstance(bus, FwBridgeBus)
    bus.inject(**fault)  # type: ignore[arg-type]
    fish.world.run_for(300)

    can_info = fish.link.query(SubCommand.QUERY_CAN_ERROR_RATE)
    assert isinstance(can_info, CanErrorInfo)
    node = can_info.node(2)
    assert node is not None
    if state == 1:
        assert (node.state, node.bus_offs) == (1, 0) and node.tec >= 128
    else:
        assert node.bus_offs >= 1
        assert can_info.error_frames > 0 and can_info.error_ppm > 0
        if state == 2:
            assert node.state == 2 and node.tec > 255
    others = [n for n in can_info.nodes if n.module_id not in (2, 0xFF)]
    assert [n.module_id for n in others] == [0, 1, 3, 4, 5, 6, 7]
    if state is None:
        # A node that misreads everything also destroys the others' frames (its
        # error flags): they suffer, the culprit is the one that keeps going bus-off.
        assert all(n.bus_offs < node.bus_offs for n in others)
    else:
        assert all(n.state != 2 and n.bus_offs == 0 for n in others)  # still on the bus
    servos = fish.link.query(SubCommand.QUERY_SERVO_INFO, bytes([2, 3]))
    assert isinstance(servos, tuple) and [s.module_id for s in servos] == [2, 3]
    assert servos[0].health == Health.SILENT
    assert servos[1].health in (Health.OK, Health.DEGRADED)  # heard (its REC may be high)


def test_servo_commands_queries_and_refusals(fish: Fish) -> None:
    link = fish.link
    targets = encode_servo_targets([action_group.ServoEntry(4, 50, -25),
                                    action_group.ServoEntry(7, 50, 35)])
    assert link.send(ActionFrame(0, InstructionType.WRITE_PC, SubCommand.SET_SERVO_POSITION,
                                 targets)).delivered
    fish.world.run_for(600)
    servos = link.query(SubCommand.QUERY_SERVO_INFO)
    assert isinstance(servos, tuple) and len(servos) == len(FISH_SERVOS)
    by_id: dict[int, ServoInfo] = {s.module_id: s for s in servos}
    assert (by_id[4].target, by_id[7].target) == (-25, 35)
    assert by_id[4].angle == pytest.approx(-25, abs=2)
    assert by_id[7].angle == pytest.approx(35, abs=2)
    assert [by_id[k].role for k in range(1, 8)] == [1, 1, 0, 2, 2, 2, 2]
    assert {(k, s, a) for _, k, s, a in fish.commands()} == {(4, 50, -25), (7, 50, 35)}
    # Real-time control goes out as 0x21 on CAN.
    rt = encode_servo_targets([action_group.ServoEntry(3, 0, 10)])
    assert link.send(ActionFrame(0, InstructionType.CONTROL_PHONE,
                                 SubCommand.REALTIME_SERVO_CONTROL, rt)).delivered
    fish.world.run_for(50)
    assert {(k, a) for _, k, _, a in fish.commands(SubCommand.REALTIME_SERVO_CONTROL)} == {(3, 10)}
    # Refusals: unknown sub-command, malformed servo list; each gives up after the retries.
    link.sender.retries = 0
    for frame, status in ((ActionFrame(0, 6, 0x50), Status.UNKNOWN_SUB),
                          (ActionFrame(0, 6, SubCommand.SET_SERVO_POSITION, b"\x01\x02\x03"),
                           Status.LENGTH_ERROR),
                          (ActionFrame(0, 6, SubCommand.TEST_ACTION_GROUP, b"\x00" * 5),
                           Status.LENGTH_ERROR)):
        ex = link.send(frame)
        assert (ex.delivered, ex.status) == (False, status), frame
    # Another machine code is not answered at all.
    ex = link.send(ActionFrame(9, InstructionType.READ_PC, SubCommand.QUERY_ROBOT_INFO))
    assert (ex.delivered, ex.status) == (False, None) and "no answer" in ex.reason
    assert fish.model.stats.other_machine == 1
    buoy = link.query(SubCommand.QUERY_BUOYANCY_INFO)
    assert isinstance(buoy, BuoyancyInfo)
    assert buoy.as_dict() == {"fill_pct": 50, "pump": 0, "depth_cm": 50, "pressure_hpa": 1062,
                              "water_in_ml": 0, "water_out_ml": 0}


def test_a_bad_crc_is_answered_with_a_nak_and_the_retransmission_gets_through(
        fish: Fish) -> None:
    good = action_frame.encode(EXAMPLE)
    bad = bytearray(good)
    bad[20] ^= 0xFF  # one data byte changed on the way: the CRC no longer matches
    fish.port.write(bytes(bad))
    fish.world.run_for(5)
    assert fish.model.responder.stats.naks == 1 and fish.model.stats.groups_run == 0
    answer = action_frame.decode(fish.port.read(fish.port.in_waiting))
    assert (answer.type, answer.sub, answer.data) == (
        InstructionType.WRITE_RESULT_PC, SubCommand.TEST_ACTION_GROUP, bytes([Status.CRC_ERROR]))
    assert fish.link.send(EXAMPLE).delivered
    fish.run_until_group_done()
    check_example_on_the_bus(fish)


def test_stored_groups_and_idle(fish: Fish) -> None:
    link = fish.link
    assert link.send(ActionFrame(0, 6, SubCommand.WRITE_ACTION_GROUP, EXAMPLE.data)).delivered
    assert fish.model.controller.groups == [action_group.from_frame(EXAMPLE)]
    assert fish.commands() == []  # stored, not run
    assert link.send(ActionFrame(0, 6, SubCommand.TEST_ACTION_GROUP, EXAMPLE.data)).delivered
    fish.world.run_for(100)
    assert fish.model.controller.player.running
    assert link.send(ActionFrame(0, 7, SubCommand.ENTER_IDLE)).delivered
    fish.world.run_for(100)
    assert not fish.model.controller.player.running
    info = link.query(SubCommand.QUERY_ROBOT_INFO)
    assert isinstance(info, RobotInfo)
    assert (info.mode, info.running, info.stored_groups) == (0, 0, 1)
    held = {k: m.angle for k, m in fish.model.modules.items()}
    fish.world.run_for(300)
    for k, m in fish.model.modules.items():  # idle: every servo holds where it stopped
        assert m.angle == pytest.approx(held[k], abs=1.0)
    assert {k for _, k, _, _ in fish.commands(SubCommand.ENTER_IDLE)} == set(range(1, 8))


def test_fish_is_in_the_registry() -> None:
    from fwbridge.bridge.sim.models import MODELS, create_model

    assert MODELS["fish"] is RobotFish
    model = create_model("fish")
    assert isinstance(model, RobotFish) and model.name == "fish"


def test_result_layouts_have_the_documented_sizes_and_round_trip() -> None:
    info = RobotInfo(1, 2, 7, 3, 123_456, -17_999, 250, 372, 0xFFFF, 2, 3, 10, 1, 0)
    servos = (ServoInfo(1, 1, 3, -60, -60, 0, 1, 0x40), ServoInfo(7, 2, 1, 5, 40, 9, 2, 0))
    buoy = BuoyancyInfo(80, -1, 120, 1131, 400, 150)
    can_info = CanErrorInfo(1000, 500, 3, 5964, (CanNodeInfo(0, 0, 0, 8, 0),
                                                  CanNodeInfo(2, 2, 256, 0, 3)))
    for sub, value, size in ((0x11, info, 24), (0x12, servos, 1 + 2 * 8), (0x13, buoy, 14),
                             (0x14, can_info, 17 + 2 * 8)):
        data = encode_result(value)
        assert len(data) == 1 + size and data[0] == 0  # status byte, then the fields
        assert decode_result(sub, data) == value
        with pytest.raises(FrameError):
            decode_result(sub, data[:-1])
        with pytest.raises(FrameError):
            decode_result(sub, b"\x05" + data[1:])  # not an OK result
    assert info.as_dict()["decision_source"] == "avoid"
    assert info.as_dict()["decision_action"] == "turn-right"
    assert servos[0].as_dict()["health"] == "silent" and servos[0].as_dict()["role"] == "power"
    assert can_info.as_dict()["nodes"][1]["state"] == "bus-off"
    assert [action_name(action_code(n)) for n in ("glide", "group-3")] == ["glide", "group-3"]


def test_closing_a_sim_port_shuts_the_fish_s_can_nodes_down() -> None:
    # Not left to python-can's "was not properly shut down" at exit (docs/simulation.md).
    port = serial.serial_for_url(SIM_URL, timeout=0.1)
    port.write(action_frame.encode(ActionFrame(0, InstructionType.WRITE_PC,
                                               SubCommand.ENTER_FREE_MODE, b"")))
    assert port.read(1)
    buses = list(port.endpoint.model.buses)
    assert len(buses) == 8
    port.close()
    assert port.endpoint.model.buses == []
    assert all(bus._is_shutdown for bus in buses)
