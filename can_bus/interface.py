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
actuator modules (IDs 1..N) on the channel, ``capture=FILE`` records every
frame on it (any python-can log format, or ``.pcapng``) and, like a bus
analyser, acknowledges frames.

A lone node gets no ACK, as on a real bus: its TEC climbs to error-passive
and its frames wait for another node.
"""

from __future__ import annotations

import contextlib
import time
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


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class FwBridgeBus(can.BusABC):
    """One node on a simulated CAN bus (see the module docstring for the keywords)."""

    def __init__(self, channel: Any = "sim0", can_filters: CanFilters | None = None, *,
                 bitrate: int | None = None, pacing: str | None = None,
                 receive_own_messages: bool = False, receive_error_frames: bool = False,
                 listen_only: bool = False, auto_recovery: bool = True,
                 tx_queue_size: int = 256, rx_queue_size: int = 0, tx_order: str = "priority",
                 bit_error_rate: float = 0.0, fault_seed: int | None = None,
                 stuck_dominant: bool = False, disconnected: bool = False,
                 seed: int = 0, epoch: float | None = None, dominant_timeout: float = 1e-3,
                 modules: int = 0, capture: str | None = None, name: str | None = None,
                 **kwargs: Any) -> None:
        if _as_bool(kwargs.get("fd", False)):
            raise SimBusInitError("the fwbridge simulator is classic CAN only (no FD)")
        timing = kwargs.get("timing")
        if bitrate is None and timing is not None and hasattr(timing, "bitrate"):
            bitrate = int(timing.bitrate)
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
        self.receive_own_messages = _as_bool(receive_own_messages)
        self.receive_error_frames = _as_bool(receive_error_frames)
        self.tx_queue_size = max(1, int(tx_queue_size))
        self._rx: deque[can.Message] = deque(maxlen=int(rx_queue_size) or None)
        self.rx_rules: Rules | None = None
        self._closed = False
        self._owned: list[Callable[[], None]] = []  # started here, stopped at shutdown
        self._ch: SimChannel = open_channel(
            self.channel_name, bitrate=None if bitrate is None else int(bitrate), pacing=pacing,
            epoch=None if epoch is None else float(epoch), seed=int(seed),
            dominant_timeout=float(dominant_timeout))
        ch = self._ch
        with ch.lock:
            ch.sync()
            self.node_id = ch.model.add_node(name or f"{self.channel_name}.{ch.users}",
                                             auto_recovery=_as_bool(auto_recovery),
                                             listen_only=_as_bool(listen_only),
                                             fifo=str(tx_order) == "fifo")
            ch.endpoints[self.node_id] = self
        self.channel_info = (f"fwbridge simulated CAN {self.channel_name} @ {ch.bitrate} bit/s"
                             f" ({ch.pacing}), node {self.node_id}")
        self._can_protocol = can.CanProtocol.CAN_20
        try:
            if ber or _as_bool(stuck_dominant) or _as_bool(disconnected):
                self.inject(bit_error_rate=ber, seed=fault_seed,
                            stuck_dominant=_as_bool(stuck_dominant),
                            disconnected=_as_bool(disconnected))
            if capture:
                self._start_capture(str(capture))
            if int(modules):
                self._start_modules(int(modules))
        except Exception:
            self._teardown()
            raise
        super().__init__(channel, can_filters=can_filters)

    # -- python-can API ----------------------------------------------------------
    def _apply_filters(self, filters: CanFilters | None) -> None:
        self.rx_rules = compile_filters(filters)

    # -- the channel's Endpoint protocol ------------------------------------------
    def deliver(self, msg: can.Message) -> None:
        """Queue a frame the channel delivers to this node (called under the channel lock)."""
        self._rx.append(msg)

    def state_changed(self, event: StateChanged) -> None:
        """The channel reports a change of this node's error state."""
        pass  # state is read from the model when asked

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
        frame = make_frame(msg)
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
        names = channels() or ["sim0"]
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
        for stop in reversed(self._owned):
            with contextlib.suppress(Exception):
                stop()
        self._owned.clear()
        ch = self._ch
        with ch.lock:
            if not self._closed:
                self._closed = True
                ch.endpoints.pop(self.node_id, None)
                ch.model.remove_node(self.node_id)
                ch.rx_cond.notify_all()
        release_channel(ch)

    def _start_capture(self, path: str) -> None:
        from fwbridge.can_bus.capture import open_writer  # only needed with capture=

        writer = open_writer(path)
        ch = self._ch
        tap = _Tap(writer)
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
        from fwbridge.can_bus.nodes import ActuatorModule, NodeRunner  # only needed with modules=

        buses = [FwBridgeBus(self.channel_name, name=f"module{k}") for k in range(1, count + 1)]
        modules = [ActuatorModule(bus, k) for k, bus in enumerate(buses, start=1)]
        runner = NodeRunner(modules, period=0.002, sim=self._ch)
        runner.start()

        def stop() -> None:
            runner.stop()
            for bus in buses:
                bus.shutdown()

        self._owned.append(stop)


class _Tap:
    """A capture point on the channel: a node that acknowledges and records every frame."""

    receive_own_messages = False
    receive_error_frames = False  # captures hold the frames; error frames stay out
    rx_rules: Rules | None = None

    def __init__(self, writer: can.Listener) -> None:
        self.writer = writer
        self.node_id = -1

    def deliver(self, msg: can.Message) -> None:
        self.writer.on_message_received(msg)

    def state_changed(self, event: StateChanged) -> None:
        pass
