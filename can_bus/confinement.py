"""Fault confinement of the bus model: counters and states, bus-off recovery, and the
faults that take a node off the wire (a stuck-dominant transmitter, a cut cable).

A mixin of :class:`~can_bus.model.BusModel`, kept apart to keep each file small;
it works on the model's own fields, declared below.
"""

from __future__ import annotations

from typing import NamedTuple

from fwbridge.can_bus.bits import Frame, stuffed_length
from fwbridge.can_bus.faults import RECOVERY_TAIL, Outcome
from fwbridge.can_bus.modeltypes import ErrorFrame, ErrorState, Event, Node, StateChanged, TxEntry

__all__ = ["REC_MAX", "SUSPEND_BITS", "FaultConfinement", "Flight"]

REC_MAX = 255  # an 8-bit counter, as in common controllers
SUSPEND_BITS = 8


class Flight(NamedTuple):
    """The frame (or dominant run) on the wire now: when it ends and who sent it."""

    done_at: int
    free_at: int
    tail_start: int  # first bit of the recessive run that follows
    start: int
    frame: Frame | None
    tx: tuple[Node, ...]
    entries: tuple[TxEntry, ...]
    outcome: Outcome | None


class FaultConfinement:
    """TEC/REC bookkeeping and the off-the-wire faults (see :mod:`can_bus.model`)."""

    _events: list[Event]
    _nodes: dict[int, Node]
    _rec_nonzero: set[Node]
    _listeners: list[Node]
    _isolated: list[Node]
    _dirty: bool
    _resort: bool
    _recovering: list[Node]
    _flight: Flight | None
    dominant_timeout: int
    error_frames: int

    def _refresh(self) -> None:
        raise NotImplementedError

    def _end_run(self, s: int) -> None:
        raise NotImplementedError

    def _counters(self) -> tuple[tuple[int, int, int], ...]:
        return tuple((n.id, n.tec, n.rec) for n in self._nodes.values())

    def _received(self, receivers: set[int], t: int) -> None:
        """Successful reception: REC - 1, or back to 127 from error-passive."""
        for m in list(self._rec_nonzero):
            if m.id not in receivers:
                continue
            m.rec = m.rec - 1 if m.rec <= 127 else 127
            if m.rec == 0:
                self._rec_nonzero.discard(m)
            self._check_state(m, t)

    def _check_state(self, n: Node, t: int) -> None:
        old = n.state
        if old is ErrorState.BUS_OFF:
            return
        if n.tec > 255:
            new = ErrorState.BUS_OFF
        elif n.tec >= 128 or n.rec >= 128:
            new = ErrorState.PASSIVE
        else:
            new = ErrorState.ACTIVE
        if new is old:
            return
        n.state = new
        self._events.append(StateChanged(t, n.id, old, new, n.tec, n.rec))
        if new is ErrorState.BUS_OFF:
            n.bus_offs += 1
            n.recovery_count = 0
            n.recovery_from = t if n.auto_recovery else None
            self._dirty = True

    def _recover(self, n: Node, t: int) -> None:
        n.tec = n.rec = 0
        n.recovery_count, n.recovery_from = 0, None
        n.state = ErrorState.ACTIVE
        n.stuck_at = n.seg_free = t
        self._rec_nonzero.discard(n)
        self._events.append(StateChanged(t, n.id, ErrorState.BUS_OFF, ErrorState.ACTIVE, 0, 0))
        self._refresh()

    def _start_dominant(self, n: Node, s: int) -> None:
        if self._recovering:
            self._end_run(s)
        d = self.dominant_timeout
        self._flight = Flight(s + d, s + d + RECOVERY_TAIL, s + d, s, None, (n,), (), None)

    def _finish_dominant(self, f: Flight) -> None:
        """ISO rule 6 through a dominant burst: REC + 1 at the stuff error, + 8 per 8 bits."""
        s, end = f.start, f.done_at
        steps = [(s + 6, 1)] + [(s + 26 + 8 * j, 8) for j in range((end - s - 26 + 7) // 8)
                                if s + 26 + 8 * j < end]
        for m in list(self._listeners):
            if m.listen_only:
                continue
            for when, inc in steps:
                m.rec = min(REC_MAX, m.rec + inc)
                self._check_state(m, when)
            self._rec_nonzero.add(m)
        stuck = f.tx[0]
        if stuck.stuck_dominant and stuck.id in self._nodes:
            stuck.tx_disabled = True
            stuck.seg_free = end
        self.error_frames += 1
        self._events.append(ErrorFrame(end, s, None, "dominant", stuck.id, (),
                                       counters=self._counters()))
        self._resort = self._dirty = True

    def _next_isolated(self) -> tuple[int, Node] | None:
        best: tuple[int, Node] | None = None
        for n in self._isolated:
            if not n.tx or n.stalled or n.state is ErrorState.BUS_OFF:
                continue
            start = max(n.seg_free, n.ready, n.suspend_until)
            # no ACK: through the ACK slot, flag, delimiter, intermission; or a bit error on SOF
            dur = stuffed_length(n.tx.head()[0]) + 19 if n.disconnected else 18
            if best is None or start + dur < best[0]:
                best = (start + dur, n)
        return best

    def _isolated_attempt(self, n: Node, t: int) -> None:
        frame = n.tx.head()[0]
        if n.disconnected and n.state is ErrorState.PASSIVE:
            n.stalled = True  # exception 1: an unacknowledged passive sender keeps its TEC
        else:
            n.tec += 8
        n.tx_errors += 1
        self._check_state(n, t)
        n.seg_free = t + (SUSPEND_BITS if n.state is ErrorState.PASSIVE else 0)
        self._events.append(ErrorFrame(t, t, frame, "ack" if n.disconnected else "bit", n.id,
                                       (n.id,), local=True, counters=((n.id, n.tec, n.rec),)))
        if self._dirty:
            self._refresh()
