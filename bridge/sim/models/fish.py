"""The robot fish of seed 004: its main controller's firmware, its CAN bus, its body.

Robot link (``serialComRx``/``serialComTx``): action frames (PROTOCOLS.md 3)
read with :class:`~protocols.action_receiver.ActionReceiver`. Every request
for this fish's machine code is answered by a
:class:`~protocols.arq.Responder` (one status byte, type T + 0x10; frames
rejected by the receiver get their NAK; duplicates are counted), and then
executed:

======  =====================================================================
 sub    what the fish does
======  =====================================================================
 0x01   answers a status result (16 bytes: mode, firmware bank and version, ...)
 0x02   stand still: every servo to 0° and held, the tank keeps its fill
 0x03   free swimming: as 0x39
 0x11   answers a robot-info result (24 bytes)
 0x12   answers servo info: 8 bytes per servo (data: module IDs; none: all)
 0x13   answers buoyancy-module info (14 bytes)
 0x14   answers the CAN error rate from the simulated bus's counters
 0x21   real-time servo targets (``id, speed, angle int16`` each), CAN 0x21
 0x31   stores an action group (16 slots, BUSY when full); it joins free mode
 0x32   runs an action group now, step by step, as 0x38 targets on CAN
 0x38   absolute servo positions (as 0x21), CAN 0x38
 0x39   free mode: scene, sonar avoidance, random actions (seeded)
 0x33   writes the user configuration to flash and applies it
 0x34   erases the stored action groups (the command flash)
 0x35   firmware upgrade (IAP): begin, chunks, end, abort, reset; dual bank
 0x36   answers the user configuration
 0x37   answers the stored action groups (a list, or one slot's payload)
 0x3A   idle: stop, every servo holds (CAN 0x3A), pump off
 0x41   read types: answers the error codes; others: module (data) enters
        its CAN flash mode (no more targets for it)
 0x42   CAN flash mode: no servo commands; only 0x35 and 0x42 are answered
        (others ``0x05`` busy) until an IAP reset or end reboots the fish
======  =====================================================================

Result layouts: :mod:`fwbridge.protocols.families.fish_payloads` and
:mod:`fwbridge.protocols.families.fish_commands` (system commands:
:mod:`fwbridge.bridge.sim.fish.system`). Sub-commands outside the patent's
table are answered ``0x04`` (unknown); malformed data ``0x02`` (length). Any
request type (0x01..0x07) is accepted for any sub-command; the answer's type
is T + 0x10. Frames for another machine code are counted, not answered. A
duplicate (the same frame again after its answer was lost) is answered again
and changes nothing its first copy did: a duplicate 0x32 does not restart
the group it started, a duplicate 0x31 is not stored twice; the other
commands are idempotent.

CAN: seven :class:`~can_bus.sim.nodes.ActuatorModule` servos (IDs of
:data:`~fwbridge.protocols.families.fish_payloads.FISH_SERVOS`) and the main controller
(:class:`~can_bus.sim.nodes.MainController`) on an ``fwbridge`` channel of its
own, as-fast-as-possible pacing, advanced to the world's time every step.
Body: :class:`~fwbridge.bridge.sim.fish.body.FishBody` (pose, sonars, ballast tank).
Flash (:class:`~fwbridge.bridge.sim.fish.flash.FishFlash`): user configuration,
stored groups and the firmware banks, kept in ``FishParams.flash`` (a file)
across restarts; a restart is a power cycle (an upgrade in progress is lost).
Supervisor link: a JSON status line every 100 ms; JSON commands ``status``,
``obstacle`` (x, y, r), ``clear_obstacles``, ``light`` (x, y, lux at 1 m),
``clear_lights``, ``laser`` (receiver 0..3), ``can_fault`` (module,
``stuck_dominant``/``disconnected``/``bit_error_rate``; module 0 = the main
controller).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fwbridge.bridge.sim.fish.behaviour import Sensors
from fwbridge.bridge.sim.fish.body import FishBody, FishBodyParams, Obstacle
from fwbridge.bridge.sim.fish.controller import FishController, Mode
from fwbridge.bridge.sim.fish.flash import FishFlash
from fwbridge.bridge.sim.fish.queries import FishQueries
from fwbridge.bridge.sim.fish.senses import Light, Senses
from fwbridge.bridge.sim.fish.system import SYSTEM_SUBS, SystemCommands
from fwbridge.bridge.sim.webots_serial import ROBOT_LINK, SUPERVISOR_LINK, WebotsSerialDrv
from fwbridge.bridge.sim.world import Board, SupervisorLines, open_serial
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import ActuatorModule, Kind, MainController
from fwbridge.protocols.action_frame import ActionFrame, SubCommand, encode
from fwbridge.protocols.config_text import parse_json_bytes
from fwbridge.protocols.counters import Counters
from fwbridge.protocols.crc import DEFAULT_CRC
from fwbridge.protocols.engine import action_receiver
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families import action_group
from fwbridge.protocols.families.actuator import Fault
from fwbridge.protocols.families.arq import REQUEST_TYPES, Responder, Status
from fwbridge.protocols.families.fish_commands import UserConfig
from fwbridge.protocols.families.fish_payloads import (
    FISH_SERVOS,
    Result,
    decode_servo_targets,
    encode_result,
    result_frame,
)

__all__ = ["FishParams", "RobotFish"]

HANDLED = frozenset({
    SubCommand.QUERY_ROBOT_INFO, SubCommand.QUERY_SERVO_INFO, SubCommand.QUERY_BUOYANCY_INFO,
    SubCommand.QUERY_CAN_ERROR_RATE, SubCommand.REALTIME_SERVO_CONTROL,
    SubCommand.WRITE_ACTION_GROUP, SubCommand.TEST_ACTION_GROUP, SubCommand.SET_SERVO_POSITION,
    SubCommand.ENTER_FREE_MODE, SubCommand.ENTER_IDLE, *SYSTEM_SUBS,
})
_GROUP_SUBS = (SubCommand.WRITE_ACTION_GROUP, SubCommand.TEST_ACTION_GROUP)
_SERVO_SUBS = (SubCommand.REALTIME_SERVO_CONTROL, SubCommand.SET_SERVO_POSITION)
_SUP_LINE_MAX = 4096
_names = itertools.count(1)


@dataclass(frozen=True)
class FishParams:
    machine: int = 0
    crc: str = DEFAULT_CRC
    bitrate: int = 500_000
    channel: str | None = None  # CAN channel name; default: unique per fish
    auto_recovery: bool = True  # CAN controllers leave bus-off by themselves
    feedback_period: float = 0.02  # s, each module's feedback
    command_period: float = 0.02  # s, the master's target refresh
    silence_timeout: float = 0.1  # s without feedback: the module is silent
    tolerance: float = 2.0  # degrees: an action-group step is in sync
    step_timeout: float = 3.0  # s: an action-group step gives up waiting
    free_period: float = 0.1  # s between free-mode decisions (and sonar pings)
    rx_gap: float = 0.02  # s of silence on the robot link that ends a held candidate
    seed: int = 0  # free mode's random actions
    status_period_ms: int = 100
    flash: str | None = None  # file keeping the flash across restarts (None: in memory)
    boot_ms: int = 50  # a reboot (IAP) takes this long; bytes arriving meanwhile are lost
    body: FishBodyParams = field(default_factory=FishBodyParams)


@dataclass
class FishCounters(Counters):
    frames: int = 0  # action frames decoded, any machine code
    other_machine: int = 0
    answers_refused: int = 0  # answers or results the emitter buffer refused
    results: int = 0
    groups_run: int = 0
    groups_stored: int = 0
    duplicates_skipped: int = 0
    bad_payloads: int = 0
    status_sent: int = 0
    reboots: int = 0
    lost_booting: int = 0  # bytes that arrived while the fish was rebooting
    supervisor_refused: int = 0  # supervisor lines that are not a command


def _shutdown(buses: list[FwBridgeBus]) -> None:
    for bus in buses:
        bus.shutdown()


#: CAN nodes of fish that were garbage-collected unclosed, shut down at the next
#: safe moment. Not in the collector itself: it can run inside the CAN
#: simulator's registry lock (while a channel is being opened), which shutting a
#: node down takes too, and that deadlocks. ``deque.append`` takes no lock.
_orphans: deque[list[FwBridgeBus]] = deque()


def _shutdown_orphans() -> None:
    while _orphans:
        try:
            buses = _orphans.popleft()
        except IndexError:  # another thread took the last one
            return
        _shutdown(buses)


class RobotFish(FishQueries):
    """The fish: main-controller firmware on the serial link, servos on CAN, a body."""

    name = "fish"

    def __init__(self, params: FishParams | None = None) -> None:
        self.params = p = params or FishParams()
        self.stats = FishCounters()
        self.rx = action_receiver(crc=p.crc, keep_rejects=True)
        self.responder = Responder(crc=p.crc, known_subs=set(HANDLED))
        self.body = FishBody(p.body)
        self.senses = Senses()  # side light sensors, laser receivers
        self.flash = FishFlash.open(p.flash)  # a bad file fails here, before anything runs
        self.boot_time = 0.0  # when the firmware last started (fish time)
        self._booting_until = 0.0
        self._reboot_pending = False
        self.serial: WebotsSerialDrv | None = None
        self.supervisor: WebotsSerialDrv | None = None
        self.buses: list[FwBridgeBus] = []
        self.modules: dict[int, ActuatorModule] = {}
        self._sup_lines = SupervisorLines(_SUP_LINE_MAX)
        self._last_rx = 0.0
        self._t0 = 0.0
        self._next_status = 0

    # -- firmware -----------------------------------------------------------------
    def setup(self, board: Board) -> None:
        self.clock = board.clock
        self.serial = open_serial(board, ROBOT_LINK)
        try:
            self.supervisor = open_serial(board, SUPERVISOR_LINK)
        except RuntimeError:
            self.supervisor = None
        p = self.params
        _shutdown_orphans()
        self.can_channel = p.channel or f"fish-{os.getpid()}-{next(_names)}"
        kw: dict[str, Any] = {"bitrate": p.bitrate, "pacing": "afap",
                              "auto_recovery": p.auto_recovery}
        self.main_bus = FwBridgeBus(self.can_channel, name="main", **kw)
        self.buses = [self.main_bus]
        # Closed when the fish is: sim:// and the CLI stop the world, not the model.
        self._finalizer = weakref.finalize(self, _orphans.append, self.buses)
        for spec in FISH_SERVOS:
            bus = FwBridgeBus(self.can_channel, name=spec.name, **kw)
            self.buses.append(bus)
            self.modules[spec.module_id] = ActuatorModule(
                bus, spec.module_id, Kind.SERVO, feedback_period=p.feedback_period)
        self.node_modules = {self.main_bus.node_id: 0, **{
            m.bus.node_id: k for k, m in self.modules.items() if isinstance(m.bus, FwBridgeBus)}}
        self.master = MainController(self.main_bus, self.modules, silence_timeout=p.silence_timeout,
                                     command_period=p.command_period)
        self._t0 = self.clock.seconds
        self._boot(0.0)
        self._next_status = self.clock.millis() + p.status_period_ms

    def _boot(self, now: float) -> None:
        """Start the firmware: a fresh controller with the flash's configuration and groups."""
        p = self.params
        self.master.targets.clear()
        self.controller = FishController(self.master, seed=p.seed, tolerance=p.tolerance,
                                         step_timeout=p.step_timeout, free_period=p.free_period)
        try:
            self.controller.apply_config(UserConfig.unpack(self.flash.user_config))
        except FrameError:
            self.stats.bad_payloads += 1  # a damaged configuration: the built-in one stays
        for payload in self.flash.actions:
            try:
                self.controller.store_group(action_group.decode(payload))
            except FrameError:
                self.stats.bad_payloads += 1
        self.system = SystemCommands(self)
        self.flash.boot()
        self.boot_time = now

    def reboot_after_answer(self) -> None:
        """Reboot once the frame being handled has had its answer and result."""
        self._reboot_pending = True

    @property
    def uptime(self) -> float:
        return self.now - self.boot_time

    def close(self) -> None:
        """Shut the CAN nodes down (a fish garbage-collected unclosed has them shut
        down when the next fish starts or closes). A closed fish does nothing more:
        its firmware and body stop."""
        if self.buses:
            self._finalizer.detach()
            _shutdown(self.buses)
            self.buses = []
        _shutdown_orphans()

    @property
    def now(self) -> float:
        """Seconds since setup: the CAN bus's time."""
        return self.clock.seconds - self._t0

    def physics(self, dt: float) -> None:
        if not self.buses:
            return
        t = self.now
        self.main_bus.advance_to(t)  # frames sent during the last step arrive
        for m in self.modules.values():
            m.step(t)
        self.body.step(dt, {k: m.angle for k, m in self.modules.items()},
                       {k: m.rate for k, m in self.modules.items()})

    def loop(self) -> None:
        serial = self.serial
        assert serial is not None
        if not self.buses:
            return  # closed
        now = self.now
        if now < self._booting_until:
            if serial.available():
                self.stats.lost_booting += len(serial.read_all())
            return
        if serial.available():
            self._last_rx = now
            for rec in self.rx.feed(serial.read_all()):
                self._on_frame(rec.frame, now)
        elif self.rx.pending and now - self._last_rx >= self.params.rx_gap:
            # A silent line ends what was sent: a candidate held by a corrupted
            # length field is decided now, not when 1 kB more has come.
            for rec in self.rx.finish():
                self._on_frame(rec.frame, now)
        for rej in self.rx.take_rejects():
            if rej.machine == self.params.machine:
                ans = self.responder.answer_rejected(rej)
                if ans is not None:
                    self._write(ans.data)
        self.controller.step(now, self._sensors)
        self.body.tank_target = self.controller.buoyancy_target
        sup = self.supervisor
        if sup is not None:
            if sup.available():
                self._supervisor_input(sup.read_all())
            ms = self.clock.millis()
            if self.params.status_period_ms > 0 and ms >= self._next_status:
                self._next_status = ms + self.params.status_period_ms
                self.send_status()

    def _write(self, data: bytes) -> None:
        assert self.serial is not None
        if not self.serial.write(data):
            self.stats.answers_refused += 1

    def _sensors(self) -> Sensors:
        left, right = self.body.sonars()
        ingress = any(h.feedback is not None and h.feedback.fault & Fault.WATER_INGRESS
                      for h in self.master.health.values())
        b, now = self.body, self.now
        light_left, light_right = self.senses.light_levels(b.x, b.y, b.yaw)
        return Sensors(sonar_left=left, sonar_right=right, depth=b.depth,
                       water_ingress=ingress, light_left=light_left, light_right=light_right,
                       laser=self.senses.laser(now))

    # -- action frames --------------------------------------------------------------
    def _on_frame(self, frame: ActionFrame, now: float) -> None:
        c = self.stats
        c.frames += 1
        if frame.machine != self.params.machine:
            c.other_machine += 1
            return
        if int(frame.type) not in REQUEST_TYPES:
            return  # an answer or a result: not for the fish
        status = self.system.check(frame)
        work = None
        if status is None:
            status, work = self._check(frame)
        ans = self.responder.answer(frame, status)
        if ans is None:
            return
        self._write(ans.data)
        if ans.status != Status.OK:
            return
        sub, ctl = frame.sub, self.controller
        if sub == SubCommand.TEST_ACTION_GROUP:
            assert isinstance(work, action_group.ActionGroup)
            if ctl.test_group(work, now, duplicate=ans.duplicate):
                c.groups_run += 1
            else:
                c.duplicates_skipped += 1
        elif sub == SubCommand.WRITE_ACTION_GROUP:
            assert isinstance(work, action_group.ActionGroup)
            before = len(ctl.groups)
            ctl.store_group(work, duplicate=ans.duplicate)
            if len(ctl.groups) > before:
                c.groups_stored += 1
                self.flash.store_action(frame.data)
            else:
                c.duplicates_skipped += 1
        elif sub in _SERVO_SUBS:
            assert isinstance(work, tuple)
            ctl.set_servos(work, int(sub))
        elif sub == SubCommand.ENTER_FREE_MODE:
            ctl.enter_free(now)
            self.system.still = False
        elif sub == SubCommand.ENTER_IDLE:
            ctl.enter_idle()
            self.system.still = False
        elif sub in SYSTEM_SUBS:
            got = self.system.execute(frame, now)
            if got is not None:
                self._send_result(frame, got)
            if self._reboot_pending:
                self._reboot_pending = False
                c.reboots += 1
                self._booting_until = now + self.params.boot_ms / 1000.0
                self._boot(now)
        else:
            self._send_result(frame, self.result(int(sub), frame.data))

    def _send_result(self, frame: ActionFrame, result: Result) -> None:
        self._write(encode(result_frame(frame, encode_result(result)), crc=self.params.crc))
        self.stats.results += 1

    def _check(self, frame: ActionFrame) -> tuple[Status | None, Any]:
        """The status to answer (None: the Responder decides) and the decoded data."""
        sub = frame.sub
        try:
            if sub in _GROUP_SUBS:
                group = action_group.decode(frame.data)
                groups = self.controller.groups
                full = len(groups) >= self.controller.max_groups
                if sub == SubCommand.WRITE_ACTION_GROUP and full and groups[-1] != group:
                    return Status.BUSY, None
                return None, group
            if sub in _SERVO_SUBS:
                return None, decode_servo_targets(frame.data)
        except FrameError:
            self.stats.bad_payloads += 1
            return Status.LENGTH_ERROR, None
        return None, None

    # -- supervisor -----------------------------------------------------------------
    def _supervisor_input(self, data: bytes) -> None:
        for line in self._sup_lines.feed(data):
            self._supervisor_line(line)

    def _supervisor_line(self, line: bytes) -> None:
        """One supervisor command; a line that is not one (too long, nested too deeply, not
        a JSON object, a malformed command) is counted and ignored, as a bad frame is."""
        try:  # nesting bounded: a line of brackets is refused, never a RecursionError
            msg = parse_json_bytes(line, "supervisor", _SUP_LINE_MAX)
            if isinstance(msg, dict):
                self.supervisor_command(msg)
                return
        except (KeyError, TypeError, ValueError, OverflowError):
            pass
        self.stats.supervisor_refused += 1

    def supervisor_command(self, msg: dict[str, Any]) -> None:
        cmd = msg.get("cmd")
        if cmd == "status":
            self.send_status()
        elif cmd == "obstacle":
            self.body.add_obstacle(Obstacle(float(msg["x"]), float(msg["y"]), float(msg["r"])))
        elif cmd == "clear_obstacles":
            self.body.obstacles.clear()
        elif cmd == "light":
            self.senses.add_light(Light(float(msg["x"]), float(msg["y"]), float(msg["lux"])))
        elif cmd == "clear_lights":
            self.senses.lights.clear()
        elif cmd == "laser":
            self.senses.laser_hit(int(msg["receiver"]), self.now)
        elif cmd == "can_fault":
            k = int(msg["module"])
            bus = self.main_bus if k == 0 else self.modules[k].bus
            assert isinstance(bus, FwBridgeBus)
            bus.inject(bit_error_rate=msg.get("bit_error_rate"),
                       stuck_dominant=msg.get("stuck_dominant"),
                       disconnected=msg.get("disconnected"))

    def send_status(self) -> None:
        if self.supervisor is not None and self.supervisor.println(
                json.dumps(self.status(), separators=(",", ":"))):
            self.stats.status_sent += 1

    def status(self) -> dict[str, Any]:
        x, y, _ = self.pose
        left, right = self.body.sonars() if self.buses else (math.inf, math.inf)
        ch = self.main_bus.sim if self.buses else None
        can: dict[str, Any] = {}
        if ch is not None:
            with ch.lock:
                st = ch.stats()
            can = {"channel": st["channel"], "frames": st["frames"],
                   "error_frames": st["error_frames"]}
        return {
            "t": self.clock.millis(), "model": self.name,
            "pose": [round(x, 4), round(y, 4), self.body.heading_rounded(2)],
            "depth": round(self.body.depth, 3), "speed": round(self.body.speed, 3),
            "sonar": [None if math.isinf(v) else round(v, 3) for v in (left, right)],
            **self.controller.status(),
            "servos": {k: round(m.angle, 1) for k, m in self.modules.items()},
            "health": {k: h.status.value for k, h in self.master.health.items()},
            "can": can, "link": self.stats.as_dict(), "rx": self.rx.stats.as_dict(),
            "responder": self.responder.stats.as_dict(),
        }

    @property
    def rx_stats(self) -> dict[str, int]:
        return self.rx.stats.as_dict()

    @property
    def pose(self) -> tuple[float, float, float]:
        return self.body.x, self.body.y, self.body.yaw

    @property
    def mode(self) -> Mode:
        return self.controller.mode
