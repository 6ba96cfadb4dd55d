"""ACK/NAK answers and stop-and-wait ARQ, down to a deterministic lossy link."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver, Rejected
from fwbridge.protocols.errors import ConfigError, FieldValueError, StateError
from fwbridge.protocols.families.arq import (
    TRANSIENT,
    Delivered,
    Failed,
    Responder,
    Retransmit,
    Status,
    StopAndWaitSender,
    answer_type,
    is_answer_to,
    make_answer,
    parse_answer,
)

REQ = ActionFrame(3, InstructionType.WRITE_PC, SubCommand.TEST_ACTION_GROUP, b"\x01\x02")


# -- answers ------------------------------------------------------------------
def test_answer_layout() -> None:
    ans = make_answer(REQ)
    assert ans == ActionFrame(3, 0x16, 0x32, b"\x00")
    assert ans.type is InstructionType.WRITE_RESULT_PC
    nak = make_answer(REQ, Status.CRC_ERROR)
    assert nak.data == b"\x01"
    parsed = parse_answer(af.decode(af.encode(nak)))
    assert parsed is not None and parsed.status is Status.CRC_ERROR and not parsed.ok
    assert (parsed.machine, parsed.request_type, parsed.sub) == (3, 0x06, 0x32)


@pytest.mark.parametrize("req", range(0x01, 0x08))
def test_every_request_type_gets_type_plus_0x10(req: int) -> None:
    assert answer_type(req) == req + 0x10
    assert is_answer_to(make_answer(ActionFrame(0, req, 1)), ActionFrame(0, req, 1))


@pytest.mark.parametrize("rtype", [0x00, 0x08, 0x11, 0x16, 0x19, 0xFF])
def test_answers_are_not_answered(rtype: int) -> None:
    with pytest.raises(FieldValueError):
        answer_type(rtype)
    assert Responder().answer(ActionFrame(0, rtype, 1)) is None


def test_recognition_needs_machine_type_sub_and_one_byte() -> None:
    ok = make_answer(REQ)
    assert is_answer_to(ok, REQ)
    assert not is_answer_to(ActionFrame(4, 0x16, 0x32, b"\x00"), REQ)  # other machine
    assert not is_answer_to(ActionFrame(3, 0x15, 0x32, b"\x00"), REQ)  # other type
    assert not is_answer_to(ActionFrame(3, 0x16, 0x31, b"\x00"), REQ)  # other sub-command
    assert not is_answer_to(ActionFrame(3, 0x16, 0x32, b"\x00\x00"), REQ)  # a result, not an answer
    assert parse_answer(REQ) is None
    assert parse_answer(ActionFrame(3, 0x16, 0x32, b"\x77")).status == 0x77  # type: ignore[union-attr]


# -- sender -------------------------------------------------------------------
def test_send_ack_delivered() -> None:
    tx = StopAndWaitSender(timeout=0.5, retries=2)
    data, deadline = tx.send(REQ, now=10.0)
    assert af.decode(data) == REQ and deadline == 10.5 and tx.busy
    with pytest.raises(StateError):
        tx.send(REQ, now=10.1)
    assert tx.poll(10.4) == []
    assert tx.on_answer(make_answer(REQ), now=10.2) == [Delivered(REQ, 1)]
    assert not tx.busy and tx.deadline is None
    assert tx.stats.as_dict() == {"sent": 1, "retransmitted": 0, "delivered": 1, "failed": 0,
                                  "timeouts": 0, "naks": 0, "ignored": 0, "missing_results": 0}


def test_timeouts_retransmit_then_fail() -> None:
    tx = StopAndWaitSender(timeout=1.0, retries=2)
    data, deadline = tx.send(REQ, now=0.0)
    ev = tx.poll(deadline)
    assert ev == [Retransmit(data, 2.0, 2)]
    assert tx.poll(1.5) == []
    assert tx.poll(2.0) == [Retransmit(data, 3.0, 3)]
    (failed,) = tx.poll(3.0)
    assert isinstance(failed, Failed) and failed.frame == REQ and failed.attempts == 3
    assert "no answer" in failed.reason
    assert tx.poll(100.0) == [] and not tx.busy
    assert (tx.stats.retransmitted, tx.stats.failed, tx.stats.timeouts) == (2, 1, 3)


def test_nak_retransmits_at_once_and_fails_after_the_limit() -> None:
    tx = StopAndWaitSender(timeout=1.0, retries=1)
    data, _ = tx.send(REQ, now=0.0)
    assert tx.on_answer(make_answer(REQ, Status.CRC_ERROR), now=0.1) == [Retransmit(data, 1.1, 2)]
    (failed,) = tx.on_answer(make_answer(REQ, Status.BUSY), now=0.2)
    assert isinstance(failed, Failed) and "BUSY" in failed.reason
    assert tx.stats.naks == 2


@pytest.mark.parametrize("status", [Status.UNKNOWN_SUB, 0x42])
def test_a_permanent_nak_fails_at_once_without_retransmitting(status: int) -> None:
    """An unknown sub-command (or a status this side does not know) refuses the request
    itself: the same bytes again would be refused again."""
    tx = StopAndWaitSender(timeout=1.0, retries=3)
    tx.send(REQ, now=0.0)
    (failed,) = tx.on_answer(make_answer(REQ, status), now=0.1)
    assert isinstance(failed, Failed) and failed.attempts == 1
    assert "refused, not retried" in failed.reason
    assert not tx.busy and tx.poll(100.0) == []
    assert (tx.stats.retransmitted, tx.stats.failed, tx.stats.naks) == (0, 1, 1)


def test_a_responder_that_does_not_know_the_sub_command_gets_it_once() -> None:
    rsp = Responder(known_subs=set())
    tx = StopAndWaitSender(timeout=1.0, retries=3)
    data, _ = tx.send(REQ, now=0.0)
    writes = [data]
    events: list[object] = []
    while tx.busy:
        ans = rsp.answer(af.decode(writes[-1]))
        assert ans is not None
        events = tx.on_answer(af.decode(ans.data), now=0.1)
        writes += [e.data for e in events if isinstance(e, Retransmit)]
    assert len(writes) == 1 and rsp.stats.answered == 1
    assert isinstance(events[0], Failed) and "UNKNOWN_SUB" in events[0].reason


def test_transient_naks_are_the_documented_ones() -> None:
    assert {Status.CRC_ERROR, Status.LENGTH_ERROR, Status.TRAILER_ERROR, Status.BUSY} == TRANSIENT


def test_stray_and_late_answers_are_ignored_and_counted() -> None:
    tx = StopAndWaitSender()
    assert tx.on_answer(make_answer(REQ), now=0.0) == []
    tx.send(REQ, now=0.0)
    other = ActionFrame(3, InstructionType.WRITE_PC, SubCommand.STAND_STILL)
    assert tx.on_answer(make_answer(other), now=0.1) == []
    assert tx.busy and tx.stats.ignored == 2


def test_send_refuses_frames_nobody_answers() -> None:
    with pytest.raises(FieldValueError):
        StopAndWaitSender().send(ActionFrame(0, 0x16, 0x32), now=0.0)


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"timeout": -1.0}, {"retries": -1}, {"retries": 1.5},
               {"crc": "nope"}]
)
def test_sender_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        StopAndWaitSender(**kwargs)  # type: ignore[arg-type]


# -- responder ------------------------------------------------------------------
def test_responder_acks_flags_duplicates_and_naks() -> None:
    rsp = Responder(known_subs={SubCommand.TEST_ACTION_GROUP})
    first = rsp.answer(REQ)
    assert first is not None and first.status is Status.OK and not first.duplicate
    assert af.decode(first.data) == make_answer(REQ)
    again = rsp.answer(REQ)
    assert again is not None and again.duplicate and again.status is Status.OK
    unknown = rsp.answer(ActionFrame(3, 6, 0x33))
    assert unknown is not None and unknown.status is Status.UNKNOWN_SUB
    busy = rsp.answer(REQ, Status.BUSY)
    assert busy is not None and busy.status is Status.BUSY
    assert not rsp.answer(REQ).duplicate  # type: ignore[union-attr]  # the last answer was BUSY
    assert rsp.stats.as_dict() == {"answered": 5, "acks": 3, "naks": 2, "duplicates": 1}


@pytest.mark.parametrize(
    ("reason", "status"),
    [("crc", Status.CRC_ERROR), ("length", Status.LENGTH_ERROR),
     ("truncated", Status.LENGTH_ERROR), ("trailer", Status.TRAILER_ERROR)],
)
def test_rejected_frames_get_negative_answers(reason: str, status: Status) -> None:
    ans = Responder().answer_rejected(Rejected(0, reason, 3, 6, 0x32))
    assert ans is not None and ans.status is status
    assert af.decode(ans.data) == make_answer(REQ, status)


def test_unattributable_rejects_get_no_answer() -> None:
    assert Responder().answer_rejected(Rejected(0, "truncated", 3, 6, None)) is None
    assert Responder().answer_rejected(Rejected(0, "crc", 3, 0x16, 0x32)) is None


# -- a deterministic lossy link -------------------------------------------------------
@dataclass
class Link:
    """One direction of a serial link: drops whole writes, or flips one bit, by a seeded RNG."""

    rnd: random.Random
    loss: float
    corrupt: float = 0.0
    dropped: int = 0
    damaged: int = 0

    def carry(self, data: bytes) -> bytes:
        if not data:
            return data
        if self.rnd.random() < self.loss:
            self.dropped += 1
            return b""
        if self.rnd.random() < self.corrupt:
            self.damaged += 1
            bad = bytearray(data)
            k = self.rnd.randrange(len(bad))
            bad[k] ^= 1 << self.rnd.randrange(8)
            return bytes(bad)
        return data


@dataclass
class Device:
    """The main controller's side: receiver, responder, and what the application saw."""

    # The link carries at most 44 data bytes: a tight maximum rejects a damaged
    # length field at once instead of waiting for bytes that never come.
    rx: ActionReceiver = field(
        default_factory=lambda: ActionReceiver(keep_rejects=True, max_length=64)
    )
    responder: Responder = field(default_factory=Responder)
    seen: list[ActionFrame] = field(default_factory=list)
    duplicates_flagged: int = 0

    def on_bytes(self, data: bytes) -> bytes:
        out = []
        for item in self.rx.feed(data):
            ans = self.responder.answer(item.frame)
            assert ans is not None
            self.seen.append(item.frame)
            self.duplicates_flagged += ans.duplicate
            out.append(ans.data)
        for rej in self.rx.take_rejects():
            nak = self.responder.answer_rejected(rej)
            if nak is not None:
                out.append(nak.data)
        return b"".join(out)


def run_link(n: int, loss: float, corrupt: float, retries: int, seed: int) -> dict[str, object]:
    rnd = random.Random(seed)
    down = Link(random.Random(seed + 1), loss, corrupt)
    up = Link(random.Random(seed + 2), loss, corrupt)
    tx = StopAndWaitSender(timeout=0.05, retries=retries)
    host_rx = ActionReceiver(max_length=64)
    dev = Device()
    outcome: dict[int, list[object]] = {}
    now = 0.0
    for k in range(n):
        frame = ActionFrame(1, InstructionType.WRITE_PC, SubCommand.REALTIME_SERVO_CONTROL,
                            k.to_bytes(4, "little") + rnd.randbytes(rnd.randrange(0, 40)))
        data, _ = tx.send(frame, now)
        events: list[object] = []
        while tx.busy:
            answers = dev.on_bytes(down.carry(data))
            now += 0.001
            for item in host_rx.feed(up.carry(answers)):
                events += tx.on_answer(item.frame, now)
            if tx.busy and not events:
                now = tx.deadline  # type: ignore[assignment]
                events += tx.poll(now)
            for ev in events:
                if isinstance(ev, Retransmit):
                    data = ev.data
                else:
                    outcome.setdefault(k, []).append(ev)
            events = []
        # stop-and-wait: a frame ends before the next one starts
        assert len(outcome.get(k, [])) == 1, f"frame {k}: {outcome.get(k)}"
    return {"tx": tx, "dev": dev, "outcome": outcome, "down": down, "up": up}


@pytest.mark.parametrize("corrupt", [0.0, 0.1])
def test_lossy_link_every_frame_delivered_or_failed(corrupt: float) -> None:
    n, retries = 1000, 6
    r = run_link(n, loss=0.3, corrupt=corrupt, retries=retries, seed=42)
    tx: StopAndWaitSender = r["tx"]  # type: ignore[assignment]
    dev: Device = r["dev"]  # type: ignore[assignment]
    outcome: dict[int, list[object]] = r["outcome"]  # type: ignore[assignment]
    st = tx.stats
    # none silently lost: each frame ended in exactly one Delivered or Failed
    assert sorted(outcome) == list(range(n))
    delivered = [k for k, (ev,) in outcome.items() if isinstance(ev, Delivered)]
    failed = [k for k, (ev,) in outcome.items() if isinstance(ev, Failed)]
    assert len(delivered) + len(failed) == n == st.sent
    assert (st.delivered, st.failed) == (len(delivered), len(failed))
    attempts = sum(ev.attempts for (ev,) in outcome.values())  # type: ignore[attr-defined]
    assert st.retransmitted == attempts - n
    # bounded: no frame sent more than 1 + retries times
    assert all(ev.attempts <= 1 + retries for (ev,) in outcome.values())  # type: ignore[attr-defined]
    assert 0 < st.retransmitted <= retries * n
    assert st.delivered > 0.95 * n
    # at-least-once: every delivered frame reached the device's application
    seen_ids = [int.from_bytes(f.data[:4], "little") for f in dev.seen]
    assert set(delivered) <= set(seen_ids)
    # duplicates: receptions of a frame already answered OK, all counted and flagged
    repeats = len(seen_ids) - len(set(seen_ids))
    assert dev.responder.stats.duplicates == dev.duplicates_flagged == repeats
    assert 0 < repeats <= st.retransmitted
    assert r["down"].dropped > 0.25 * (n + st.retransmitted)  # type: ignore[attr-defined]
    if corrupt:
        assert st.naks > 0 and dev.responder.stats.naks > 0


def test_lossy_link_is_deterministic() -> None:
    a = run_link(200, 0.3, 0.05, 4, seed=9)
    b = run_link(200, 0.3, 0.05, 4, seed=9)
    assert a["tx"].stats == b["tx"].stats  # type: ignore[attr-defined]


def test_dead_link_reports_every_frame_failed() -> None:
    r = run_link(20, loss=1.0, corrupt=0.0, retries=2, seed=1)
    tx: StopAndWaitSender = r["tx"]  # type: ignore[assignment]
    assert (tx.stats.failed, tx.stats.delivered, tx.stats.retransmitted) == (20, 0, 40)
