"""A node of a shared simulated bus: ``can.Bus(interface="fwbridge", channel=NAME)`` when a
``fwbridge can bus up NAME`` daemon runs (see :mod:`can_bus.daemon`).

The daemon owns the bus model and bus time; this process's Bus submits frames
and receives deliveries over the Unix socket of :mod:`can_bus.daemon_client`.

Afap buses across processes: as in one process, bus time moves while some node
waits on the bus (``recv`` with a timeout other than 0, a full transmit
buffer, ``wait_sent``, ``advance_to``). A node that was waiting for traffic
and is handed a frame is busy until it calls the bus again: time stands still
meanwhile, so its answer arbitrates at the instant it would in one process.
Frames submitted before the bus runs contend together.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import weakref
from typing import Any

import can
from can import BusState, CanOperationError

from fwbridge.can_bus.daemon_client import Connection, channel_socket, pack_message, packet
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.simchannel import SimBusError, SimBusInitError
from fwbridge.protocols.bus_wire import Kind

__all__ = ["RemoteBus", "RemoteSim"]


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
                conn.cond.wait(1.0)
            conn.waiting = False  # the daemon holds time until we call again


class RemoteBus(FwBridgeBus):
    """One node on a daemon's bus; the same API as the in-process :class:`FwBridgeBus`."""

    def __init__(self, channel: Any = "sim0", can_filters: Any = None, *,
                 bitrate: int | None = None, data_bitrate: int | None = None,
                 fd: bool = False, pacing: str | None = None,
                 receive_own_messages: bool = False, receive_error_frames: bool = False,
                 listen_only: bool = False, auto_recovery: bool = True,
                 tx_queue_size: int = 256, rx_queue_size: int = 0, tx_order: str = "priority",
                 name: str | None = None, modules: int = 0, capture: str | None = None,
                 **kwargs: Any) -> None:
        from fwbridge.can_bus.interface import as_bool

        self.channel_name = str(channel)
        if int(modules) or capture:
            name = self.channel_name
            raise SimBusInitError(
                f"{name} is a shared bus (daemon): modules= and capture= belong to a channel"
                f" inside one process; on {name} run the modules with 'fwbridge can -c {name}"
                f" sim N' and record with 'fwbridge can -c {name} record FILE'")
        timing = kwargs.get("timing")
        if timing is not None and hasattr(timing, "nom_bitrate"):
            fd, bitrate, data_bitrate = True, int(timing.nom_bitrate), int(timing.data_bitrate)
        fd = as_bool(kwargs.get("fd", fd))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(channel_socket(self.channel_name)))
        except OSError as exc:
            sock.close()
            raise SimBusInitError(f"bus daemon {self.channel_name}: {exc}") from None
        self.tx_queue_size = max(1, int(tx_queue_size))
        self._fd = fd
        conn = self._conn = Connection(sock, int(rx_queue_size), channel)
        conn.thread.start()
        self._finalizer: Any = weakref.finalize(self, conn.close)
        hello = {"name": name or "", "fd": fd, "listen_only": as_bool(listen_only),
                 "auto_recovery": as_bool(auto_recovery), "fifo": str(tx_order) == "fifo",
                 "receive_own_messages": as_bool(receive_own_messages),
                 "receive_error_frames": as_bool(receive_error_frames),
                 "bitrate": None if bitrate is None else int(bitrate),
                 "data_bitrate": None if data_bitrate is None else int(data_bitrate),
                 "pacing": pacing}
        conn.send(packet(Kind.HELLO, json.dumps(hello).encode()))
        deadline = time.monotonic() + 10.0
        with conn.cond:
            while conn.hello is None and not conn.closed and time.monotonic() < deadline:
                conn.cond.wait(0.5)
        reply = conn.hello
        if reply is None or "error" in reply:
            self._finalizer()
            why = (conn.error or "no answer") if reply is None else reply["error"]
            raise SimBusInitError(f"bus daemon {self.channel_name}: {why}")
        self.node_id = int(reply["node_id"])
        self._sim = RemoteSim(conn, self.channel_name, reply)
        self.channel_info = (f"fwbridge shared CAN{' FD' if fd else ''} {self.channel_name}"
                             f" @ {self._sim.bitrate} bit/s ({self._sim.pacing}, daemon), "
                             f"node {self.node_id}")
        self._can_protocol = can.CanProtocol.CAN_FD if fd else can.CanProtocol.CAN_20
        self._own = as_bool(receive_own_messages)
        self._errors = as_bool(receive_error_frames)
        can.BusABC.__init__(self, channel, can_filters=can_filters)

    # -- python-can API ----------------------------------------------------------------------
    def _apply_filters(self, filters: Any) -> None:
        self._conn.call("filters", filters=list(filters or []))

    @property
    def receive_own_messages(self) -> bool:
        return self._own

    @receive_own_messages.setter
    def receive_own_messages(self, flag: bool) -> None:
        self._own = bool(flag)
        self._conn.call("own", flag=self._own)

    @property
    def receive_error_frames(self) -> bool:
        return self._errors

    @receive_error_frames.setter
    def receive_error_frames(self, flag: bool) -> None:
        raise SimBusError("receive_error_frames of a shared-bus node is set when it opens")

    @property
    def _closed(self) -> bool:
        return self._conn.closed or not self._finalizer.alive

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        with conn.cond:
            while True:
                if conn.rx:
                    return conn.rx.popleft(), True
                if self._closed:
                    raise SimBusError(f"{self.channel_info}: bus is shut down")
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    if self._sim.afap and conn.waiting:
                        conn.idle()
                    return None, True
                if self._sim.afap:
                    conn.wait_flag()
                conn.cond.wait(min(remaining, 1.0))

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        from fwbridge.can_bus.simchannel import make_frame

        make_frame(msg, self._fd)  # checked here: one clear error, nothing sent
        conn = self._conn
        deadline = None if timeout is None else time.monotonic() + timeout
        with conn.cond:
            if self._closed:
                raise SimBusError(f"{self.channel_info}: bus is shut down")
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
                if remaining <= 0 or conn.closed:
                    raise SimBusError(
                        f"{self.channel_info}: transmit buffer full ({self.tx_queue_size} frames)")
                if self._sim.afap:
                    conn.wait_flag()
                conn.cond.wait(min(remaining, 0.2))
            conn.outstanding += 1
            conn.send(packet(Kind.SEND, pack_message(msg)), now=False)
            if self._sim.afap and conn.waiting:
                conn.idle()  # submitted: whatever it sends next need not hold the bus

    def flush_tx_buffer(self) -> None:
        self._conn.call("flush")

    @property
    def state(self) -> BusState:
        st = self._conn.call("state")
        if st["state"] == "BUS_OFF":
            return BusState.ERROR
        return BusState.PASSIVE if st["state"] == "PASSIVE" or st["listen_only"] \
            else BusState.ACTIVE

    @state.setter
    def state(self, new_state: BusState) -> None:
        if new_state is BusState.ERROR:
            raise SimBusError("a node cannot be put into bus-off on request")
        self._conn.call("set_state", listen_only=new_state is BusState.PASSIVE)

    def shutdown(self) -> None:
        if self._is_shutdown or self._closed:
            can.BusABC.shutdown(self)
            return
        with contextlib.suppress(CanOperationError):
            self.wait_sent()
            _ = self._sim.endpoints  # remembered for what is said after shutdown
        self._finalizer()
        can.BusABC.shutdown(self)

    # -- simulator extras --------------------------------------------------------------------
    @property
    def sim(self) -> Any:
        return self._sim

    @property
    def time(self) -> float:
        return self._sim.bus_time()

    @property
    def error_counters(self) -> tuple[int, int]:
        st = self._conn.call("state")
        return int(st["tec"]), int(st["rec"])

    def error_state(self) -> Any:
        from fwbridge.can_bus.model import ErrorState

        return ErrorState[self._conn.call("state")["state"]]

    def advance_to(self, t: float) -> None:
        self._sim.advance_to(t)

    def advance(self, dt: float) -> None:
        self._sim.advance_to(self._sim.bus_time() + dt)

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
                conn.cond.wait(0.05)
            if self._sim.afap and conn.waiting:
                conn.idle()
            return max(0, conn.outstanding)
