"""The shared simulated bus: one process owns the bus model and bus time, nodes anywhere
on the machine attach through a Unix socket (``fwbridge can bus up NAME``).

One owner of bus time: every node's frames go to this process, which
arbitrates, times and confines them exactly as in one process (it runs the
same :class:`~can_bus.simchannel.SimChannel`) and sends each node its
deliveries, stamped in bus time. Realtime pacing: the channel's driver
thread follows the wall clock. Afap pacing: the bus runs only while every
attached node waits on it (see :mod:`can_bus.remote`), one instant at
a time, up to the earliest horizon a node asked for (``advance_to``).

The socket lives in the user's private runtime directory, never on the
network; a JSON file beside it describes the bus for ``bus list``.

A socket is an interface: every packet is checked (:mod:`protocols.bus_wire`)
before it is acted on; a client that breaks the protocol gets an error packet
and is dropped, and no client can kill the daemon, hold afap bus time for
longer than ``hold_limit`` seconds, or queue more than :data:`TX_LIMIT` frames; the
bytes waiting for all clients together are held to ``queue_budget``
(:data:`~can_bus.daemon_nodes.FAIR_SHARE` each beyond it), and at most ``max_clients``
socketcand clients are served.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import can

from fwbridge.can_bus.bits import Frame, stuffed_length
from fwbridge.can_bus.daemon_client import (
    daemon_info,
    runtime_dir,
    unpack_message,
    valid_name,
)
from fwbridge.can_bus.daemon_nodes import (
    FAIR_SHARE,
    QUEUE_BUDGET,
    TX_LIMIT,
    Client,
    DaemonChannel,
)
from fwbridge.can_bus.simchannel import compile_filters, make_frame
from fwbridge.can_bus.socketcand import TextClient
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import FLAG_EXT, FLAG_RX, Kind
from fwbridge.protocols.errors import CanError, ConfigError

__all__ = ["BusDaemon", "serve", "stop_daemon"]

HOLD_LIMIT = 5.0  # s a node may hold afap bus time: beyond, it is treated as not listening
MAX_CLIENTS = 16  # socketcand clients served at once: beyond, one more is refused
SOCKETCAND_SNDBUF = 128 << 10  # a socketcand client's kernel send buffer (Linux doubles it)


class ProtocolViolation(CanError, ValueError):
    """A client that does not speak the daemon's protocol: it is disconnected."""


class BusAlreadyUp(CanError, OSError):
    """``bus up`` for a name whose daemon already answers."""


class BusDaemon:
    """The daemon's state; :meth:`run` is its loop (one thread, plus the realtime driver)."""

    def __init__(self, name: str, *, bitrate: int = 500_000, data_bitrate: int | None = None,
                 pacing: str = "realtime", socketcand: int | None = None,
                 hold_limit: float = HOLD_LIMIT, max_clients: int = MAX_CLIENTS,
                 queue_budget: int = QUEUE_BUDGET) -> None:
        if not valid_name(name):
            raise ConfigError(f"bus name {name!r}: letters, digits, '_', '.', '-' (1..64)")
        if not 1 <= max_clients <= 1000:
            raise ConfigError(f"max clients {max_clients}: 1..1000")
        if not 1 << 16 <= queue_budget <= 1 << 34:
            raise ConfigError(f"queue budget {queue_budget} bytes: 64 KiB..16 GiB")
        self.name = name
        # realtime: the loop itself runs the bus at each frame's end (no driver thread to
        # hand the frames over), so it waits in select(), whose timeout is in microseconds
        # (epoll's and poll's are in milliseconds); clients are refused past its fd limit
        self.ch = DaemonChannel(name, bitrate, pacing, data_bitrate=data_bitrate, drive=False)
        self.ch.daemon = self
        self.by_node: dict[int, Client] = {}
        self.clients: dict[socket.socket, Client] = {}
        self.pending: set[Client] = set()
        self.held: set[Client] = set()
        self.sel: selectors.BaseSelector = (
            selectors.DefaultSelector() if self.ch.afap else selectors.SelectSelector())
        d = runtime_dir(create=True)  # first: it refuses where there are no Unix sockets
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stop = False
        self.path = d / f"{name}.sock"
        self.info_path = d / f"{name}.json"
        self.srv: socket.socket | None = None
        self.socketcand_port = socketcand  # None: no socketcand endpoint; 0: any free port
        self.tcp: socket.socket | None = None
        self.hold_limit = hold_limit
        self.max_clients = max_clients  # socketcand clients at once
        self.queue_budget = queue_budget
        self.queued = 0  # bytes queued for all clients (their ``out``)
        self.queued_peak = 0
        self.refused = 0  # socketcand connections refused: too many, or the budget spent
        self.bugs = 0  # exceptions a client's packets met (each printed; the client dropped)
        self.info: dict[str, Any] = {}
        self._reported: tuple[Any, ...] = ((), ())
        self._report_at = 0.0
        self._look_at = 0.0

    # -- life ---------------------------------------------------------------------------------
    def open(self) -> None:
        if daemon_info(self.name) is not None:
            raise BusAlreadyUp(f"bus {self.name} is already up")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket: its daemon is gone
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            srv.bind(str(self.path))
        finally:
            os.umask(old)
        srv.listen(64)
        srv.setblocking(False)
        self.srv = srv
        self.sel.register(srv, selectors.EVENT_READ)
        self.sel.register(self._wake_r, selectors.EVENT_READ)
        info = {"name": self.name, "pid": os.getpid(), "bitrate": self.ch.bitrate,
                "data_bitrate": self.ch.data_bitrate, "pacing": self.ch.pacing,
                "socket": str(self.path)}
        if self.socketcand_port is not None:  # asked for: loopback only
            tcp = socket.create_server(("127.0.0.1", self.socketcand_port))
            tcp.setblocking(False)
            self.tcp = tcp
            self.sel.register(tcp, selectors.EVENT_READ)
            self.socketcand_port = tcp.getsockname()[1]
            info["socketcand"] = f"127.0.0.1:{self.socketcand_port}"
            info["max_clients"] = self.max_clients
        info["queue_budget"] = self.queue_budget
        self.info = info
        self._write_info()

    def _write_info(self) -> None:
        tmp = self.info_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.info))
        tmp.replace(self.info_path)

    def _report(self, now: float) -> None:
        """Say in the bus's description which nodes are treated as not listening and which
        lost frames, the bytes queued for the clients (now and at most) and the socketcand
        connections refused (rewritten when that changes, at most once a second for the
        counts); looked at every 50 ms, not at each turn of the loop (a turn per frame)."""
        if now < self._look_at:
            return
        self._look_at = now + 0.05
        deaf = tuple(sorted(c.label for c in self.clients.values() if c.not_listening))
        dropped = tuple(sorted((c.label, c.tx_dropped + c.dropped)
                               for c in self.clients.values() if c.tx_dropped or c.dropped))
        key = (deaf, dropped, self.queued, self.queued_peak, self.refused)
        if key == self._reported or (deaf == self._reported[0] and now < self._report_at):
            return
        self._reported, self._report_at = key, now + 1.0
        self.info = {k: v for k, v in self.info.items() if k not in ("not_listening", "dropped")}
        if deaf:
            self.info["not_listening"] = list(deaf)
        if dropped:
            self.info["dropped"] = dict(dropped)
        self.info.update(queued=self.queued, queued_peak=self.queued_peak,
                         refused=self.refused)
        with contextlib.suppress(OSError):
            self._write_info()

    def close(self) -> None:
        for client in list(self.clients.values()):
            self._drop(client)
        if self.tcp is not None:
            with contextlib.suppress(OSError):
                self.tcp.close()
        if self.srv is not None:
            with contextlib.suppress(OSError):
                self.srv.close()
            for p in (self.path, self.info_path):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        self.ch.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.sel.close()

    def stop(self) -> None:
        self._stop = True
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def run(self, ready: Callable[[], None] | None = None) -> None:
        if ready is not None:
            ready()
        while not self._stop:
            for key, events in self.sel.select(timeout=self._timeout()):
                obj = key.fileobj
                if obj is self.srv or (obj is self.tcp and obj is not None):
                    self._accept(obj)
                elif obj == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                else:
                    client = self.clients.get(obj)  # type: ignore[call-overload]
                    if client is None:
                        continue
                    if events & selectors.EVENT_READ:
                        self._read(client)
                    if events & selectors.EVENT_WRITE:
                        self.pending.add(client)
            with self.ch.lock:
                if self.ch.afap:
                    self._expire(time.monotonic())
                    self._advance()
                else:
                    self._drive()
                    self._release(time.monotonic())
                self._flush()
            self._report(time.monotonic())

    def _timeout(self) -> float:
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

    # -- connections ----------------------------------------------------------------------------
    def _accept(self, srv: socket.socket) -> None:
        try:
            sock, _ = srv.accept()
        except OSError:
            return
        sock.setblocking(False)
        if not self.ch.afap and sock.fileno() >= 1000:  # select()'s limit (FD_SETSIZE)
            sock.close()
            return
        if srv is self.tcp:
            why = self._too_many()
            if why:
                self.refused += 1
                with contextlib.suppress(OSError):
                    sock.send(f"< error {why} >".encode())
                sock.close()
                return
            # a fixed kernel buffer (no autotuning up to megabytes): what a client that does
            # not read holds stays in the daemon's queue, where the budget sees it
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKETCAND_SNDBUF)
            client: Client = TextClient(sock, self)
        else:
            client = Client(sock, self)
        self.clients[sock] = client
        self.sel.register(sock, selectors.EVENT_READ)

    def _too_many(self) -> str:
        """Why one more socketcand client is refused ("": it is not)."""
        served = sum(1 for c in self.clients.values() if isinstance(c, TextClient))
        if served >= self.max_clients:
            return f"too many clients: {served} served, at most {self.max_clients}"
        if self.queued + FAIR_SHARE > self.queue_budget:  # no room for its share
            return (f"busy: {self.queued} bytes queued for clients that do not read,"
                    f" the budget is {self.queue_budget}")
        return ""

    def _drop(self, client: Client) -> None:
        if client.sock in self.clients:
            self.queued -= len(client.out)  # its unsent bytes go with it
            client.out.clear()
        self.clients.pop(client.sock, None)
        self.pending.discard(client)
        self.held.discard(client)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(client.sock)
        with contextlib.suppress(OSError):
            client.sock.close()
        if client.node_id >= 0:
            with self.ch.lock:
                self.by_node.pop(client.node_id, None)
                self.ch.endpoints.pop(client.node_id, None)
                self.ch.model.remove_node(client.node_id)
                self.ch.users -= 1

    def _read(self, client: Client) -> None:
        try:
            chunk = client.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(client)
            return
        self.receive(client, chunk)

    def receive(self, client: Client, chunk: bytes) -> None:
        """Act on what arrived from ``client``; a client that breaks the protocol is told
        and dropped, and whatever it sends, no exception leaves (a bug is printed)."""
        feed = getattr(client, "feed", None)
        with self.ch.lock:
            try:
                if feed is not None:  # a socketcand client
                    if not feed(chunk):
                        self._flush()
                        self._drop(client)
                    return
                for kind, body in client.reader.feed(chunk):
                    self._handle(client, kind, body)
            except (ValueError, KeyError, TypeError, struct.error, can.CanError) as exc:
                self._refuse(client, str(exc))  # not a node we can serve
            except Exception as exc:  # a bug, met through this client: it alone goes
                self.bugs += 1
                print(f"fwbridge bus {self.name}: dropped {client.label}: {exc!r}",
                      file=sys.stderr)
                traceback.print_exc(file=sys.stderr)
                self._refuse(client, "internal error")

    def _refuse(self, client: Client, why: str) -> None:
        """Tell the client what it broke (if it reads) and drop it."""
        if client.sock not in self.clients:
            return
        pkt = client.error_packet(why[:500])
        client.out += pkt
        self.queued += len(pkt)
        with contextlib.suppress(OSError):
            client.sock.send(client.out)
        self._drop(client)

    def _handle(self, client: Client, kind: Kind, body: bytes) -> None:
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

    def _flush(self) -> None:
        for client in list(self.pending):
            if client.sock not in self.clients:
                self.pending.discard(client)
                continue
            if client.out:
                try:
                    n = client.sock.send(client.out)
                    del client.out[:n]
                    self.queued -= n
                except BlockingIOError:
                    pass
                except OSError:
                    self._drop(client)
                    continue
            writing = bool(client.out)
            if writing != client.writing:
                self.sel.modify(client.sock, selectors.EVENT_READ
                                | (selectors.EVENT_WRITE if writing else 0))
                client.writing = writing
            if not client.out:
                self.pending.discard(client)


def serve(name: str, *, bitrate: int = 500_000, data_bitrate: int | None = None,
          pacing: str = "realtime", socketcand: int | None = None,
          max_clients: int = MAX_CLIENTS, queue_budget: int = QUEUE_BUDGET,
          ready: Callable[[BusDaemon], None] | None = None) -> int | None:
    """Run the daemon ``name`` until SIGINT, SIGTERM or SIGHUP (in the main thread);
    returns the signal that stopped it (None: stopped otherwise)."""
    daemon = BusDaemon(name, bitrate=bitrate, data_bitrate=data_bitrate, pacing=pacing,
                       socketcand=socketcand, max_clients=max_clients,
                       queue_budget=queue_budget)
    daemon.open()
    old = {}
    stopped_by: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stopped_by.append(signum)
        daemon.stop()

    if threading.current_thread() is threading.main_thread():
        for sig in (getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP")
                    if hasattr(signal, s)):  # those of them this system has
            old[sig] = signal.signal(sig, on_signal)
    try:
        daemon.run(None if ready is None else (lambda: ready(daemon)))
    finally:
        daemon.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return stopped_by[0] if stopped_by else None


def stop_daemon(name: str, timeout: float = 5.0) -> bool:
    """SIGTERM the daemon ``name``; True once its socket is gone."""
    import time

    info = daemon_info(name)
    if info is None:
        return False
    os.kill(int(info["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon_info(name) is None:
            return True
        time.sleep(0.05)
    return False

