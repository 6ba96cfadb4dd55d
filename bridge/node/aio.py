"""The asyncio runtime of the mobile-base node, through pyserial-asyncio.

Same :class:`~bridge.node.base_node.BaseNodeCore`, same
:class:`~bridge.node.hardware.LinkHardware` lifecycle, the same sinks and the same
:class:`~bridge.node.backoff.LinkPolicy` (one :class:`~bridge.node.record_path.RecordPath`)
as the blocking :class:`~bridge.node.base_node.BaseNode`; only the I/O
differs: the event loop polls the link's file descriptor (so: devices and
ptys, not descriptor-less URL handlers) and one task keeps the command
schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import serial_asyncio

from fwbridge.bridge.link.transports import LinkError, LinkLost, check_pollable
from fwbridge.bridge.node.base_core import BaseNodeCore, NodeEvent
from fwbridge.bridge.node.base_node import MAX_WAIT
from fwbridge.bridge.node.hardware import LifecycleState
from fwbridge.bridge.node.record_path import RecordPath

__all__ = ["AsyncBaseNode"]


class _LinkProtocol(asyncio.Protocol):
    def __init__(self, node: AsyncBaseNode) -> None:
        self.node = node
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.node._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)


class AsyncBaseNode(RecordPath):
    """The mobile-base node on an asyncio event loop.

    ``await node.run(duration)`` runs the whole lifecycle and closes every sink
    at its end (last first, after the safe stop); ``stop()`` is called from
    the same loop. ``request()`` and ``send_now()`` may come from any thread
    (a ROS 2 sink's ``cmd_vel``). Sinks and keywords as :class:`BaseNode`'s.
    """

    def init_runtime(self) -> None:
        self._stopping = False
        self._stopped = asyncio.Event()  # wakes a reconnect back-off early
        self._loop: asyncio.AbstractEventLoop | None = None
        self._linked = False

    @property
    def connected(self) -> bool:
        return self._linked

    def send_now(self) -> None:
        """Send the current command at once, outside the schedule (from any thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._send_now)

    def _send_now(self) -> None:
        if self._linked:
            with self.core_lock:
                frame = self.core.frame(self.clock())
            with contextlib.suppress(LinkLost):  # the drive loop sees the loss itself
                self.hardware.send(frame)

    def stats(self) -> dict[str, int]:
        with self.core_lock:
            return {**self.core.stats(), "open_attempts": self.open_attempts,
                    **self.path_stats()}

    def stop(self) -> None:
        """Ask :meth:`run` to finish (safe stop, close) within one scheduling step."""
        self._stopping = True
        self._stopped.set()

    def _drain(self) -> list[NodeEvent]:
        with self.core_lock:  # a request from another thread may be adding "resumed"
            return self.core.drain_events()

    def _on_data(self, data: bytes) -> None:
        # As BaseNode: a slow sink blocks the loop, so it gets the newest
        # record once over budget, and the command schedule keeps its rate.
        self.read(data)

    async def run(self, duration: float | None = None) -> None:
        """Configure, activate, drive commands and odometry, reconnect; then safe stop."""
        hw = self.hardware
        try:
            hw.configure()
            check_pollable(hw.link)
            self.core = BaseNodeCore.from_config(self.config, self.clock(), hw.calibration,
                                                 keep=self.core)
            hw.activate()
        except BaseException:
            try:
                hw.shutdown()
            finally:
                self._close_sinks()
            raise
        loop = self._loop = asyncio.get_running_loop()
        end = None if duration is None else loop.time() + duration
        proto: _LinkProtocol | None = None
        transport: Any = None
        try:
            while True:
                transport, proto = await serial_asyncio.connection_for_serial(
                    loop, lambda: _LinkProtocol(self), hw.link
                )
                hw.redirect(transport.write)
                self._linked = True
                reason = await self._drive(proto, end)
                if reason is None:
                    break
                self._linked = False
                hw.redirect(None)
                if not transport.is_closing():  # usually pyserial-asyncio closed it already
                    transport.abort()
                transport = proto = None
                hw.close()
                self.core.link_lost(self.clock(), reason)
                self._dispatch()
                if not await self._reconnect(end):
                    break
        finally:
            await self._finish(transport, proto)

    async def _drive(self, proto: _LinkProtocol, end: float | None) -> str | None:
        """Commands on schedule until stopped (None) or the link is lost (the reason)."""
        loop = asyncio.get_running_loop()
        core = self.core
        while not self._stopping and (end is None or loop.time() < end):
            if proto.closed.done():
                exc = proto.closed.result()
                return f"read failed: {exc}" if exc else "closed"
            now = self.clock()
            wait = core.next_deadline - now
            if wait <= 0:
                with self.core_lock:
                    frame = core.tick(now)
                try:
                    self.hardware.send(frame)
                except LinkLost as exc:
                    return str(exc)
                wait = core.next_deadline - now
            with self.core_lock:
                core.check(now)
            self._dispatch()
            await asyncio.sleep(min(max(wait, 0.0), MAX_WAIT))
        return None

    async def _reconnect(self, end: float | None) -> bool:
        """Reopen as the policy says; False when stopping or out of time."""
        policy, clock = self.policy, self.clock
        loop = asyncio.get_running_loop()
        delay: float | None = policy.lost(clock())
        while delay is not None and not self._stopping and (end is None or loop.time() < end):
            try:
                await asyncio.wait_for(self._stopped.wait(), delay)
                return False
            except asyncio.TimeoutError:
                pass
            self.open_attempts += 1
            try:
                self.hardware.reopen()
                check_pollable(self.hardware.link)
            except LinkError as exc:
                delay = policy.failed(clock())
                if delay is None:
                    lost = self.give_up(exc)
                    self._dispatch()
                    raise lost from None
                continue
            attempts = policy.succeeded(clock())
            with self.core_lock:
                zero = self.core.link_restored(clock(), attempts)
            self._dispatch()
            try:
                self.hardware.send(zero)  # blocking write: the transport is not attached yet
            except LinkLost:
                delay = policy.lost(clock())
                continue
            return True
        return False

    async def _finish(self, transport: Any, proto: _LinkProtocol | None) -> None:
        """Safe stop through the transport, close it, then the lifecycle's cleanup."""
        hw = self.hardware
        try:
            if hw.state is LifecycleState.ACTIVE:
                hw.deactivate()  # the zero frame goes out through the transport if attached
            if transport is not None and proto is not None:
                transport.close()  # flushes the safe-stop frame, then closes the port
                try:
                    await asyncio.wait_for(asyncio.shield(proto.closed), 1.0)
                except asyncio.TimeoutError:
                    transport.abort()
        finally:
            self._linked = False
            hw.redirect(None)
            try:
                hw.shutdown()
            finally:
                self._close_sinks()  # after the safe stop, so the captures hold it
