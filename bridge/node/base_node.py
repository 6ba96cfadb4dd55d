"""The mobile-base node (seed 002) as a blocking runtime: velocity commands out, odometry in.

All protocol and time logic is in :class:`~bridge.node.base_core.BaseNodeCore`,
the sinks, the reconnect and delivery policy in
:class:`~bridge.node.record_path.RecordPath` (shared with the asyncio runtime,
:mod:`bridge.node.aio`); this module is the thin I/O around them: the hardware
lifecycle, one I/O thread that waits on the port until the next command is
due (odometry is handled the moment it arrives), and reconnection as the
policy says when the port disappears.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import serial

from fwbridge.bridge.link.transports import IO_ERRORS, LinkError, LinkLost, poller_for, read_some
from fwbridge.bridge.node.base_core import ZERO_FRAME, BaseNodeCore, NodeEvent, log_event
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.record_path import RecordPath

__all__ = ["ZERO_FRAME", "BaseNode", "BaseNodeCore", "NodeEvent", "log_event"]

#: Longest single sleep of a runtime, so a stop or a lost link is noticed promptly
#: even when the next command is far away (slow rates, a frozen test clock).
MAX_WAIT = 0.05
#: Longest wait for a pump thread to finish after its link was cancelled or lost.
PUMP_JOIN = 1.0
#: Chunks a pump thread may queue ahead of the I/O thread (then it blocks).
PUMP_QUEUE = 256
#: Seconds between health checks and event hand-outs when nothing else happens.
HOUSEKEEPING = 0.1


class _Session:
    """One open period of the link, and how the I/O thread waits on it.

    A native POSIX port is polled directly (``poll`` with the time to the
    next command as timeout). Other links (URL handlers) get a pump thread
    that reads with the link's own timeout into a bounded queue, so the
    I/O loop is the same for both.
    """

    def __init__(self, link: serial.SerialBase) -> None:
        self.link = link
        self.alive = True
        self._pump: threading.Thread | None = None
        poll = poller_for(link)
        if poll is not None:
            self.wait_read = poll
        else:
            self._queue: queue.Queue[bytes | BaseException] = queue.Queue(PUMP_QUEUE)
            self._pump = threading.Thread(target=self._pump_loop, name="base-node-rx", daemon=True)
            self._pump.start()
            self.wait_read = self._from_queue

    def _pump_loop(self) -> None:
        while self.alive:
            try:
                data = read_some(self.link)
            except IO_ERRORS as exc:
                self._queue.put(exc)
                return
            if data:
                self._queue.put(data)  # blocks when full: backpressure, not unbounded memory

    def _from_queue(self, timeout: float) -> bytes:
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return b""
        if isinstance(item, BaseException):
            raise item
        return item

    def wake(self) -> None:
        """Interrupt a wait on the link (stop, loss)."""
        cancel = getattr(self.link, "cancel_read", None)
        if cancel is not None:
            with contextlib.suppress(*IO_ERRORS, ValueError, AttributeError):
                cancel()

    def close(self) -> None:
        self.alive = False
        self.wake()
        if self._pump is not None and self._pump is not threading.current_thread():
            with contextlib.suppress(queue.Empty):  # unblock a pump waiting on a full queue
                while True:
                    self._queue.get_nowait()
            self._pump.join(PUMP_JOIN)


class BaseNode(RecordPath):
    """The blocking runtime of the mobile-base node on a :class:`RobotConfig`.

    ``start()`` configures and activates the hardware and starts one I/O
    thread: it waits on the port until the next command is due, so odometry
    is handled the moment it arrives and commands leave on schedule;
    ``request()`` sets the velocity (from any thread); ``stop()`` sends the
    safe stop, then closes the link and every sink (last first). The sinks
    (:mod:`bridge.node.sinks`; keywords as :class:`~bridge.node.record_path.RecordPath`)
    run on the I/O thread and should return quickly. A sink slower than the
    stream delays a command by at most one of its calls (a command due
    between two calls goes out first) and builds no backlog: once the
    records of one read have held the sinks for the policy's budget they get
    the newest next, and the records skipped are counted
    (``odometry_dropped`` in :meth:`stats`). Every frame is integrated all the
    same: each record carries the whole pose.
    """

    def init_runtime(self) -> None:
        self._write_lock = threading.Lock()  # one writer at a time on the link
        self._stopping = threading.Event()
        self._session: _Session | None = None
        self._lost: str | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # what ended the node, if not stop()

    # -- public API -------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._session is not None and self._lost is None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def send_now(self) -> None:
        """Send the current command at once, outside the schedule (thread-safe)."""
        session = self._session
        if session is None:
            return
        with self.core_lock:
            frame = self.core.frame(self.clock())
        self._send(session, frame)

    def stats(self) -> dict[str, int]:
        with self.core_lock:
            return {**self.core.stats(), "open_attempts": self.open_attempts,
                    **self.path_stats()}

    def start(self) -> None:
        """Configure (open the link, load calibration), activate (zero velocity), run."""
        hw = self.hardware
        hw.configure()
        try:
            with self.core_lock:
                self.core = BaseNodeCore.from_config(self.config, self.clock(), hw.calibration,
                                                     keep=self.core)
            hw.activate()
        except BaseException:
            hw.shutdown()  # the sinks stay open: stop() closes them, on every path
            raise
        self._session = _Session(hw.link)
        self._thread = threading.Thread(target=self._io_loop, name="base-node", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the I/O thread, send the safe stop (zero velocity), close the link, then
        the sinks (last first; also after a failed start). Idempotent."""
        self._stopping.set()
        session = self._session
        if session is not None:
            session.wake()
        if self._thread is not None:
            self._thread.join()
        self._end_session()
        try:
            self.hardware.shutdown()
        finally:
            self._close_sinks()  # after the safe stop, so the captures hold it

    def run(self, duration: float | None = None) -> None:
        """start(), wait for ``duration`` seconds (None: until interrupted), stop().

        Re-raises what ended the node early (a link that could not come back
        within ``reconnect.attempts``).
        """
        self.start()
        try:
            end = None if duration is None else time.monotonic() + duration
            while self.running:
                left = 0.2 if end is None else min(0.2, end - time.monotonic())
                if left <= 0:
                    break
                self._thread.join(left)  # type: ignore[union-attr]
        finally:
            self.stop()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> BaseNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the I/O thread -----------------------------------------------------------
    def _io_loop(self) -> None:
        clock, core, lock = self.clock, self.core, self.core_lock
        next_check = clock()
        try:
            while not self._stopping.is_set():
                if self._lost is not None:
                    self._handle_loss()
                    if not self._reconnect():
                        return
                    continue
                session = self._session
                assert session is not None
                now = clock()
                if now >= next_check:  # housekeeping at 10 Hz, not per frame
                    next_check = now + HOUSEKEEPING
                    with lock:
                        core.check(now)
                    self._dispatch()
                with lock:
                    wait = core.next_deadline - now
                    frame = core.tick(now) if wait <= 0 else None
                if frame is not None:
                    self._send(session, frame)
                    if core.has_events:
                        self._dispatch()
                    continue
                try:
                    data = session.wait_read(wait if wait < MAX_WAIT else MAX_WAIT)
                except IO_ERRORS as exc:
                    self._mark_lost(session, f"read failed: {exc}")
                    continue
                if data:
                    self.read(data, self._between_records)
        except LinkError as exc:
            self.error = exc
        except Exception as exc:  # reported by run(); the thread must not die silently
            import logging  # here, not at the top: only a failure needs it (start-up time)

            logging.getLogger("fwbridge.bridge").exception("base node I/O loop failed")
            self.error = exc
        finally:
            self._dispatch()

    def _receive(self, data: bytes, now: float) -> list[Odometry]:
        with self.core_lock:
            return self.core.receive(data, now)

    def _drain(self) -> list[NodeEvent]:
        with self.core_lock:
            return self.core.drain_events()

    def _between_records(self) -> None:
        session = self._session
        if session is not None:
            self._send_due(session)  # a command due meanwhile goes out first

    def _send_due(self, session: _Session) -> None:
        """Send the scheduled command if it is due (between slow subscriber calls)."""
        now = self.clock()
        with self.core_lock:
            frame = self.core.tick(now) if now >= self.core.next_deadline else None
        if frame is not None:
            self._send(session, frame)

    def _end_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _mark_lost(self, session: _Session, reason: str) -> None:
        if self._session is session and self._lost is None and session.alive:
            self._lost = reason

    def _send(self, session: _Session, frame: bytes) -> None:
        with self._write_lock:
            if not session.alive:
                return
            try:
                self.hardware.send(frame)
            except LinkLost as exc:
                self._mark_lost(session, str(exc.__cause__ or exc))

    def _handle_loss(self) -> None:
        reason = self._lost or "unknown"
        self._end_session()
        self.hardware.close()
        with self.core_lock:
            self.core.link_lost(self.clock(), reason)
        self._dispatch()

    def _reconnect(self) -> bool:
        """Reopen as the policy says; False when stopping, LinkLost when out of tries."""
        policy, clock = self.policy, self.clock
        delay: float | None = policy.lost(clock())
        while delay is not None and not self._stopping.wait(delay):
            self.open_attempts += 1
            try:
                link = self.hardware.reopen()
            except LinkError as exc:
                delay = policy.failed(clock())
                if delay is None:
                    raise self.give_up(exc) from None
                continue
            attempts = policy.succeeded(clock())
            with self.core_lock:
                zero = self.core.link_restored(clock(), attempts)
            session = _Session(link)
            self._lost = None
            self._session = session
            self._send(session, zero)
            self._dispatch()
            return True
        return False
