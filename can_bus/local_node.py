"""A node on this process's own simulated channel (:mod:`can_bus.simchannel`): the
:class:`~can_bus.bus_node.BusNode` behind ``can.Bus(interface="fwbridge", channel=NAME)``.

The channel holds only the node's receiving port, never the node: a Bus nobody
shut down is collected, and its finalizer takes the node off the bus.
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

from fwbridge.can_bus.bus_node import Settings
from fwbridge.can_bus.model import ErrorState, StateChanged
from fwbridge.can_bus.simchannel import (
    Rules,
    SimBusError,
    SimBusInitError,
    SimChannel,
    compile_filters,
    make_frame,
    open_channel,
    release_channel,
)

__all__ = ["SHUTDOWN_LINGER", "LocalNode", "open_capture"]

SHUTDOWN_LINGER = 2.0  # seconds a closing realtime bus waits for its queued frames


class LocalNode:
    """One node (one CAN controller) on the channel ``channel`` of this process.

    ``owner`` is told of this node's fault-confinement changes (its ``state_changed``),
    through a weak reference. ``capture`` (a path or a python-can Listener) records
    every frame on the channel from a tap that acknowledges, as a bus analyser.
    """

    shared = False

    def __init__(self, channel: Any, s: Settings, *, owner: Any = None,
                 capture: str | can.Listener | None = None, seed: int = 0,
                 epoch: float | None = None, dominant_timeout: float = 1e-3) -> None:
        self.channel_name = str(channel)
        self.tx_queue_size = s.tx_queue_size
        self._fd = s.fd
        port = self.port = _Port(channel, deque(maxlen=s.rx_queue_size or None), s.fd)
        port.receive_own_messages = s.receive_own_messages
        port.receive_error_frames = s.receive_error_frames
        port.owner = None if owner is None else weakref.ref(owner)
        self._rx = port.rx
        self._owned: list[Callable[[], None]] = []  # started here, stopped at close
        ch = self._ch = open_channel(
            self.channel_name, bitrate=s.bitrate, pacing=s.pacing, data_bitrate=s.data_bitrate,
            epoch=None if epoch is None else float(epoch), seed=int(seed),
            dominant_timeout=float(dominant_timeout))
        self.first = ch.users == 1  # this node opened the channel
        with ch.lock:
            ch.sync()
            self.node_id = port.node_id = ch.model.add_node(
                s.name or f"{self.channel_name}.{ch.users}", auto_recovery=s.auto_recovery,
                listen_only=s.listen_only, fifo=s.fifo)
            ch.endpoints[self.node_id] = port
        # runs once: at close, or when the node is collected without one
        self._finalizer = weakref.finalize(self, _release, ch, port, self._owned)
        rates = f"{ch.bitrate}" + (f"/{ch.data_bitrate}" if ch.data_bitrate != ch.bitrate else "")
        self.channel_info = (f"fwbridge simulated CAN{' FD' if s.fd else ''} {self.channel_name}"
                             f" @ {rates} bit/s ({ch.pacing}), node {self.node_id}")
        try:
            f = s.faults
            if f.any:
                self.inject(bit_error_rate=f.bit_error_rate, seed=f.seed,
                            stuck_dominant=f.stuck_dominant, disconnected=f.disconnected)
            if capture:
                self._start_capture(capture)
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        return self.port.closed

    @property
    def sim(self) -> SimChannel:
        return self._ch

    def recv(self, timeout: float | None) -> can.Message | None:
        ch = self._ch
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch.lock:
            if not ch.afap:
                ch.sync()
            while True:
                if self._rx:
                    return self._rx.popleft()
                if self.port.closed:
                    raise SimBusError(f"{self.channel_info}: bus is shut down")
                if ch.afap and timeout != 0:
                    ch.pump(stop=lambda: bool(self._rx))
                    if self._rx:
                        continue
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return None
                ch.wait(min(remaining, 1.0))

    def send(self, msg: can.Message, timeout: float | None) -> None:
        frame = make_frame(msg, self._fd)
        ch = self._ch
        model = ch.model
        nid = self.node_id
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch.lock:
            if self.port.closed:
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

    def set_filters(self, filters: Any) -> None:
        self.port.rx_rules = compile_filters(filters)

    def get_own(self) -> bool:
        return self.port.receive_own_messages

    def set_own(self, flag: bool) -> None:
        self.port.receive_own_messages = bool(flag)

    def get_error_frames(self) -> bool:
        return self.port.receive_error_frames

    def set_error_frames(self, flag: bool) -> None:
        self.port.receive_error_frames = bool(flag)

    def flush(self) -> None:
        with self._ch.lock:
            self._ch.model.flush(self.node_id)

    def get_state(self) -> BusState:
        with self._ch.lock:
            self._ch.sync()
            node = self._ch.model.node(self.node_id)
            if node.state is ErrorState.BUS_OFF:
                return BusState.ERROR
            if node.state is ErrorState.PASSIVE or node.listen_only:
                return BusState.PASSIVE
            return BusState.ACTIVE

    def set_state(self, new_state: BusState) -> None:
        with self._ch.lock:
            model = self._ch.model
            if new_state is BusState.PASSIVE:
                model.set_listen_only(self.node_id, True)
            elif new_state is BusState.ACTIVE:
                model.set_listen_only(self.node_id, False)
                model.request_recovery(self.node_id)
            else:
                raise SimBusError("a node cannot be put into bus-off on request")

    def bus_time(self) -> float:
        with self._ch.lock:
            return self._ch.bus_time()

    def error_counters(self) -> tuple[int, int]:
        with self._ch.lock:
            self._ch.sync()
            node = self._ch.model.node(self.node_id)
            return node.tec, node.rec

    def advance_to(self, t: float) -> None:
        with self._ch.lock:
            self._ch.advance_to(t)

    def inject(self, *, bit_error_rate: float | None = None, stuck_dominant: bool | None = None,
               disconnected: bool | None = None, seed: int | None = None) -> None:
        with self._ch.lock:
            self._ch.sync()
            self._ch.model.set_faults(self.node_id, bit_error_rate=bit_error_rate,
                                      stuck_dominant=stuck_dominant, disconnected=disconnected,
                                      seed=seed)
            self._ch.kick()

    def recover(self) -> None:
        with self._ch.lock:
            self._ch.sync()
            self._ch.model.request_recovery(self.node_id)
            self._ch.kick()

    def wait_sent(self, timeout: float = SHUTDOWN_LINGER) -> int:
        ch, model, nid = self._ch, self._ch.model, self.node_id
        with ch.lock:
            if self.port.closed:
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

    def close(self) -> None:
        self._finalizer()

    def _start_capture(self, path: str | can.Listener) -> None:
        ch = self._ch
        if isinstance(path, can.Listener):  # a writer the caller made (and may extend)
            writer = path
            label = type(writer).__name__
        else:
            writer = open_capture(str(path), ch.model.bitrate)
            label = str(path)
        tap = _Tap(writer, self.channel_name)
        with ch.lock:
            tap.node_id = ch.model.add_node(f"capture:{label}")
            ch.endpoints[tap.node_id] = tap

        def stop() -> None:
            with ch.lock:
                ch.endpoints.pop(tap.node_id, None)
                ch.model.remove_node(tap.node_id)
            writer.stop()

        self._owned.append(stop)


def open_capture(path: str, bitrate: int) -> can.Listener:
    """python-can's writer for ``path`` (its own dispatch: ``can.Logger``, which finds the
    ``.pcapng`` and ``.mcap`` writers through the ``can.io.message_writer`` entry points);
    one :class:`SimBusInitError` when there is none or it cannot open."""
    # an MCAP capture also keeps the bus load, a share of the bit rate
    extra = {"bitrate": bitrate} if path.lower().endswith(".mcap") else {}
    try:
        writer: can.Listener = can.Logger(path, **extra)
    except (ValueError, OSError, ImportError, NotImplementedError) as exc:
        raise SimBusInitError(f"capture={path}: {exc}") from None
    return writer


class _Port:
    """A node's receiving side, the endpoint its channel delivers to. The node holds its
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
        self.owner: weakref.ref[Any] | None = None

    def deliver(self, msg: can.Message) -> None:
        self.rx.append(msg)

    def state_changed(self, event: StateChanged) -> None:
        owner = self.owner() if self.owner is not None else None
        if owner is not None:
            owner.state_changed(event)


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
