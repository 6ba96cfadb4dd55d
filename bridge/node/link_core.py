"""A link node's protocol and time logic for any descriptions, without I/O.

:class:`LinkCore` is what a bridge node does with a link, whatever its
frames: the descriptions that flow in are decoded by their receivers (each
fed every byte: a stream may interleave several families, each receiver
takes its own frames and counts the rest as noise), and each description
that flows out is an :class:`Outbound` with its rate, its watchdog and its
safe value:

- the latest request of an outbound frame goes out at its rate; a request
  that changes what is sent goes out at once as well (:meth:`LinkCore.prompt`),
  at most twice a period, so a new value does not wait for the schedule;
- its watchdog: no request for ``timeout`` seconds -> the safe value, and an
  event saying so (and another when requests resume);
- after the link comes back, every outbound frame's safe value first;
- "wrong baud rate?" when only garbage arrives.

Time is an argument (``now``), so tests drive it with an exact clock. The
mobile base (:class:`~fwbridge.bridge.node.base_core.BaseNodeCore`) is one
configuration of it: odometry in, velocity commands out at the control rate,
zero velocity as the safe value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.node.health import GarbageWatch
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.errors import ConfigError, FrameError

__all__ = ["MAX_EVENTS", "LinkCore", "NodeEvent", "Outbound"]

#: Events a core holds for its runtime: a stalled consumer must not grow memory.
MAX_EVENTS = 256


@dataclass(frozen=True)
class NodeEvent:
    """Something the node reports: ``kind`` for programs, ``message`` for people.

    Kinds: ``watchdog``, ``resumed``, ``watchdog-set``, ``link-lost``,
    ``link-restored``, ``gave-up``, ``garbage``.
    """

    stamp: float
    kind: str
    message: str


@dataclass(frozen=True)
class Outbound:
    """One description the node sends: its codec, rate and safe value.

    ``timeout``: seconds without a request after which the watchdog sends
    ``safe`` (None: no watchdog). ``safe`` is also what goes out before any
    request and first after the link comes back. ``what``/``safe_name``
    name the request and the safe value in events ("velocity request",
    "zero velocity").
    """

    codec: FrameCodec[Any]
    rate_hz: float
    safe: Any
    timeout: float | None = 0.5
    what: str = "request"
    safe_name: str = "the safe value"

    @property
    def name(self) -> str:
        return self.codec.desc.name


def _non_finite(record: Any, codec: FrameCodec[Any]) -> list[str]:
    """The float fields of ``record`` that are NaN or infinite."""
    return [name for name in codec.fields
            if isinstance(v := getattr(record, name, None), float) and not math.isfinite(v)]


class _Out:
    """The state of one outbound frame: its request, schedule and encoded bytes."""

    __slots__ = ("encoded", "next_deadline", "period", "prompted_at", "request", "request_at",
                 "sent", "spec", "timeout", "tripped", "trips", "watchdog")

    def __init__(self, spec: Outbound, now: float) -> None:
        if not spec.rate_hz > 0:
            raise ConfigError(f"{spec.name}: rate_hz must be positive, got {spec.rate_hz!r}")
        self.spec = spec
        self.period = 1.0 / spec.rate_hz
        self.watchdog = spec.timeout is not None
        self.timeout = spec.timeout if spec.timeout is not None else math.inf
        self.request: Any = spec.safe
        self.request_at: float | None = None
        self.prompted_at = -math.inf
        self.tripped = False
        self.next_deadline = now
        self.sent = 0
        self.trips = 0
        frame = spec.codec.encode(spec.safe)
        # the current target, its bytes and the value they carry (as the wire holds it),
        # cached; one tuple, so a reader on another thread sees a matching set
        self.encoded: tuple[Any, bytes, Any] = (spec.safe, frame, spec.codec.decode(frame))


class LinkCore:
    """Frames in by description, frames out on schedules with watchdogs; no I/O, no clock."""

    def __init__(self, inbound: Sequence[FrameCodec[Any]], outbound: Sequence[Outbound], *,
                 garbage_timeout: float = 3.0, port: str = "link", baud: int | None = None,
                 now: float = 0.0) -> None:
        names = [c.desc.name for c in inbound]
        if len(set(names)) != len(names):
            raise ConfigError(f"a description flows in twice: {', '.join(names)}")
        out_names = [o.name for o in outbound]
        if len(set(out_names)) != len(out_names):
            raise ConfigError(f"a description flows out twice: {', '.join(out_names)}")
        self.port, self.baud = port, baud
        self.receivers = {c.desc.name: receiver_for(c) for c in inbound}
        self.outbound = {o.name: _Out(o, now) for o in outbound}
        self.garbage = GarbageWatch(garbage_timeout, now)
        self.reconnects = 0
        self.bytes_in = 0
        self._events: list[NodeEvent] = []

    # -- out ------------------------------------------------------------------------
    def set_request(self, name: str, record: Any, now: float) -> None:
        """The latest request of outbound frame ``name``; it stays until replaced or stale.

        A record with a float that is not finite, or that the frame cannot carry,
        is refused (:class:`ConfigError`) and changes nothing.
        """
        out = self.outbound[name]
        codec = out.spec.codec
        bad = _non_finite(record, codec)
        if bad:
            raise ConfigError(f"{out.spec.what} is not finite: {', '.join(bad)}")
        try:  # a finite double can still overflow a float32 field (1e300)
            codec.encode(record)
        except FrameError as exc:
            raise ConfigError(f"{out.spec.what} cannot be sent: {exc}") from None
        out.request, out.request_at = record, now
        if out.tripped:
            out.tripped = False
            self._event(now, "resumed", f"{out.spec.what}s resumed")

    def prompt_out(self, name: str, now: float) -> bool:
        """Whether the request just made goes out now rather than at the next tick: it
        changes what is sent (a renewal of the same value waits for the schedule), and
        the last one sent early is half a period old (a flood of requests is not a flood
        of frames on a slow link). True counts it as sent early."""
        out = self.outbound[name]
        if now - out.prompted_at < out.period / 2 or self.target_of(name, now) == out.encoded[0]:
            return False
        out.prompted_at = now
        return True

    def set_timeout(self, name: str, seconds: float, now: float) -> None:
        """Outbound ``name``'s watchdog timeout from now on: the request that is there
        trips once it is ``seconds`` old (already older: at the next tick)."""
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            raise ConfigError(f"cmd_timeout must be a positive number of seconds, got {seconds!r}")
        out = self.outbound[name]
        old, out.timeout = out.timeout, float(seconds)
        self._event(now, "watchdog-set", f"watchdog: cmd_timeout {old:g} s -> {seconds:g} s")

    def target_of(self, name: str, now: float) -> Any:
        """What to send of ``name`` now: the request, or the safe value once the watchdog
        has tripped (or before any request)."""
        out = self.outbound[name]
        at = out.request_at
        if at is None:
            return out.spec.safe
        if out.watchdog and now - at >= out.timeout:
            if not out.tripped:
                out.tripped = True
                out.trips += 1
                self._event(now, "watchdog",
                            f"no {out.spec.what} for {now - at:.2f} s (cmd_timeout "
                            f"{out.timeout:g} s): sending {out.spec.safe_name}")
            return out.spec.safe
        return out.request

    def frame_of(self, name: str, now: float) -> bytes:
        """The frame of ``name`` for ``now`` (counts as sent; does not move the schedule)."""
        out = self.outbound[name]
        target = self.target_of(name, now)
        encoded = out.encoded
        if target != encoded[0]:  # once per new target: the value as the wire holds it
            codec = out.spec.codec
            frame = codec.encode(target)
            encoded = out.encoded = (target, frame, codec.decode(frame))
        out.sent += 1
        return encoded[1]

    def sent_value(self, name: str, data: bytes) -> Any | None:
        """The value ``data`` (bytes this node wrote) carries as the peer reads it, without
        decoding it again: the current target's frame or the safe one; None otherwise."""
        out = self.outbound[name]
        _, frame, wire = out.encoded
        if data == frame:
            return wire
        return out.spec.safe if data == out.spec.codec.encode(out.spec.safe) else None

    def safe_frames(self) -> bytes:
        """Every outbound frame's safe value: what the link sends when it starts and
        when it stops, whatever way the process ends."""
        return b"".join(o.spec.codec.encode(o.spec.safe) for o in self.outbound.values())

    @property
    def next_deadline(self) -> float:
        """When the next scheduled frame is due."""
        return min((o.next_deadline for o in self.outbound.values()), default=math.inf)

    def tick(self, now: float) -> bytes:
        """Every scheduled frame due at ``now`` (at least the earliest); each is next due
        one period later.

        Missed periods are skipped rather than sent in a burst: a late frame is
        already stale, and a burst would flood a slow link.
        """
        due = [name for name, out in self.outbound.items() if out.next_deadline <= now]
        if not due and self.outbound:  # called for the earliest: a clock read a hair early
            due = [min(self.outbound, key=lambda n: self.outbound[n].next_deadline)]
        parts = []
        for name in due:
            out = self.outbound[name]
            nxt = out.next_deadline + out.period
            out.next_deadline = nxt if nxt > now else now + out.period
            parts.append(self.frame_of(name, now))
        return b"".join(parts)

    # -- in ---------------------------------------------------------------------------
    def receive_frames(self, data: bytes, now: float) -> list[tuple[str, Any]]:
        """Bytes from the peer, arrived at ``now``: (description name, received frame) for
        each frame they complete, description by description."""
        self.bytes_in += len(data)
        return [(name, item) for name, rx in self.receivers.items() for item in rx.feed(data)]

    def _totals(self) -> tuple[int, int]:
        frames = errors = 0
        for rx in self.receivers.values():
            frames += rx.stats.frames
            errors += rx.stats.checksum_errors
        return frames, errors

    def check(self, now: float) -> None:
        """Periodic health check (the wrong-baud suspicion)."""
        frames, errors = self._totals()
        report = self.garbage.update(frames, self.bytes_in, errors, now)
        if report is not None:
            self._event(now, "garbage",
                        report.message(self.port, self.baud, "link.baud in the config"))

    # -- the link -----------------------------------------------------------------------
    def link_lost(self, now: float, reason: str) -> None:
        for rx in self.receivers.values():
            rx.finish()  # a partial frame from the old link must not join new bytes
        self._event(now, "link-lost", f"{self.port}: link lost ({reason}); reconnecting")

    def link_restored(self, now: float, attempts: int = 1) -> bytes:
        """The link is back: every outbound frame's safe value, to send first; the
        schedules restart."""
        self.reconnects += 1
        frames, errors = self._totals()
        self.garbage.reset(now, frames, self.bytes_in, errors)
        parts = []
        for out in self.outbound.values():
            out.next_deadline = now + out.period
            out.sent += 1
            parts.append(out.spec.codec.encode(out.spec.safe))
        names = " and ".join(o.spec.safe_name for o in self.outbound.values()) or "nothing"
        self._event(now, "link-restored",
                    f"{self.port}: link restored after {attempts} attempt(s); sent {names} first")
        return b"".join(parts)

    # -- events -------------------------------------------------------------------------
    def report(self, now: float, kind: str, message: str) -> None:
        """Queue an event for the runtime to hand to its callbacks."""
        self._event(now, kind, message)

    def _event(self, now: float, kind: str, message: str) -> None:
        if len(self._events) < MAX_EVENTS:
            self._events.append(NodeEvent(now, kind, message))

    @property
    def has_events(self) -> bool:
        return bool(self._events)

    def drain_events(self) -> list[NodeEvent]:
        events, self._events = self._events, []
        return events

    def link_stats(self) -> dict[str, int]:
        """Counts of the link: frames sent per outbound description, watchdog trips and
        reconnects."""
        return {"sent": sum(o.sent for o in self.outbound.values()),
                "watchdog_trips": sum(o.trips for o in self.outbound.values()),
                "reconnects": self.reconnects}
