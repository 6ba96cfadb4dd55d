"""``fwbridge``: the simulated bus as a python-can interface.

::

    bus = can.Bus(interface="fwbridge", channel="sim0", bitrate=500000)

Every Bus instance on a channel is one node (one CAN controller) of a bus
shared inside the process; frames arbitrate, take their exact bit time and
carry the end of their EOF, in bus time, as timestamp (``epoch`` plus bus
seconds; ``epoch`` defaults to the wall clock when the channel opened).

Pacing, chosen by the first Bus opened on a channel (``pacing=`` keyword,
``--bus-kwargs pacing=afap`` for python-can's tools):

- ``"realtime"`` (default): bus time follows the wall clock;
- ``"afap"``: as fast as possible; bus time jumps from frame to frame and
  moves while idle only through :meth:`FwBridgeBus.advance_to`. See
  :mod:`can_bus.simchannel` for when the bus runs.

Other keywords: ``receive_own_messages``, ``receive_error_frames`` (SocketCAN
style error frames: protocol errors, state changes, counters),
``listen_only``, ``auto_recovery``, ``tx_queue_size``, ``rx_queue_size``,
``tx_order`` (``"priority"``: queued frames leave lowest ID first, as from a
controller with one transmit buffer per frame; ``"fifo"``: in the order sent,
as through a SocketCAN queue; replays want ``fifo``),
faults of this node (``bit_error_rate``, ``fault_seed``, ``stuck_dominant``,
``disconnected``), channel settings (``seed``, ``epoch``,
``dominant_timeout``), and two conveniences for python-can's command line
tools, which open one Bus per process: ``modules=N`` starts N simulated
actuator modules (IDs 1..N) on the channel, ``capture=FILE`` (or a python-can
writer) records every
frame on it (any python-can log format, or ``.pcapng``) and, like a bus
analyser, acknowledges frames.

Shared bus: when ``fwbridge can bus up NAME`` runs, ``channel=NAME`` attaches
to that daemon's bus from any process (:mod:`can_bus.daemon_client`); pass
``local=True`` for this process's own channel of the same name.

A lone node gets no ACK, as on a real bus: its TEC climbs to error-passive
and its frames wait for another node.

CAN FD: ``fd=True`` makes the node FD-capable (it sends and receives
``is_fd`` messages, with ``bitrate_switch`` and ``error_state_indicator``);
``data_bitrate`` (or a ``timing=BitTimingFd``) sets the channel's data-phase
rate, default the nominal one. A node opened without ``fd`` ignores FD frames
(as an FD-tolerant controller) and refuses to send them.

A Bus that is never shut down is cleaned up when it is garbage collected: the
channel holds only its receiving port, so the node leaves the bus (no more
ACKs, no queue growing) once nothing refers to the Bus.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import can
from can import BusState
from can.typechecking import AutoDetectedConfig, CanFilters

from fwbridge.can_bus.model import ErrorState, StateChanged
from fwbridge.can_bus.simchannel import (
    PACINGS,
    Rules,
    SimBusError,
    SimBusInitError,
    SimChannel,
    channels,
    compile_filters,
    make_frame,
    open_channel,
    release_channel,
)

__all__ = ["FwBridgeBus", "SimBusError", "SimBusInitError"]

SHUTDOWN_LINGER = 2.0  # seconds a closing realtime bus waits for its queued frames


def as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class FwBridgeBus(can.BusABC):
    """One node on a simulated CAN bus (see the module docstring for the keywords)."""

    def __new__(cls, channel: Any = "sim0", *args: Any, **kwargs: Any) -> FwBridgeBus:
        # A bus daemon of that name runs: attach to it (unless asked for the local bus).
        if cls is FwBridgeBus and not as_bool(kwargs.get("local", False)):
            from fwbridge.can_bus.daemon_client import attachable

            if attachable(str(channel)):
                from fwbridge.can_bus.remote import RemoteBus

                return super().__new__(RemoteBus)
        return super().__new__(cls)

    def __init__(self, channel: Any = "sim0", can_filters: CanFilters | None = None, *,
                 bitrate: int | None = None, pacing: str | None = None,
                 receive_own_messages: bool = False, receive_error_frames: bool = False,
                 listen_only: bool = False, auto_recovery: bool = True,
                 tx_queue_size: int = 256, rx_queue_size: int = 0, tx_order: str = "priority",
                 bit_error_rate: float = 0.0, fault_seed: int | None = None,
                 stuck_dominant: bool = False, disconnected: bool = False,
                 seed: int = 0, epoch: float | None = None, dominant_timeout: float = 1e-3,
                 modules: int = 0, capture: str | can.Listener | None = None,
                 name: str | None = None,
                 **kwargs: Any) -> None:
        timing = kwargs.get("timing")
        fd = as_bool(kwargs.get("fd", False))
        data_bitrate = kwargs.get("data_bitrate")
        if timing is not None and hasattr(timing, "nom_bitrate"):  # can.BitTimingFd
            fd = True
            bitrate = int(timing.nom_bitrate) if bitrate is None else bitrate
            data_bitrate = int(timing.data_bitrate) if data_bitrate is None else data_bitrate
        if bitrate is None and timing is not None and hasattr(timing, "bitrate"):
            bitrate = int(timing.bitrate)
        if data_bitrate is not None:
            data_bitrate = int(data_bitrate)
            if data_bitrate <= 0:
                raise SimBusInitError(f"data bit rate must be positive, got "
                                             f"{data_bitrate}")
        if pacing is not None:
            pacing = str(pacing).lower()
            if pacing not in PACINGS:
                raise SimBusInitError(
                    f"pacing must be one of {', '.join(PACINGS)}, not {pacing!r}")
        if bitrate is not None and int(bitrate) <= 0:
            raise SimBusInitError(f"bit rate must be positive, got {bitrate}")
        if str(tx_order) not in ("priority", "fifo"):
            raise SimBusInitError(f"tx_order must be priority or fifo, not {tx_order!r}")
        ber = float(bit_error_rate)  # --bus-kwargs hands "1e-3" over as a string
        if not 0.0 <= ber <= 1.0:
            raise SimBusInitError(f"bit_error_rate {ber} not in 0..1")
        self.channel_name = str(channel)
        self.tx_queue_size = max(1, int(tx_queue_size))
        self._fd = fd
        port = self._port = _Port(channel, deque(maxlen=int(rx_queue_size) or None), fd)
        port.receive_own_messages = as_bool(receive_own_messages)
        port.receive_error_frames = as_bool(receive_error_frames)
        port.owner = weakref.ref(self)
        self._rx = port.rx
        self._owned: list[Callable[[], None]] = []  # started here, stopped at shutdown
        self._ch: SimChannel = open_channel(
            self.channel_name, bitrate=None if bitrate is None else int(bitrate), pacing=pacing,
            data_bitrate=data_bitrate, epoch=None if epoch is None else float(epoch),
            seed=int(seed), dominant_timeout=float(dominant_timeout))
        ch = self._ch
        with ch.lock:
            ch.sync()
            self.node_id = port.node_id = ch.model.add_node(
                name or f"{self.channel_name}.{ch.users}", auto_recovery=as_bool(auto_recovery),
                listen_only=as_bool(listen_only), fifo=str(tx_order) == "fifo")
            ch.endpoints[self.node_id] = port
        # runs once: at shutdown, or when the Bus is collected without one
        self._finalizer: Any = weakref.finalize(self, _release, ch, port, self._owned)
        rates = f"{ch.bitrate}" + (f"/{ch.data_bitrate}" if ch.data_bitrate != ch.bitrate else "")
        self.channel_info = (f"fwbridge simulated CAN{' FD' if fd else ''} {self.channel_name}"
                             f" @ {rates} bit/s ({ch.pacing}), node {self.node_id}")
        self._can_protocol = can.CanProtocol.CAN_FD if fd else can.CanProtocol.CAN_20
        try:
            if ber or as_bool(stuck_dominant) or as_bool(disconnected):
                self.inject(bit_error_rate=ber, seed=fault_seed,
                            stuck_dominant=as_bool(stuck_dominant),
                            disconnected=as_bool(disconnected))
            if capture:
                self._start_capture(capture if isinstance(capture, can.Listener)
                                    else str(capture))
            if int(modules):
                self._start_modules(int(modules))
        except Exception:
            self._teardown()
            raise
        super().__init__(channel, can_filters=can_filters)

    # -- python-can API ----------------------------------------------------------
    def _apply_filters(self, filters: CanFilters | None) -> None:
        self._port.rx_rules = compile_filters(filters)

    def state_changed(self, event: StateChanged) -> None:
        """Hook: this node's fault-confinement state changed (state is read from the model)."""

    @property
    def receive_own_messages(self) -> bool:
        return self._port.receive_own_messages

    @receive_own_messages.setter
    def receive_own_messages(self, flag: bool) -> None:
        self._port.receive_own_messages = bool(flag)

    @property
    def receive_error_frames(self) -> bool:
        return self._port.receive_error_frames

    @receive_error_frames.setter
    def receive_error_frames(self, flag: bool) -> None:
        self._port.receive_error_frames = bool(flag)

    @property
    def _closed(self) -> bool:
        return self._port.closed

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        ch = self._ch
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch.lock:
            if not ch.afap:
                ch.sync()
            while True:
                if self._rx:
                    return self._rx.popleft(), True
                if self._closed:
                    raise SimBusError(f"{self.channel_info}: bus is shut down")
                if ch.afap and timeout != 0:
                    ch.pump(stop=lambda: bool(self._rx))
                    if self._rx:
                        continue
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return None, True
                ch.wait(min(remaining, 1.0))

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        """Queue ``msg`` for transmission (lowest ID first among this node's frames).

        Blocks while the node's ``tx_queue_size`` frames are queued, up to
        ``timeout``; raises ``CanOperationError`` then, or at once when no
        other node can acknowledge the frames.
        """
        frame = make_frame(msg, self._fd)
        ch = self._ch
        model = ch.model
        nid = self.node_id
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch.lock:
            if self._closed:
                raise SimBusError(f"{self.channel_info}: bus is shut down")
            node = model.node(nid)
            if node.listen_only:
                raise SimBusError(f"{self.channel_info}: listen-only, cannot send")
            if not ch.afap:
                ch.sync()
            # the one frame on the wire can be ours: + 1 is the cheap upper bound
            while (len(node.tx) + 1 >= self.tx_queue_size
                   and model.outstanding(nid) >= self.tx_queue_size):
                if node.stalled:
                    raise SimBusError(
                        f"{self.channel_info}: transmit buffer full, no acknowledgement: no other"
                        f" node on {self.channel_name} can receive")
                if ch.afap:
                    idle = ch.pump(stop=lambda: model.outstanding(nid) < self.tx_queue_size
                                   or node.stalled)
                    if model.outstanding(nid) < self.tx_queue_size or node.stalled:
                        continue
                    if idle:  # bus-off without recovery: nothing will free the buffer
                        raise SimBusError(
                            f"{self.channel_info}: transmit buffer full ({self.tx_queue_size}"
                            f" frames, node {node.state.name.lower().replace('_', '-')})")
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    raise SimBusError(
                        f"{self.channel_info}: transmit buffer full ({self.tx_queue_size} frames,"
                        f" node {node.state.name.lower().replace('_', '-')})")
                ch.wait(min(remaining, 1.0))
            model.submit(nid, frame)
            ch.kick()

    def flush_tx_buffer(self) -> None:
        with self._ch.lock:
            self._ch.model.flush(self.node_id)

    @property
    def state(self) -> BusState:
        """ACTIVE, PASSIVE (error-passive or listen-only) or ERROR (bus-off)."""
        with self._ch.lock:
            self._ch.sync()
            node = self._ch.model.node(self.node_id)
            if node.state is ErrorState.BUS_OFF:
                return BusState.ERROR
            if node.state is ErrorState.PASSIVE or node.listen_only:
                return BusState.PASSIVE
            return BusState.ACTIVE

    @state.setter
    def state(self, new_state: BusState) -> None:
        """PASSIVE: listen-only (no ACK, no frames). ACTIVE: normal, and recover from bus-off."""
        with self._ch.lock:
            model = self._ch.model
            if new_state is BusState.PASSIVE:
                model.set_listen_only(self.node_id, True)
            elif new_state is BusState.ACTIVE:
                model.set_listen_only(self.node_id, False)
                model.request_recovery(self.node_id)
            else:
                raise SimBusError("a node cannot be put into bus-off on request")

    def shutdown(self) -> None:
        if self._is_shutdown or self._closed:
            super().shutdown()
            return
        self.wait_sent()
        self._teardown()
        super().shutdown()

    @staticmethod
    def _detect_available_configs() -> list[AutoDetectedConfig]:
        from fwbridge.can_bus.daemon_client import list_daemons  # shared buses too

        names = sorted({*channels(), *(d["name"] for d in list_daemons())}) or ["sim0"]
        return [{"interface": "fwbridge", "channel": name} for name in names]

    # -- simulator extras ----------------------------------------------------------
    @property
    def sim(self) -> SimChannel:
        """The shared channel (model, lock, clock) this node is on."""
        return self._ch

    @property
    def time(self) -> float:
        """Bus time in seconds since the channel opened."""
        with self._ch.lock:
            return self._ch.bus_time()

    @property
    def error_counters(self) -> tuple[int, int]:
        """(TEC, REC) of this node."""
        with self._ch.lock:
            self._ch.sync()
            node = self._ch.model.node(self.node_id)
            return node.tec, node.rec

    def advance_to(self, t: float) -> None:
        """Afap only: run the bus up to bus time ``t`` (seconds)."""
        with self._ch.lock:
            self._ch.advance_to(t)

    def advance(self, dt: float) -> None:
        """Afap only: run the bus for ``dt`` more seconds."""
        with self._ch.lock:
            self._ch.advance_to(self._ch.bus_time() + dt)

    def inject(self, *, bit_error_rate: float | None = None, stuck_dominant: bool | None = None,
               disconnected: bool | None = None, seed: int | None = None) -> None:
        """Inject (or clear, with False / 0.0) faults on this node from now on."""
        with self._ch.lock:
            self._ch.sync()
            self._ch.model.set_faults(self.node_id, bit_error_rate=bit_error_rate,
                                      stuck_dominant=stuck_dominant, disconnected=disconnected,
                                      seed=seed)
            self._ch.kick()

    def recover(self) -> None:
        """Ask a bus-off node to recover (counts 128 x 11 recessive bits from now)."""
        with self._ch.lock:
            self._ch.sync()
            self._ch.model.request_recovery(self.node_id)
            self._ch.kick()

    def wait_sent(self, timeout: float = SHUTDOWN_LINGER) -> int:
        """Wait until this node's queued frames are on the bus; return how many are left.

        Frames stay queued while the node is bus-off or nobody acknowledges
        them; realtime buses wait at most ``timeout`` seconds, afap buses run
        the bus instead. Shutdown calls this, as a kernel queue drains on close.
        """
        ch, model, nid = self._ch, self._ch.model, self.node_id
        with ch.lock:
            if self._closed:
                return 0

            def done() -> bool:
                node = model.node(nid)
                return (model.outstanding(nid) == 0 or node.stalled
                        or node.state is ErrorState.BUS_OFF)

            if ch.afap:
                ch.pump(stop=done)
            else:
                deadline = time.monotonic() + timeout
                ch.sync()
                while not done() and time.monotonic() < deadline:
                    ch.wait(0.05)
                    ch.sync()
            return model.outstanding(nid)

    # -- internals -----------------------------------------------------------------

    def _teardown(self) -> None:
        self._finalizer()

    def _start_capture(self, path: str | can.Listener) -> None:
        from fwbridge.bridge.record.can_logs import open_writer  # only needed with capture=

        ch = self._ch
        if isinstance(path, can.Listener):  # a writer the caller made (and may extend)
            writer = path
            path = type(writer).__name__
        else:
            # an MCAP capture also keeps the bus load, a share of the bit rate
            extra = {"bitrate": ch.model.bitrate} if path.lower().endswith(".mcap") else {}
            writer = open_writer(path, **extra)
        tap = _Tap(writer, self.channel_name)
        with ch.lock:
            tap.node_id = ch.model.add_node(f"capture:{path}")
            ch.endpoints[tap.node_id] = tap

        def stop() -> None:
            with ch.lock:
                ch.endpoints.pop(tap.node_id, None)
                ch.model.remove_node(tap.node_id)
            writer.stop()

        self._owned.append(stop)

    def _start_modules(self, count: int) -> None:
        from fwbridge.can_bus.sim.nodes import (  # only needed with modules=
            ActuatorModule,
            NodeRunner,
        )

        buses = [FwBridgeBus(self.channel_name, name=f"module{k}") for k in range(1, count + 1)]
        modules = [ActuatorModule(bus, k) for k, bus in enumerate(buses, start=1)]
        runner = NodeRunner(modules, period=0.002, sim=self._ch)
        runner.start()

        def stop() -> None:
            runner.stop()
            for bus in buses:
                bus.shutdown()

        self._owned.append(stop)


class _Port:
    """A node's receiving side, the endpoint its channel delivers to. The Bus holds its
    port, never the other way round, so that a Bus nobody shut down can be collected."""

    __slots__ = ("channel", "closed", "fd", "node_id", "owner", "receive_error_frames",
                 "receive_own_messages", "rx", "rx_rules")

    def __init__(self, channel: Any, rx: deque[can.Message], fd: bool) -> None:
        self.channel = channel
        self.rx = rx
        self.fd = fd
        self.node_id = -1
        self.receive_own_messages = False
        self.receive_error_frames = False
        self.rx_rules: Rules | None = None
        self.closed = False
        self.owner: weakref.ref[FwBridgeBus] | None = None

    def deliver(self, msg: can.Message) -> None:
        self.rx.append(msg)

    def state_changed(self, event: StateChanged) -> None:
        bus = self.owner() if self.owner is not None else None
        if bus is not None:
            bus.state_changed(event)


def _release(ch: SimChannel, port: _Port, owned: list[Callable[[], None]]) -> None:
    """Take the node off the bus: what it started, its node, its share of the channel."""
    for stop in reversed(owned):
        with contextlib.suppress(Exception):
            stop()
    owned.clear()
    with ch.lock:
        if not port.closed:
            port.closed = True
            ch.endpoints.pop(port.node_id, None)
            ch.model.remove_node(port.node_id)
            ch.rx_cond.notify_all()
    release_channel(ch)


class _Tap:
    """A capture point on the channel: a node that acknowledges and records every frame."""

    receive_own_messages = False
    receive_error_frames = False  # captures hold the frames; error frames stay out
    rx_rules: Rules | None = None
    fd = True

    def __init__(self, writer: can.Listener, channel: Any = None) -> None:
        self.writer = writer
        self.node_id = -1
        self.channel = channel

    def deliver(self, msg: can.Message) -> None:
        self.writer.on_message_received(msg)

    def state_changed(self, event: StateChanged) -> None:
        pass

    def observe_state(self, node: str, event: StateChanged, timestamp: float) -> None:
        """Any node's fault-confinement change; writers that keep them (MCAP) get it."""
        record = getattr(self.writer, "on_state_changed", None)
        if record is not None:
            record(node, event.old.name, event.new.name, event.tec, event.rec, timestamp)
