"""The shared bus daemon's bus side: the packets its nodes send, acted on under the
channel's lock, and bus time driven — realtime up to the wall clock, afap while every
attached node waits on it, up to the earliest horizon one asked for.

:class:`DaemonBus` holds the bus and its nodes; :class:`~can_bus.daemon.BusDaemon`
adds the sockets, the loop and the bus's description file. Every packet reaching
:meth:`DaemonBus.handle` has passed :mod:`protocols.bus_wire`'s checks; what a node may
not do raises :class:`ProtocolViolation` (the daemon then drops it).
"""

from __future__ import annotations

import math
import socket
import sys
import time
import traceback
from typing import Any

import can

from fwbridge.can_bus.bits import Frame, stuffed_length
from fwbridge.can_bus.daemon_client import unpack_message
from fwbridge.can_bus.daemon_nodes import TX_LIMIT, Client, DaemonChannel
from fwbridge.can_bus.simchannel import compile_filters, make_frame
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import FLAG_EXT, FLAG_RX, Kind
from fwbridge.protocols.errors import CanError, ConfigError

__all__ = ["HOLD_LIMIT", "DaemonBus", "ProtocolViolation"]

HOLD_LIMIT = 5.0  # s a node may hold afap bus time: beyond, it is treated as not listening


class ProtocolViolation(CanError, ValueError):
    """A client that does not speak the daemon's protocol: it is disconnected."""


class DaemonBus:
    """The bus of a daemon and its attached nodes. Its methods run in the daemon's one
    thread, with the channel's lock held (but :meth:`_timeout`: how long the loop waits)."""

    def __init__(self, name: str, bitrate: int, data_bitrate: int | None, pacing: str,
                 hold_limit: float) -> None:
        self.name = name
        # realtime: the loop itself runs the bus at each frame's end (no driver thread to
        # hand the frames over)
        self.ch = DaemonChannel(name, bitrate, pacing, data_bitrate=data_bitrate, drive=False)
        self.by_node: dict[int, Client] = {}
        self.clients: dict[socket.socket, Client] = {}
        self.held: set[Client] = set()
        self.hold_limit = hold_limit
        self.bugs = 0  # exceptions a client's packets met (each printed; the client dropped)

    # -- bus time -------------------------------------------------------------------------------
    def _timeout(self) -> float:
        """Seconds the loop may wait for its sockets before the bus needs it again."""
        if not self.ch.afap:  # until the next frame starts, or a kept frame ends
            model, now = self.ch.model, time.monotonic()
            nxt = model.next_event_time()
            t = 0.5 if nxt is None else self.ch.t0 + model.seconds(nxt) - now
            for c in self.held:
                if c.later:
                    t = min(t, c.later[0][0] - now)
            return min(0.5, max(0.0, t))
        busy = [c.busy_since for c in self.clients.values() if c.mode == "busy"]
        if not busy:
            return 0.5
        return max(0.01, min(0.5, min(busy) + self.hold_limit - time.monotonic()))

    def _drive(self) -> None:
        """Realtime: bring the bus up to the wall clock and hand out what happened, and the
        frame now on the wire too: its outcome is settled as it starts, and nodes that
        hold frames until their end (every fwbridge node) get it at once, so it reaches
        them while it is still on the wire instead of after one more wake-up here. An
        input that arrives meanwhile (a frame, a fault, a node) takes effect at the end
        of that frame, within the wall clock's own jitter."""
        try:
            self.ch.sync()
            model = self.ch.model
            end = model.flight_end
            if end is not None:
                self.ch.dispatch(model.run_until(end))
        except Exception as exc:  # a bug: the bus goes on (as a channel's driver thread does)
            self.bugs += 1
            print(f"fwbridge bus {self.name}: delivering frames failed: {exc!r}",
                  file=sys.stderr)
            traceback.print_exc(file=sys.stderr)

    def _release(self, now: float) -> None:
        """Realtime: hand over the kept frames that have ended (nodes that do not hold)."""
        for c in list(self.held):
            c.release(now)
            if not c.later:
                self.held.discard(c)

    def _expire(self, now: float) -> None:
        """A node that holds bus time past the limit (asleep, or stuck) no longer holds it:
        it is treated as not listening until it waits on the bus again."""
        for c in self.clients.values():
            if c.mode == "busy" and now - c.busy_since > self.hold_limit:
                c.mode = "idle"
                c.not_listening = True

    # -- packets --------------------------------------------------------------------------------
    def handle(self, client: Client, kind: Kind, body: bytes) -> None:
        ch = self.ch
        model = ch.model
        if kind is Kind.SEND:
            _, can_id, flags, dlc, data = bus_wire.unpack_message(body)  # checked first
            if client.node_id < 0:
                raise ProtocolViolation("a frame before the hello")
            if model.outstanding(client.node_id) >= TX_LIMIT:
                client.tx_dropped += 1  # it sends faster than the bus: the new frame drops
                client.queue(bus_wire.pack_done(1))
                return
            if flags & ~(FLAG_EXT | FLAG_RX) == 0 and dlc == len(data):  # a classic data frame
                frame = Frame(can_id, bool(flags & FLAG_EXT), False, dlc, data)  # (<= 8 bytes)
                if ch.afap:  # its length now, while bus time may wait on a node: a look-up
                    stuffed_length(frame)  # at its start (cached per frame)
            else:
                frame = make_frame(unpack_message(body), client.fd)
            self.submit(client, frame)
        elif kind is Kind.WAIT:
            t = bus_wire.parse_wait(body)
            client.mode = "wait"
            client.not_listening = False
            client.horizon = math.inf if math.isinf(t) else float(model.bits(t))
        elif kind is Kind.IDLE:
            client.mode = "idle"
            client.not_listening = False
        elif kind is Kind.HELLO:
            hello = bus_wire.parse_hello(body)
            try:
                self._hello(client, hello)
            except ConfigError as exc:  # a node of another bus: it is told, and goes
                client.queue(bus_wire.pack_json(Kind.WELCOME, {"error": str(exc)}))
        elif kind is Kind.CALL:
            req = bus_wire.parse_call(body)
            try:
                reply = {"id": req.id, "result": self._call(client, req)}
            except (ValueError, KeyError, TypeError, can.CanError) as exc:
                reply = {"id": req.id, "error": str(exc)}
            client.queue(bus_wire.pack_json(Kind.REPLY, reply))
        else:
            raise ProtocolViolation(f"packet kind {kind.name} goes to nodes, not to the daemon")

    def _hello(self, client: Client, req: bus_wire.Hello) -> None:
        ch = self.ch
        if client.node_id >= 0:
            raise ProtocolViolation("hello twice")
        for key, want, have in (("bitrate", req.bitrate, ch.bitrate),
                                ("data_bitrate", req.data_bitrate, ch.data_bitrate)):
            if want is not None and want != have:
                option = "--bitrate" if key == "bitrate" else "--data-bitrate"
                raise ConfigError(
                    f"bus {self.name} runs at {have} bit/s ({key}), not {want}: ask for {have}"
                    f" (or no rate: a node takes the bus's), or restart the bus at {want}"
                    f" ('fwbridge can bus down {self.name}; fwbridge can bus up {self.name}"
                    f" {option} {want}')")
        if req.pacing not in (None, ch.pacing):
            raise ConfigError(
                f"bus {self.name} is paced {ch.pacing}, not {req.pacing}: leave the pacing"
                f" out (a node takes the bus's), or restart the bus ('fwbridge can bus down"
                f" {self.name}; fwbridge can bus up {self.name} --pacing {req.pacing}')")
        nid = self.attach(client, req)
        client.queue(bus_wire.pack_json(Kind.WELCOME, {
            "node_id": nid, "bitrate": ch.bitrate, "data_bitrate": ch.data_bitrate,
            "pacing": ch.pacing, "epoch": ch.epoch, "t0": ch.t0}))

    def attach(self, client: Client, req: bus_wire.Hello) -> int:
        """Make ``client`` a node of the bus (lock held)."""
        ch = self.ch
        ch.sync()
        ch.users += 1
        client.name = req.name or f"{self.name}.{ch.users}"
        nid = ch.model.add_node(client.name, auto_recovery=req.auto_recovery,
                                listen_only=req.listen_only, fifo=req.fifo)
        client.node_id = nid
        client.fd = req.fd
        client.receive_own_messages = req.receive_own_messages
        client.receive_error_frames = req.receive_error_frames
        client.hold = req.hold
        client.lockstep = req.lockstep
        if not ch.afap:
            client.offset = ch.t0 - ch.epoch
        ch.endpoints[nid] = client
        self.by_node[nid] = client
        return nid

    def submit(self, client: Client, frame: Frame) -> None:
        """Queue a node's frame at the current bus time (lock held)."""
        if not self.ch.afap:
            self.ch.sync()
        self.ch.model.submit(client.node_id, frame)
        self.ch.kick()

    def _call(self, client: Client, call: bus_wire.Call) -> Any:
        ch, op, nid, req = self.ch, call.op, client.node_id, call.args
        model = ch.model
        if op == "bus_time":
            return ch.bus_time()
        if op == "stats":
            return ch.stats()
        if op == "endpoints":
            return sorted(ch.endpoints)
        if nid < 0:
            raise ProtocolViolation("no hello yet")
        if not ch.afap:
            ch.sync()
        node = model.node(nid)
        if op == "state":
            return {"state": node.state.name, "listen_only": node.listen_only, "tec": node.tec,
                    "rec": node.rec, "stalled": node.stalled, "outstanding": model.outstanding(nid)}
        if op == "filters":
            client.rx_rules = compile_filters(req.get("filters"))
        elif op == "own":
            client.receive_own_messages = bool(req.get("flag"))
        elif op == "flush":
            n = len(node.tx)
            model.flush(nid)
            if n:
                client.queue(bus_wire.pack_done(n))
        elif op == "set_state":
            model.set_listen_only(nid, bool(req.get("listen_only")))
            if not req.get("listen_only"):
                model.request_recovery(nid)
        elif op == "inject":
            model.set_faults(nid, bit_error_rate=req["bit_error_rate"],
                             stuck_dominant=req["stuck_dominant"],
                             disconnected=req["disconnected"], seed=req["seed"])
            ch.kick()
        elif op == "recover":
            model.request_recovery(nid)
            ch.kick()
        else:
            raise ProtocolViolation(f"unknown call {op!r}")
        return None

    # -- afap: bus time moves while every node waits ---------------------------------------------
    def _advance(self) -> None:
        """Run the bus while some node waits on it and none is busy with a frame, in batches
        of 64 events as an in-process afap bus runs, up to the earliest horizon."""
        ch, model = self.ch, self.ch.model
        clients = [c for c in self.clients.values() if c.node_id >= 0]
        for _ in range(64):
            if any(c.mode == "busy" for c in clients):
                return
            waiting = [c for c in clients if c.mode == "wait"]
            if not waiting:
                return
            h = min(c.horizon for c in waiting)
            nxt = model.next_event_time()
            if nxt is None or nxt > h:
                if math.isinf(h):
                    return  # they wait for traffic and none will come
                ch.dispatch(model.run_until(int(h)))
                for c in waiting:
                    if c.horizon <= h:
                        c.mode = "busy"
                        c.busy_since = time.monotonic()
                        c.queue(bus_wire.pack(Kind.REACHED))
                return
            ch.dispatch(model.run_idle_until(int(h) if not math.isinf(h) else 1 << 62, 64))
