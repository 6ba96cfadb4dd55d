"""``fwbridge``: the simulated bus as a python-can interface.

::

    bus = can.Bus(interface="fwbridge", channel="sim0", bitrate=500000)

Every Bus instance on a channel is one node (one CAN controller) of a bus
shared inside the process; frames arbitrate, take their exact bit time and
carry the end of their EOF, in bus time, as timestamp (``epoch`` plus bus
seconds; ``epoch`` defaults to the wall clock when the channel opened).

Shared bus: ``channel="shared:NAME"`` attaches to the bus that ``fwbridge can
bus up NAME`` runs for every process of this user (:mod:`can_bus.remote`);
without that daemon it is an error. A plain ``channel=NAME`` is always this
process's own bus; when a daemon named NAME is up, opening it warns
(:class:`~can_bus.attach.SharedBusWarning`) that ``shared:NAME`` attaches.

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
as through a SocketCAN queue; replays want ``fifo``), ``lockstep`` (shared afap
buses: ``False`` for a node that never answers in bus time, a logger say, so
frames handed to it hold no bus time), ``name``, faults of this
node (``bit_error_rate``, ``fault_seed``, ``stuck_dominant``,
``disconnected``), channel settings (``seed``, ``epoch``,
``dominant_timeout``), and, for python-can's command line tools, which open
one Bus per process, ``capture=FILE`` (or a python-can Listener): a tap that
records every frame on the channel (any format python-can's ``can.Logger``
writes, ``.pcapng`` and ``.mcap`` among them) and, like a bus analyser,
acknowledges frames. The Bus never starts simulated modules: that is
:func:`can_bus.sim.nodes.start_modules` or ``fwbridge can sim N``.

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
from typing import Any

import can
from can import BusState, CanOperationError
from can.typechecking import AutoDetectedConfig, CanFilters

from fwbridge.can_bus.attach import open_node
from fwbridge.can_bus.bus_node import SETTINGS, SHARED, BusNode, settings
from fwbridge.can_bus.daemon_dir import list_daemons
from fwbridge.can_bus.local_node import SHUTDOWN_LINGER
from fwbridge.can_bus.model import StateChanged
from fwbridge.can_bus.simchannel import SimBusError, SimBusInitError, channels

__all__ = ["MODULES_MOVED", "FwBridgeBus", "SimBusError", "SimBusInitError"]

#: Why ``modules=`` is refused: the Bus starts no simulated firmware.
MODULES_MOVED = ("modules= is gone: the Bus starts no simulated modules; run them with "
                 "fwbridge.can_bus.sim.nodes.start_modules(channel, N) or 'fwbridge can sim N'")


class FwBridgeBus(can.BusABC):
    """One node on a simulated CAN bus (see the module docstring for the keywords): this
    process's channel, or with ``channel="shared:NAME"`` a shared bus's daemon."""

    def __init__(self, channel: Any = "sim0", can_filters: CanFilters | None = None, *,
                 capture: str | can.Listener | None = None, seed: int = 0,
                 epoch: float | None = None, dominant_timeout: float = 1e-3,
                 modules: Any = None, **kwargs: Any) -> None:
        if modules is not None:
            raise SimBusInitError(MODULES_MOVED)
        # other keywords (python-can's configuration may hold any) are left alone, as before
        s = settings(**{k: v for k, v in kwargs.items() if k in SETTINGS})
        self._node: BusNode = open_node(
            channel, s, owner=self, capture=capture, seed=int(seed),
            epoch=None if epoch is None else float(epoch),
            dominant_timeout=float(dominant_timeout))
        node = self._node
        self.channel_name = node.channel_name
        self.channel_info = node.channel_info
        self.node_id = node.node_id
        self.tx_queue_size = node.tx_queue_size
        self._can_protocol = can.CanProtocol.CAN_FD if s.fd else can.CanProtocol.CAN_20
        try:
            super().__init__(channel, can_filters=can_filters)
        except BaseException:
            node.close()
            raise

    # -- python-can API ----------------------------------------------------------
    def _apply_filters(self, filters: CanFilters | None) -> None:
        self._node.set_filters(filters)

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        return self._node.recv(timeout), True  # the node filters as it receives

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        """Queue ``msg`` for transmission (lowest ID first among this node's frames).

        Blocks while the node's ``tx_queue_size`` frames are queued, up to
        ``timeout``; raises ``CanOperationError`` then, or at once when no
        other node can acknowledge the frames.
        """
        self._node.send(msg, timeout)

    def flush_tx_buffer(self) -> None:
        self._node.flush()

    @property
    def receive_own_messages(self) -> bool:
        return self._node.get_own()

    @receive_own_messages.setter
    def receive_own_messages(self, flag: bool) -> None:
        self._node.set_own(flag)

    @property
    def receive_error_frames(self) -> bool:
        return self._node.get_error_frames()

    @receive_error_frames.setter
    def receive_error_frames(self, flag: bool) -> None:
        self._node.set_error_frames(flag)

    @property
    def state(self) -> BusState:
        """ACTIVE, PASSIVE (error-passive or listen-only) or ERROR (bus-off)."""
        return self._node.get_state()

    @state.setter
    def state(self, new_state: BusState) -> None:
        """PASSIVE: listen-only (no ACK, no frames). ACTIVE: normal, and recover from bus-off."""
        self._node.set_state(new_state)

    def shutdown(self) -> None:
        node = getattr(self, "_node", None)
        if node is not None and not self._is_shutdown and not node.closed:
            with contextlib.suppress(CanOperationError):
                node.wait_sent(SHUTDOWN_LINGER)  # as a kernel queue drains on close
            node.close()
        super().shutdown()

    @staticmethod
    def _detect_available_configs() -> list[AutoDetectedConfig]:
        names = [*channels(), *(SHARED + d["name"] for d in list_daemons(strict=False))] or ["sim0"]
        return [{"interface": "fwbridge", "channel": name} for name in sorted(set(names))]

    # -- simulator extras ----------------------------------------------------------
    def state_changed(self, event: StateChanged) -> None:
        """Hook: this node's fault-confinement state changed (this process's channels)."""

    @property
    def shared(self) -> bool:
        """On a shared bus (``shared:NAME``, its daemon elsewhere), not this process's."""
        return self._node.shared

    @property
    def sim(self) -> Any:
        """The bus this node is on: the channel (model, lock, clock) of this process, or
        what a shared bus's daemon tells of its own (rates, pacing, epoch, stats)."""
        return self._node.sim

    @property
    def time(self) -> float:
        """Bus time in seconds since the channel opened."""
        return self._node.bus_time()

    @property
    def error_counters(self) -> tuple[int, int]:
        """(TEC, REC) of this node."""
        return self._node.error_counters()

    def advance_to(self, t: float) -> None:
        """Afap only: run the bus up to bus time ``t`` (seconds)."""
        self._node.advance_to(t)

    def advance(self, dt: float) -> None:
        """Afap only: run the bus for ``dt`` more seconds."""
        self._node.advance_to(self._node.bus_time() + dt)

    def inject(self, *, bit_error_rate: float | None = None, stuck_dominant: bool | None = None,
               disconnected: bool | None = None, seed: int | None = None) -> None:
        """Inject (or clear, with False / 0.0) faults on this node from now on."""
        self._node.inject(bit_error_rate=bit_error_rate, stuck_dominant=stuck_dominant,
                          disconnected=disconnected, seed=seed)

    def recover(self) -> None:
        """Ask a bus-off node to recover (counts 128 x 11 recessive bits from now)."""
        self._node.recover()

    def wait_sent(self, timeout: float = SHUTDOWN_LINGER) -> int:
        """Wait until this node's queued frames are on the bus; return how many are left.

        Frames stay queued while the node is bus-off or nobody acknowledges
        them; realtime buses wait at most ``timeout`` seconds, afap buses run
        the bus instead. Shutdown calls this, as a kernel queue drains on close.
        """
        return self._node.wait_sent(timeout)
