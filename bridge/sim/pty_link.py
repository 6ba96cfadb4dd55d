"""Put a simulated endpoint's serial links on ptys: real ttys any program can open.

The robot link and the supervisor link each get a pty pair
(:class:`bridge.link.transports.PtyPair`, raw mode); the world's hooks move bytes
between the pty masters and the endpoint's host ports. Bytes a program
writes to the port become packets at the next step (one read of the
master, one packet); what the robot sends is written to the master after
each step.

When the reader is slow: in ``realtime`` pacing bytes that do not fit wait
in a bounded buffer and then the newest are lost and counted (``overruns``),
as on a UART nobody reads (a program that opens the port late first reads
what the kernel and that buffer hold: flush it if stale bytes matter). In
``afap`` pacing the simulation waits for the robot link's reader instead
(backpressure), so nothing is lost and runs stay deterministic. The
supervisor link (monitoring) never holds the simulation back: unread status
lines are lost and counted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
from collections.abc import Callable
from typing import Any

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.sim.clock import SimStopped
from fwbridge.bridge.sim.endpoint import HostPort, SimEndpoint

__all__ = ["PtyLink"]

READ_CHUNK = 4096
#: Bytes kept back while the kernel's pty buffer is full (a UART's FIFO), beyond: lost.
PENDING_MAX = 4096


class _Pipe:
    """One pty pair and the host port it feeds."""

    __slots__ = ("backpressure", "fd", "pair", "pending", "port")

    def __init__(self, pair: PtyPair, port: HostPort, backpressure: bool) -> None:
        self.pair = pair
        self.port = port
        self.backpressure = backpressure
        self.fd = pair.master_fd
        self.pending = bytearray()
        os.set_blocking(self.fd, False)  # POSIX, as the pair itself


class PtyLink:
    """Serves ``endpoint``'s robot link (and supervisor link) on ptys."""

    def __init__(
        self, endpoint: SimEndpoint, *, link_path: str | None = None, supervisor: bool = True
    ) -> None:
        self.endpoint = endpoint
        fast = endpoint.pacing == "afap"
        self.robot = _Pipe(PtyPair(link_path), endpoint.link, backpressure=fast)
        self.pipes = [self.robot]
        self.sup: _Pipe | None = None
        if supervisor:
            self.sup = _Pipe(PtyPair(), endpoint.supervisor, backpressure=False)
            self.pipes.append(self.sup)
        self.overruns = 0
        #: Sees the robot link's bytes as the host does: ("tx", what the host wrote),
        #: ("rx", what the firmware sent it). A capture's ``write`` (``fwbridge sim --record``).
        self.tap: Callable[[str, bytes], None] | None = None
        self._poll = select.poll()
        for p in self.pipes:
            self._poll.register(p.fd, select.POLLIN)
        world = endpoint.world
        # After the pacer (so input read while waiting goes out this step), before the ports.
        world.pre_step.insert(1, self._pump_in)
        world.post_step.append(self._pump_out)
        endpoint.pacer.wait = self._wait

    @property
    def path(self) -> str:
        """The robot link's port (``/dev/pts/N`` or the symlink)."""
        return self.robot.pair.path

    @property
    def supervisor_path(self) -> str | None:
        return self.sup.pair.path if self.sup else None

    def close(self) -> None:
        for p in self.pipes:
            with contextlib.suppress(KeyError, ValueError):
                self._poll.unregister(p.fd)
            p.pair.close()

    def __enter__(self) -> PtyLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for_host(self, stop: threading.Event | None = None) -> bool:
        """Block until the host has written to the robot port (False if ``stop`` is set first).

        Starting the clock then makes a ``fast`` run repeat byte for byte: the
        first command lands in the first step whatever the wall-clock timing.
        """
        poller = select.poll()
        poller.register(self.robot.fd, select.POLLIN)
        while not (stop is not None and stop.is_set()):
            if poller.poll(100):
                return True
        return False

    def stats(self) -> dict[str, Any]:
        return {"overruns": self.overruns}

    # -- hooks ------------------------------------------------------------------
    def _read_ready(self, pipes: list[_Pipe]) -> None:
        for p in pipes:
            room = p.port.in_room
            if room <= 0:
                continue  # the port is full: leave the bytes in the kernel (backpressure)
            try:
                data = os.read(p.fd, min(READ_CHUNK, room))
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:
                    continue  # no program has the port open
                raise
            if data:
                p.port.write(data)
                if self.tap is not None and p is self.robot:
                    self.tap("tx", data)

    def _pump_in(self, target_ms: int) -> None:
        events = self._poll.poll(0)
        if events:
            ready = [p for p in self.pipes if any(fd == p.fd for fd, _ in events)]
            self._read_ready(ready)

    def _wait(self, timeout: float) -> None:
        """The pacer's sleep: wake early to take input as it arrives."""
        events = self._poll.poll(max(0, int(timeout * 1000)))
        if events:
            ready = [p for p in self.pipes if any(fd == p.fd for fd, _ in events)]
            self._read_ready(ready)
        elif timeout * 1000 < 1:
            # poll's resolution is 1 ms; sleep the sub-millisecond rest precisely.
            self.endpoint.stop_event.wait(timeout)

    def _pump_out(self, now_ms: int) -> None:
        for p in self.pipes:
            if p.port.in_waiting:
                out = p.port.take()
                p.pending += out
                if self.tap is not None and p is self.robot:
                    self.tap("rx", out)
            if p.pending:
                self._flush(p)

    def _flush(self, p: _Pipe) -> None:
        while p.pending:
            try:
                n = os.write(p.fd, p.pending)
            except BlockingIOError:
                n = 0
            if n:
                del p.pending[:n]
                continue
            if not p.backpressure:
                excess = len(p.pending) - PENDING_MAX
                if excess > 0:  # overrun: the newest bytes are lost, as in a full FIFO
                    del p.pending[PENDING_MAX:]
                    self.overruns += excess
                    p.port.stats.overruns += excess
                return
            # fast: wait for the reader; the simulation must not outrun it
            while not select.select([], [p.fd], [], 0.1)[1]:
                if self.endpoint.stop_event.is_set():
                    raise SimStopped
