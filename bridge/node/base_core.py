"""The mobile-base node's protocol and time logic (seed 002): one configuration of the link core.

:class:`BaseNodeCore` is a :class:`~fwbridge.bridge.node.link_core.LinkCore`
with odometry frames in and velocity-command frames out at the control rate,
zero velocity as the safe value; it adds what a base means by them:

- velocity requests in m/s and rad/s (:meth:`~BaseNodeCore.request`), the
  watchdog's timeout as ``cmd_timeout`` (:meth:`~BaseNodeCore.set_cmd_timeout`
  changes it on a running node, at once);
- odometry frames integrated by :class:`~bridge.node.odometry.OdometryIntegrator`;
- more descriptions in on the same link (``frames_in``: a robot file's
  ``link.frames_in``), their frames held for the runtime (:meth:`~BaseNodeCore.drain_frames`).

The link core keeps the rest (the schedule, a changed command at once, the
watchdog's zero, a zero command first after the link comes back, "wrong
baud rate?" when only garbage arrives). Time is an argument (``now``).
The runtimes around it: :class:`bridge.node.base_node.BaseNode` (blocking)
and :class:`bridge.node.aio.AsyncBaseNode` (asyncio).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from fwbridge.bridge.node.backoff import SUBSCRIBER_BUDGET, paced
from fwbridge.bridge.node.config import Calibration, RobotConfig
from fwbridge.bridge.node.link_core import LinkCore, NodeEvent, Outbound
from fwbridge.bridge.node.odometry import Odometry, OdometryIntegrator
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.engine import codec_for
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
    from fwbridge.protocols.odom_frame import OdomFrame

__all__ = ["SUBSCRIBER_BUDGET", "ZERO_FRAME", "BaseNodeCore", "NodeEvent", "log_event", "paced"]


ZERO_FRAME = cmd_frame.encode(cmd_frame.ZERO)
_CMD = "cmd"
#: Frames of ``frames_in`` held between two drains: a runtime that stops draining
#: must not grow memory (the newest are dropped and counted).
MAX_HELD_FRAMES = 4096


def frame_codecs(refs: Sequence[str]) -> list[FrameCodec[Any]]:
    """The codecs of a robot file's ``link.frames_in``: built-in names or description files."""
    return [codec_for(builtin(r) if r in BUILTIN_NAMES else r) for r in refs]


class BaseNodeCore(LinkCore):
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
        frames_in: Sequence[FrameCodec[Any]] = (),
    ) -> None:
        if not rate_hz > 0:
            raise ConfigError(f"rate_hz must be positive, got {rate_hz!r}")
        command = Outbound(cmd_frame.CODEC, rate_hz, cmd_frame.ZERO,
                           timeout=cmd_timeout if watchdog else None,
                           what="velocity request", safe_name="zero velocity")
        super().__init__([odom_frame.CODEC, *frames_in], [command],
                         garbage_timeout=garbage_timeout, port=port, baud=baud, now=now)
        self.period = 1.0 / rate_hz
        # the engine picks the sum-8 kernel for the odometry description
        self.receiver = cast("Sum8Receiver[OdomFrame]", self.receivers["odom"])
        self.integrator = OdometryIntegrator(calibration)
        self._cmd = self.outbound[_CMD]
        self._more = [(c.desc.name, self.receivers[c.desc.name]) for c in frames_in]
        self._held: list[tuple[str, Any]] = []
        self.frames_dropped = 0
        if not watchdog:  # kept for set_cmd_timeout and the parameter: off until asked
            self._cmd.timeout = cmd_timeout

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
            frames_in=frame_codecs(config.frames_in),
        )
        if keep is not None:
            core._cmd.request, core._cmd.request_at = keep._cmd.request, keep._cmd.request_at
        return core

    # -- commands -------------------------------------------------------------
    @property
    def cmd_timeout(self) -> float:
        return self._cmd.timeout

    @property
    def watchdog(self) -> bool:
        return self._cmd.watchdog

    @property
    def commands_sent(self) -> int:
        return self._cmd.sent

    @property
    def watchdog_trips(self) -> int:
        return self._cmd.trips

    def request(self, vx: float, vy: float, wz: float, now: float) -> None:
        """The latest velocity request (m/s, m/s, rad/s); it stays until replaced or stale."""
        self.set_request(_CMD, CmdFrame(float(vx), float(vy), float(wz)), now)

    def prompt(self, now: float) -> bool:
        """Whether the request just made goes out now (:meth:`LinkCore.prompt_out`)."""
        return self.prompt_out(_CMD, now)

    def set_cmd_timeout(self, seconds: float, now: float) -> None:
        """The watchdog's timeout from now on (:meth:`LinkCore.set_timeout`)."""
        self.set_timeout(_CMD, seconds, now)

    def target(self, now: float) -> CmdFrame:
        """What to command now: the request, or zero once the watchdog has tripped."""
        target: CmdFrame = self.target_of(_CMD, now)
        return target

    def frame(self, now: float) -> bytes:
        """The command frame for ``now`` (counts as sent; does not move the schedule)."""
        return self.frame_of(_CMD, now)

    def command_of(self, data: bytes) -> CmdFrame | None:
        """The command ``data`` (bytes this node wrote) carries, as the firmware reads it,
        without decoding it again: the current target's frame or the zero frame; None for
        anything else."""
        _, frame, wire = self._cmd.encoded
        if data == frame:
            return wire  # type: ignore[no-any-return]
        return cmd_frame.ZERO if data == ZERO_FRAME else None

    # -- odometry ---------------------------------------------------------------
    def receive(self, data: bytes, now: float) -> list[Odometry]:
        """Bytes from the firmware, arrived at ``now``: the odometry they complete."""
        self.bytes_in += len(data)
        out = []
        update = self.integrator.update
        for item in self.receiver.feed(data):
            odom = update(item.frame, now)
            if odom is not None:
                out.append(odom)
        for name, rx in self._more:  # the same bytes: each receiver takes its own frames
            items = rx.feed(data)
            room = MAX_HELD_FRAMES - len(self._held)
            if len(items) > room:
                self.frames_dropped += len(items) - room
                items = items[:room]
            self._held += [(name, item.frame) for item in items]
        return out

    @property
    def has_frames(self) -> bool:
        return bool(self._held)

    def drain_frames(self) -> list[tuple[str, Any]]:
        """The frames of ``frames_in`` received since the last drain: (description name,
        frame), description by description within each read."""
        held, self._held = self._held, []
        return held

    def link_restored(self, now: float, attempts: int = 1) -> bytes:
        """The link is back: the zero frame to send first; the schedule restarts."""
        self.integrator.restart_clock()
        return super().link_restored(now, attempts)

    def stats(self) -> dict[str, int]:
        return {
            "commands": self.commands_sent,
            "odometry": self.integrator.seq,
            "skipped_nonfinite": self.integrator.skipped,
            "watchdog_trips": self.watchdog_trips,
            "reconnects": self.reconnects,
            **self.receiver.stats.as_dict(),
            **({"frames_in": sum(rx.stats.frames for _, rx in self._more),
                "frames_dropped": self.frames_dropped} if self._more else {}),
        }


def log_event(event: NodeEvent) -> None:
    """The default event handler: the ``fwbridge.bridge`` logger."""
    import logging  # here, not at the top: logging starts threading, the core has none

    quiet = ("resumed", "watchdog-set", "link-restored")
    level = logging.INFO if event.kind in quiet else logging.WARNING
    logging.getLogger("fwbridge.bridge").log(level, "%s", event.message)
