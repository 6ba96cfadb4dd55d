"""The one path a base node's record takes, shared by both runtimes.

:class:`RecordPath` is what :class:`~bridge.node.base_node.BaseNode` (threads) and
:class:`~bridge.node.aio.AsyncBaseNode` (asyncio) have in common around the
sans-I/O :class:`~bridge.node.base_core.BaseNodeCore`: the sinks
(:class:`~bridge.node.sinks.Sinks`), the link policy
(:class:`~bridge.node.backoff.LinkPolicy`), the hardware tap that hands every
write to the sinks with the command it carries, and the delivery of each
read's bytes, records and events. The runtimes differ only in how they wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from fwbridge.bridge.link.transports import LinkLost
from fwbridge.bridge.node.backoff import LinkPolicy
from fwbridge.bridge.node.base_core import BaseNodeCore, NodeEvent, log_event
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.hardware import LinkHardware
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import RX, TX, ByteSink, CallbackSink, Sink, Sinks, borrowed

__all__ = ["RecordPath"]


class RecordPath:
    """Sinks, policy and hardware of one node; the runtimes subclass it.

    ``sinks`` get everything, in order. The older keywords still work, each
    a sink: ``capture`` (a byte capture its owner closes) first,
    ``on_odometry``/``on_event`` (callbacks) last. ``say`` takes the one
    ``error:`` line of a failing sink (default: the ``fwbridge.bridge`` logger).
    ``clock`` stamps records (the node's time), ``clock_ns`` the bytes (epoch ns).
    """

    def __init__(
        self,
        config: RobotConfig,
        *,
        sinks: Iterable[Sink] = (),
        on_odometry: Callable[[Odometry], Any] | None = None,
        on_event: Callable[[NodeEvent], Any] | None = log_event,
        clock: Callable[[], float] = time.monotonic,
        capture: ByteSink | None = None,
        hardware: LinkHardware | None = None,
        say: Callable[[str], Any] | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self.clock = clock
        self.clock_ns = clock_ns  # the bytes' stamps: the captures' epoch time base
        self.capture = capture
        chain = [borrowed(capture)] if capture is not None else []
        chain += sinks
        if on_odometry is not None or on_event is not None:
            chain.append(CallbackSink(on_odometry, on_event))
        self.sinks = Sinks(chain, say=say)
        self.policy = LinkPolicy.for_config(config)
        self.core = BaseNodeCore.from_config(config, clock())
        self.odometry_dropped = 0  # records a slow sink skipped (all were integrated)
        safe = self.core.safe_frames()  # the base's: zero velocity
        self.hardware = hardware or LinkHardware(config, reset_frame=safe, safe_stop_frame=safe)
        self.hardware.tap = self.wrote  # every write, the reset and safe-stop zeros too
        self.open_attempts = 0  # reconnection attempts, for monitoring
        self.core_lock = threading.Lock()  # the core: requests come from other threads
        self.init_runtime()

    def request(self, vx: float, vy: float, wz: float) -> None:
        """Set the velocity request (from any thread); it must be renewed within
        cmd_timeout. One that changes the command is also sent at once."""
        with self.core_lock:
            now = self.clock()
            self.core.request(vx, vy, wz, now)
            early = self.core.prompt(now)
        if early:  # a new command: at once, not at the next tick
            self.send_now()

    def give_up(self, exc: Exception) -> LinkLost:
        """The policy is out of tries: the core reports it, and this is what to raise."""
        with self.core_lock:
            self.core.report(self.clock(), "gave-up",
                             f"gave up after {self.policy.attempts} attempts: {exc}")
        return LinkLost(f"{self.config.link_url}: gave up reconnecting: {exc}")

    def set_cmd_timeout(self, seconds: float) -> None:
        """The watchdog's timeout, changed at once (from any thread); the node's
        ``config`` says the new one too. Its event goes out with the node's others,
        from the node's own thread."""
        with self.core_lock:
            self.core.set_cmd_timeout(seconds, self.clock())
            self.config = replace(self.config, cmd_timeout=self.core.cmd_timeout)

    def send_now(self) -> None:
        """Send the current command at once, outside the schedule (from any thread):
        each runtime sends it its own way."""
        raise NotImplementedError

    def init_runtime(self) -> None:
        """The runtime's own state (its locks, events, loop), set up last by ``__init__``:
        the runtimes take the constructor as it is here."""

    def wrote(self, direction: str, data: bytes) -> None:
        """A write on the link (the hardware's tap): its bytes, and the command it
        carries (known, not decoded)."""
        sinks = self.sinks
        if not sinks.takes_writes:  # no capture: no stamp to take
            return
        ts = self.clock_ns()
        sinks.on_bytes(direction, data, ts)
        if direction == TX:
            command = self.core.command_of(data)
            if command is not None:
                sinks.on_command(command, ts)

    def _receive(self, data: bytes, now: float) -> list[Odometry]:
        return self.core.receive(data, now)

    def read(self, data: bytes, between: Callable[[], Any] | None = None) -> None:
        """A read from the link: bytes to the sinks, decoded once, records paced
        (``between``: before each record but the first)."""
        now = self.clock()
        sinks = self.sinks
        if sinks.takes_bytes:
            sinks.on_bytes(RX, data, self.clock_ns())
        records = self._receive(data, now)
        if self.core.has_frames:
            frames = self._drain_frames()
            if frames:
                self.sinks.frames(frames, self.clock_ns())
        if records:
            # real time (not self.clock): the budget is the sinks' own cost
            self.odometry_dropped += sinks.records(records, self.policy, time.monotonic,
                                                   between)

    def _drain(self) -> list[NodeEvent]:
        return self.core.drain_events()

    def _drain_frames(self) -> list[tuple[str, Any]]:
        return self.core.drain_frames()

    def _dispatch(self) -> None:
        self.sinks.events(self._drain())

    def _close_sinks(self) -> None:
        """After the safe stop: the last events, then every sink, last first."""
        self._dispatch()
        self.sinks.close()

    def receiver_stats(self) -> dict[str, dict[str, int]]:
        """The receiver's counters by direction, as a capture's counter records hold them."""
        return {RX: self.core.receiver.stats.as_dict()}

    def path_stats(self) -> dict[str, int]:
        return {"odometry_dropped": self.odometry_dropped, "sink_errors": self.sinks.errors}
