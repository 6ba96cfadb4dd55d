"""The asyncio runtime of the mobile-base node, through pyserial-asyncio.

Same :class:`~bridge.node.base_node.BaseNodeCore`, same
:class:`~bridge.node.hardware.LinkHardware` lifecycle and the same reconnection
policy as the blocking :class:`~bridge.node.base_node.BaseNode`; only the I/O
differs: the event loop polls the link's file descriptor (so: devices and
ptys, not descriptor-less URL handlers) and one task keeps the command
schedule.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import serial_asyncio

from fwbridge.bridge.link.transports import LinkError, LinkLost, check_pollable
from fwbridge.bridge.node.base_core import (
    SUBSCRIBER_BUDGET,
    BaseNodeCore,
    NodeEvent,
    log_event,
    paced,
)
from fwbridge.bridge.node.base_node import MAX_WAIT, node_hardware
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.hardware import LifecycleState, LinkHardware
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.record.serial_pcapng import RX, ByteSink

__all__ = ["AsyncBaseNode"]

log = logging.getLogger("fwbridge.bridge")


class _LinkProtocol(asyncio.Protocol):
    def __init__(self, node: AsyncBaseNode) -> None:
        self.node = node
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.node._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)


class AsyncBaseNode:
    """The mobile-base node on an asyncio event loop.

    ``await node.run(duration)`` runs the whole lifecycle; ``request()`` and
    ``stop()`` are called from the same loop.
    """

    def __init__(
        self,
        config: RobotConfig,
        *,
        on_odometry: Callable[[Odometry], Any] | None = None,
        on_event: Callable[[NodeEvent], Any] | None = log_event,
        clock: Callable[[], float] = time.monotonic,
        capture: ByteSink | None = None,
        hardware: LinkHardware | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.capture = capture
        self.hardware = node_hardware(config, capture, hardware)
        self.on_odometry = on_odometry
        self.on_event = on_event
        self.core = BaseNodeCore.from_config(config, clock())
        self.open_attempts = 0
        self.odometry_dropped = 0  # records a slow subscriber skipped (all were integrated)
        self._stopping = False
        self._stopped = asyncio.Event()  # wakes a reconnect back-off early

    def request(self, vx: float, vy: float, wz: float) -> None:
        self.core.request(vx, vy, wz, self.clock())

    def stop(self) -> None:
        """Ask :meth:`run` to finish (safe stop, close) within one scheduling step."""
        self._stopping = True
        self._stopped.set()

    def _on_data(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.write(RX, data)
        records = self.core.receive(data, self.clock())
        if self.on_odometry is None:
            return
        # As BaseNode: a slow subscriber blocks the loop, so it gets the newest
        # record once over budget, and the command schedule keeps its rate.
        for record, skipped in paced(records, SUBSCRIBER_BUDGET, time.monotonic):
            self.odometry_dropped += skipped
            try:
                self.on_odometry(record)
            except Exception:  # a subscriber's bug must not stop odometry
                log.exception("odometry callback failed")

    def _dispatch(self) -> None:
        for event in self.core.drain_events():
            if self.on_event is not None:
                try:
                    self.on_event(event)
                except Exception:
                    log.exception("event callback failed")

    async def run(self, duration: float | None = None) -> None:
        """Configure, activate, drive commands and odometry, reconnect; then safe stop."""
        hw = self.hardware
        hw.configure()
        try:
            check_pollable(hw.link)
            self.core = BaseNodeCore.from_config(self.config, self.clock(), hw.calibration)
            hw.activate()
        except BaseException:
            hw.shutdown()
            raise
        loop = asyncio.get_running_loop()
        end = None if duration is None else loop.time() + duration
        proto: _LinkProtocol | None = None
        transport: Any = None
        try:
            while True:
                transport, proto = await serial_asyncio.connection_for_serial(
                    loop, lambda: _LinkProtocol(self), hw.link
                )
                hw.redirect(transport.write)
                reason = await self._drive(proto, end)
                if reason is None:
                    break
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
                try:
                    self.hardware.send(core.tick(now))
                except LinkLost as exc:
                    return str(exc)
                wait = core.next_deadline - now
            core.check(now)
            self._dispatch()
            await asyncio.sleep(min(max(wait, 0.0), MAX_WAIT))
        return None

    async def _reconnect(self, end: float | None) -> bool:
        cfg = self.config
        loop = asyncio.get_running_loop()
        delay = cfg.reconnect_min_delay
        attempts = 0
        while not self._stopping and (end is None or loop.time() < end):
            try:
                await asyncio.wait_for(self._stopped.wait(), delay)
                return False
            except asyncio.TimeoutError:
                pass
            attempts += 1
            self.open_attempts += 1
            try:
                self.hardware.reopen()
                check_pollable(self.hardware.link)
            except LinkError as exc:
                if cfg.reconnect_attempts and attempts >= cfg.reconnect_attempts:
                    self.core.report(
                        self.clock(), "gave-up", f"gave up after {attempts} attempts: {exc}"
                    )
                    self._dispatch()
                    raise LinkLost(f"{cfg.link_url}: gave up reconnecting: {exc}") from None
                delay = min(delay * 2, cfg.reconnect_max_delay)
                continue
            zero = self.core.link_restored(self.clock(), attempts)
            self._dispatch()
            try:
                self.hardware.send(zero)  # blocking write: the transport is not attached yet
            except LinkLost:
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
            hw.redirect(None)
            hw.shutdown()
            self._dispatch()
