"""pyserial URL handler for ``sim://MODEL?options``: a simulated endpoint as a serial port.

Registered with pyserial by :func:`fwbridge.bridge.sim.register` (explicitly:
nothing registers it at import). Then
:func:`~fwbridge.bridge.link.transports.open_link` and
``serial.serial_for_url("sim://mecanum")`` (or any program that takes a
port URL) talk to the simulated firmware.

Options (query string): ``pacing=realtime|afap``, ``speed=1.0`` (realtime
only), ``step_ms=1``, ``quantum_ms=0`` (realtime: run ahead up to MS ms of the
wall clock and sleep once a quantum, see :mod:`~fwbridge.bridge.sim.endpoint`),
``seed=0``, ``baud=-1`` (emulated line rate; -1 none,
as in Webots), ``watchdog=MS`` (the mecanum firmware's command watchdog:
motors stop after MS ms without a command; default 500, 0 off as in the
seed), faults as ``faults=drop=0.01,corrupt=0.01`` or one by one
(``drop=``, ``corrupt=``, ``insert=``, ``delay=``, ``delay_ms=``). The
port's own ``baudrate`` is ignored: a simulated link has no baud rate.

In ``realtime`` pacing the world runs in a thread and ``timeout`` is wall
time. In ``afap`` pacing there is no thread: simulated time advances only
inside this object's calls, so a run is a deterministic function of them.
``read`` steps the world until it has the bytes or ``timeout`` seconds of
*simulated* time have passed (``timeout=None``: until it has them);
``in_waiting`` steps once when nothing is buffered, so a polling loop
makes progress; ``flush`` steps until the written bytes are on the ether.

asyncio polls a file descriptor: the first :meth:`Serial.fileno` serves the
endpoint on a pty (:class:`~fwbridge.bridge.sim.pty_link.PtyLink`) and the
port then reads and writes the pty, so pyserial-asyncio works on ``sim://``.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from serial.serialutil import (
    PortNotOpenError,
    SerialBase,
    SerialTimeoutException,
    to_bytes,
)

from fwbridge.bridge.link.transports import PortError
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.models import model_factory
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.pacing import AFAP, REALTIME, parse_pacing

__all__ = ["Serial", "parse_url"]

_FAULT_KEYS = ("drop", "corrupt", "insert", "delay", "delay_ms")
_OPTIONS = ("pacing", "speed", "step_ms", "quantum_ms", "seed", "baud", "watchdog", "faults",
            *_FAULT_KEYS)
_FORM = (
    "sim://MODEL[?pacing=realtime|afap&speed=S&step_ms=N&quantum_ms=MS&seed=N&baud=N&watchdog=MS"
    "&faults=drop=P,corrupt=P,...]"
)


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """``sim://MODEL?opts`` -> (model, keyword arguments of :class:`SimEndpoint`)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "sim":
        raise PortError(f"expected a URL of the form {_FORM}, got {url!r}")
    model = (parts.netloc or parts.path.lstrip("/")).lower()
    try:
        model_factory(model)
    except ConfigError as exc:
        raise PortError(f"sim://: {exc}") from None
    opts: dict[str, Any] = {}
    faults: list[str] = []
    seed = 0
    try:
        for key, values in urllib.parse.parse_qs(parts.query, keep_blank_values=True).items():
            key = key.lower()
            value = values[-1]
            if key == "pacing":
                opts["pacing"] = parse_pacing(value, "pacing")
            elif key == "speed":
                opts["speed"] = float(value)
            elif key == "step_ms":
                opts["step_ms"] = int(value)
            elif key == "quantum_ms":
                opts["quantum_ms"] = int(value)
            elif key == "baud":
                opts["baud"] = int(value)
            elif key == "watchdog":
                opts["watchdog_ms"] = int(value)
            elif key == "seed":
                seed = int(value)
            elif key == "faults":
                faults.append(value)
            elif key in _FAULT_KEYS:
                faults.append(f"{key}={value}")
            else:
                raise ConfigError(f"unknown option {key!r} (known: {', '.join(_OPTIONS)})")
        spec = FaultSpec.parse(",".join(faults), seed=seed)
    except ValueError as exc:
        raise PortError(f"sim://: {exc}; form: {_FORM}") from None
    if spec.enabled:
        opts["faults"] = spec
    return model, opts


class Serial(SerialBase):  # type: ignore[misc]  # pyserial ships no type hints
    """A serial port whose other end is a simulated firmware."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.endpoint: SimEndpoint | None = None
        self.is_open: bool = False
        self._started = False
        self._start_lock = threading.Lock()
        self._pty: Any = None  # the PtyLink once fileno() was asked for
        self._pty_port: Any = None  # the pty's port: reads and writes go there then
        super().__init__(*args, **kwargs)

    def open(self) -> None:
        if self.is_open:
            raise PortError("Port is already open.")
        if self._port is None:
            raise PortError("Port must be configured before it can be used.")
        model, opts = parse_url(self.portstr or "")
        try:
            ep = SimEndpoint(model, **opts)
        except ValueError as exc:
            raise PortError(f"sim://: {exc}") from None
        self.endpoint = ep
        self._started = False  # realtime: the world starts at the first I/O (or fileno())
        self.is_open = True

    def close(self) -> None:
        if self._pty_port is not None:
            self._pty_port.close()
            self._pty_port = None
        if self.is_open and self.endpoint is not None:
            ep = self.endpoint
            ep.stop()
            # The fish's CAN nodes: shut down now, not by python-can's complaint at exit.
            close = getattr(ep.model, "close", None)
            thread = getattr(ep, "_thread", None)
            if callable(close) and (thread is None or not thread.is_alive()):
                close()
        if self._pty is not None:
            self._pty.close()
            self._pty = None
        self.is_open = False
        super().close()

    def _reconfigure_port(self) -> None:
        # No baud rate, parity or flow control in simulation; the pty's port takes the timeouts.
        if self._pty_port is not None:
            self._pty_port.timeout = self._timeout
            self._pty_port.write_timeout = self._write_timeout

    def _ep(self) -> SimEndpoint:
        if not self.is_open or self.endpoint is None:
            raise PortNotOpenError()
        ep = self.endpoint
        if not self._started:
            with self._start_lock:
                if not self._started:
                    if ep.pacing == REALTIME:
                        ep.start()
                    self._started = True
        return ep

    def fileno(self) -> int:
        """A descriptor asyncio can poll: the simulation moves onto a pty.

        pyserial-asyncio (and fwbridge's asyncio runtime) poll the port's file
        descriptor; the simulation has none, so the first ``fileno()`` serves
        the endpoint on a pty pair (as ``fwbridge sim`` does) and this port
        reads and writes the pty from then on. It must come before the first
        read or write (asyncio transports ask at once).
        """
        if self._pty_port is not None:
            fd: int = self._pty_port.fileno()
            return fd
        if not self.is_open or self.endpoint is None:
            raise PortNotOpenError()
        with self._start_lock:
            if self._started:
                raise PortError(
                    "sim://: fileno() after the port was used: the simulation cannot move "
                    "onto a pty now; ask for the descriptor first (asyncio does)")
            import serial as pyserial

            from fwbridge.bridge.sim.pty_link import PtyLink

            link = PtyLink(self.endpoint, supervisor=False)
            try:
                port = pyserial.serial_for_url(link.path, timeout=self._timeout,
                                               write_timeout=self._write_timeout)
            except Exception:
                link.close()
                raise
            self._pty, self._pty_port = link, port
            self.endpoint.start()
            self._started = True
        fd = port.fileno()
        return fd

    def paced_by_owner(self) -> SimEndpoint:
        """The endpoint, stepped by its caller from now on rather than by a thread of its
        own (:meth:`SimEndpoint.paced_by_owner`): many worlds on one thread. Before the
        port's first read or write; realtime pacing only."""
        if not self.is_open or self.endpoint is None:
            raise PortNotOpenError()
        ep = self.endpoint
        with self._start_lock:
            if self._started or ep.pacing != REALTIME:
                raise PortError("sim://: only an unused realtime port can be stepped by its "
                                "owner")
            ep.paced_by_owner()
            self._started = True
        return ep

    @property
    def _fast(self) -> bool:
        return self._ep().pacing == AFAP

    @property
    def in_waiting(self) -> int:
        if self._pty_port is not None:
            waiting: int = self._pty_port.in_waiting
            return waiting
        ep = self._ep()
        if ep.pacing == AFAP and not ep.link.in_waiting:
            ep.world.step()
        return ep.link.in_waiting

    @property
    def out_waiting(self) -> int:
        return self._ep().link.pending_in

    def read(self, size: int = 1) -> bytes:
        if self._pty_port is not None:
            data: bytes = self._pty_port.read(size)
            return data
        ep = self._ep()
        port = ep.link
        out = bytearray()
        if size <= 0:
            return b""
        if ep.pacing == AFAP:
            world = ep.world
            end = None if self._timeout is None else world.clock.millis() + self._timeout * 1000.0
            while True:
                out += port.take(size - len(out))
                if len(out) >= size or (end is not None and world.clock.millis() >= end):
                    return bytes(out)
                if world.step() == -1:
                    return bytes(out)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            out += port.take(size - len(out))
            if len(out) >= size or not ep.running:
                return bytes(out)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return bytes(out)
            if not port.wait(remaining) and not port.in_waiting:
                return bytes(out)  # timed out, or cancel_read()

    def poller(self, limit: int) -> Callable[[float], bytes] | None:
        """``read(timeout)`` -> what arrived within ``timeout`` s (at most ``limit``
        bytes), waiting on the simulated port itself, for
        :func:`~fwbridge.bridge.link.transports.poller_for`: a node's I/O loop needs no
        pump thread and no queue hand-off per chunk. ``cancel_read`` wakes it. None in
        ``afap`` pacing (the caller's reads step the world) and on a pty."""
        if self._pty_port is not None or not self.is_open:
            return None
        ep = self._ep()
        if ep.pacing == AFAP:
            return None
        port = ep.link

        def read(timeout: float) -> bytes:
            if timeout <= 0:  # a loop that only looks (no lock unless bytes are there)
                return port.take(limit)
            return port.take(limit) if port.wait(timeout) else b""

        return read

    def cancel_read(self) -> None:
        if self._pty_port is not None:
            self._pty_port.cancel_read()
        elif self.endpoint is not None:
            self.endpoint.link.cancel()

    def write(self, data: Any) -> int:
        if self._pty_port is not None:
            done: int = self._pty_port.write(data)
            return done
        ep = self._ep()
        raw = to_bytes(data)
        view = memoryview(raw)
        deadline = None if self._write_timeout is None else time.monotonic() + self._write_timeout
        while view:
            n = ep.link.write(bytes(view))
            view = view[n:]
            if not view:
                break
            if ep.pacing == AFAP:
                if ep.world.step() == -1:
                    break
            elif deadline is not None and time.monotonic() >= deadline:
                raise SerialTimeoutException("Write timeout")
            else:
                time.sleep(ep.world.clock.dt / ep.pacer.speed)
        return len(raw) - len(view)

    def flush(self) -> None:
        if self._pty_port is not None:
            self._pty_port.flush()
            return
        if not self.is_open or self.endpoint is None:
            return  # io's close() flushes after we are closed
        ep = self.endpoint
        if ep.pacing == AFAP:
            while ep.link.pending_in and ep.world.step() != -1:
                pass
        else:
            end = time.monotonic() + 1.0
            while ep.link.pending_in and ep.running and time.monotonic() < end:
                time.sleep(0.001)

    def reset_input_buffer(self) -> None:
        self._ep().link.clear(incoming=False, outgoing=True)

    def reset_output_buffer(self) -> None:
        self._ep().link.clear(incoming=True, outgoing=False)

    def _update_break_state(self) -> None:
        pass

    def _update_rts_state(self) -> None:
        pass

    def _update_dtr_state(self) -> None:
        pass

    @property
    def cts(self) -> bool:
        return True

    @property
    def dsr(self) -> bool:
        return True

    @property
    def ri(self) -> bool:
        return False

    @property
    def cd(self) -> bool:
        return True
