"""Host side of the action-frame link: send with stop-and-wait ARQ, read answers and results.

:class:`ActionLink` sits on an open serial link (a device, a pty, ``sim://``,
any pyserial object). :meth:`ActionLink.send` writes a frame through
:class:`~protocols.arq.StopAndWaitSender`, reads what comes back with
:class:`~protocols.action_receiver.ActionReceiver`, retransmits on a timeout
or a negative answer, and returns an :class:`Exchange` saying whether the
frame was delivered, after how many attempts, and the query result if one
was asked for. It never raises on a lost frame: failure is a value.

Time: the link's clock. On a ``sim://`` port in ``afap`` pacing that is the
simulation's clock (simulated time advances only inside the port's calls),
so timeouts count simulated seconds and a run is deterministic; otherwise
the wall clock (``time.monotonic``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fwbridge.bridge.link.transports import poller_for, read_some
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand, encode
from fwbridge.protocols.crc import DEFAULT_CRC
from fwbridge.protocols.engine import action_receiver
from fwbridge.protocols.engine.kernels.action_receiver import DEFAULT_MAX_LENGTH
from fwbridge.protocols.errors import FrameError, LinkError
from fwbridge.protocols.families.arq import (
    Acknowledged,
    ArqEvent,
    Delivered,
    Retransmit,
    Status,
    StopAndWaitSender,
    parse_answer,
)
from fwbridge.protocols.families.fish_payloads import (
    RESULT_SUBS,
    Result,
    decode_result,
    is_result_to,
)

__all__ = ["ActionLink", "Exchange", "LinkFailed", "link_clock"]

READ_SLICE = 0.05  # s: longest single wait for bytes, so deadlines are kept
MAX_OTHER = 64  # unrelated frames kept per exchange (bounded)
_READ_TYPES = (InstructionType.READ_PHONE, InstructionType.READ_SIMULATOR, InstructionType.READ_PC)


class SerialLike(Protocol):
    """What :class:`ActionLink` needs from a port (pyserial's ``SerialBase`` has it)."""

    timeout: float | None

    def write(self, data: bytes, /) -> int | None: ...

    def read(self, size: int = 1, /) -> bytes: ...

    @property
    def in_waiting(self) -> int: ...


class LinkFailed(LinkError):
    """A query got no delivered answer or no well-formed result."""


@dataclass
class Exchange:
    """The outcome of one :meth:`ActionLink.send`."""

    request: ActionFrame
    delivered: bool
    attempts: int
    status: Status | int | None  # the last answer's status; None: no answer at all
    reason: str  # why it failed ("" when delivered)
    seconds: float  # link-clock time from the first write to the end
    result: ActionFrame | None = None  # the query result frame, when one was awaited
    #: Of ``attempts``, how many re-asked a read whose result did not come in time.
    missing_results: int = 0
    malformed_results: int = 0  # result frames that passed the CRC but did not decode
    other: list[ActionFrame] = field(default_factory=list)  # anything else that arrived

    def decoded(self) -> Result | None:
        """The result's fields (:mod:`~fwbridge.protocols.families.fish_payloads`); None without
        a result."""
        if self.result is None:
            return None
        return decode_result(int(self.result.sub), self.result.data)


def link_clock(port: Any) -> Callable[[], float]:
    """The clock timeouts on ``port`` are counted in (see the module docstring)."""
    endpoint = getattr(port, "endpoint", None)
    if endpoint is not None and getattr(endpoint, "pacing", None) == "afap":
        clock = endpoint.world.clock
        return lambda: float(clock.seconds)
    return time.monotonic


class ActionLink:
    """Action frames over ``port`` with acknowledgement and retransmission.

    ``timeout``: seconds to wait for each answer; ``retries``: retransmissions
    after the first attempt; ``clock``: default :func:`link_clock`.
    """

    def __init__(self, port: SerialLike, *, crc: str = DEFAULT_CRC, timeout: float = 0.2,
                 retries: int = 3, max_length: int = DEFAULT_MAX_LENGTH,
                 clock: Callable[[], float] | None = None) -> None:
        self.port = port
        self.sender = StopAndWaitSender(timeout=timeout, retries=retries, crc=crc)
        self.rx = action_receiver(crc=crc, max_length=max_length)
        self.clock = clock or link_clock(port)
        # A native port is polled with a per-call timeout; anything else is read
        # with its own timeout, set per call (a sim:// port steps the world meanwhile).
        self._poll = poller_for(port)
        self.bytes_out = 0

    @property
    def stats(self) -> dict[str, int]:
        return self.sender.stats.as_dict()

    def _read(self, wait: float) -> bytes:
        wait = max(0.0, min(wait, READ_SLICE))
        if self._poll is not None:
            return self._poll(wait)
        if self.port.timeout != wait:
            self.port.timeout = wait
        return read_some(self.port)

    def _write(self, data: bytes) -> None:
        self.port.write(data)
        self.bytes_out += len(data)

    def write_only(self, frame: ActionFrame) -> bytes:
        """Write ``frame`` once, no answer awaited; returns its bytes."""
        data = encode(frame, crc=self.sender.crc)
        self._write(data)
        return data

    def send(self, frame: ActionFrame, *, want_result: bool | None = None,
             result_timeout: float | None = None) -> Exchange:
        """Send ``frame`` until answered OK or the retries run out.

        ``want_result``: the frame is a read, delivered only with its result:
        after the OK answer wait up to ``result_timeout`` (default the answer
        timeout) for the result frame, and ask again (same retry budget) when
        it does not come or comes malformed. Default: for read requests
        (types 0x01..0x03).
        """
        if want_result is None:
            want_result = int(frame.type) in _READ_TYPES
        wait_result = self.sender.timeout if result_timeout is None else result_timeout
        saved = self.port.timeout
        try:
            return self._send(frame, wait_result if want_result else None)
        finally:
            if self.port.timeout != saved:
                self.port.timeout = saved

    def _send(self, frame: ActionFrame, result_timeout: float | None) -> Exchange:
        clock = self.clock
        start = clock()
        data, _ = self.sender.send(frame, start, result_timeout=result_timeout)
        self._write(data)
        ex = Exchange(frame, False, 1, None, "", 0.0)
        missing_before = self.sender.stats.missing_results
        other: deque[ActionFrame] = deque(maxlen=MAX_OTHER)
        done = False
        while not done:
            deadline = self.sender.deadline
            wait = READ_SLICE if deadline is None else deadline - clock()
            received = self.rx.feed(self._read(wait))
            if not received and self.rx.pending and deadline is not None \
                    and clock() >= deadline:
                # The peer fell silent with a candidate held (a corrupted length
                # field): a stop-and-wait peer has said all it will, decide it now.
                received = self.rx.finish()
            for rec in received:
                f = rec.frame
                now = clock()
                if done:
                    other.append(f)
                    continue
                if result_timeout is not None and is_result_to(f, frame):
                    if not self._well_formed(f):
                        ex.malformed_results += 1
                        continue
                    events = self.sender.on_result(now)
                    if events:
                        ex.result = f
                        ex.status = Status.OK
                else:
                    ans = parse_answer(f)
                    events = self.sender.on_answer(f, now) if ans is not None else []
                    if ans is None:
                        other.append(f)
                    elif events:  # it answers our frame
                        ex.status = ans.status
                for ev in events:
                    done = self._event(ev, ex) or done
            if not done:
                for ev in self.sender.poll(clock()):
                    done = self._event(ev, ex) or done
        ex.other = list(other)
        ex.missing_results = self.sender.stats.missing_results - missing_before
        ex.seconds = clock() - start
        return ex

    @staticmethod
    def _well_formed(result: ActionFrame) -> bool:
        """A result whose layout is known decodes (one that passed the CRC by chance does not)."""
        if int(result.sub) not in RESULT_SUBS:
            return True
        try:
            decode_result(int(result.sub), result.data)
        except FrameError:
            return False
        return True

    def _event(self, ev: ArqEvent, ex: Exchange) -> bool:
        """Apply one sender event to ``ex``; True when the exchange is over."""
        if isinstance(ev, Retransmit):
            self._write(ev.data)
            ex.attempts = ev.attempt
            return False
        if isinstance(ev, Acknowledged):
            return False
        ex.attempts = ev.attempts
        if isinstance(ev, Delivered):
            ex.delivered = True
        else:
            ex.reason = ev.reason
        return True

    def query(self, sub: SubCommand | int, data: bytes = b"", *, machine: int = 0,
              itype: InstructionType | int = InstructionType.READ_PC) -> Result:
        """Send a query (0x11..0x14) and return its decoded result; LinkFailed otherwise."""
        ex = self.send(ActionFrame(machine, itype, sub, data), want_result=True)
        if not ex.delivered:
            raise LinkFailed(f"query 0x{int(sub):02x} not delivered: {ex.reason}")
        if ex.result is None:
            raise LinkFailed(f"query 0x{int(sub):02x} answered but no result within the timeout")
        try:
            result = ex.decoded()
        except FrameError as exc:
            raise LinkFailed(f"query 0x{int(sub):02x}: malformed result: {exc}") from None
        assert result is not None
        return result
