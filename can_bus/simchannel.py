"""A named simulated bus shared by every ``fwbridge`` Bus instance of a process.

One :class:`~can_bus.model.BusModel` per channel name, one lock, and the
clock that drives it:

- ``realtime``: bus time follows the wall clock; a daemon thread wakes at
  each event (end of a frame) and hands the frames to the receivers.
- ``afap`` (as fast as possible): bus time jumps from event to event and
  stands still while the bus is idle. The bus runs when a program waits for
  traffic (``recv`` with a timeout other than 0), when a ``send`` finds the
  transmit buffer full, at :meth:`SimChannel.advance_to`, and when a Bus
  shuts down with frames still queued. A non-blocking ``recv(0)`` never
  moves time, so step-wise code (``node.step(t)`` then ``advance_to(t)``)
  stays deterministic: frames queued at the same instant arbitrate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import can

from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.model import (
    BusModel,
    ErrorFrame,
    ErrorState,
    Event,
    FrameDelivered,
    StateChanged,
)
from fwbridge.protocols.errors import CanError, CanFrameError
from fwbridge.protocols.pacing import PACINGS, parse_pacing

__all__ = ["PACINGS", "Endpoint", "SimBusError", "SimBusInitError", "SimChannel", "channels",
           "get_channel", "open_channel",
           "release_channel"]

log = logging.getLogger("fwbridge.can_bus.simchannel")
PUMP_LIMIT = 20_000  # events per pump: an endless fault loop cannot hold a caller forever

# SocketCAN error-frame layout (linux/can/error.h), so candump-style tools read ours.
CAN_ERR_CRTL, CAN_ERR_PROT, CAN_ERR_ACK = 0x04, 0x08, 0x20
CAN_ERR_BUSOFF, CAN_ERR_RESTARTED, CAN_ERR_CNT = 0x40, 0x100, 0x200
_PROT_TYPE = {"bit": 0x01, "form": 0x02, "stuff": 0x04, "crc": 0x00, "ack": 0x00,
              "dominant": 0x04}
_CRTL = {ErrorState.PASSIVE: 0x30, ErrorState.ACTIVE: 0x40}  # RX/TX passive, back to active


Rules = list[tuple[int, int, bool | None]]  # (can_id & mask, mask, extended or None)


class SimBusInitError(CanError, can.CanInitializationError):
    """The simulated bus cannot open with these keywords (python-can's and fwbridge's error)."""


class SimBusError(CanError, can.CanOperationError):
    """The simulated bus refuses an operation (python-can's and fwbridge's error)."""


def compile_filters(filters: Any) -> Rules | None:
    """python-can filters as (id & mask, mask, extended) rules; None accepts everything."""
    rules = [(f["can_id"] & f["can_mask"], f["can_mask"], f.get("extended"))
             for f in filters or ()]
    return rules or None


def matches(rules: Rules, can_id: int, extended: bool) -> bool:
    """python-can's filter semantics: any rule whose mask and extended flag fit."""
    for want, mask, ext in rules:
        if (ext is None or ext == extended) and can_id & mask == want:
            return True
    return False


class Endpoint(Protocol):
    """What the channel needs from a receiving node (a Bus, or a capture tap)."""

    node_id: int
    receive_own_messages: bool
    receive_error_frames: bool
    rx_rules: Rules | None  # acceptance filter applied at delivery, as hardware would
    fd: bool  # receives CAN FD frames (a classic node ignores them, as an FD-tolerant one)
    channel: Any  # the channel as its Bus was opened with (0 stays 0), for Message.channel

    def deliver(self, msg: can.Message) -> None: ...

    def state_changed(self, event: StateChanged) -> None: ...


class SimChannel:
    """One simulated bus and its clock. Every method is called with ``lock`` held
    unless its docstring says otherwise."""

    def __init__(self, name: str, bitrate: int, pacing: str, *, epoch: float | None = None,
                 seed: int = 0, dominant_timeout: float = 1e-3,
                 data_bitrate: int | None = None, drive: bool = True) -> None:
        pacing = parse_pacing(pacing)
        self.name = name
        self.pacing = pacing
        self.afap = pacing == "afap"
        self.model = BusModel(bitrate, data_bitrate=data_bitrate, seed=seed,
                              dominant_timeout=dominant_timeout)
        self.epoch = time.time() if epoch is None else float(epoch)
        self.lock = threading.RLock()
        self.rx_cond = threading.Condition(self.lock)  # frames delivered, space freed
        self._drv_cond = threading.Condition(self.lock)  # new work for the driver
        self.endpoints: dict[int, Endpoint] = {}
        self.users = 0
        self.waiting = 0
        self._t0 = time.monotonic()
        self._stop = False
        self._driver: threading.Thread | None = None
        if not self.afap and drive:  # drive=False: the owner's loop calls sync() in time
            self._driver = threading.Thread(target=self._drive, name=f"fwbridge-{name}",
                                            daemon=True)
            self._driver.start()

    @property
    def bitrate(self) -> int:
        return self.model.bitrate

    @property
    def data_bitrate(self) -> int:
        return self.model.data_bitrate

    # -- time ------------------------------------------------------------------
    @property
    def t0(self) -> float:
        """``time.monotonic()`` at bus time 0 (realtime: bus time follows that clock)."""
        return self._t0

    def bus_time(self) -> float:
        """Seconds since the channel started, in bus time."""
        if self.afap:
            return self.model.seconds(self.model.now)
        return time.monotonic() - self._t0

    def sync(self) -> None:
        """Realtime: bring the model up to the wall clock. No-op when afap."""
        if not self.afap:
            self.dispatch(self.model.run_until(self.model.bits(time.monotonic() - self._t0)))

    def kick(self) -> None:
        """New frames are queued: wake whoever drives the bus."""
        if not self.afap:
            self._drv_cond.notify()
        elif self.waiting:  # afap: a receiver waiting for traffic runs the bus
            self.rx_cond.notify_all()

    def wait(self, timeout: float) -> None:
        """Wait for deliveries (lock held), counted so senders know to wake us."""
        self.waiting += 1
        try:
            self.rx_cond.wait(timeout)
        finally:
            self.waiting -= 1

    def pump(self, stop: Callable[[], bool] | None = None, limit: int = PUMP_LIMIT) -> bool:
        """Afap: run the bus until ``stop()`` or nothing is left. True if idle.

        Runs in batches: whatever is queued goes out, as it would at any pace.
        """
        model = self.model
        batch = 64
        done = 0
        while done < limit:
            if stop is not None and stop():
                return False
            self.dispatch(model.run_until_idle(batch))
            done += batch
            if model.next_event_time() is None:
                return True
            batch = min(batch * 4, 4096)
        return False

    def advance_to(self, t: float) -> None:
        """Afap: run the bus up to bus time ``t`` seconds (idle time included)."""
        if not self.afap:
            raise SimBusError(f"{self.name} runs in real time; only afap buses advance")
        self.dispatch(self.model.run_until(self.model.bits(t)))

    def _drive(self) -> None:
        model = self.model
        with self.lock:
            while not self._stop:
                elapsed = time.monotonic() - self._t0
                try:
                    self.dispatch(model.run_until(model.bits(elapsed)))
                except Exception:  # a failing receiver (say, a full disk) must not stop the bus
                    log.exception("fwbridge %s: delivering frames failed", self.name)
                nxt = model.next_event_time()
                wait = 0.5 if nxt is None else model.seconds(nxt) - elapsed
                if wait > 0:
                    self._drv_cond.wait(min(wait, 0.5))

    def close(self) -> None:
        """Stop the driver thread (call without holding the lock)."""
        with self.lock:
            self._stop = True
            self._drv_cond.notify()
        if self._driver is not None and self._driver is not threading.current_thread():
            self._driver.join(timeout=2.0)

    # -- delivery --------------------------------------------------------------
    def dispatch(self, events: list[Event]) -> None:
        """Hand each event to the endpoints that see it."""
        if not events:
            return
        eps = self.endpoints
        epoch, rate = self.epoch, self.model.tick_rate
        for ev in events:
            if type(ev) is FrameDelivered:
                can_id, ext, rtr, dlc, data, is_fd, brs, esi = ev.frame
                if is_fd:
                    dlc = len(data)  # python-can's FD dlc is the length
                ts = epoch + ev.time / rate
                for rid in ev.receivers:
                    ep = eps.get(rid)
                    if ep is not None and (ep.rx_rules is None
                                           or matches(ep.rx_rules, can_id, ext)):
                        if not is_fd:
                            ep.deliver(can.Message(timestamp=ts, arbitration_id=can_id,
                                                is_extended_id=ext, is_remote_frame=rtr, dlc=dlc,
                                                data=data, channel=ep.channel))
                        elif ep.fd:
                            ep.deliver(can.Message(timestamp=ts, arbitration_id=can_id,
                                                is_extended_id=ext, dlc=dlc, data=data,
                                                channel=ep.channel, is_fd=True,
                                                bitrate_switch=brs, error_state_indicator=esi))
                for tid in ev.transmitters:
                    ep = eps.get(tid)
                    if ep is not None and ep.receive_own_messages and (
                            ep.rx_rules is None or matches(ep.rx_rules, can_id, ext)):
                        ep.deliver(can.Message(timestamp=ts, arbitration_id=can_id,
                                            is_extended_id=ext, is_remote_frame=rtr, dlc=dlc,
                                            data=data, channel=ep.channel, is_rx=False,
                                            is_fd=is_fd, bitrate_switch=brs,
                                            error_state_indicator=esi))
            elif type(ev) is ErrorFrame:
                self._error_frame(ev)
            elif type(ev) is StateChanged:
                ep = eps.get(ev.node)
                if ep is not None:
                    ep.state_changed(ev)
                    if ep.receive_error_frames:
                        ep.deliver(self._state_message(ev, ep.channel))
                for tap in eps.values():  # capture taps record every node's changes
                    seen = getattr(tap, "observe_state", None)
                    if seen is not None:
                        seen(self.model.node(ev.node).name, ev, epoch + ev.time / rate)
        self.rx_cond.notify_all()

    def _error_frame(self, ev: ErrorFrame) -> None:
        ts = self.epoch + ev.time / self.model.tick_rate
        model = self.model
        counters = {nid: (tec, rec) for nid, tec, rec in ev.counters}
        for nid, ep in self.endpoints.items():
            if not ep.receive_error_frames:
                continue
            if ev.local and nid not in ev.transmitters:
                continue
            node = model.node(nid)
            if not ev.local and (node.disconnected or node.state is ErrorState.BUS_OFF):
                continue
            can_id = CAN_ERR_PROT | CAN_ERR_CNT | (CAN_ERR_ACK if ev.kind == "ack" else 0)
            data = bytearray(8)
            data[2] = _PROT_TYPE.get(ev.kind, 0)
            data[3] = 0x08 if ev.kind == "crc" else 0  # CAN_ERR_PROT_LOC_CRC_SEQ
            tec, rec = counters.get(nid, (node.tec, node.rec))
            data[6], data[7] = min(tec, 255), min(rec, 255)
            ep.deliver(can.Message(timestamp=ts, arbitration_id=can_id, is_error_frame=True,
                                is_extended_id=False, dlc=8, data=data, channel=ep.channel))

    def _state_message(self, ev: StateChanged, channel: Any) -> can.Message:
        data = bytearray(8)
        if ev.new is ErrorState.BUS_OFF:
            can_id = CAN_ERR_BUSOFF | CAN_ERR_CNT
        elif ev.old is ErrorState.BUS_OFF:
            can_id = CAN_ERR_RESTARTED | CAN_ERR_CNT
        else:
            can_id = CAN_ERR_CRTL | CAN_ERR_CNT
            data[1] = _CRTL[ev.new]
        data[6], data[7] = min(ev.tec, 255), min(ev.rec, 255)
        return can.Message(timestamp=self.epoch + ev.time / self.model.tick_rate,
                           arbitration_id=can_id, is_error_frame=True, is_extended_id=False,
                           dlc=8, data=data, channel=channel)

    # -- queries ---------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters of the whole bus and of each node."""
        m = self.model
        now = m.now if self.afap else max(m.now, m.bits(time.monotonic() - self._t0))
        return {
            "channel": self.name, "bitrate": m.bitrate, "data_bitrate": m.data_bitrate,
            "pacing": self.pacing,
            "bus_time": m.seconds(now), "frames": m.frames, "error_frames": m.error_frames,
            "busy_bits": m.busy_bits, "load": m.busy_bits / now if now else 0.0,
            "nodes": [{"id": n.id, "name": n.name, "state": n.state.name, "tec": n.tec,
                       "rec": n.rec, "tx_ok": n.tx_ok, "tx_errors": n.tx_errors,
                       "bus_offs": n.bus_offs, "queued": len(n.tx)} for n in m.nodes],
        }


_channels: dict[str, SimChannel] = {}
# Re-entrant: a bus's finalizer (a model or bus nobody shut down, collected by the
# garbage collector while open_channel allocates under this lock) calls release_channel
# on the same thread; a plain Lock deadlocks there.
_registry_lock = threading.RLock()


def open_channel(name: str, *, bitrate: int | None, pacing: str | None,
                 data_bitrate: int | None = None, **options: Any) -> SimChannel:
    """The channel ``name``, created on first use; later users must agree on its settings."""
    with _registry_lock:
        ch = _channels.get(name)
        if ch is None:
            ch = SimChannel(name, bitrate or 500_000, pacing or "realtime",
                            data_bitrate=data_bitrate, **options)
            _channels[name] = ch
        else:
            if data_bitrate is not None and data_bitrate != ch.data_bitrate:
                raise SimBusInitError(
                    f"channel {name} has a data phase at {ch.data_bitrate} bit/s, not "
                    f"{data_bitrate}")
            if bitrate is not None and bitrate != ch.bitrate:
                raise SimBusInitError(
                    f"channel {name} runs at {ch.bitrate} bit/s, not {bitrate}: a node at another"
                    " bit rate would only see errors")
            if pacing is not None and pacing != ch.pacing:
                raise SimBusInitError(
                    f"channel {name} is paced {ch.pacing}, not {pacing}")
        ch.users += 1
        return ch


def release_channel(ch: SimChannel) -> None:
    """One user fewer; the last one closes the channel."""
    with _registry_lock:
        ch.users -= 1
        last = ch.users <= 0
        if last and _channels.get(ch.name) is ch:
            del _channels[ch.name]
    if last:
        ch.close()


def get_channel(name: str) -> SimChannel | None:
    """The open channel ``name`` of this process, if any."""
    with _registry_lock:
        return _channels.get(name)


def channels() -> list[str]:
    with _registry_lock:
        return sorted(_channels)


def make_frame(msg: can.Message, fd: bool = False) -> Frame:
    """The frame a python-can message puts on the bus (checked); CAN FD frames only when
    the node is FD-capable (``fd``)."""
    can_id, data = msg.arbitration_id, msg.data
    if (not msg.is_remote_frame and not msg.is_error_frame and not msg.is_fd
            and msg.dlc == len(data) <= 8
            and 0 <= can_id <= (0x1FFFFFFF if msg.is_extended_id else 0x7FF)):
        return Frame(can_id, msg.is_extended_id, False, msg.dlc, bytes(data))  # the usual case
    if msg.is_error_frame:
        raise SimBusError("error frames are not transmitted: the bus makes them")
    if msg.is_fd and not fd:
        raise SimBusError("a CAN FD frame on a classic node: open the bus with fd=True")
    if not msg.is_fd and (msg.bitrate_switch or msg.error_state_indicator):
        raise SimBusError("bitrate_switch and error_state_indicator need is_fd=True")
    try:
        if msg.is_fd:
            if msg.is_remote_frame:
                raise CanFrameError("CAN FD has no remote frames")
            if msg.dlc != len(data):
                raise CanFrameError(f"DLC {msg.dlc} does not match {len(data)} data bytes")
            return Frame.make(can_id, bytes(data), extended=msg.is_extended_id, fd=True,
                              brs=msg.bitrate_switch, esi=msg.error_state_indicator)
        return Frame.make(msg.arbitration_id, bytes(msg.data or b""), extended=msg.is_extended_id,
                          remote=msg.is_remote_frame, dlc=msg.dlc)
    except ValueError as exc:
        raise SimBusError(str(exc)) from None
