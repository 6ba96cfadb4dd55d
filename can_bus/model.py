"""Sans-I/O model of one CAN bus: arbitration, exact timing, fault confinement.

Classic and CAN FD frames (:mod:`can_bus.fd`). Time is an integer count of
ticks, ``tick_rate`` of them per second: one bit time when the bus has one
bit rate, else the least common multiple of the nominal and the data bit
rates (``nt`` ticks per nominal bit, ``dt`` per data-phase bit). The
model never reads a clock and runs no thread. Drive it with
:meth:`BusModel.run_until` and read the events it returns::

    bus = BusModel(500_000)
    a, b = bus.add_node("a"), bus.add_node("b")
    bus.submit(a, Frame.make(0x123, b"\\x01"))
    for event in bus.run_until(bus.bits(0.001)):
        ...

Behaviour (ISO 11898-1): when the bus goes idle every node with a frame
pending starts together and the lowest arbitration field wins (that is the
bitwise arbitration: dominant 0 overwrites recessive 1); losers retry at the
next idle. A frame takes exactly :func:`~can_bus.bits.frame_length` bits.
TEC/REC follow the ISO increments; error-active below 128, error-passive
from 128 (and an error-passive transmitter waits 8 more bits before its next
frame), bus-off when TEC exceeds 255, back to error-active with both
counters at 0 after 128 occurrences of 11 recessive bits, counted from the
bus-off (automatic recovery) or from :meth:`BusModel.request_recovery`.

Fault injection per node (:meth:`BusModel.set_faults`):

- ``bit_error_rate``: the node misreads bits at that rate (seeded), see
  :mod:`can_bus.faults` for what each misread does;
- ``stuck_dominant``: the node's transmitter holds the bus dominant. Every
  node sees the error flags and ISO rule 6 raises REC by 8 for every 8 more
  dominant bits, until the transceiver's TXD dominant time-out
  (``dominant_timeout``, default 1 ms) releases the bus. The node then
  cannot drive the bus (no frame, no ACK): each of its attempts is a bit
  error on SOF, and fault confinement takes it bus-off;
- ``disconnected``: the node is alone on its own wire: it receives nothing
  and its frames get no ACK (TEC + 8 up to error-passive, then exception 1).

A transmitter nobody acknowledges goes error-passive the same way and then
waits, without spending events, until a node that could acknowledge joins
or recovers (the bus is treated as idle meanwhile).
"""

from __future__ import annotations

import math
import random
from math import lcm

from fwbridge.can_bus.bits import EOF_END, TAIL_BITS, Frame, arbitration_key, stuffed_length
from fwbridge.can_bus.confinement import REC_MAX, SUSPEND_BITS, FaultConfinement, Flight
from fwbridge.can_bus.faults import FLAG_BITS, RECOVERY_TAIL, Outcome, Party, first_misread, resolve
from fwbridge.can_bus.modeltypes import (
    ErrorFrame,
    ErrorState,
    Event,
    FrameDelivered,
    Node,
    StateChanged,
    TxBuffer,
)
from fwbridge.protocols.errors import ConfigError

__all__ = [
    "BusModel",
    "ErrorFrame",
    "ErrorState",
    "Event",
    "FrameDelivered",
    "Node",
    "StateChanged",
    "TxBuffer",
]

_FAR = 1 << 62  # "no horizon" for run_until_idle
RECOVERY_OCCURRENCES = 128




class BusModel(FaultConfinement):
    """One CAN bus with its nodes, in bit times. Not thread-safe: callers lock."""

    def __init__(self, bitrate: int = 500_000, *, data_bitrate: int | None = None, seed: int = 0,
                 dominant_timeout: float = 1e-3) -> None:
        if bitrate <= 0 or (data_bitrate is not None and data_bitrate <= 0):
            raise ConfigError(f"bit rates must be positive, got {bitrate}, {data_bitrate}")
        self.bitrate = int(bitrate)
        self.data_bitrate = int(data_bitrate or bitrate)
        self.tick_rate = lcm(self.bitrate, self.data_bitrate)
        self.nt = self.tick_rate // self.bitrate
        self.dt = self.tick_rate // self.data_bitrate
        self.seed = seed
        self.dominant_timeout = max(1, math.ceil(dominant_timeout * self.tick_rate))
        self.now = 0
        self.frames = 0
        self.error_frames = 0
        self.busy_bits = 0
        self._free_at = 0
        self._run_start = 0
        self._nodes: dict[int, Node] = {}
        self._next_id = 1
        self._flight: Flight | None = None
        self._events: list[Event] = []
        self._pending: dict[int, Node] = {}
        self._listeners: list[Node] = []
        self._others: dict[int, tuple[int, ...]] = {}
        self._n_ackers = 0
        self._faulty: list[Node] = []  # listeners that misread bits
        self._isolated: list[Node] = []
        self._recovering: list[Node] = []
        self._stuck: list[Node] = []
        self._rec_nonzero: set[Node] = set()
        self._dirty = False
        self._resort = False

    # -- time ------------------------------------------------------------------
    def bits(self, seconds: float) -> int:
        """Seconds -> ticks (rounded up: nothing happens between bit boundaries)."""
        return math.ceil(seconds * self.tick_rate - 1e-9)

    def seconds(self, bits: int) -> float:
        """Ticks -> seconds."""
        return bits / self.tick_rate

    # -- nodes -----------------------------------------------------------------
    def add_node(self, name: str = "", *, auto_recovery: bool = True,
                 listen_only: bool = False, fifo: bool = False) -> int:
        """A new node; ``fifo`` sends its frames in order instead of lowest ID first
        (a single transmit buffer, as a SocketCAN queue, rather than one per frame)."""
        nid = self._next_id
        self._next_id += 1
        self._nodes[nid] = Node(nid, name or f"node{nid}", auto_recovery, listen_only,
                                rng=random.Random(f"{self.seed}:{nid}"), tx=TxBuffer(fifo))
        self._refresh()
        return nid

    def remove_node(self, nid: int) -> None:
        n = self._nodes.pop(nid, None)
        if n is not None:
            self._rec_nonzero.discard(n)
            self._refresh()

    def node(self, nid: int) -> Node:
        return self._nodes[nid]

    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def submit(self, nid: int, frame: Frame) -> None:
        """Queue ``frame`` at the model's current time; a node sends its lowest ID first."""
        n = self._nodes[nid]
        if n.listen_only:
            raise ConfigError(f"{n.name} is listen-only and cannot transmit")
        if not n.tx:
            n.ready = self.now
        n.tx.push((frame, arbitration_key(frame)))
        if nid not in self._pending and self._eligible(n):
            self._pending[nid] = n

    def outstanding(self, nid: int) -> int:
        """Frames of this node not yet transmitted, the one on the wire included."""
        n = self._nodes[nid]
        f = self._flight
        return len(n.tx) + (1 if f is not None and n in f.tx else 0)

    def flush(self, nid: int) -> None:
        """Drop the node's queued frames (not the one on the wire)."""
        self._nodes[nid].tx.clear()
        self._pending.pop(nid, None)

    def set_listen_only(self, nid: int, flag: bool) -> None:
        self._nodes[nid].listen_only = flag
        self._refresh()

    def set_faults(self, nid: int, *, bit_error_rate: float | None = None,
                   stuck_dominant: bool | None = None, disconnected: bool | None = None,
                   seed: int | str | None = None) -> None:
        """Inject or clear faults on one node, from the model's current time."""
        n = self._nodes[nid]
        if bit_error_rate is not None:
            if not 0.0 <= bit_error_rate <= 1.0:
                raise ConfigError(f"bit error rate {bit_error_rate} not in 0..1")
            n.bit_error_rate = bit_error_rate
        if seed is not None:
            n.rng = random.Random(seed)
        if stuck_dominant is not None:
            n.stuck_dominant = stuck_dominant
            n.stuck_at = self.now
            if not stuck_dominant:
                n.tx_disabled = False
        if disconnected is not None:
            n.disconnected = disconnected
            n.seg_free = self.now
        self._refresh()

    def request_recovery(self, nid: int) -> None:
        """Start the 128 x 11 recessive-bit count of a bus-off node (ISO recovery on request)."""
        n = self._nodes[nid]
        if n.state is ErrorState.BUS_OFF and n.recovery_from is None:
            n.recovery_from, n.recovery_count = self.now, 0
            self._refresh()

    # -- running ---------------------------------------------------------------
    def run_until(self, t: int) -> list[Event]:
        """Advance to bit time ``t``; return what happened, in time order."""
        return self._run(max(t, self.now), False, None)

    def run_until_idle(self, limit: int | None = None) -> list[Event]:
        """Run until nothing is left to do (or ``limit`` steps); time stops at the last event.

        Idle time does not pass: this is how an as-fast-as-possible clock runs.
        """
        return self._run(_FAR, True, limit)

    def run_idle_until(self, t: int, limit: int | None = None) -> list[Event]:
        """:meth:`run_until_idle`, but not past bit time ``t`` (an afap bus with a
        node that waits only until then)."""
        return self._run(t, True, limit)

    def _run(self, t: int, idle_stop: bool, limit: int | None) -> list[Event]:
        ev: list[Event] = []
        self._events = ev
        last = self.now
        steps = 0
        while limit is None or steps < limit:
            steps += 1
            f = self._flight
            iso = self._next_isolated() if self._isolated else None
            if f is not None:
                if iso is not None and iso[0] < f.done_at and iso[0] <= t:
                    last = iso[0]
                    self._isolated_attempt(iso[1], last)
                    continue
                if f.done_at > t:
                    break
                self._flight = None
                last = f.done_at
                self._complete(f)
                continue
            idle = self._next_idle()
            if iso is not None and iso[0] <= t and (idle is None or iso[0] < idle[0]):
                last = iso[0]
                self._isolated_attempt(iso[1], last)
                continue
            if idle is None or idle[0] > t:
                break
            when, kind, node = idle
            last = when
            if kind == 2:
                self._sof(when)
            elif kind == 0 and node is not None:
                self._recover(node, when)
            elif node is not None:
                self._start_dominant(node, when)
        self.now = last if idle_stop else t
        if self._resort:
            ev.sort(key=lambda e: e.time)
            self._resort = False
        return ev

    def next_event_time(self) -> int | None:
        """Bit time of the next thing that will happen, or None if nothing will."""
        times = []
        if self._flight is not None:
            times.append(self._flight.done_at)
        else:
            idle = self._next_idle()
            if idle is not None:
                times.append(idle[0])
        if self._isolated:
            iso = self._next_isolated()
            if iso is not None:
                times.append(iso[0])
        return min(times) if times else None

    @property
    def flight_end(self) -> int | None:
        """Bit time the frame (or error flag) now on the wire ends; None while idle. Its
        outcome is settled when it starts: inputs after that change only later frames."""
        return self._flight.done_at if self._flight is not None else None

    @property
    def busy_until(self) -> int:
        """End of the current transmission (bit time), or the last one."""
        return self._flight.free_at if self._flight is not None else self._free_at

    # -- internals -------------------------------------------------------------
    @staticmethod
    def _eligible(n: Node) -> bool:
        return (n.state is not ErrorState.BUS_OFF and not n.disconnected and not n.tx_disabled
                and not n.listen_only and not n.stalled)

    def _refresh(self) -> None:
        nodes = list(self._nodes.values())
        for n in nodes:
            n.stalled = False
        self._listeners = [n for n in nodes
                           if not n.disconnected and n.state is not ErrorState.BUS_OFF]
        ids = tuple(n.id for n in self._listeners)
        self._others = {n.id: tuple(i for i in ids if i != n.id) for n in nodes}
        self._n_ackers = sum(1 for n in self._listeners if not n.listen_only and not n.tx_disabled)
        self._faulty = [n for n in self._listeners if n.bit_error_rate > 0 and not n.listen_only]
        self._pending = {n.id: n for n in nodes if n.tx and self._eligible(n)}
        self._isolated = [n for n in nodes if (n.disconnected or n.tx_disabled)
                          and n.state is not ErrorState.BUS_OFF and not n.listen_only]
        self._recovering = [n for n in nodes if n.state is ErrorState.BUS_OFF
                            and n.recovery_from is not None]
        self._stuck = [n for n in nodes if n.stuck_dominant and not n.tx_disabled
                       and not n.disconnected and n.state is not ErrorState.BUS_OFF]
        self._dirty = False

    def _next_idle(self) -> tuple[int, int, Node | None] | None:
        """Earliest of: a bus-off recovery (0), a stuck node grabbing the bus (1), a SOF (2)."""
        best: tuple[int, int, Node | None] | None = None
        free = self._free_at
        if self._pending:
            s = -1
            for n in self._pending.values():
                r = n.ready if n.ready > n.suspend_until else n.suspend_until
                if r <= free:  # under load somebody is always ready when the bus frees
                    s = free
                    break
                if s < 0 or r < s:
                    s = r
            best = (s, 2, None)
        for n in self._stuck:
            cand = (max(free, n.stuck_at), 1, n)
            if best is None or cand[:2] < best[:2]:
                best = cand
        for n in self._recovering:
            base = max(self._run_start, n.recovery_from or 0)
            when = max(free, base + RECOVERY_TAIL * self.nt
                       * (RECOVERY_OCCURRENCES - n.recovery_count))
            cand = (when, 0, n)
            if best is None or cand[:2] < best[:2]:
                best = cand
        return best

    def _end_run(self, s: int) -> None:
        """The recessive run that began at ``_run_start`` ends at ``s``: count its 11-bit blocks."""
        for n in self._recovering:
            base = max(self._run_start, n.recovery_from or 0)
            if s > base:
                n.recovery_count += (s - base) // (RECOVERY_TAIL * self.nt)
                n.recovery_from = s

    def _sof(self, s: int) -> None:
        if self._recovering:
            self._end_run(s)
        win: Node | None = None
        ties: list[Node] | None = None
        best = 0
        for n in self._pending.values():
            if n.ready > s or n.suspend_until > s:
                continue
            k = n.tx.first[1]  # type: ignore[index]  # pending nodes have frames
            if win is None or k < best:
                best, win, ties = k, n, None
            elif k == best:
                ties = [win, n] if ties is None else [*ties, n]
        assert win is not None
        draws: dict[int, int] | None = None
        nt = self.nt
        if ties is None and self._n_ackers >= 2:
            first = win.tx.head()
            frame = first[0]
            if frame[5]:  # CAN FD: ESI recessive from an error-passive transmitter
                if win.state is not ErrorState.ACTIVE and not frame.esi:
                    frame = frame._replace(esi=True)
                s_len, t_s = self._ends(frame)
            else:
                s_len = stuffed_length(frame)
                t_s = s_len * nt
            if self._faulty:  # draw first: most frames meet no misread and stay on the fast path
                draws = {}
                for n in self._faulty:
                    k = first_misread(n.bit_error_rate, n.rng, s_len + EOF_END)
                    if k >= 0:
                        draws[n.id] = k
            if not draws:
                win.tx.pop()
                self._flight = Flight(s + t_s + EOF_END * nt, s + t_s + TAIL_BITS * nt,
                                       s + t_s + 2 * nt, s, frame, (win,), (first,), None)
                if not win.tx:
                    del self._pending[win.id]
                return
        contenders = sorted(ties or [win], key=lambda n: n.id)
        entries = tuple(n.tx.pop() for n in contenders)
        for n in contenders:
            if not n.tx:
                self._pending.pop(n.id, None)
        tx = {n.id: Party(n.id, n.state is not ErrorState.ACTIVE, n.bit_error_rate, n.rng)
              for n in contenders}
        rx = [Party(n.id, n.state is not ErrorState.ACTIVE or n.tx_disabled, n.bit_error_rate,
                    n.rng, acks=not n.tx_disabled)
              for n in self._listeners if n.id not in tx and not n.listen_only]
        sent = {n.id: e[0]._replace(esi=True) if e[0][5] and n.state is not ErrorState.ACTIVE
                else e[0] for n, e in zip(contenders, entries)}
        out = resolve(sent, tx, rx, draws)
        if out.delivered:
            t_s = self._ends(out.frame)[1]
            done, free, tail = s + t_s + EOF_END * nt, s + t_s + TAIL_BITS * nt, s + t_s + 2 * nt
        else:
            done = s + self._at(out.frame, out.position + 1) + FLAG_BITS * nt
            free, tail = done + RECOVERY_TAIL * nt, done
        self._flight = Flight(done, free, tail, s, out.frame, tuple(contenders), entries, out)

    def _complete(self, f: Flight) -> None:
        t = f.done_at
        self._free_at, self._run_start = f.free_at, f.tail_start
        self.busy_bits += f.free_at - f.start
        out = f.outcome
        if f.frame is None:
            self._finish_dominant(f)
        elif out is None:
            n = f.tx[0]
            n.tx_ok += 1
            self.frames += 1
            if n.tec:
                n.tec -= 1
                if n.state is ErrorState.PASSIVE:
                    self._check_state(n, t)
            if n.state is ErrorState.PASSIVE:
                n.suspend_until = f.free_at + SUSPEND_BITS * self.nt
            others = self._others_of(n.id)
            if self._rec_nonzero:
                self._received(set(others), t)
            self._events.append(FrameDelivered(t, f.start, f.frame, (n.id,), others))
        else:
            self._apply(f, out, t)
        if self._dirty:
            self._refresh()

    def _others_of(self, nid: int) -> tuple[int, ...]:
        """The listeners but ``nid``; also for a node removed with its frame on the wire
        (that frame still ends, and is received, as on a real bus)."""
        others = self._others.get(nid)
        if others is None:
            others = tuple(n.id for n in self._listeners if n.id != nid)
        return others

    def _apply(self, f: Flight, out: Outcome, t: int) -> None:
        nodes = self._nodes
        by_id = {n.id: (n, e) for n, e in zip(f.tx, f.entries)}
        for nid, inc in out.tec.items():
            if nid in nodes:
                nodes[nid].tec += inc
        for nid, inc in out.rec.items():
            if nid in nodes:
                m = nodes[nid]
                m.rec = min(REC_MAX, m.rec + inc)
                self._rec_nonzero.add(m)
        for nid in out.ok_tx:
            n = by_id[nid][0]
            n.tx_ok += 1
            n.tec = max(0, n.tec - 1)
        lone = self._n_ackers < 2
        for nid in out.retry_tx:
            if nid not in nodes:
                continue  # its node is gone: nobody retries the frame
            n, entry = by_id[nid]
            n.tx_errors += 1
            n.tx.push(entry, front=True)
            if lone and out.error is None and n.state is ErrorState.PASSIVE:
                n.stalled = True  # nobody can acknowledge: wait for a node to join
            if self._eligible(n):
                self._pending[nid] = n
        for n in f.tx:
            if n.id in nodes:
                self._check_state(n, t)
                if n.state is ErrorState.PASSIVE:
                    n.suspend_until = f.free_at + SUSPEND_BITS * self.nt
        for nid in out.rec:
            if nid in nodes:
                self._check_state(nodes[nid], t)
        txs = tuple(n.id for n in f.tx)
        if out.delivered:
            self.frames += 1
            accepted = tuple(i for i in self._others_of(txs[0])
                             if i not in by_id and i not in out.rejected)
            self._received(set(accepted), t)
            if out.ok_tx or accepted:
                self._events.append(
                    FrameDelivered(t, f.start, out.frame, tuple(out.ok_tx), accepted))
        if out.error is not None:
            self.error_frames += 1
            self._events.append(ErrorFrame(t, f.start, out.frame, out.error, out.detector, txs,
                                           counters=self._counters()))
