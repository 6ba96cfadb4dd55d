"""What the serial robot models share: the seed-002 link, odometry and status timers.

A model is firmware plus the body it drives. Its firmware reads velocity
commands from ``serialComRx`` with the project's receiver
(:class:`~protocols.sum8_receiver.Sum8Receiver`), sends an odometry frame
every ``odom_period_ms`` on ``serialComTx``, and prints one JSON status line
every ``status_period_ms`` on ``supervisorComTx`` (firmware counters plus,
since this is a simulation, the body's true pose). It accepts JSON lines on
``supervisorComRx`` (``{"cmd": "status"}``, and per model more).
"""

from __future__ import annotations

import json
import math
from typing import Any

from fwbridge.bridge.sim.kinematics import wrap_deg
from fwbridge.bridge.sim.webots_serial import ROBOT_LINK, SUPERVISOR_LINK, WebotsSerialDrv
from fwbridge.bridge.sim.world import Board, SupervisorLines, open_serial
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.config_text import parse_json_bytes
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.odom_frame import OdomFrame

__all__ = ["FirmwareBase", "LinkCounters"]

#: The longest supervisor line: a command is a small JSON object; longer is garbage.
_SUP_LINE_MAX = 4096


class LinkCounters:
    """The firmware's own view of its link."""

    __slots__ = ("cmd_applied", "cmd_rejected", "odom_refused", "odom_sent", "status_sent",
                 "supervisor_refused")

    def __init__(self) -> None:
        self.cmd_applied = 0
        self.cmd_rejected = 0  # decoded but non-finite or implausible
        self.odom_sent = 0
        self.odom_refused = 0  # emitter buffer full
        self.status_sent = 0
        self.supervisor_refused = 0  # supervisor lines that are not a JSON object (or too deep)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


class FirmwareBase:
    """Serial plumbing of a simulated base; subclasses add the body and the kinematics."""

    name = "base"
    #: Commands beyond these are rejected (a corrupted frame can pass sum-8 by chance).
    plausible_speed = 5.0  # m/s
    plausible_turn = 20.0  # rad/s

    def __init__(self, odom_period_ms: int = 20, status_period_ms: int = 100) -> None:
        self.odom_period_ms = odom_period_ms
        self.status_period_ms = status_period_ms
        self.counters = LinkCounters()
        self.cmd = CmdFrame()
        self.cmd_ms = -1  # when the last command was applied
        # The body's true pose (ground truth, the simulator's knowledge).
        self.x = self.y = self.yaw = 0.0
        self.serial: WebotsSerialDrv | None = None
        self.supervisor: WebotsSerialDrv | None = None
        self._rx = receiver_for(cmd_frame.CODEC)
        self._sup_lines = SupervisorLines(_SUP_LINE_MAX)
        self._next_odom = 0
        self._next_status = 0

    # -- firmware ---------------------------------------------------------
    def setup(self, board: Board) -> None:
        self.board = board
        self.clock = board.clock
        self.serial = open_serial(board, ROBOT_LINK)
        try:
            self.supervisor = open_serial(board, SUPERVISOR_LINK)
        except RuntimeError:
            self.supervisor = None  # a robot without the supervisor link still drives
        now = self.clock.millis()
        self._next_odom = now + self.odom_period_ms
        self._next_status = now + self.status_period_ms if self.status_period_ms > 0 else -1
        self.begin()

    def loop(self) -> None:
        serial = self.serial
        assert serial is not None
        if serial.available():
            for rec in self._rx.feed(serial.read_all()):
                self._command(rec.frame)
        sup = self.supervisor
        if sup is not None and sup.available():
            self._supervisor_input(sup.read_all())
        now = self.clock.millis()
        self.control(now)
        if now >= self._next_odom:
            self._next_odom += self.odom_period_ms * max(
                1, (now - self._next_odom) // self.odom_period_ms + 1
            )
            frame = self.odometry(now)
            if serial.write(odom_frame.CODEC.encode(frame, allow_nonfinite=True)):
                self.counters.odom_sent += 1
            else:
                self.counters.odom_refused += 1
        if 0 <= self._next_status <= now:
            self._next_status += self.status_period_ms
            self.send_status()

    def _command(self, frame: CmdFrame) -> None:
        if (
            frame.nonfinite
            or abs(frame.vx) > self.plausible_speed
            or abs(frame.vy) > self.plausible_speed
            or abs(frame.wz) > self.plausible_turn
        ):
            self.counters.cmd_rejected += 1
            return
        self.counters.cmd_applied += 1
        self.command(frame)  # sees the previous ``cmd``/``cmd_ms``
        self.cmd = frame
        self.cmd_ms = self.clock.millis()

    def _supervisor_input(self, data: bytes) -> None:
        for line in self._sup_lines.feed(data):
            self._supervisor_line(line)

    def _supervisor_line(self, line: bytes) -> None:
        """One supervisor command; a line that is not one (too long, nested too deeply, not
        a JSON object, a field of the wrong type) is counted and ignored."""
        try:  # nesting bounded: a line of brackets is refused, never a RecursionError
            msg = parse_json_bytes(line, "supervisor", _SUP_LINE_MAX)
            if isinstance(msg, dict):
                self.supervisor_command(msg)
                return
        except (KeyError, TypeError, ValueError, OverflowError):
            pass
        self.counters.supervisor_refused += 1

    def send_status(self) -> None:
        if self.supervisor is None:
            return
        line = json.dumps(self.status(), separators=(",", ":"), allow_nan=True)
        if self.supervisor.println(line):
            self.counters.status_sent += 1

    def status(self) -> dict[str, Any]:
        """One JSON-able snapshot: time, true pose, command, counters."""
        x, y, yaw = self.pose
        return {
            "t": self.clock.millis(),
            "model": self.name,
            "pose": [round(x, 6), round(y, 6), round(wrap_deg(math.degrees(yaw)), 4)],
            "cmd": [self.cmd.vx, self.cmd.vy, self.cmd.wz],
            "cmd_t": self.cmd_ms,
            "link": self.counters.as_dict(),
            "rx": self._rx.stats.as_dict(),
            **self.status_extra(),
        }

    @property
    def rx_stats(self) -> dict[str, int]:
        return self._rx.stats.as_dict()

    @property
    def pose(self) -> tuple[float, float, float]:
        """True pose (x m, y m, yaw rad, unwrapped)."""
        return self.x, self.y, self.yaw

    def supervisor_command(self, msg: dict[str, Any]) -> None:
        if msg.get("cmd") == "status":
            self.send_status()

    # -- for subclasses ---------------------------------------------------
    def begin(self) -> None:
        """Firmware setup after the serial ports are open."""

    def command(self, frame: CmdFrame) -> None:
        """Apply a velocity command."""
        raise NotImplementedError

    def control(self, now_ms: int) -> None:
        """Per-loop control work (watchdogs, motor set-points)."""

    def odometry(self, now_ms: int) -> OdomFrame:
        raise NotImplementedError

    def status_extra(self) -> dict[str, Any]:
        return {}

    def physics(self, dt: float) -> None:
        raise NotImplementedError
