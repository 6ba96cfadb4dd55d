"""Controller and actuator modules on the simulator, on python-can's virtual bus, and on vcan."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator, Sequence

import can
import pytest

from fwbridge.can_bus.ids import Direction, from_message, to_message
from fwbridge.can_bus.interface import FwBridgeBus, SimBusInitError
from fwbridge.can_bus.sim.nodes import (
    ActuatorModule,
    Kind,
    MainController,
    NodeRunner,
    Status,
    TxQueue,
    start_modules,
)
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault
from tests.helpers import vcan_reason

_names = itertools.count()
TARGETS = {1: (30, 0), 2: (-40, 50), 3: (20, 100)}  # module: (angle, speed %)


@pytest.fixture
def opened() -> Iterator[list[can.BusABC]]:
    buses: list[can.BusABC] = []
    yield buses
    for bus in buses:
        bus.shutdown()


def make_nodes(new_bus: object, buses: list[can.BusABC]
               ) -> tuple[MainController, list[ActuatorModule]]:
    assert callable(new_bus)
    ctrl_bus = new_bus()
    buses.append(ctrl_bus)
    modules = []
    for k, kind in zip((1, 2, 3), (Kind.SERVO, Kind.SERVO_MOTOR, Kind.STEPPER)):
        bus = new_bus()
        buses.append(bus)
        modules.append(ActuatorModule(bus, k, kind))
    ctrl = MainController(ctrl_bus, (1, 2, 3))
    for k, (angle, speed) in TARGETS.items():
        ctrl.set_target(k, angle, speed)
    return ctrl, modules


def drive(nodes: Sequence[object], t_end: float, sim: FwBridgeBus | None = None,
          t0: float = 0.0, dt: float = 0.002) -> float:
    """Step every node to ``t_end``; on an afap simulator the bus runs between steps."""
    t = t0
    while t < t_end - 1e-9:
        t += dt
        if sim is not None:
            sim.advance_to(t)
        for node in nodes:
            node.step(t)  # type: ignore[attr-defined]
    return t


def check_converged(ctrl: MainController, modules: list[ActuatorModule]) -> None:
    for mod in modules:
        angle = TARGETS[mod.module_id][0]
        assert mod.angle == pytest.approx(angle, abs=1.8), mod.kind
        h = ctrl.health[mod.module_id]
        assert h.status is Status.OK and h.feedback is not None
        assert h.feedback.angle == pytest.approx(angle, abs=2)
        assert h.feedback.command == SubCommand.SET_SERVO_POSITION
        assert h.feedback.current_ma == round(mod.dyn.idle_amps * 10) * 100  # at rest


def test_nodes_on_the_simulator(opened: list[can.BusABC]) -> None:
    channel = f"nodes{next(_names)}"
    ctrl, modules = make_nodes(lambda: FwBridgeBus(channel, pacing="afap"), opened)
    sim = opened[0]
    assert isinstance(sim, FwBridgeBus)
    drive([ctrl, *modules], 1.5, sim)
    check_converged(ctrl, modules)
    for mod in modules:  # periodic feedback, 20 ms
        assert ctrl.health[mod.module_id].frames == pytest.approx(1.5 / 0.02, abs=2)
    assert ctrl.events and all(e.new is Status.OK for e in ctrl.events)


def test_faulty_module_is_isolated_and_no_longer_addressed(opened: list[can.BusABC]) -> None:
    channel = f"nodes{next(_names)}"
    ctrl, modules = make_nodes(lambda: FwBridgeBus(channel, pacing="afap", auto_recovery=False),
                               opened)
    sim, bad = opened[0], opened[2]  # module 2's bus
    assert isinstance(sim, FwBridgeBus) and isinstance(bad, FwBridgeBus)
    t = drive([ctrl, *modules], 0.3, sim)
    bad.inject(stuck_dominant=True)
    t = drive([ctrl, *modules], 0.6, sim, t0=t)
    assert bad.state is can.BusState.ERROR  # fault confinement took it off the bus
    h2 = ctrl.health[2]
    assert h2.status is Status.SILENT and not h2.addressed
    (event,) = [e for e in ctrl.events if e.module == 2 and e.new is Status.SILENT]
    assert "bus-off" in event.reason and 0.3 < event.time < 0.5
    sent, cmds = h2.commands_sent, [m.commands for m in modules]
    t = drive([ctrl, *modules], 1.0, sim, t0=t)
    assert h2.commands_sent == sent and h2.commands_held > 0  # no longer addressed
    assert modules[0].commands > cmds[0] and modules[2].commands > cmds[2]  # others talk on
    for k in (1, 3):
        assert ctrl.health[k].status is Status.OK
        assert ctrl.health[k].age(t) is not None and ctrl.health[k].age(t) < 0.05  # type: ignore[operator]
    modules[0].faults = Fault.OVER_TEMPERATURE
    drive([ctrl, *modules], 1.1, sim, t0=t)
    assert ctrl.health[1].status is Status.DEGRADED  # reported, still addressed
    assert ctrl.report(1.1)[0]["fault"] == "OVER_TEMPERATURE"


def test_nodes_unchanged_on_python_can_virtual(opened: list[can.BusABC]) -> None:
    channel = f"virt{next(_names)}"
    ctrl, modules = make_nodes(lambda: can.Bus(interface="virtual", channel=channel), opened)
    t = drive([ctrl, *modules], 1.5)
    check_converged(ctrl, modules)
    # module 3 stops answering (not stepped): silent, then heard again
    t = drive([ctrl, *modules[:2]], 1.7, t0=t)
    assert ctrl.health[3].status is Status.SILENT
    drive([ctrl, *modules], 1.8, t0=t)
    assert ctrl.health[3].status is Status.OK
    assert [e.reason for e in ctrl.events if e.module == 3][-1] == "heard again"


def test_acceptance_filter_and_commands(opened: list[can.BusABC]) -> None:
    channel = f"virt{next(_names)}"
    master = can.Bus(interface="virtual", channel=channel)
    m1, m2 = (ActuatorModule(can.Bus(interface="virtual", channel=channel), k) for k in (1, 2))
    opened += [master, m1.bus, m2.bus]
    cmd = ActuatorStruct(angle=10, speed=0, module_id=2, command=SubCommand.SET_SERVO_POSITION)
    master.send(to_message(cmd, Direction.COMMAND))
    master.send(to_message(ActuatorStruct(module_id=2, command=SubCommand.QUERY_SERVO_INFO),
                           Direction.COMMAND))
    m1.step(0.0)
    m2.step(0.0)
    assert (m1.commands, m2.commands, m2.target) == (0, 2, 10.0)
    replies = [from_message(m) for m in iter(lambda: master.recv(0.05), None)]
    assert {(r.direction, r.module) for r in replies if r} == {
        (Direction.FEEDBACK, 1), (Direction.FEEDBACK, 2)}
    m2.bus.send(can.Message(arbitration_id=0x102, is_extended_id=False, data=b"\x01"))
    master.send(can.Message(arbitration_id=0x102, is_extended_id=False, data=b"\x01\x02"))
    m2.step(0.01)
    assert m2.bad_frames == 1  # a 2-byte actuator frame is malformed, not a crash


def test_tx_queue_lowest_id_first_and_latest_wins(opened: list[can.BusABC]) -> None:
    channel = f"virt{next(_names)}"
    tx, rx = (can.Bus(interface="virtual", channel=channel) for _ in range(2))
    opened += [tx, rx]
    q = TxQueue()
    for can_id, data in ((0x300, b"a"), (0x100, b"b"), (0x200, b"c"), (0x100, b"d")):
        q.put(can.Message(arbitration_id=can_id, is_extended_id=False, data=data))
    assert len(q) == 3 and q.pump(tx) == 3
    got = [rx.recv(0.1) for _ in range(3)]
    assert [(m.arbitration_id, bytes(m.data)) for m in got if m] == [
        (0x100, b"d"), (0x200, b"c"), (0x300, b"a")]


def test_start_modules_runs_modules_on_a_python_can_bus(opened: list[can.BusABC]) -> None:
    channel = f"rt{next(_names)}"
    bus = can.Bus(interface="fwbridge", channel=channel)
    opened.append(bus)
    with start_modules(channel, 2) as mods:
        assert [m.module_id for m in mods.modules] == [1, 2]
        bus.send(to_message(ActuatorStruct(angle=30, speed=0, module_id=2,
                                           command=SubCommand.SET_SERVO_POSITION),
                            Direction.COMMAND))
        seen = set()
        deadline = time.monotonic() + 10
        while (len(seen) < 2 or not mods.modules[1].commands) and time.monotonic() < deadline:
            msg = bus.recv(0.5)
            if msg is not None:
                seen.add(msg.arbitration_id)
        assert seen == {0x201, 0x202}
        assert mods.modules[1].commands >= 1 and mods.modules[0].commands == 0
    assert all(b._is_shutdown for b in mods.buses)  # stopped on the way out
    assert mods.error is None


def test_start_modules_on_virtual_read_past_frames_for_others() -> None:
    # virtual filters in software: the modules' buses carry no filter and each node filters
    # what it drains, so a command behind frames for other modules still arrives
    channel = f"v{next(_names)}"
    host = can.Bus(interface="virtual", channel=channel)
    try:
        with start_modules(channel, 3, interface="virtual") as mods:
            assert all(b.filters is None for b in mods.buses)
            deadline = time.monotonic() + 10
            while mods.modules[2].commands == 0 and time.monotonic() < deadline:
                for k in (1, 2, 1, 2, 3):
                    host.send(to_message(ActuatorStruct(angle=5, module_id=k), Direction.COMMAND,
                                         k))
                time.sleep(0.01)  # pacing: a burst every 10 ms until module 3 has one
            assert mods.modules[2].commands >= 1 and mods.error is None
    finally:
        host.shutdown()


def test_modules_keyword_is_refused_with_its_replacement() -> None:
    with pytest.raises(SimBusInitError) as err:
        can.Bus(interface="fwbridge", channel=f"rt{next(_names)}", modules=2)
    text = str(err.value)
    assert "\n" not in text and "start_modules(channel, N)" in text
    assert "'fwbridge can sim N'" in text


def test_nodes_on_vcan(opened: list[can.BusABC]) -> None:
    reason = vcan_reason()
    if reason is not None:
        pytest.skip(f"socketcan vcan0 unavailable: {reason} (modprobe vcan; ip link add dev "
                    "vcan0 type vcan; ip link set up vcan0)")
    ctrl, modules = make_nodes(lambda: can.Bus(interface="socketcan", channel="vcan0"), opened)
    runner = NodeRunner([ctrl, *modules], period=0.002)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                ctrl.health[k].status is Status.OK for k in (1, 2, 3)):
            time.sleep(0.05)  # polling: a bounded wait
    finally:
        runner.stop()
    assert runner.error is None
    assert all(ctrl.health[k].status is Status.OK for k in (1, 2, 3)), os.uname()
