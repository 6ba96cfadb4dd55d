"""CAN faults with the controller and actuator modules on the simulated bus.

A babbling node, a module with 1 % bit errors (recovered on request, and
recovering by itself), a module unplugged and plugged back. The bus runs
as fast as possible (afap): bus time moves only when the test steps it, so
every run is the same run. What these add to ``test_can_model.py`` (the
bus model on its own) and ``test_can_nodes.py`` (a stuck-dominant module
isolated): the nodes' view of each fault, the controller's health report
naming the module, counted traffic of the others, ISO fault confinement
seen from the faulty node, and recovery back to a healthy report.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import can
import pytest

from fwbridge.can_bus.ids import FEEDBACK_BASE, drain
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.model import ErrorState, StateChanged
from fwbridge.can_bus.sim.nodes import ActuatorModule, Kind, MainController, Status

_names = itertools.count()
BITRATE = 500_000
DT = 0.002  # the nodes' step
FEEDBACK_PERIOD = 0.02  # ActuatorModule default
MODULES = (1, 2, 3)
#: More than the longest actuator frame on the wire, in seconds (8 data bytes, worst-case
#: stuffing and the intermission come to about 140 bits).
LONGEST = 160 / BITRATE
RECOVERY_BITS = 128 * 11  # ISO 11898-1: bus-off -> error-active


class WatchedBus(FwBridgeBus):
    """A node's bus that also keeps its fault-confinement state changes (bit times)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.changes: list[StateChanged] = []
        super().__init__(*args, **kwargs)

    def state_changed(self, event: StateChanged) -> None:
        self.changes.append(event)

    def error_state(self) -> ErrorState:
        with self.sim.lock:
            return self.sim.model.node(self.node_id).state

    def node_stats(self) -> dict[str, Any]:
        with self.sim.lock:
            return next(n for n in self.sim.stats()["nodes"] if n["id"] == self.node_id)


class Babbler:
    """A node gone wrong: ID 0x000 frames back to back, the highest priority there is."""

    def __init__(self, bus: WatchedBus) -> None:
        self.bus = bus
        self.on = False
        self.queued = 0  # frames it has waiting (kept topped up while on)
        self.offered = 0

    def step(self, now: float) -> None:
        drain(self.bus)  # what others send: read and ignored
        if not self.on:
            return
        msg = can.Message(arbitration_id=0x000, is_extended_id=False, data=b"\x00" * 8)
        with self.bus.sim.lock:
            self.queued = self.bus.sim.model.outstanding(self.bus.node_id)
        while self.queued < 32:  # more than a step's worth: the bus never waits for it
            self.bus.send(msg, timeout=0)
            self.queued += 1
            self.offered += 1

    def stop(self) -> None:
        self.on = False
        self.bus.flush_tx_buffer()


class Monitor:
    """A listening node that logs (bus seconds, ID) of every actuator frame."""

    def __init__(self, bus: FwBridgeBus) -> None:
        self.bus = bus
        bus.set_filters([{"can_id": 0x100, "can_mask": 0x700, "extended": False},
                         {"can_id": 0x200, "can_mask": 0x700, "extended": False}])
        self.frames: list[tuple[float, int]] = []

    def step(self, now: float) -> None:
        epoch = self.bus.sim.epoch
        self.frames += [(m.timestamp - epoch, m.arbitration_id) for m in drain(self.bus)]

    def between(self, t0: float, t1: float, ids: Sequence[int] | None = None) -> int:
        return sum(1 for t, i in self.frames if t0 < t <= t1 and (ids is None or i in ids))


class Rig:
    """The controller, three modules and a monitor on one afap channel."""

    def __init__(self, opened: list[can.BusABC], *, auto_recovery: bool = True,
                 max_events: int = 1000) -> None:
        self.channel = f"rel{next(_names)}"
        self.opened = opened
        self.ctrl_bus = self.bus("controller")
        self.module_buses = {k: self.bus(f"module{k}", auto_recovery=auto_recovery)
                             for k in MODULES}
        kinds = dict(zip(MODULES, (Kind.SERVO, Kind.SERVO_MOTOR, Kind.STEPPER)))
        self.modules = {k: ActuatorModule(b, k, kinds[k]) for k, b in self.module_buses.items()}
        self.ctrl = MainController(self.ctrl_bus, MODULES, max_events=max_events)
        for k in MODULES:
            self.ctrl.set_target(k, 10 * k, 50)
        self.monitor = Monitor(self.bus("monitor"))
        self.nodes: list[Any] = [self.ctrl, *self.modules.values(), self.monitor]
        self.t = 0.0

    def bus(self, name: str, **kwargs: Any) -> WatchedBus:
        bus = WatchedBus(self.channel, pacing="afap", bitrate=BITRATE, name=name, **kwargs)
        self.opened.append(bus)
        return bus

    def run(self, seconds: float, watch: Any = None) -> float:
        """Step every node for ``seconds`` of bus time; the bus runs between steps."""
        end = self.t + seconds
        while self.t < end - 1e-9:
            self.t += DT
            self.ctrl_bus.advance_to(self.t)
            for node in self.nodes:
                node.step(self.t)
            if watch is not None:
                watch(self.t)
        return self.t

    def now_bits(self) -> int:
        with self.ctrl_bus.sim.lock:
            return self.ctrl_bus.sim.model.now

    def feedback(self, t0: float, t1: float, module: int) -> int:
        return self.monitor.between(t0, t1, [FEEDBACK_BASE + module])

    def statuses(self) -> dict[int, Status]:
        return {k: h.status for k, h in self.ctrl.health.items()}

    def events_since(self, t0: float, module: int | None = None) -> list[Any]:
        return [e for e in self.ctrl.events if e.time > t0 and module in (None, e.module)]


@pytest.fixture
def opened() -> Iterator[list[can.BusABC]]:
    buses: list[can.BusABC] = []
    yield buses
    for bus in reversed(buses):
        bus.shutdown()


def expected(seconds: float) -> int:
    return round(seconds / FEEDBACK_PERIOD)


# -- (a) a babbling node ---------------------------------------------------------------------
def test_babbling_node_starves_the_others_exactly_while_it_babbles(
    opened: list[can.BusABC],
) -> None:
    rig = Rig(opened)
    babbler = Babbler(rig.bus("babbler", auto_recovery=False))
    rig.nodes.append(babbler)
    rig.run(0.5)
    assert set(rig.statuses().values()) == {Status.OK}
    commands = {k: m.commands for k, m in rig.modules.items()}

    babbler.on = True
    t_on = rig.t
    t_end = rig.run(0.5)
    # That is CAN: 0x000 wins every arbitration. Nothing else gets on the wire after the
    # frame that was already there when the babbling began.
    assert rig.monitor.between(t_on + LONGEST, t_end) == 0
    assert {k: m.commands for k, m in rig.modules.items()} == commands  # commands starved too
    with rig.ctrl_bus.sim.lock:
        load = rig.ctrl_bus.sim.stats()["load"]
    assert babbler.offered > 1500 and load > 0.5  # it really held the bus
    # The controller names every module it lost, and stops addressing them.
    assert rig.statuses() == dict.fromkeys(MODULES, Status.SILENT)
    silent = rig.events_since(t_on)
    assert sorted(e.module for e in silent) == list(MODULES)
    assert all(e.new is Status.SILENT and "no feedback" in e.reason for e in silent)
    assert all(row["status"] == "silent" for row in rig.ctrl.report(t_end))

    # 1. The babbler stops: the others are back at once.
    babbler.stop()
    t_off = rig.t
    t_end = rig.run(0.5)
    first = min(t for t, _ in rig.monitor.frames if t > t_off)
    assert first <= t_off + 2 * LONGEST  # its last frame, then ours
    for k in MODULES:
        assert rig.feedback(t_off, t_end, k) >= expected(0.5) - 2
    assert rig.statuses() == dict.fromkeys(MODULES, Status.OK)
    assert all(e.reason == "heard again" for e in rig.events_since(t_off))

    # 2. It babbles again, and a fault takes it off the bus (fault confinement).
    babbler.on = True
    t_on = rig.t
    rig.run(0.3)
    assert rig.statuses() == dict.fromkeys(MODULES, Status.SILENT)
    babbler.bus.inject(bit_error_rate=1.0)  # its transceiver breaks: every frame a bit error
    t_fault = rig.t
    t_end = rig.run(0.5)
    assert babbler.bus.error_state() is ErrorState.BUS_OFF
    (off,) = [c for c in babbler.bus.changes if c.new is ErrorState.BUS_OFF]
    assert off.tec == 32 * 8 and babbler.queued > 0  # it still wants to babble; it cannot
    for k in MODULES:
        assert rig.feedback(t_fault, t_end, k) >= expected(0.5) - 5
        assert rig.ctrl.health[k].status is Status.OK
    # bus-off within a few milliseconds: 32 failed attempts
    assert min(t for t, _ in rig.monitor.frames if t > t_fault) < t_fault + 0.01


# -- (b) a module with 1 % bit errors ---------------------------------------------------------
def test_module_with_bit_errors_is_confined_named_and_recovered_on_request(
    opened: list[can.BusABC],
) -> None:
    rig = Rig(opened, auto_recovery=False)  # bus-off recovery only when asked
    bad = rig.module_buses[2]
    rig.run(0.5)
    t_f = rig.t
    bad.inject(bit_error_rate=0.01, seed=4)
    tec_peak = 0

    def watch(_: float) -> None:
        nonlocal tec_peak
        tec_peak = max(tec_peak, bad.error_counters[0])

    t_end = rig.run(1.0, watch=watch)

    # ISO 11898-1 fault confinement, as the faulty node lived it.
    states = [(c.old, c.new) for c in bad.changes]
    assert states[0] == (ErrorState.ACTIVE, ErrorState.PASSIVE)
    assert states[-1] == (ErrorState.PASSIVE, ErrorState.BUS_OFF)
    for c in bad.changes:  # each change at the first count past its threshold
        if c.new is ErrorState.PASSIVE:
            assert 128 <= c.tec < 128 + 8 or 128 <= c.rec < 128 + 9
        elif c.new is ErrorState.BUS_OFF:
            assert 255 < c.tec <= 255 + 8
        else:  # back to error-active (a good reception after REC > 127)
            assert c.tec < 128 and c.rec < 128
    assert bad.node_stats()["bus_offs"] == 1 and tec_peak > 255
    assert bad.error_state() is ErrorState.BUS_OFF  # and it stays off: no recovery asked

    # The others: every feedback frame arrived, every module got its commands.
    for k in (1, 3):
        assert rig.feedback(t_f, t_end, k) >= expected(1.0) - 2
        assert rig.modules[k].commands >= expected(1.5) - 3
        assert rig.module_buses[k].node_stats()["bus_offs"] == 0
        assert rig.module_buses[k].error_state() is ErrorState.ACTIVE
    assert rig.ctrl_bus.node_stats()["bus_offs"] == 0

    # The controller names module 2, and only module 2.
    named = rig.events_since(t_f)
    assert {e.module for e in named} == {2}
    assert any(e.new is Status.DEGRADED and "CAN_ERROR" in e.reason for e in named)
    assert named[-1].new is Status.SILENT and "no feedback" in named[-1].reason
    assert rig.statuses() == {1: Status.OK, 2: Status.SILENT, 3: Status.OK}
    held = rig.ctrl.health[2].commands_held
    assert held > 0  # no longer addressed

    # Repaired, then recovery on request: 128 x 11 recessive bits, then error-active.
    bad.inject(bit_error_rate=0.0)
    asked = rig.now_bits()
    bad.recover()
    t_fix = rig.t
    rig.run(0.3)
    back = bad.changes[-1]
    assert (back.old, back.new, back.tec, back.rec) == (
        ErrorState.BUS_OFF, ErrorState.ACTIVE, 0, 0)
    assert back.time >= asked + RECOVERY_BITS
    assert back.time <= asked + RECOVERY_BITS + 20 * 160  # a light bus: little more than that
    again = rig.events_since(t_fix, 2)
    # Heard again: first the feedback it queued while off (flagged CAN_ERROR), then fresh.
    assert again[0].old is Status.SILENT and again[-1].new is Status.OK
    assert rig.statuses() == dict.fromkeys(MODULES, Status.OK)
    assert rig.ctrl.health[2].commands_sent > 0 and rig.modules[2].commands > 0


def test_module_recovering_by_itself_keeps_coming_back_and_the_rest_gets_through(
    opened: list[can.BusABC],
) -> None:
    """Automatic bus-off recovery (the default): the faulty module returns after each
    bus-off, error-active with its counters at 0, and destroys frames again until it is
    error-passive. The others pay in TEC; no frame of theirs is lost."""
    rig = Rig(opened, max_events=16)
    bad = rig.module_buses[2]
    rig.run(0.5)
    t_f = rig.t
    bad.inject(bit_error_rate=0.01, seed=4)
    peaks = dict.fromkeys(MODULES, 0)

    def watch(_: float) -> None:
        for k in (1, 3):
            peaks[k] = max(peaks[k], rig.module_buses[k].error_counters[0])

    rig.run(2.0, watch=watch)
    t_end = rig.t
    offs = [c for c in bad.changes if c.new is ErrorState.BUS_OFF]
    backs = [c for c in bad.changes if c.old is ErrorState.BUS_OFF]
    assert len(offs) >= 3 and len(backs) >= len(offs) - 1  # off, back, off again ...
    assert all(255 < c.tec <= 255 + 8 for c in offs)
    assert all((c.tec, c.rec) == (0, 0) for c in backs)
    for off, back in zip(offs, backs):
        assert back.time >= off.time + RECOVERY_BITS
    for k in (1, 3):
        assert rig.feedback(t_f, t_end, k) >= expected(2.0) - 2  # retransmitted: all there
        assert peaks[k] > 0  # what the faulty module's error flags cost them
    per_module = {k: 0 for k in MODULES}
    for e in rig.events_since(t_f):
        per_module[e.module] += 1
    assert per_module[2] > max(per_module[1], per_module[3])  # the one it names most
    # The health log is bounded: a module flapping for days cannot grow it.
    assert len(rig.ctrl.events) == 16 and rig.ctrl.events_dropped > 0
    assert rig.ctrl.events[-1].time == max(h.since for h in rig.ctrl.health.values())


# -- (c) a module unplugged and plugged back --------------------------------------------------
def test_unplugged_module_is_named_silent_then_ok_when_plugged_back(
    opened: list[can.BusABC],
) -> None:
    rig = Rig(opened)
    gone = rig.module_buses[2]
    rig.run(0.5)
    before = rig.modules[2].commands
    gone.inject(disconnected=True)
    t_u = rig.t
    t_end = rig.run(1.0)

    # Alone on its wire: no ACK for its frames -> TEC + 8 up to error-passive, then ISO's
    # exception (no ACK while error-passive) holds it there: never bus-off.
    assert [(c.old, c.new) for c in gone.changes] == [(ErrorState.ACTIVE, ErrorState.PASSIVE)]
    assert gone.error_counters == (128, 0) and gone.node_stats()["bus_offs"] == 0
    assert rig.modules[2].commands == before  # it hears nothing either
    assert rig.feedback(t_u + LONGEST, t_end, 2) == 0
    # Named by the controller; the others talk on.
    (event,) = rig.events_since(t_u)
    assert (event.module, event.new) == (2, Status.SILENT) and "no feedback" in event.reason
    assert event.time <= t_u + rig.ctrl.silence_timeout + 2 * FEEDBACK_PERIOD
    for k in (1, 3):
        assert rig.feedback(t_u, t_end, k) >= expected(1.0) - 2
        assert rig.ctrl.health[k].status is Status.OK
    assert rig.ctrl.health[2].commands_held > 0

    gone.inject(disconnected=False)
    t_p = rig.t
    t_end = rig.run(0.5)
    assert rig.statuses() == dict.fromkeys(MODULES, Status.OK)
    assert any(e.module == 2 and e.reason == "heard again" for e in rig.events_since(t_p))
    assert rig.feedback(t_end - 0.2, t_end, 2) >= expected(0.2) - 1  # fresh feedback again
    assert rig.modules[2].commands > before  # addressed again
    tec, _ = gone.error_counters
    assert tec < 128 and gone.error_state() is ErrorState.ACTIVE  # each good frame: TEC - 1
    assert gone.changes[-1].new is ErrorState.ACTIVE

