"""The slow path of the bus model: one transmission attempt resolved bit by bit.

Used only when it matters: two or more nodes sending the same arbitration
field (a collision that ISO 11898-1 turns into a bit error when the rest of
the frames differ), injected bit errors, and a transmitter nobody
acknowledges. Without those the model computes the outcome from the
arbitration key and the cached length alone.

Modelling choices, each the ISO rule or the closest simple reading of it:

- A node "misreads" at most one bit per attempt (the first of a geometric
  draw at its bit-error rate); it monitors SOF through EOF.
- A transmitter that misreads a bit is in bit error (TEC + 8), except a
  recessive arbitration bit read dominant, which it takes for lost
  arbitration (no error: it stops and the frame breaks off), and a missing
  ACK while error-passive, which ISO exempts (exception 1).
- A receiver that misreads a bit in the stuffed part detects a stuff error
  where the misread makes six equal bits, otherwise a CRC error after the ACK
  delimiter; a misread fixed-form bit is a form error; the last EOF bit is
  not checked by receivers. An error-active receiver that flags an error
  gets REC + 1 + 8 (rule 2: the others' flags follow its own).
- Active error flags destroy the frame for everybody (transmitters TEC + 8,
  other receivers REC + 1). Passive flags are recessive and only take their
  sender out of this frame. A flag starting on the last EOF bit no longer
  destroys it for receivers, so the transmitter resends a frame that was
  already received: the duplicate ISO accepts.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from fwbridge.can_bus import fd
from fwbridge.can_bus.bits import Frame, arbitration_end, frame_bits, stuff

__all__ = ["Outcome", "Party", "first_misread", "receiver_detection", "resolve"]

#: Error flag plus the others' echo flags, then delimiter and intermission.
FLAG_BITS = 12
RECOVERY_TAIL = 11


@dataclass(slots=True)
class Party:
    """What the resolver needs to know about a node taking part in one attempt."""

    node: int
    passive: bool
    bit_error_rate: float = 0.0
    rng: random.Random | None = None
    acks: bool = True  # receivers only: can drive the ACK slot (its transmitter works)


@dataclass(slots=True)
class Outcome:
    """The result of one attempt; the model applies it when the attempt ends."""

    frame: Frame
    stuffed: int  # S, bits SOF..CRC with stuffing
    delivered: bool = True
    ok_tx: list[int] = field(default_factory=list)  # completed: TEC - 1, frame dequeued
    retry_tx: list[int] = field(default_factory=list)  # frame goes back to the queue
    rejected: set[int] = field(default_factory=set)  # receivers that did not accept it
    tec: dict[int, int] = field(default_factory=dict)
    rec: dict[int, int] = field(default_factory=dict)
    error: str | None = None  # bit, stuff, crc, form, ack
    detector: int = -1
    position: int = -1  # bit index (from SOF) where the error was detected

    def add(self, table: dict[int, int], node: int, n: int) -> None:
        table[node] = table.get(node, 0) + n


def first_misread(rate: float, rng: random.Random, limit: int) -> int:
    """Index of the first misread bit among ``limit`` bits, or -1 (geometric draw)."""
    if rate <= 0.0:
        return -1
    if rate >= 1.0:
        return 0
    k = int(math.log(1.0 - rng.random()) / math.log1p(-rate))
    return k if k < limit else -1


def receiver_detection(stuffed: list[int], k: int) -> tuple[int, str]:
    """Where a receiver that misread stuffed bit ``k`` flags it, and as what."""
    seq = stuffed.copy()
    seq[k] ^= 1
    n = len(seq)
    lo = max(0, k - 5)
    run, last = 0, -1
    for j in range(lo, min(n, k + 6)):
        run = run + 1 if seq[j] == last else 1
        last = seq[j]
        if run == 6 and j >= k:
            return j, "stuff"
    return n + 2, "crc"  # flagged after the ACK delimiter


def _first_difference(seqs: dict[int, list[int]]) -> int:
    ref = next(iter(seqs.values()))
    for i in range(min(len(s) for s in seqs.values())):
        if any(s[i] != ref[i] for s in seqs.values()):
            return i
    return -1


def _wire(frame: Frame) -> tuple[list[int], list[bool]]:
    if frame.fd:
        w = fd.wire(frame)
        return w.bits, w.stuff
    return stuff(frame_bits(frame))


def _fd_detection(frame: Frame, stuffed: list[int], k: int) -> tuple[int, str]:
    """CAN FD: the six-equal-bits rule holds in the dynamic part only; a misread fixed
    stuff bit is a form error; any other misread shows as a CRC error (the stuff count
    is checked with the CRC)."""
    w = fd.wire(frame)
    if k < w.dyn_end:
        d, kind = receiver_detection(stuffed[:w.dyn_end], k)
        if kind == "stuff":
            return d, kind
    elif w.fixed[k]:
        return k, "form"
    return len(stuffed) + 2, "crc"


def resolve(frames: dict[int, Frame], tx: dict[int, Party], rx: list[Party],
            misreads: dict[int, int] | None = None) -> Outcome:
    """Resolve one attempt: ``frames`` (node -> frame, equal arbitration keys), the
    transmitters' and the receivers' states. Deterministic given the nodes' RNGs.

    ``misreads`` (node -> bit index) replaces the draws when the caller made them
    already (it does, to skip this function when nobody misreads anything).
    """

    def misread(party: Party, total: int) -> int:
        if misreads is not None:
            return misreads.get(party.node, -1)
        return first_misread(party.bit_error_rate, party.rng or random.Random(0), total)

    order = sorted(frames)
    out = Outcome(frames[order[0]], 0)
    alive = order
    # 1. Same arbitration field, different frames: the first differing bit is
    # a bit error for whoever sent it recessive.
    while len({frames[n] for n in alive}) > 1:
        seqs = {n: _wire(frames[n])[0] + [1] for n in alive}  # +CRC delimiter: lengths differ
        p = _first_difference(seqs)
        losers = [n for n in alive if seqs[n][p] == 1]
        if any(not tx[n].passive for n in losers):
            for n in alive:
                out.add(out.tec, n, 8)
            out.retry_tx.extend(alive)
            out.stuffed = len(seqs[losers[0]]) - 1
            return _destroyed(out, frames[losers[0]], rx, p, "bit", losers[0], counted=set())
        for n in losers:  # passive flags are recessive: the others carry on
            out.add(out.tec, n, 8)
            out.retry_tx.append(n)
        alive = [n for n in alive if n not in losers]
    frame = frames[alive[0]]
    stuffed, flags = _wire(frame)
    s = len(stuffed)
    out.frame, out.stuffed = frame, s
    wire = [*stuffed, 1, 0, 1] + [1] * 7
    total = s + 10
    arb_last = _stuffed_index(flags, arbitration_end(frame))

    # 2. Misreads, each turned into (position, node, effect).
    events: list[tuple[int, int, str, str]] = []  # position, node, effect, kind
    for n in alive:
        k = misread(tx[n], total)
        if k < 0:
            continue
        if k <= arb_last and wire[k] == 1:
            events.append((k, n, "lost", "stuff"))
        elif k == s + 1:
            events.append((k, n, "ack", "ack"))
        else:
            events.append((k, n, "txerr", "bit"))
    ackers = {p.node for p in rx if p.acks}
    for party in rx:
        k = misread(party, total)
        if k < 0 or k in (s + 1, s + 9):
            continue  # its own ACK bit; the last EOF bit is not checked by receivers
        if k < s:
            d, kind = _fd_detection(frame, stuffed, k) if frame.fd else \
                receiver_detection(stuffed, k)
            if d < s + 1 or kind == "crc":
                ackers.discard(party.node)  # a receiver in error does not acknowledge
        else:
            d, kind = k, "form"
        events.append((d, party.node, "rxerr", kind))
    if not ackers:
        events.extend((s + 1, n, "ack", "ack") for n in alive)
    events.sort()

    # 3. Walk the errors in bus order until one destroys the frame.
    rx_by = {p.node: p for p in rx}
    for pos, n, effect, kind in events:
        if n not in rx_by and n not in alive:
            continue  # already out of this frame
        if effect == "rxerr":
            if n in out.rejected:
                continue
            out.rejected.add(n)
            if rx_by[n].passive:
                out.add(out.rec, n, 1)
                continue
            out.add(out.rec, n, 9)
            if pos + 1 >= s + 9:  # flag on the last EOF bit: receivers keep the frame
                for t in alive:
                    out.add(out.tec, t, 8)
                    out.retry_tx.append(t)
                alive = []
                continue
            return _finish_destroy(out, alive, rx, pos, kind, n)
        if effect == "lost":
            if len(alive) > 1:
                alive = [t for t in alive if t != n]
                out.retry_tx.append(n)
                continue
            out.add(out.rec, n, 1)  # it is a receiver now, and sees the stuff error too
            return _finish_destroy(out, [], rx, pos + 6, kind, -1, also_retry=[n])
        if effect == "ack":
            if tx[n].passive:  # exception 1: no TEC change; receivers keep the frame
                alive = [t for t in alive if t != n]
                out.retry_tx.append(n)
                continue
            return _finish_destroy(out, alive, rx, pos, kind, n)
        # bit error of a transmitter
        passive = tx[n].passive
        if (not passive and pos + 1 < s + 9) or (passive and pos < s and len(alive) == 1):
            return _finish_destroy(out, alive, rx, pos, kind, n)
        out.add(out.tec, n, 8)
        out.retry_tx.append(n)
        alive = [t for t in alive if t != n]
    out.ok_tx = alive
    return out


def _stuffed_index(flags: list[bool], unstuffed: int) -> int:
    seen = -1
    for i, is_stuff in enumerate(flags):
        if not is_stuff:
            seen += 1
            if seen == unstuffed:
                return i
    return len(flags) - 1


def _finish_destroy(out: Outcome, alive: list[int], rx: list[Party], pos: int, kind: str,
                    detector: int, also_retry: list[int] | None = None) -> Outcome:
    for t in alive:
        out.add(out.tec, t, 8)
        out.retry_tx.append(t)
    out.retry_tx.extend(also_retry or [])
    counted = set(out.rejected)
    return _destroyed(out, out.frame, rx, pos, kind, detector, counted)


def _destroyed(out: Outcome, frame: Frame, rx: list[Party], pos: int, kind: str, detector: int,
               counted: set[int]) -> Outcome:
    for party in rx:
        if party.node not in counted:
            out.add(out.rec, party.node, 1)
    out.frame = frame
    out.delivered = False
    out.ok_tx = []
    out.error, out.position, out.detector = kind, pos, detector
    out.rejected = {p.node for p in rx}
    return out
