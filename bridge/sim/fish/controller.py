"""The robot fish's main controller: servo targets, action groups, idle and free mode.

Runs on a :class:`~can_bus.sim.nodes.MainController` (the CAN master: periodic
targets, per-module health) and is stepped with it: ``step(now, sensors)``.

- **Action groups** (:class:`GroupPlayer`): each step's servo entries become
  set-absolute-position (0x38) targets; steps that share a sync byte start
  together; a step is done once every servo of its wait mask reports (in
  its CAN feedback) an angle within ``tolerance`` of its target after at
  least one command went out (the patent's "action synchronisation"), or
  after its timeout (its "action timeout": counted, and the group goes
  on). A group runs ``repeat`` times, or until stopped when continuous.
- **Servo commands** (0x21, 0x38) set targets at once and stop a running group.
- **Idle** (0x3A): no group, no free mode; every servo holds where it is
  (0x3A on CAN), the ballast pump stops.
- **Free mode** (0x39): every ``free_period`` the two sonars are read and
  :class:`~fwbridge.bridge.sim.fish.behaviour.FreeBehaviour` decides: a scene or an
  obstacle pre-empts the running free action at once; a random action is
  drawn only when none runs. A user action group runs first (free mode waits).
  Free actions are built-in groups (below) and the stored groups; the scenes,
  the decision period, the avoidance distance and the stored groups'
  probability come from the user configuration (:meth:`apply_config`).
- **Stand still** (0x02): every servo to 0° and held there.
- **CAN flash mode** (0x42): :meth:`stop_commanding`: no servo target is
  sent any more (feedback is still read) until the controller is rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from fwbridge.bridge.sim.fish.behaviour import (
    Decision,
    FreeBehaviour,
    RandomAction,
    SceneMode,
    Sensors,
)
from fwbridge.can_bus.sim.nodes import MainController
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.counters import Counters
from fwbridge.protocols.families.action_group import ActionGroup, ServoEntry, Step
from fwbridge.protocols.families.fish_commands import Scene, SceneSensor, UserConfig
from fwbridge.protocols.families.fish_payloads import FISH_SERVOS, action_name

__all__ = ["BUILTIN_ACTIONS", "BUOYANCY_TARGETS", "FishController", "GroupPlayer", "Mode",
           "Running"]


class Mode(IntEnum):
    IDLE = 0
    FREE = 1


def _sensor_value(sensor: int, s: Sensors) -> float:
    """A scene's sensor in its threshold's unit."""
    if sensor == SceneSensor.SONAR_LEFT_MM:
        return s.sonar_left * 1000.0
    if sensor == SceneSensor.SONAR_RIGHT_MM:
        return s.sonar_right * 1000.0
    if sensor == SceneSensor.DEPTH_CM:
        return s.depth * 100.0
    if sensor == SceneSensor.WATER_INGRESS:
        return 1.0 if s.water_ingress else 0.0
    if sensor == SceneSensor.LIGHT_LEFT_LUX:
        return s.light_left
    if sensor == SceneSensor.LIGHT_RIGHT_LUX:
        return s.light_right
    if sensor == SceneSensor.LASER:
        return float(s.laser)
    return s.battery * 100.0


def scene_mode(k: int, scene: Scene) -> SceneMode:
    """The behaviour's scene for the configuration's ``scene``."""
    sensor = SceneSensor(scene.sensor).name.lower() if (
        scene.sensor in SceneSensor._value2member_map_) else str(scene.sensor)
    op = "<>="[scene.op] if 0 <= scene.op <= 2 else "?"
    return SceneMode(f"scene-{k}:{sensor}{op}{scene.threshold}",
                     lambda s: scene.matches(_sensor_value(scene.sensor, s)),
                     action_name(scene.action))


class Running(IntEnum):
    NONE = 0
    USER = 1
    FREE = 2


def _group(*steps: tuple[tuple[int, int, int], ...]) -> ActionGroup:
    """An action group from steps of (servo ID, speed, angle)."""
    return ActionGroup(tuple(Step(tuple(ServoEntry(i, s, a) for i, s, a in st)) for st in steps))


_SWIM = ((1, 80, 60), (2, 60, 50), (3, 30, 20))  # the worked example's first step
_FINS = (4, 5, 6, 7)

#: Free-mode actions (names of :class:`~fwbridge.bridge.sim.fish.behaviour.FreeBehaviour`). Turning
#: right: head to the right and the left fins beat once, then both straighten;
#: left: the mirror image.
BUILTIN_ACTIONS: dict[str, ActionGroup] = {
    "swim-forward": _group(_SWIM, tuple((i, s, -a) for i, s, a in _SWIM)),
    "turn-left": _group(((3, 50, 30), (5, 80, 40), (7, 80, 40)),
                        ((3, 50, 30), (5, 80, -40), (7, 80, -40)),
                        ((3, 50, 0), (5, 80, 0), (7, 80, 0))),
    "turn-right": _group(((3, 50, -30), (4, 80, 40), (6, 80, 40)),
                         ((3, 50, -30), (4, 80, -40), (6, 80, -40)),
                         ((3, 50, 0), (4, 80, 0), (6, 80, 0))),
    "dive": _group(tuple((k, 40, -30) for k in _FINS)),
    "ascend": _group(tuple((k, 40, 30) for k in _FINS)),
    "surface": _group(tuple((k, 40, 30) for k in _FINS)),
    "glide": _group(tuple((s.module_id, 30, 0) for s in FISH_SERVOS)),
}
#: Ballast-tank fill (fraction) an action sets the pump to.
BUOYANCY_TARGETS = {"dive": 0.8, "ascend": 0.2, "surface": 0.0}


@dataclass
class PlayerStats(Counters):
    groups_started: int = 0
    groups_done: int = 0
    runs_done: int = 0  # passes through a group (a group repeats its steps ``repeat`` times)
    steps_done: int = 0
    step_timeouts: int = 0
    unknown_servos: int = 0  # entries for IDs the fish does not have (skipped)
    preempted: int = 0


@dataclass
class _Waiting:
    """One step of the running phase: the servos it waits for, since when, how long."""

    targets: dict[int, int]
    sent_at_start: dict[int, int]
    timeout: float


class GroupPlayer:
    """Runs one action group at a time on the main controller, as the patent describes it.

    A *phase* is one step, or several consecutive steps with the same non-zero
    sync byte: all their targets go out at the same moment (a later step's
    entry for a servo overrides an earlier one's). Each step of the phase is
    done when every servo of its wait mask reports (CAN feedback, after a
    command went out) an angle within ``tolerance`` of the angle commanded,
    or when its own timeout (default ``step_timeout``) has passed (counted);
    the next phase starts when all are done. After the last phase a single
    group runs again until it has run ``repeat`` times; a continuous group
    (action type 1) runs until stopped.
    """

    def __init__(self, ctrl: MainController, servos: Iterable[int], *, tolerance: float = 2.0,
                 step_timeout: float = 3.0) -> None:
        self.ctrl = ctrl
        self.servos = frozenset(servos)
        self.tolerance = tolerance
        self.step_timeout = step_timeout
        self.stats = PlayerStats()
        self.group: ActionGroup | None = None
        self.name = ""
        self.source = Running.NONE
        self.targets: dict[int, int] = {}  # last angle commanded per servo
        self.phase_started = 0.0  # when the running phase's targets went out
        self.log: list[tuple[float, int, int]] = []  # (time, run, first step) of recent phases
        self._index = 0  # the first step of the running phase
        self._next = 0  # the step after it
        self._run = 0
        self._played = False  # this run sent at least one target
        self._waiting: list[_Waiting] = []

    @property
    def running(self) -> bool:
        return self.group is not None

    def start(self, group: ActionGroup, name: str, source: Running, now: float) -> None:
        if self.group is not None:
            self.stats.preempted += 1
        self.group, self.name, self.source = group, name, source
        self.stats.groups_started += 1
        self._index = self._next = self._run = 0
        self._played = False
        self._begin(now)

    def stop(self) -> None:
        self.group, self.name, self.source = None, "", Running.NONE
        self._waiting = []

    def update(self, now: float) -> None:
        """Next phase when every step of this one is in sync or timed out."""
        if self.group is None:
            return
        health = self.ctrl.health
        still: list[_Waiting] = []
        for w in self._waiting:
            synced = True
            for k, angle in w.targets.items():
                h = health[k]
                fb = h.feedback
                if (h.commands_sent <= w.sent_at_start[k] or fb is None
                        or abs(fb.angle - angle) > self.tolerance):
                    synced = False
                    break
            if synced:
                self.stats.steps_done += 1
            elif now - self.phase_started >= w.timeout:
                self.stats.steps_done += 1
                self.stats.step_timeouts += 1
            else:
                still.append(w)
        self._waiting = still
        if not still:
            self._index = self._next
            self._begin(now)

    def _begin(self, now: float) -> None:
        group = self.group
        assert group is not None
        steps = group.steps
        while True:
            if self._index >= len(steps):
                self._run += 1
                self.stats.runs_done += 1
                again = group.action_type == 1 or self._run < group.repeat
                if not (again and self._played):  # a run that did nothing does not loop
                    self.stats.groups_done += 1
                    self.stop()
                    return
                self._index, self._played = 0, False
            first = steps[self._index]
            end = self._index + 1
            while first.sync and end < len(steps) and steps[end].sync == first.sync:
                end += 1
            self._next = end
            sent: dict[int, int] = {}
            for step in steps[self._index:end]:
                for e in step.servos:
                    if e.servo_id not in self.servos:
                        self.stats.unknown_servos += 1
                        continue
                    angle = max(-128, min(127, e.angle))  # the CAN struct's int8
                    self.ctrl.set_target(e.servo_id, angle, e.speed,
                                         SubCommand.SET_SERVO_POSITION)
                    self.targets[e.servo_id] = sent[e.servo_id] = angle
            if sent:
                self._played = True
                self.phase_started = now
                self.log.append((now, self._run, self._index))
                del self.log[:-64]  # bounded
                self._waiting = []
                for step in steps[self._index:end]:
                    mask = step.wait_mask
                    waits = {e.servo_id: sent[e.servo_id] for e in step.servos
                             if e.servo_id in sent and (not mask or mask >> (e.servo_id - 1) & 1)}
                    timeout = step.timeout_ms / 1000.0 if step.timeout_ms else self.step_timeout
                    self._waiting.append(_Waiting(waits, {
                        k: self.ctrl.health[k].commands_sent for k in waits}, timeout))
                return
            self.stats.steps_done += end - self._index  # steps with nothing this fish can do
            self._index = end


class FishController:
    """The fish's main-controller logic over the CAN master ``ctrl``."""

    def __init__(self, ctrl: MainController, *, seed: int = 0, tolerance: float = 2.0,
                 step_timeout: float = 3.0, free_period: float = 0.1, max_groups: int = 16,
                 stored_probability: float = 0.3) -> None:
        self.ctrl = ctrl
        self.servos = tuple(s.module_id for s in FISH_SERVOS)
        self.player = GroupPlayer(ctrl, self.servos, tolerance=tolerance,
                                  step_timeout=step_timeout)
        self.behaviour = FreeBehaviour(seed=seed)
        self.free_period = free_period
        self.max_groups = max_groups
        self.stored_probability = stored_probability
        self.mode = Mode.IDLE
        self.groups: list[ActionGroup] = []
        self.last_decision: Decision | None = None
        self.decisions = 0
        self.buoyancy_target: float | None = None  # tank fill the pump works towards
        self.holding: set[int] = set()  # servos told to hold where they are
        self.commanding = True  # False in CAN flash mode
        self._next_free = 0.0
        self.hold_all()

    # -- configuration ----------------------------------------------------------------------
    def apply_config(self, cfg: UserConfig) -> None:
        """The user configuration: scenes, decision period, avoidance, stored probability."""
        self.free_period = cfg.free_period_ms / 1000.0
        self.stored_probability = cfg.stored_probability_pct / 100.0
        self.behaviour.avoid_distance = cfg.avoid_mm / 1000.0
        self.behaviour.scenes = [scene_mode(k, sc) for k, sc in enumerate(cfg.scenes)]
        for slot in range(len(self.groups)):
            self.behaviour.add_action(RandomAction(f"group-{slot}", self.stored_probability))

    def clear_groups(self) -> None:
        """0x34: the stored groups are gone (a running one is stopped)."""
        if self.player.running and self.player.name.startswith("group-"):
            self.player.stop()
        self.behaviour.actions = tuple(a for a in self.behaviour.actions
                                       if not a.name.startswith("group-"))
        self.groups.clear()

    def release(self, module: int) -> None:
        """A module enters its own CAN flash mode: no more targets for it."""
        self.ctrl.targets.pop(module, None)
        self.servos = tuple(k for k in self.servos if k != module)
        self.player.servos = frozenset(self.servos)
        self.holding.discard(module)

    def stop_commanding(self) -> None:
        """CAN flash mode: nothing runs, no servo is commanded."""
        self.player.stop()
        self.mode = Mode.IDLE
        self.commanding = False
        self.ctrl.targets.clear()
        self.buoyancy_target = None

    def stand_still(self) -> None:
        """0x02: stop, every servo to 0° (slowly) and held there."""
        self.mode = Mode.IDLE
        self.player.stop()
        self.set_servos((ServoEntry(k, 30, 0) for k in self.servos),
                        SubCommand.SET_SERVO_POSITION)

    # -- commands ---------------------------------------------------------------
    def hold_all(self) -> None:
        for k in self.servos:
            self.ctrl.set_target(k, 0, 0, SubCommand.ENTER_IDLE)
        self.holding = set(self.servos)

    def target(self, module: int) -> int | None:
        """The commanded angle, None while the servo holds its position."""
        return None if module in self.holding else self.player.targets.get(module)

    def set_servos(self, entries: Iterable[ServoEntry], command: int) -> int:
        """0x21 / 0x38: targets now; stops a running group. Returns the servos set."""
        self.player.stop()
        n = 0
        for e in entries:
            if e.servo_id not in self.servos:
                self.player.stats.unknown_servos += 1
                continue
            angle = max(-128, min(127, e.angle))
            self.ctrl.set_target(e.servo_id, angle, e.speed, command)
            self.player.targets[e.servo_id] = angle
            self.holding.discard(e.servo_id)
            n += 1
        return n

    def test_group(self, group: ActionGroup, now: float, *, duplicate: bool = False) -> bool:
        """0x32: run ``group`` now. A duplicate of the group that is running is not
        restarted (its answer was lost; the first copy is being executed). False then."""
        p = self.player
        if duplicate and p.running and p.source is Running.USER and p.group == group:
            return False
        self._run(group, "user", Running.USER, now)
        return True

    def store_group(self, group: ActionGroup, *, duplicate: bool = False) -> int | None:
        """0x31: keep ``group`` (a free-mode action from now on). Its slot, None when full.

        A duplicate of the last group stored is not stored twice.
        """
        if duplicate and self.groups and self.groups[-1] == group:
            return len(self.groups) - 1
        if len(self.groups) >= self.max_groups:
            return None
        self.groups.append(group)
        slot = len(self.groups) - 1
        self.behaviour.add_action(RandomAction(f"group-{slot}", self.stored_probability))
        return slot

    def enter_free(self, now: float) -> None:
        """0x39."""
        if self.mode is not Mode.FREE:
            self.mode = Mode.FREE
            self._next_free = now

    def enter_idle(self) -> None:
        """0x3A."""
        self.mode = Mode.IDLE
        self.player.stop()
        self.hold_all()
        self.buoyancy_target = None

    # -- running ----------------------------------------------------------------
    @property
    def running(self) -> Running:
        return self.player.source if self.player.running else Running.NONE

    def step(self, now: float, sensors: Callable[[], Sensors]) -> None:
        """One control cycle: CAN master, action group, free mode. ``sensors`` reads
        the sonars and the rest; it is called on free-mode ticks only (the patent's
        sonars range intermittently)."""
        self.ctrl.step(now)
        if not self.commanding:
            return
        self.player.update(now)
        if self.mode is Mode.FREE and now >= self._next_free:
            self._next_free = max(self._next_free + self.free_period, now)
            self._free_tick(now, sensors())

    def _free_tick(self, now: float, sensors: Sensors) -> None:
        if self.player.source is Running.USER:
            return  # the user's action first; free mode resumes after it
        reflex = self.behaviour.reflex(sensors)
        if reflex is not None:
            self._note(reflex)
            if not (self.player.running and self.player.name == reflex.action):
                self._act(reflex.action, now)
            return
        if self.player.running:
            return
        decision = self.behaviour.decide(sensors)
        self._note(decision)
        if decision.source == "random":
            self._act(decision.action, now)

    def _note(self, decision: Decision) -> None:
        self.last_decision = decision
        self.decisions += 1

    def _act(self, action: str, now: float) -> None:
        group = BUILTIN_ACTIONS.get(action)
        if group is None and action.startswith("group-"):
            slot = int(action[6:])
            group = self.groups[slot] if slot < len(self.groups) else None
        if group is None:
            return
        if action in BUOYANCY_TARGETS:
            self.buoyancy_target = BUOYANCY_TARGETS[action]
        self._run(group, action, Running.FREE, now)

    def _run(self, group: ActionGroup, name: str, source: Running, now: float) -> None:
        self.holding -= {e.servo_id for st in group.steps for e in st.servos}
        self.player.start(group, name, source, now)

    def status(self) -> dict[str, Any]:
        d = self.last_decision
        return {"mode": self.mode.name.lower(), "running": self.player.name or None,
                "groups": len(self.groups), "decisions": self.decisions,
                "decision": None if d is None else [d.source, d.action, d.reason],
                "player": self.player.stats.as_dict()}
