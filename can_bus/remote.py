"""A node of a shared simulated bus: the :class:`~can_bus.bus_node.BusNode` behind
``can.Bus(interface="fwbridge", channel="shared:NAME")`` while ``fwbridge can bus up NAME``
runs (see :mod:`can_bus.daemon`).

The daemon owns the bus model and bus time; this process's node submits frames
and receives deliveries over the Unix socket of :mod:`can_bus.daemon_client`.

Afap buses across processes: as in one process, bus time moves while some node
waits on the bus (``recv`` with a timeout other than 0, a full transmit
buffer, ``wait_sent``, ``advance_to``). A node that was waiting for traffic
and is handed a frame is busy until it calls the bus again: time stands still
meanwhile, so its answer arbitrates at the instant it would in one process
(``lockstep=False``: a node that never answers in bus time, such as a logger,
holds none). Frames submitted before the bus runs contend together.

Realtime buses: the daemon sends a frame as it starts (its outcome is settled
then) and the node hands it out at its end, by this machine's monotonic
clock, never before.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
from typing import Any

import can
from can import BusState, CanOperationError

from fwbridge.can_bus.bus_node import Settings
from fwbridge.can_bus.daemon_client import Connection, pack_message
from fwbridge.can_bus.daemon_dir import channel_socket
from fwbridge.can_bus.simchannel import SimBusError, SimBusInitError, make_frame
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import Hello, Kind

__all__ = ["HELLO_TIMEOUT", "RemoteNode", "RemoteSim"]

HELLO_TIMEOUT = 10.0  # seconds the daemon has to welcome a node
HOLD_MAX = 1.0  # s: a frame that would end later than this is handed out at once (clocks)


class RemoteSim:
    """What the CLI and the node runner read from a simulated channel, for a remote one."""

    def __init__(self, conn: Connection, name: str, hello: dict[str, Any]) -> None:
        self._conn = conn
        self.name = name
        self.bitrate = int(hello["bitrate"])
        self.data_bitrate = int(hello["data_bitrate"])
        self.pacing = str(hello["pacing"])
        self.afap = self.pacing == "afap"
        self.epoch = float(hello["epoch"])
        self.lock = threading.RLock()
        self.last_endpoints: list[int] = []

    def bus_time(self) -> float:
        return float(self._conn.call("bus_time"))

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._conn.call("stats")
        return result

    @property
    def endpoints(self) -> list[int]:
        """The bus's nodes (as last seen, once this node is shut down)."""
        if not self._conn.closed:
            self.last_endpoints = list(self._conn.call("endpoints"))
        return self.last_endpoints

    def advance_to(self, t: float) -> None:
        """Afap: wait until the daemon's bus time reaches ``t`` seconds."""
        conn = self._conn
        with conn.cond:
            before = conn.reached
            conn.wait_flag(t)
            while conn.reached == before and not conn.closed:
                conn.wait(1.0)
            conn.waiting = False  # the daemon holds time until we call again
            if conn.gone is not None:
                raise conn.gone_error()


class RemoteNode:
    """One node on the daemon ``name``'s bus; ``channel`` (``"shared:NAME"``) is what its
    messages carry as their channel."""

    shared = True

    def __init__(self, channel: Any, name: str, s: Settings) -> None:
        self.channel_name = name
        self.tx_queue_size = s.tx_queue_size
        self._fd = s.fd
        path = channel_socket(name)  # first: it refuses where there are no Unix sockets
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except OSError as exc:
            sock.close()
            raise SimBusInitError(f"bus daemon {name}: {exc}") from None
        conn = self._conn = Connection(sock, s.rx_queue_size, channel, name)
        conn.lockstep = s.lockstep
        conn.thread.start()
        self._finalizer = weakref.finalize(self, conn.close)
        hello = Hello(name=s.name or "", fd=s.fd, listen_only=s.listen_only,
                      auto_recovery=s.auto_recovery, fifo=s.fifo,
                      receive_own_messages=s.receive_own_messages,
                      receive_error_frames=s.receive_error_frames, bitrate=s.bitrate,
                      data_bitrate=s.data_bitrate, pacing=s.pacing, hold=True,
                      lockstep=s.lockstep)
        conn.send(bus_wire.pack_hello(hello))
        deadline = time.monotonic() + HELLO_TIMEOUT
        with conn.cond:
            while conn.hello is None and not conn.closed and time.monotonic() < deadline:
                conn.wait(0.5)
        reply = conn.hello
        if reply is None or "error" in reply:
            self.close()
            why = (conn.error or "no answer") if reply is None else reply["error"]
            raise SimBusInitError(f"bus daemon {name}: {why}")
        self.node_id = int(reply["node_id"])
        self._sim = RemoteSim(conn, name, reply)
        # realtime: a frame comes as soon as its outcome is settled; it is handed out at
        # its end, timestamp + this offset on this machine's monotonic clock
        self._offset: float | None = None
        if not self._sim.afap and isinstance(reply.get("t0"), float | int):
            self._offset = float(reply["t0"]) - self._sim.epoch
        self.channel_info = (f"fwbridge shared CAN{' FD' if s.fd else ''} {name}"
                             f" @ {self._sim.bitrate} bit/s ({self._sim.pacing}, daemon), "
                             f"node {self.node_id}")
        self._own = s.receive_own_messages
        self._errors = s.receive_error_frames
        f = s.faults
        if f.any:
            try:
                self.inject(bit_error_rate=f.bit_error_rate, seed=f.seed,
                            stuck_dominant=f.stuck_dominant, disconnected=f.disconnected)
            except BaseException:
                self.close()
                raise

    @property
    def closed(self) -> bool:
        return self._conn.closed or not self._finalizer.alive

    @property
    def sim(self) -> RemoteSim:
        return self._sim

    def set_filters(self, filters: Any) -> None:
        self._conn.call("filters", filters=list(filters or []))

    def get_own(self) -> bool:
        return self._own

    def set_own(self, flag: bool) -> None:
        self._own = bool(flag)
        self._conn.call("own", flag=self._own)

    def get_error_frames(self) -> bool:
        return self._errors

    def set_error_frames(self, flag: bool) -> None:
        raise SimBusError("receive_error_frames of a shared-bus node is set when it opens")

    def recv(self, timeout: float | None) -> can.Message | None:
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        off = self._offset
        with conn.cond:
            while True:
                hold = 1.0
                if conn.rx:
                    conn.active = time.monotonic()  # it reads: its reader thread stays out
                    if off is None:
                        return conn.rx.popleft()
                    hold = conn.rx[0].timestamp + off - time.monotonic()
                    if not 0.0 < hold < HOLD_MAX:  # ended (or a clock that is not ours)
                        return conn.rx.popleft()
                if self.closed:
                    raise self._ended()
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    if self._sim.afap and conn.waiting:
                        conn.idle()
                    return None
                if self._sim.afap:
                    conn.wait_flag()
                conn.wait(min(remaining, 1.0, hold))

    def send(self, msg: can.Message, timeout: float | None) -> None:
        make_frame(msg, self._fd)  # checked here: one clear error, nothing sent
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        with conn.cond:
            if self.closed:
                raise self._ended()
            checked = time.monotonic()
            while conn.outstanding >= self.tx_queue_size:
                now = time.monotonic()
                if now - checked > 0.2:
                    checked = now
                    st = conn.call("state")
                    if st["stalled"]:
                        raise SimBusError(
                            f"{self.channel_info}: transmit buffer full, no acknowledgement: no"
                            f" other node on {self.channel_name} can receive")
                remaining = 1.0 if deadline is None else deadline - now
                if conn.closed:
                    raise self._ended()
                if remaining <= 0:
                    raise SimBusError(
                        f"{self.channel_info}: transmit buffer full ({self.tx_queue_size} frames)")
                if self._sim.afap:
                    conn.wait_flag()
                conn.wait(min(remaining, 0.2))
            conn.outstanding += 1
            conn.send(bus_wire.pack(Kind.SEND, pack_message(msg)), now=False)
            if self._sim.afap and conn.waiting:
                conn.idle()  # submitted: whatever it sends next need not hold the bus

    def _ended(self) -> SimBusError:
        """What an operation on a node whose connection ended raises."""
        return self._conn.gone_error(f"{self.channel_info}: bus is shut down")

    def flush(self) -> None:
        self._conn.call("flush")

    def get_state(self) -> BusState:
        st = self._conn.call("state")
        if st["state"] == "BUS_OFF":
            return BusState.ERROR
        return BusState.PASSIVE if st["state"] == "PASSIVE" or st["listen_only"] \
            else BusState.ACTIVE

    def set_state(self, new_state: BusState) -> None:
        if new_state is BusState.ERROR:
            raise SimBusError("a node cannot be put into bus-off on request")
        self._conn.call("set_state", listen_only=new_state is BusState.PASSIVE)

    def bus_time(self) -> float:
        return self._sim.bus_time()

    def error_counters(self) -> tuple[int, int]:
        st = self._conn.call("state")
        return int(st["tec"]), int(st["rec"])

    def advance_to(self, t: float) -> None:
        self._sim.advance_to(t)

    def inject(self, *, bit_error_rate: float | None = None, stuck_dominant: bool | None = None,
               disconnected: bool | None = None, seed: int | None = None) -> None:
        self._conn.call("inject", bit_error_rate=bit_error_rate, stuck_dominant=stuck_dominant,
                        disconnected=disconnected, seed=seed)

    def recover(self) -> None:
        self._conn.call("recover")

    def wait_sent(self, timeout: float = 2.0) -> int:
        """Wait until this node's frames are on the bus (or cannot be); how many are left."""
        conn = self._conn
        deadline = time.monotonic() + timeout
        with conn.cond:
            while conn.outstanding > 0 and not conn.closed:
                st = conn.call("state")
                if st["stalled"] or st["state"] == "BUS_OFF":
                    break
                if not self._sim.afap and time.monotonic() > deadline:
                    break
                if self._sim.afap:
                    conn.wait_flag()
                conn.wait(0.05)
            if self._sim.afap and conn.waiting:
                conn.idle()
            return max(0, conn.outstanding)

    def close(self) -> None:
        if self._finalizer.alive and not self._conn.closed and hasattr(self, "_sim"):
            with contextlib.suppress(CanOperationError):
                _ = self._sim.endpoints  # remembered for what is said after shutdown
        self._finalizer()
