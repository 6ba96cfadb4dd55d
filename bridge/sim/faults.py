"""Byte-level fault injection on a simulated serial link (off by default).

Four faults, each with a per-byte rate: ``drop`` removes a byte, ``corrupt``
flips bits of a byte (XOR with a random non-zero mask), ``insert`` adds a
random byte after a byte, ``delay`` stalls the stream at a byte for
``delay_ms`` of simulated time (order is kept: later bytes queue behind).

Event positions are drawn as geometric gaps from random generators per fault
and stream, seeded from ``seed`` and the stream's name. So the faults
hit the same byte offsets of a stream for the same seed whatever way the
stream is cut into packets, and the two directions of a link get
independent faults.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields

from fwbridge.protocols.counters import Counters
from fwbridge.protocols.errors import ConfigError

__all__ = ["FaultInjector", "FaultSpec", "FaultStats"]

_RATES = ("drop", "corrupt", "insert", "delay")


@dataclass(frozen=True)
class FaultSpec:
    """Rates (probability per byte, 0..1), the stall length and the seed."""

    drop: float = 0.0
    corrupt: float = 0.0
    insert: float = 0.0
    delay: float = 0.0
    delay_ms: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        for name in _RATES:
            rate = getattr(self, name)
            if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"fault rate {name}={rate!r} must be between 0 and 1")
        if self.delay_ms < 0:
            raise ConfigError(f"delay_ms={self.delay_ms!r} must not be negative")

    @property
    def enabled(self) -> bool:
        return any(getattr(self, name) > 0 for name in _RATES)

    @classmethod
    def parse(cls, text: str | None, seed: int = 0) -> FaultSpec:
        """From ``"drop=0.01,corrupt=0.01,delay=0.001,delay_ms=50"`` (empty: no faults)."""
        values: dict[str, float | int] = {"seed": seed}
        known = {f.name for f in fields(cls)}
        for item in (text or "").replace(";", ",").split(","):
            item = item.strip()
            if not item:
                continue
            key, sep, raw = item.partition("=")
            key = key.strip().lower().replace("-", "_")
            if not sep or key not in known:
                raise ConfigError(
                    f"bad fault {item!r}: expected NAME=VALUE with NAME one of "
                    f"{', '.join(sorted(known))}"
                )
            try:
                values[key] = int(raw) if key in ("delay_ms", "seed") else float(raw)
            except ValueError:
                raise ConfigError(f"bad fault value in {item!r}: not a number") from None
        return cls(**values)  # type: ignore[arg-type]

    def __str__(self) -> str:
        parts = [f"{n}={getattr(self, n):g}" for n in _RATES if getattr(self, n) > 0]
        if self.delay > 0:
            parts.append(f"delay_ms={self.delay_ms}")
        return ",".join(parts) or "none"


@dataclass
class FaultStats(Counters):
    """What an injector did to its stream."""

    bytes_in: int = 0
    bytes_out: int = 0
    dropped: int = 0
    corrupted: int = 0
    inserted: int = 0
    delayed: int = 0  # stall events


class _Gaps:
    """Byte offsets of one fault's events: geometric gaps from its own generator."""

    __slots__ = ("countdown", "log_q", "rng")

    def __init__(self, rate: float, rng: random.Random) -> None:
        self.rng = rng
        # rate 1 hits every byte; rate 0 never (countdown stays infinite).
        self.log_q = math.log1p(-rate) if 0.0 < rate < 1.0 else (0.0 if rate <= 0 else -math.inf)
        self.countdown = self._gap() if rate > 0 else math.inf

    def _gap(self) -> float:
        if self.log_q == -math.inf:
            return 0
        # Failures before the first success of a Bernoulli(rate) sequence.
        return math.floor(math.log(1.0 - self.rng.random()) / self.log_q)

    def events(self, n: int) -> list[int]:
        """Event offsets within the next ``n`` bytes; consumes them from the stream."""
        out: list[int] = []
        pos = self.countdown
        while pos < n:
            out.append(int(pos))
            pos += 1 + self._gap()
        self.countdown = pos - n
        return out


class FaultInjector:
    """Applies a :class:`FaultSpec` to one direction of a link, packet by packet."""

    def __init__(self, spec: FaultSpec, stream: str = "") -> None:
        self.spec = spec
        self.stream = stream
        self.stats = FaultStats()
        # Separate generators for where events fall and for what they write, so
        # neither sequence depends on how the stream is cut into packets.
        key = f"{spec.seed}/{stream}"
        self._gen = {n: random.Random(f"{key}/{n}/values") for n in _RATES}
        self._gaps = {n: _Gaps(getattr(spec, n), random.Random(f"{key}/{n}/gaps")) for n in _RATES}
        self._held = bytearray()
        self._release_ms = 0
        self.max_held = 1 << 16  # a stall longer than this many bytes drops the oldest

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def apply(self, data: bytes, now_ms: int) -> bytes:
        """The bytes to deliver now for ``data``; stalled bytes come out of :meth:`release`."""
        st = self.stats
        st.bytes_in += len(data)
        out = self._mangle(data)
        cut = self._gaps["delay"].events(len(out))
        if self._held:
            self._append_held(out)
            return b""
        if cut:
            st.delayed += 1
            self._append_held(out[cut[0] :])
            self._release_ms = now_ms + self.spec.delay_ms
            out = out[: cut[0]]
        st.bytes_out += len(out)
        return bytes(out)

    def release(self, now_ms: int) -> bytes:
        """Stalled bytes whose time has come (empty when none)."""
        if not self._held or now_ms < self._release_ms:
            return b""
        out = bytes(self._held)
        self._held.clear()
        self.stats.bytes_out += len(out)
        return out

    def _append_held(self, data: bytes | bytearray) -> None:
        self._held += data
        excess = len(self._held) - self.max_held
        if excess > 0:  # bounded: a stalled line loses its oldest bytes, counted as drops
            del self._held[:excess]
            self.stats.dropped += excess

    def _mangle(self, data: bytes) -> bytearray:
        """Drop, corrupt and insert, in that order for each byte."""
        n = len(data)
        drops = set(self._gaps["drop"].events(n))
        corrupts = self._gaps["corrupt"].events(n)
        inserts = self._gaps["insert"].events(n)
        if not (drops or corrupts or inserts):
            return bytearray(data)
        buf = bytearray(data)
        st = self.stats
        crng = self._gen["corrupt"]
        for i in corrupts:
            if i not in drops:
                buf[i] ^= crng.randrange(1, 256)
                st.corrupted += 1
        irng = self._gen["insert"]
        after = {i: irng.randrange(256) for i in inserts}
        out = bytearray()
        for i in range(n):
            if i in drops:
                st.dropped += 1
            else:
                out.append(buf[i])
            extra = after.get(i)
            if extra is not None:
                out.append(extra)
                st.inserted += 1
        return out
