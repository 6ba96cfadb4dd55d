"""The mobile-base node's protocol and time logic (seed 002), without I/O.

:class:`BaseNodeCore` takes time as an argument (``now``), so tests drive it
with an exact clock:

- command frames from the latest velocity request, at the control rate; a
  request that changes the command goes out at once as well (:meth:`~BaseNodeCore.prompt`),
  at most twice a period, so a new command does not wait for the schedule;
- the watchdog: no request for ``cmd_timeout`` -> zero velocity, and an event
  saying so (and another when requests resume); :meth:`~BaseNodeCore.set_cmd_timeout`
  changes the timeout of a running node, at once;
- odometry frames decoded by :class:`~protocols.sum8_receiver.Sum8Receiver`
  and integrated by :class:`~bridge.node.odometry.OdometryIntegrator`;
- after the link comes back, a zero command first;
- "wrong baud rate?" when only garbage arrives.

The runtimes around it: :class:`bridge.node.base_node.BaseNode` (blocking) and
:class:`bridge.node.aio.AsyncBaseNode` (asyncio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fwbridge.bridge.node.backoff import SUBSCRIBER_BUDGET, paced
from fwbridge.bridge.node.config import Calibration, RobotConfig
from fwbridge.bridge.node.health import GarbageWatch
from fwbridge.bridge.node.odometry import Odometry, OdometryIntegrator
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.errors import ConfigError, FrameError

__all__ = ["SUBSCRIBER_BUDGET", "ZERO_FRAME", "BaseNodeCore", "NodeEvent", "log_event", "paced"]


ZERO_FRAME = cmd_frame.encode(cmd_frame.ZERO)


@dataclass(frozen=True)
class NodeEvent:
    """Something the node reports: ``kind`` for programs, ``message`` for people.

    Kinds: ``watchdog``, ``resumed``, ``watchdog-set``, ``link-lost``,
    ``link-restored``, ``gave-up``, ``garbage``.
    """

    stamp: float
    kind: str
    message: str


class BaseNodeCore:
    """Protocol and time logic of the mobile-base node; no I/O, no clock."""

    def __init__(
        self,
        *,
        rate_hz: float = 100.0,
        cmd_timeout: float = 0.5,
        watchdog: bool = True,
        garbage_timeout: float = 3.0,
        calibration: Calibration | None = None,
        port: str = "link",
        baud: int | None = None,
        now: float = 0.0,
    ) -> None:
        if not rate_hz > 0:
            raise ConfigError(f"rate_hz must be positive, got {rate_hz!r}")
        self.period = 1.0 / rate_hz
        self.cmd_timeout = cmd_timeout
        self.watchdog = watchdog
        self.port, self.baud = port, baud
        self.receiver = receiver_for(odom_frame.CODEC)
        self.integrator = OdometryIntegrator(calibration)
        self.garbage = GarbageWatch(garbage_timeout, now)
        self.next_deadline = now
        self.commands_sent = 0
        self.watchdog_trips = 0
        self.reconnects = 0
        self._request = cmd_frame.ZERO
        self._request_at: float | None = None
        self._prompted_at = -math.inf
        self._tripped = False
        # the current target, its encoded bytes and the command they carry (float32),
        # cached; one tuple, so the tap (another thread) reads a matching set
        self._encoded: tuple[CmdFrame, bytes, CmdFrame] = (cmd_frame.ZERO, ZERO_FRAME,
                                                           cmd_frame.ZERO)
        self._events: list[NodeEvent] = []

    @classmethod
    def from_config(
        cls, config: RobotConfig, now: float, calibration: Calibration | None = None,
        keep: BaseNodeCore | None = None,
    ) -> BaseNodeCore:
        """A core for ``config``; ``keep``: the core it replaces, whose velocity request
        (made before the node started) it keeps."""
        core = cls(
            rate_hz=config.rate_hz,
            cmd_timeout=config.cmd_timeout,
            watchdog=config.watchdog,
            garbage_timeout=config.garbage_timeout,
            calibration=calibration,
            port=config.link_url,
            baud=config.baud,
            now=now,
        )
        if keep is not None:
            core._request, core._request_at = keep._request, keep._request_at
        return core

    # -- commands -------------------------------------------------------------
    def request(self, vx: float, vy: float, wz: float, now: float) -> None:
        """The latest velocity request (m/s, m/s, rad/s); it stays until replaced or stale."""
        req = CmdFrame(float(vx), float(vy), float(wz))
        if req.nonfinite:
            raise ConfigError(f"velocity request is not finite: {', '.join(req.nonfinite)}")
        try:  # a finite double can still overflow the frame's float32 (1e300)
            cmd_frame.encode(req)
        except FrameError as exc:
            raise ConfigError(f"velocity request cannot be sent: {exc}") from None
        self._request, self._request_at = req, now
        if self._tripped:
            self._tripped = False
            self._event(now, "resumed", "velocity requests resumed")

    def prompt(self, now: float) -> bool:
        """Whether the request just made goes out now rather than at the next tick: it
        changes the command (a renewal of the same one waits for the schedule), and the
        last one sent early is half a period old (a flood of requests is not a flood of
        frames on a slow UART). True counts it as sent early."""
        if now - self._prompted_at < self.period / 2 or self.target(now) == self._encoded[0]:
            return False
        self._prompted_at = now
        return True

    def set_cmd_timeout(self, seconds: float, now: float) -> None:
        """The watchdog's timeout from now on: the request that is there trips once it is
        ``seconds`` old (already older: at the next tick)."""
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            raise ConfigError(f"cmd_timeout must be a positive number of seconds, got {seconds!r}")
        old, self.cmd_timeout = self.cmd_timeout, float(seconds)
        self._event(now, "watchdog-set", f"watchdog: cmd_timeout {old:g} s -> {seconds:g} s")

    def target(self, now: float) -> CmdFrame:
        """What to command now: the request, or zero once the watchdog has tripped."""
        at = self._request_at
        if at is None:
            return cmd_frame.ZERO
        if self.watchdog and now - at >= self.cmd_timeout:
            if not self._tripped:
                self._tripped = True
                self.watchdog_trips += 1
                self._event(
                    now,
                    "watchdog",
                    f"no velocity request for {now - at:.2f} s "
                    f"(cmd_timeout {self.cmd_timeout:g} s): sending zero velocity",
                )
            return cmd_frame.ZERO
        return self._request

    def frame(self, now: float) -> bytes:
        """The command frame for ``now`` (counts as sent; does not move the schedule)."""
        target = self.target(now)
        encoded = self._encoded
        if target != encoded[0]:  # once per new target: the wire's float32 values
            frame = cmd_frame.encode(target)
            encoded = self._encoded = (target, frame, cmd_frame.decode(frame))
        self.commands_sent += 1
        return encoded[1]

    def command_of(self, data: bytes) -> CmdFrame | None:
        """The command ``data`` (bytes this node wrote) carries, as the firmware reads it,
        without decoding it again: the current target's frame or the zero frame; None for
        anything else."""
        _, frame, wire = self._encoded
        if data == frame:
            return wire
        return cmd_frame.ZERO if data == ZERO_FRAME else None

    def tick(self, now: float) -> bytes:
        """The scheduled command frame; the next one is due one period later.

        Missed periods are skipped rather than sent in a burst: a late
        command is already stale, and a burst would flood a slow UART.
        """
        nxt = self.next_deadline + self.period
        self.next_deadline = nxt if nxt > now else now + self.period
        return self.frame(now)

    # -- odometry ---------------------------------------------------------------
    def receive(self, data: bytes, now: float) -> list[Odometry]:
        """Bytes from the firmware, arrived at ``now``: the odometry they complete."""
        out = []
        update = self.integrator.update
        for item in self.receiver.feed(data):
            odom = update(item.frame, now)
            if odom is not None:
                out.append(odom)
        return out

    def check(self, now: float) -> None:
        """Periodic health check (the wrong-baud suspicion)."""
        st = self.receiver.stats
        report = self.garbage.update(st.frames, st.bytes, st.checksum_errors, now)
        if report is not None:
            self._event(
                now, "garbage", report.message(self.port, self.baud, "link.baud in the config")
            )

    # -- the link ---------------------------------------------------------------
    def link_lost(self, now: float, reason: str) -> None:
        self.receiver.finish()  # a partial frame from the old link must not join new bytes
        self._event(now, "link-lost", f"{self.port}: link lost ({reason}); reconnecting")

    def link_restored(self, now: float, attempts: int = 1) -> bytes:
        """The link is back: the zero frame to send first; the schedule restarts."""
        self.reconnects += 1
        self.integrator.restart_clock()
        st = self.receiver.stats
        self.garbage.reset(now, st.frames, st.bytes, st.checksum_errors)
        self.next_deadline = now + self.period
        self.commands_sent += 1
        self._event(
            now,
            "link-restored",
            f"{self.port}: link restored after {attempts} attempt(s); sent zero velocity first",
        )
        return ZERO_FRAME

    # -- events -----------------------------------------------------------------
    def report(self, now: float, kind: str, message: str) -> None:
        """Queue an event for the runtime to hand to its callbacks."""
        self._event(now, kind, message)

    def _event(self, now: float, kind: str, message: str) -> None:
        if len(self._events) < 256:  # bounded: a stalled consumer must not grow memory
            self._events.append(NodeEvent(now, kind, message))

    @property
    def has_events(self) -> bool:
        return bool(self._events)

    def drain_events(self) -> list[NodeEvent]:
        events, self._events = self._events, []
        return events

    def stats(self) -> dict[str, int]:
        return {
            "commands": self.commands_sent,
            "odometry": self.integrator.seq,
            "skipped_nonfinite": self.integrator.skipped,
            "watchdog_trips": self.watchdog_trips,
            "reconnects": self.reconnects,
            **self.receiver.stats.as_dict(),
        }


def log_event(event: NodeEvent) -> None:
    """The default event handler: the ``fwbridge.bridge`` logger."""
    import logging  # here, not at the top: logging starts threading, the core has none

    quiet = ("resumed", "watchdog-set", "link-restored")
    level = logging.INFO if event.kind in quiet else logging.WARNING
    logging.getLogger("fwbridge.bridge").log(level, "%s", event.message)
