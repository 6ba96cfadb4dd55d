"""Acknowledgement and stop-and-wait retransmission for action frames (PROTOCOLS.md 3.3).

The answer to a request of type T (0x01..0x07) is an action frame of type
T + 0x10 with the request's machine code and sub-command, and one status
byte of data (:class:`Status`). The frame has no sequence number, so
delivery is at-least-once: a lost answer makes the sender send again, and
the receiving side sees the same frame twice. :class:`Responder` flags and
counts those duplicates; it does not hide them.

Both sides are sans-I/O state machines: no clock and no sleeping, the time
comes in as ``now`` (seconds, any monotonic origin), bytes go out as return
values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from fwbridge.protocols.action_frame import ActionFrame, SubCommand, as_instruction_type, encode
from fwbridge.protocols.counters import Counters
from fwbridge.protocols.crc import DEFAULT_CRC, crc_function
from fwbridge.protocols.engine.kernels.action_receiver import Rejected
from fwbridge.protocols.errors import ConfigError, FieldValueError, StateError

__all__ = [
    "ANSWER_OFFSET",
    "REQUEST_TYPES",
    "TRANSIENT",
    "Acknowledged",
    "Answer",
    "Answered",
    "ArqEvent",
    "Delivered",
    "Failed",
    "Responder",
    "ResponderStats",
    "Retransmit",
    "SenderStats",
    "Status",
    "StopAndWaitSender",
    "answer_type",
    "is_answer_to",
    "make_answer",
    "parse_answer",
]

#: Answer type = request type + ANSWER_OFFSET.
ANSWER_OFFSET = 0x10
#: The instruction types that are requests (and get an answer).
REQUEST_TYPES = range(0x01, 0x08)


class Status(IntEnum):
    """The answer's one data byte."""

    OK = 0x00
    CRC_ERROR = 0x01
    LENGTH_ERROR = 0x02
    TRAILER_ERROR = 0x03
    UNKNOWN_SUB = 0x04
    BUSY = 0x05


#: Negative answers worth sending the same frame again for: the bytes were damaged on
#: the way (CRC, length, trailer) or the peer could not take them now (busy). Any other
#: status (unknown sub-command, or a code this side does not know) says the request
#: itself is refused: sending it again cannot help, so it fails at once.
TRANSIENT = frozenset({Status.CRC_ERROR, Status.LENGTH_ERROR, Status.TRAILER_ERROR,
                       Status.BUSY})

#: Receiver rejection reason -> the status that answers it.
REJECT_STATUS = {
    "crc": Status.CRC_ERROR,
    "length": Status.LENGTH_ERROR,
    "truncated": Status.LENGTH_ERROR,
    "trailer": Status.TRAILER_ERROR,
}


def _status(value: int) -> Status | int:
    return Status(value) if value in Status._value2member_map_ else value


def answer_type(request_type: int) -> int:
    """The answer's instruction type for a request of ``request_type``."""
    if request_type not in REQUEST_TYPES:
        raise FieldValueError(
            "action", "type", f"0x{request_type:02x} is not a request type (0x01..0x07): "
            "answers are not answered"
        )
    return as_instruction_type(request_type + ANSWER_OFFSET)


def make_answer(
    request: ActionFrame | tuple[int, int, int], status: Status | int = Status.OK
) -> ActionFrame:
    """The answer frame to ``request`` (a frame, or its machine, type, sub-command)."""
    if isinstance(request, ActionFrame):
        machine, rtype, sub = request.machine, int(request.type), int(request.sub)
    else:
        machine, rtype, sub = request
    if not 0 <= int(status) <= 0xFF:
        raise FieldValueError("action", "status", f"{status} does not fit in one byte")
    return ActionFrame(machine, answer_type(rtype), sub, bytes((int(status),)))


@dataclass(frozen=True, slots=True)
class Answer:
    """A recognised answer: to which request (machine, type, sub-command), with what status."""

    machine: int
    request_type: int
    sub: SubCommand | int
    status: Status | int

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


def parse_answer(frame: ActionFrame) -> Answer | None:
    """The :class:`Answer` that ``frame`` is, or ``None`` when it is not one.

    An answer has a type in 0x11..0x17 and exactly one data byte. (A read
    result of those types with one data byte looks the same: the protocol
    cannot tell them apart, so only a sender waiting for an answer should ask.)
    """
    rtype = int(frame.type) - ANSWER_OFFSET
    if rtype not in REQUEST_TYPES or len(frame.data) != 1:
        return None
    return Answer(frame.machine, rtype, frame.sub, _status(frame.data[0]))


def is_answer_to(frame: ActionFrame, request: ActionFrame) -> bool:
    """True when ``frame`` answers ``request``: same machine and sub-command, type + 0x10."""
    ans = parse_answer(frame)
    return (
        ans is not None
        and ans.machine == request.machine
        and ans.request_type == int(request.type)
        and ans.sub == request.sub
    )


# -- sender ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Retransmit:
    """Write ``data`` (the same frame) again now; wait for its answer until ``deadline``."""

    data: bytes
    deadline: float
    attempt: int  # 2 for the first retransmission


@dataclass(frozen=True, slots=True)
class Delivered:
    """The outstanding frame was answered OK."""

    frame: ActionFrame
    attempts: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The outstanding frame was given up: retry limit reached; ``reason`` says why."""

    frame: ActionFrame
    attempts: int
    reason: str


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """A read was answered OK; its result is awaited until ``deadline``."""

    frame: ActionFrame
    attempts: int
    deadline: float


ArqEvent = Retransmit | Delivered | Failed | Acknowledged


@dataclass(slots=True)
class SenderStats(Counters):
    """``sent`` counts frames given to ``send()``; each one ends delivered or failed."""

    sent: int = 0
    retransmitted: int = 0
    delivered: int = 0
    failed: int = 0
    timeouts: int = 0
    naks: int = 0
    ignored: int = 0  # frames fed that answer nothing outstanding (late or stray answers)
    missing_results: int = 0  # reads answered OK whose result did not come in time


class StopAndWaitSender:
    """One frame in flight; retransmit on timeout or a transient negative answer
    (:data:`TRANSIENT`), up to ``retries`` times; a permanent one fails at once.

    ``send(frame, now)`` returns the bytes to write and the deadline for the
    answer. Feed every frame the link delivers to :meth:`on_answer`, and call
    :meth:`poll` when ``now`` reaches :attr:`deadline`: both return events.
    Every frame sent ends in exactly one :class:`Delivered` or :class:`Failed`.
    Answers carry no sequence number: a late answer to an earlier frame with
    the same machine code, type and sub-command counts for the current one.

    A read (``send(..., result_timeout=S)``) is delivered by its result, fed
    to :meth:`on_result`, not by its answer: the OK answer gives
    :class:`Acknowledged`, and a result that does not come within ``S``
    (lost, or rejected as corrupt) asks again. Reads are idempotent, so this
    spends the same retry budget as a lost answer. A result that comes
    before its answer (the answer lost) delivers the read too.
    """

    def __init__(self, *, timeout: float = 0.2, retries: int = 3, crc: str = DEFAULT_CRC) -> None:
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ConfigError(f"retries must be an int >= 0, got {retries!r}")
        crc_function(crc)  # an unknown name fails here, not at the first send
        self.timeout = float(timeout)
        self.retries = retries
        self.crc = crc
        self.stats = SenderStats()
        self._frame: ActionFrame | None = None
        self._data = b""
        self._attempts = 0
        self._deadline: float | None = None
        self._result_timeout: float | None = None
        self._acknowledged = False

    @property
    def busy(self) -> bool:
        """A frame is outstanding: ``send()`` must wait for its Delivered/Failed."""
        return self._frame is not None

    @property
    def outstanding(self) -> ActionFrame | None:
        return self._frame

    @property
    def deadline(self) -> float | None:
        """When :meth:`poll` has something to do (``None`` when idle)."""
        return self._deadline

    def send(self, frame: ActionFrame, now: float, *,
             result_timeout: float | None = None) -> tuple[bytes, float]:
        """Start sending ``frame``; return its bytes and the answer deadline.

        ``result_timeout``: ``frame`` is a read; after its OK answer wait this
        long for the result (:meth:`on_result`) before asking again.
        """
        if self._frame is not None:
            raise StateError(f"a frame is outstanding (attempt {self._attempts}); wait for its "
                             "Delivered or Failed event before sending the next")
        answer_type(int(frame.type))  # a frame nobody answers would always fail
        self._data = encode(frame, crc=self.crc)
        self._frame = frame
        self._attempts = 1
        self._deadline = now + self.timeout
        self._result_timeout = result_timeout
        self._acknowledged = False
        self.stats.sent += 1
        return self._data, self._deadline

    def on_answer(self, frame: ActionFrame, now: float) -> list[ArqEvent]:
        """A frame arrived from the peer; events if it answers the outstanding frame."""
        req = self._frame
        if req is None or self._acknowledged or not is_answer_to(frame, req):
            self.stats.ignored += 1
            return []
        status = frame.data[0]
        if status == Status.OK and self._result_timeout is not None:
            self._acknowledged = True
            self._deadline = now + self._result_timeout
            return [Acknowledged(req, self._attempts, self._deadline)]
        if status == Status.OK:
            self.stats.delivered += 1
            attempts = self._attempts
            self._idle()
            return [Delivered(req, attempts)]
        self.stats.naks += 1
        why = f"negative answer {_status(status)!r}"
        if status not in TRANSIENT:
            self.stats.failed += 1
            attempts = self._attempts
            self._idle()
            return [Failed(req, attempts, f"{why}: refused, not retried")]
        return self._again(now, why)

    #: The name DESIGN.md uses for :meth:`on_answer`.
    receive = on_answer

    def on_result(self, now: float) -> list[ArqEvent]:
        """The outstanding read's result arrived (the caller matched it to the request)."""
        req = self._frame
        if req is None or self._result_timeout is None:
            self.stats.ignored += 1
            return []
        self.stats.delivered += 1
        attempts = self._attempts
        self._idle()
        return [Delivered(req, attempts)]

    def poll(self, now: float) -> list[ArqEvent]:
        """Time passes: retransmit or fail when the answer (or result) deadline has passed."""
        if self._deadline is None or now < self._deadline:
            return []
        self.stats.timeouts += 1
        if self._acknowledged:
            self._acknowledged = False
            self.stats.missing_results += 1
            return self._again(now, "no result before the deadline")
        return self._again(now, "no answer before the deadline")

    def _again(self, now: float, why: str) -> list[ArqEvent]:
        req = self._frame
        assert req is not None
        if self._attempts > self.retries:
            self.stats.failed += 1
            attempts = self._attempts
            self._idle()
            return [Failed(req, attempts, f"{why} after {attempts} attempts")]
        self._attempts += 1
        self._deadline = now + self.timeout
        self.stats.retransmitted += 1
        return [Retransmit(self._data, self._deadline, self._attempts)]

    def _idle(self) -> None:
        self._acknowledged = False
        self._result_timeout = None
        self._frame = None
        self._data = b""
        self._deadline = None


# -- receiving side ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Answered:
    """What :class:`Responder` says about one received frame: the bytes to send back."""

    data: bytes
    status: Status | int
    duplicate: bool  # the same frame as the one answered OK just before


@dataclass(slots=True)
class ResponderStats(Counters):
    answered: int = 0
    acks: int = 0
    naks: int = 0
    duplicates: int = 0


class Responder:
    """Answers received requests and counts duplicates.

    A duplicate is a frame equal to the last frame answered OK, received
    right after it (rejected candidates in between do not count): the
    sender did not get our answer and sent the same bytes again. It is
    answered OK again, and flagged, so the application can choose to skip it.
    ``known_subs``: sub-commands this side handles (default: all of table
    3.2); others are answered ``UNKNOWN_SUB``.
    """

    def __init__(self, *, crc: str = DEFAULT_CRC, known_subs: set[int] | None = None) -> None:
        crc_function(crc)
        self.crc = crc
        self.known_subs = frozenset(int(s) for s in SubCommand) if known_subs is None else (
            frozenset(int(s) for s in known_subs))
        self.stats = ResponderStats()
        self._last_ok: ActionFrame | None = None

    def answer(self, frame: ActionFrame, status: Status | int | None = None) -> Answered | None:
        """Answer a received frame; ``None`` if it is not a request (answers get no answer).

        ``status``: what to answer (e.g. ``Status.BUSY``); by default OK, or
        ``UNKNOWN_SUB`` for a sub-command not in :attr:`known_subs`.
        """
        if int(frame.type) not in REQUEST_TYPES:
            return None
        if status is None:
            status = Status.OK if int(frame.sub) in self.known_subs else Status.UNKNOWN_SUB
        duplicate = self._last_ok is not None and frame == self._last_ok
        if duplicate:
            self.stats.duplicates += 1
        if status == Status.OK:
            self.stats.acks += 1
            self._last_ok = frame
        else:
            self.stats.naks += 1
            self._last_ok = None
        self.stats.answered += 1
        return Answered(encode(make_answer(frame, status), crc=self.crc), _status(int(status)),
                        duplicate)

    def answer_rejected(self, rejected: Rejected) -> Answered | None:
        """The negative answer to a candidate the receiver rejected, if it can be attributed."""
        if rejected.sub is None or int(rejected.type) not in REQUEST_TYPES:
            return None
        status = REJECT_STATUS[rejected.reason]
        frame = make_answer((rejected.machine, int(rejected.type), int(rejected.sub)), status)
        self.stats.answered += 1
        self.stats.naks += 1
        return Answered(encode(frame, crc=self.crc), status, False)
