"""The shared bus daemon's side of its nodes: each attached client (socket, buffers, afap
state) and the channel that packs each delivery once for all its receivers.

Apart from :mod:`can_bus.daemon` (the loop) and :mod:`can_bus.daemon_bus` (the packets,
bus time) so that each stays small; the daemon is seen here only through
:class:`NodeHost`, so nothing imports back.
"""

from __future__ import annotations

import math
import socket
import time
from collections import Counter, deque
from typing import Any, Protocol

import can

from fwbridge.can_bus.daemon_client import pack_message
from fwbridge.can_bus.model import Event, FrameDelivered, StateChanged
from fwbridge.can_bus.simchannel import Rules, SimChannel, matches
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import (
    FLAG_RX,
    Kind,
    PacketReader,
    frame_flags,
    message_packet,
)

__all__ = ["FAIR_SHARE", "OUT_LIMIT", "QUEUE_BUDGET", "TX_LIMIT", "Client", "DaemonChannel",
           "NodeHost"]

OUT_LIMIT = 8 << 20  # bytes queued for a node that does not read: beyond, its frames drop
TX_LIMIT = 4096  # frames a node may have queued on the bus: beyond, its new ones drop
#: Bytes queued for all nodes together: beyond, frames drop for every node holding more
#: than :data:`FAIR_SHARE` (so idle clients cannot take the daemon's memory, one by one
#: under their own limit, and a node that keeps up still gets every frame).
QUEUE_BUDGET = 64 << 20
FAIR_SHARE = 64 << 10


class NodeHost(Protocol):
    """What a client and the channel need of the daemon."""

    pending: set[Client]  # clients with bytes to send
    held: set[Client]  # clients with frames kept until their end (realtime)
    by_node: dict[int, Client]
    queued: int  # bytes queued for all clients
    queued_peak: int  # the most ever queued at once
    queue_budget: int  # beyond, frames drop for clients holding more than FAIR_SHARE

    def wake(self) -> None: ...


class Client:
    """One attached node: its socket, buffers and afap horizon (None: busy)."""

    def __init__(self, sock: socket.socket, daemon: NodeHost) -> None:
        self.sock = sock
        self.daemon = daemon
        self.inbuf = bytearray()
        self.out = bytearray()
        self.node_id = -1
        self.fd = False
        self.channel: Any = None
        self.receive_own_messages = False
        self.receive_error_frames = False
        self.rx_rules: Rules | None = None
        # afap: "idle" (holds no time), "wait" (blocked on the bus up to ``horizon`` ticks),
        # "busy" (handed a frame while waiting for traffic: time waits for it)
        self.mode = "idle"
        self.horizon = math.inf
        self.busy_since = 0.0  # monotonic time it became busy
        self.not_listening = False  # held bus time past the daemon's hold limit
        self.dropped = 0  # deliveries dropped: it did not read
        self.tx_dropped = 0  # frames of its own dropped: it queued more than TX_LIMIT
        self.reader = PacketReader("daemon")
        self.name = ""
        self.writing = False  # the loop watches its socket for room (bytes left over)
        self.hold = False  # realtime: it holds frames until their end itself (its hello)
        self.lockstep = True  # afap: a frame handed to it holds bus time (its hello)
        # realtime: its frame's timestamp + offset = the monotonic time the frame ends
        self.offset: float | None = None
        self.later: deque[tuple[float, bytes]] = deque()  # (monotonic end, packet)

    @property
    def label(self) -> str:
        return f"{self.name or 'node'} (node {self.node_id})"

    def hand(self) -> None:
        """It has a frame to work on while waiting for traffic: bus time waits for it."""
        if self.mode == "wait" and self.horizon == math.inf and self.lockstep:
            self.mode = "busy"
            self.busy_since = time.monotonic()

    def queue(self, data: bytes, frame: bool = False) -> None:
        """Bytes for it. A frame drops (counted) when it holds more than :data:`OUT_LIMIT`,
        or more than :data:`FAIR_SHARE` while all clients together hold more than the
        daemon's budget; answers (done, replies) drop only past :data:`OUT_LIMIT`."""
        held = len(self.out)
        daemon = self.daemon
        if held > OUT_LIMIT or (frame and held > FAIR_SHARE
                                and daemon.queued > daemon.queue_budget):
            self.dropped += 1
            return
        self.out += data
        queued = daemon.queued = daemon.queued + len(data)
        if queued > daemon.queued_peak:
            daemon.queued_peak = queued
        daemon.pending.add(self)

    def error_packet(self, why: str) -> bytes:
        return bus_wire.pack_json(Kind.ERROR, {"error": why})

    def put(self, pkt: bytes, timestamp: float) -> None:
        """A frame packet for it: now, or (realtime, a node that does not hold frames itself)
        once the frame has ended on the wall clock."""
        self.hand()
        if self.offset is not None and not self.hold:
            due = timestamp + self.offset
            if self.later or due > time.monotonic():  # after those kept: order holds
                self.later.append((due, pkt))
                self.daemon.held.add(self)
                return
        self._put_packed(pkt)

    def release(self, now: float) -> None:
        """Hand over the frames kept for it that have ended by ``now``."""
        later = self.later
        while later and later[0][0] <= now:
            self._put_packed(later.popleft()[1])

    def _put_packed(self, pkt: bytes) -> None:
        self.queue(pkt, frame=True)

    # the channel's endpoint protocol
    def deliver(self, msg: can.Message) -> None:
        self.put(bus_wire.pack(Kind.MESSAGE, pack_message(msg)), msg.timestamp)

    def state_changed(self, event: StateChanged) -> None:
        pass


class DaemonChannel(SimChannel):
    """The bus model, telling each node when its own frames are done. Frames are packed
    once for all their receivers (no ``can.Message`` in between); error frames and state
    changes take the channel's own path."""

    daemon: NodeHost

    def dispatch(self, events: list[Event]) -> None:
        others = [ev for ev in events if type(ev) is not FrameDelivered]
        if others:
            super().dispatch(others)
        done: Counter[int] = Counter()
        eps, epoch, rate = self.endpoints, self.epoch, self.model.tick_rate
        for ev in events:
            if type(ev) is not FrameDelivered:
                continue
            done.update(ev.transmitters)
            can_id, ext, rtr, dlc, data, is_fd, brs, esi = ev.frame
            if is_fd:
                dlc = len(data)
            flags = frame_flags(extended=ext, remote=rtr, fd=is_fd, brs=brs, esi=esi)
            ts = epoch + ev.time / rate
            pkt = message_packet(ts, can_id, flags | FLAG_RX, dlc, data)
            for rid in ev.receivers:
                ep = eps.get(rid)
                if ep is not None and (not is_fd or ep.fd) and (
                        ep.rx_rules is None or matches(ep.rx_rules, can_id, ext)):
                    ep.put(pkt, ts)  # type: ignore[attr-defined]
            for tid in ev.transmitters:
                ep = eps.get(tid)
                if ep is not None and ep.receive_own_messages and (
                        ep.rx_rules is None or matches(ep.rx_rules, can_id, ext)):
                    ep.put(message_packet(  # type: ignore[attr-defined]
                        ts, can_id, flags, dlc, data), ts)
        for nid, k in done.items():
            client = self.daemon.by_node.get(nid)
            if client is not None:
                client.queue(bus_wire.pack_done(k))
        if events and self.afap:
            self.daemon.wake()  # the loop runs the bus on (realtime: it flushes after this)
