"""Many realtime simulated worlds stepped by one thread: its owner's.

A ``sim://`` port in realtime pacing runs its world in a thread of its own, which
wakes at least once a quantum: N robots are N threads and N wake-ups a quantum,
each costing far more than the steps it makes. A :class:`WorldScheduler` holds
the worlds of many ports instead and steps each to the wall clock when its
owner calls :meth:`~WorldScheduler.step` (a fleet's loop, once a round): one
clock read and no wake-up of their own for all of them. Between two rounds the
worlds wait, so a reply leaves up to a round after its simulated time and a
host write is taken at the next round, as a world with a quantum takes it
within one.

:meth:`WorldScheduler.open` is an opener with
:func:`~fwbridge.bridge.link.transports.open_link`'s signature (what
:class:`~fwbridge.bridge.node.hardware.LinkHardware` takes): the port is the
ordinary ``sim://`` port, its endpoint only stepped from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fwbridge.bridge.link.transports import PortError
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.protocol_sim import Serial

__all__ = ["WorldScheduler"]


class _Paced:
    """One world and where its simulated time stands against the scheduler's wall ms."""

    __slots__ = ("endpoint", "offset_ms")

    def __init__(self, endpoint: SimEndpoint, offset_ms: int) -> None:
        self.endpoint = endpoint
        self.offset_ms = offset_ms  # wall ms since the scheduler's anchor, less sim ms


class WorldScheduler:
    """Realtime pacing of many simulated endpoints from their owner's loop.

    ``max_lag``: a world more than this many seconds behind the wall clock (its
    owner's loop was held up) lets simulated time slip instead of racing to catch up,
    as a realtime world's pacer does, and counts it (``lag_resets`` here and in its
    endpoint's status).
    """

    def __init__(self, *, max_lag: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.max_lag_ms = int(max_lag * 1000)
        self.lag_resets = 0
        self._t0 = clock()
        # replaced whole (never changed in place): a port opened on another thread (a
        # reconnect) joins without a lock on the stepping path
        self._worlds: tuple[_Paced, ...] = ()
        self._lock = threading.Lock()

    def _wall_ms(self, now: float) -> int:
        return int((now - self._t0) * 1000.0)

    def open(self, url: str, baud: int = 115200, *, timeout: float | None = 0.1,
             write_timeout: float | None = 1.0, exclusive: bool = True) -> Serial:
        """A ``sim://`` port (realtime) whose world this scheduler steps; ``baud`` and
        ``exclusive`` mean nothing to a simulated link."""
        try:
            port = Serial(url, timeout=timeout, write_timeout=write_timeout)
        except ValueError as exc:  # the URL's own complaint, as open_link words it
            raise PortError(str(exc)) from None
        try:
            self.add(port.paced_by_owner())
        except BaseException:
            port.close()
            raise
        return port

    def add(self, endpoint: SimEndpoint) -> None:
        """Step ``endpoint`` from now on (it was made :meth:`SimEndpoint.paced_by_owner`);
        its simulated time starts where it stands, at the wall clock's now."""
        offset = self._wall_ms(self.clock()) - endpoint.world.clock.millis()
        with self._lock:
            self._worlds = (*self._worlds, _Paced(endpoint, offset))

    @property
    def endpoints(self) -> list[SimEndpoint]:
        """The worlds it steps (a stopped one leaves at the next step: not listed)."""
        return [w.endpoint for w in self._worlds if not w.endpoint.world.stopped]

    def step(self, now: float | None = None) -> None:
        """Step every world to the wall clock (``now``: the owner's reading of
        ``clock``). A world whose firmware raised is stopped, its error kept on its
        endpoint (``error``), and the others go on; stopped worlds leave."""
        wall = self._wall_ms(self.clock() if now is None else now)
        ended = False
        for paced in self._worlds:
            ep = paced.endpoint
            target = wall - paced.offset_ms
            behind = target - ep.world.clock.millis()
            if behind > self.max_lag_ms:  # held up: let simulated time slip, one step now
                paced.offset_ms += behind - ep.world.clock.basic_time_step_ms
                target = wall - paced.offset_ms
                self.lag_resets += 1
                ep.pacer.lag_resets += 1
            try:
                alive = ep.step_to(target)
            except Exception as exc:  # one robot's firmware must not stop the others
                ep.error = exc
                ep.world.stop()
                alive = False
            ended = ended or not alive
        if ended:
            with self._lock:
                self._worlds = tuple(w for w in self._worlds if not w.endpoint.world.stopped)

    def stop(self) -> None:
        """Stop every world still here (their ports' ``close`` does too)."""
        with self._lock:
            worlds, self._worlds = self._worlds, ()
        for paced in worlds:
            paced.endpoint.stop()

    def status(self) -> dict[str, Any]:
        return {"worlds": len(self._worlds), "lag_resets": self.lag_resets}
