"""The shared simulated bus: one process owns the bus model and bus time, nodes anywhere
on the machine attach through a Unix socket (``fwbridge can bus up NAME``).

One owner of bus time: every node's frames go to this process, which
arbitrates, times and confines them exactly as in one process (it runs the
same :class:`~can_bus.simchannel.SimChannel`) and sends each node its
deliveries, stamped in bus time. Realtime pacing: the channel's driver
thread follows the wall clock. Afap pacing: the bus runs only while every
attached node waits on it (see :mod:`can_bus.remote`), one instant at
a time, up to the earliest horizon a node asked for (``advance_to``). The bus side,
packets and bus time, is :mod:`can_bus.daemon_bus`; here are the sockets and the loop.

The socket lives in the user's private runtime directory, never on the
network; a JSON file beside it describes the bus for ``bus list``.

A socket is an interface: every packet is checked (:mod:`protocols.bus_wire`)
before it is acted on; a client that breaks the protocol gets an error packet
and is dropped, and no client can kill the daemon, hold afap bus time for
longer than ``hold_limit`` seconds, or queue more than
:data:`~can_bus.daemon_nodes.TX_LIMIT` frames; the
bytes waiting for all clients together are held to ``queue_budget``
(:data:`~can_bus.daemon_nodes.FAIR_SHARE` each beyond it), and at most ``max_clients``
socketcand clients are served.
"""

from __future__ import annotations

import contextlib
import json
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

from fwbridge.can_bus.daemon_bus import HOLD_LIMIT, DaemonBus
from fwbridge.can_bus.daemon_dir import daemon_info, runtime_dir, valid_name
from fwbridge.can_bus.daemon_nodes import FAIR_SHARE, QUEUE_BUDGET, Client
from fwbridge.can_bus.socketcand import TextClient
from fwbridge.protocols.errors import CanError, ConfigError

__all__ = ["BusAlreadyUp", "BusDaemon", "serve", "stop_daemon"]

MAX_CLIENTS = 16  # socketcand clients served at once: beyond, one more is refused
SOCKETCAND_SNDBUF = 128 << 10  # a socketcand client's kernel send buffer (Linux doubles it)


class BusAlreadyUp(CanError, OSError):
    """``bus up`` for a name whose daemon already answers."""


class BusDaemon(DaemonBus):
    """The daemon: its bus (:class:`~can_bus.daemon_bus.DaemonBus`), the sockets its
    clients connect to and the bus's description; :meth:`run` is its loop (one thread)."""

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
        super().__init__(name, bitrate, data_bitrate, pacing, hold_limit)
        self.ch.daemon = self
        self.pending: set[Client] = set()
        # realtime: the loop waits in select(), whose timeout is in microseconds (epoll's
        # and poll's are in milliseconds); clients are refused past its fd limit
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
        self.max_clients = max_clients  # socketcand clients at once
        self.queue_budget = queue_budget
        self.queued = 0  # bytes queued for all clients (their ``out``)
        self.queued_peak = 0
        self.refused = 0  # socketcand connections refused: too many, or the budget spent
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
                    self.handle(client, kind, body)
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

