"""The mobile-base node with no thread of its own: its owner's loop drives it.

Same :class:`~bridge.node.base_core.BaseNodeCore`, lifecycle, sinks and
policy (one :class:`~bridge.node.record_path.RecordPath`) as
:class:`~bridge.node.base_node.BaseNode` and
:class:`~bridge.node.aio.AsyncBaseNode`; only the waiting differs: it never
waits. Its owner calls :meth:`DrivenBaseNode.service` with the time, once a
round, and the node does what is due then: the bytes the link has (read
without waiting), the command whose time has come, the health check, the
events, and while the link is lost the reopening the policy allows. Many
nodes then share one thread and one wake-up a round (a fleet), where each
threaded node would have a thread and a wake-up per frame.

A command is due at its deadline and leaves at the first round after it, so
the owner's round bounds its lateness (the schedule itself keeps its rate:
:meth:`~bridge.node.base_core.BaseNodeCore.tick`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

from fwbridge.bridge.link.transports import IO_ERRORS, LinkError, LinkLost, poller_for
from fwbridge.bridge.node.base_core import BaseNodeCore
from fwbridge.bridge.node.base_node import HOUSEKEEPING
from fwbridge.bridge.node.record_path import RecordPath

__all__ = ["DrivenBaseNode"]

log = logging.getLogger("fwbridge.bridge")


class DrivenBaseNode(RecordPath):
    """The base node serviced by its owner's loop (see the module).

    ``start()`` configures and activates the hardware (as the other runtimes);
    ``service(now)`` is one round, from the owner's thread; ``request()`` and
    ``send_now()`` may come from any thread (a ROS 2 sink's ``cmd_vel``: the command
    is written at once, not at the next round); ``stop()`` sends the safe stop, then
    closes the link and every sink (last first), once the owner no longer services
    it (or from its loop). The link must be readable without waiting (a device, a
    pty, ``sim://``: :func:`~fwbridge.bridge.link.transports.poller_for`).
    """

    def init_runtime(self) -> None:
        self._write_lock = threading.Lock()  # one writer at a time on the link
        self._read: Callable[[float], bytes] | None = None  # None: no link to read
        self._lost: str | None = None
        self._retry_at: float | None = None  # while lost: when the policy allows a reopen
        self._next_check = -math.inf
        self._running = False
        self.error: BaseException | None = None  # what ended the node, if not stop()

    # -- public API -------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._read is not None and self._lost is None

    @property
    def running(self) -> bool:
        """Started, and neither stopped nor ended (a link the policy gave up on)."""
        return self._running

    def stats(self) -> dict[str, int]:
        with self.core_lock:
            return {**self.core.stats(), "open_attempts": self.open_attempts,
                    **self.path_stats()}

    def start(self) -> None:
        """Configure (open the link, load calibration), activate (zero velocity)."""
        hw = self.hardware
        hw.configure()
        try:
            read = self._reader()
            with self.core_lock:
                self.core = BaseNodeCore.from_config(self.config, self.clock(), hw.calibration,
                                                     keep=self.core)
            hw.activate()
        except BaseException:
            hw.shutdown()  # the sinks stay open: stop() closes them, on every path
            raise
        self._read = read
        self._running = True

    def stop(self) -> None:
        """Send the safe stop (zero velocity), close the link, then the sinks (last
        first; also after a failed start). Idempotent."""
        self._running = False
        with self._write_lock:
            self._read = None
        try:
            self.hardware.shutdown()
        finally:
            self._close_sinks()  # after the safe stop, so the captures hold it

    def send_now(self) -> None:
        """Send the current command at once, outside the schedule (from any thread)."""
        if not self.connected:
            return
        with self.core_lock:
            frame = self.core.frame(self.clock())
        self._send(frame)

    # -- one round ---------------------------------------------------------------------
    def service(self, now: float) -> float:
        """One round at ``now``: read what the link has, send the command if it is due,
        check health, hand out events; reopen a lost link when the policy says. Returns
        when the node next has something due (``inf`` once it has ended); a failure
        ends this node only (``error``), never its owner's loop."""
        if not self._running:
            return math.inf
        try:
            if self._lost is not None:
                return self._service_lost(now)
            return self._service(now)
        except LinkError as exc:  # out of tries: the node ends, as BaseNode's does
            self.error = exc
        except Exception as exc:  # reported through ``error``; the others go on
            log.exception("base node round failed")
            self.error = exc
        self._running = False
        self._dispatch()
        return math.inf

    def _service(self, now: float) -> float:
        read = self._read
        assert read is not None
        try:
            data = read(0.0)
        except IO_ERRORS as exc:
            self._mark_lost(f"read failed: {exc}")
            return now
        if data:
            self.read(data, self._between_records)
        core, lock = self.core, self.core_lock
        if now >= self._next_check:  # housekeeping at 10 Hz, not per round
            self._next_check = now + HOUSEKEEPING
            with lock:
                core.check(now)
        with lock:
            frame = core.tick(now) if now >= core.next_deadline else None
            due = core.next_deadline
        if frame is not None:
            self._send(frame)
        if core.has_events:
            self._dispatch()
        return min(due, self._next_check)

    def _service_lost(self, now: float) -> float:
        policy = self.policy
        if self._retry_at is None:  # just lost: close, say so, ask the policy
            with self._write_lock:
                self._read = None
            self.hardware.close()
            with self.core_lock:
                self.core.link_lost(now, self._lost or "unknown")
            self._dispatch()
            self._retry_at = now + policy.lost(now)
            return self._retry_at
        if now < self._retry_at:
            return self._retry_at
        self.open_attempts += 1
        try:
            self.hardware.reopen()
            read = self._reader()
        except LinkError as exc:
            delay = policy.failed(now)
            if delay is None:
                raise self.give_up(exc) from None
            self._retry_at = now + delay
            return self._retry_at
        attempts = policy.succeeded(now)
        with self.core_lock:
            zero = self.core.link_restored(now, attempts)
        self._read, self._lost, self._retry_at = read, None, None
        self._send(zero)
        self._dispatch()
        return now

    def _reader(self) -> Callable[[float], bytes]:
        link = self.hardware.link
        read = poller_for(link)
        if read is None:
            raise LinkError(f"{link.port}: a node without a thread of its own needs a link "
                            "it can read without waiting (a device, a pty or sim://)")
        return read

    # -- writes -------------------------------------------------------------------------
    def _between_records(self) -> None:
        """A command due while slow sinks took the records goes out first."""
        now = self.clock()
        with self.core_lock:
            frame = self.core.tick(now) if now >= self.core.next_deadline else None
        if frame is not None:
            self._send(frame)

    def _mark_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason

    def _send(self, frame: bytes) -> None:
        with self._write_lock:
            if self._read is None or self._lost is not None:
                return
            try:
                self.hardware.send(frame)
            except LinkLost as exc:
                self._mark_lost(str(exc.__cause__ or exc))
