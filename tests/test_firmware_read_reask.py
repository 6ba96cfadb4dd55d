"""The C sender's read re-ask (PROTOCOLS.md 3.3) step for step against the host's.

A read is delivered by its result, not by its answer: the OK answer starts a
result deadline, and a result that does not come in time sends the read
again from the same retry budget. firmware_ref's ``fw_arq`` and the host's
``StopAndWaitSender`` are driven by the same random script and must give
the same events, bytes and counters after every step.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fwbridge.protocols import action_frame
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.families.arq import (
    Acknowledged,
    Delivered,
    Failed,
    Retransmit,
    StopAndWaitSender,
)
from tests.fwref import Firmware
from tests.fwref import firmware as firmware  # the session fixture

KINDS = {Retransmit: "retransmit", Delivered: "delivered", Failed: "failed",
         Acknowledged: "acknowledged"}
ops = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 255)), max_size=50)


@given(ops, st.integers(1, 50), st.integers(1, 80), st.integers(0, 4))
def test_read_reask_same_steps(firmware: Firmware, script: list[tuple[int, int]], timeout: int,
                               result_timeout: int, retries: int) -> None:
    c = firmware.arq_sender(timeout, retries)
    py = StopAndWaitSender(timeout=float(timeout), retries=retries)
    now = 0
    sent: ActionFrame | None = None
    for op, arg in script:
        py_events: list[object] = []
        py_tx = b""
        if op == 0:  # send a read or a write, when idle
            read = arg % 2 == 0
            frame = ActionFrame(arg % 4, 1 + arg % 7, 0x36 if read else 0x21,
                                bytes([arg]) * (arg % 3))
            args = (frame.machine, int(frame.type), int(frame.sub), frame.data, now)
            if py.busy:
                assert (c.send_read(*args, result_timeout) if read else c.send(*args)) == -1
                continue
            py_tx, _ = py.send(frame, float(now),
                               result_timeout=float(result_timeout) if read else None)
            assert (c.send_read(*args, result_timeout) if read else c.send(*args)) == 0
            sent = frame
            c_event = None
        elif op in (1, 2):  # an answer: OK or negative, to ours or to another sub-command
            if sent is None:
                continue
            sub = int(sent.sub) if arg % 5 else 0x22
            status = 0 if op == 1 else 1 + arg % 5
            ans = action_frame.encode(ActionFrame(sent.machine, int(sent.type) + 0x10, sub,
                                                  bytes([status])))
            py_events = py.on_answer(action_frame.decode(ans), float(now))
            c_event = c.on_answer(ans, now)
        elif op == 3:  # the read's result arrives (before or after its answer)
            py_events = py.on_result(float(now))
            c_event = c.on_result(now)
        else:  # time passes, then poll
            now += arg % (2 * max(timeout, result_timeout))
            py_events = py.poll(float(now))
            c_event = c.poll(now)
        assert [KINDS[type(e)] for e in py_events] == ([] if c_event is None else [c_event])
        py_tx += b"".join(e.data for e in py_events if isinstance(e, Retransmit))
        assert c.take_tx() == py_tx
        assert c.busy == py.busy
        py_stats = py.stats.as_dict()
        assert c.missing_results == py_stats.pop("missing_results")
        assert c.stats == py_stats


def test_lost_result_is_asked_again_then_delivered(firmware: Firmware) -> None:
    c = firmware.arq_sender(10, 2)
    assert c.send_read(1, 0x01, 0x36, b"", 0, 30) == 0
    first = c.take_tx()
    ok = action_frame.encode(ActionFrame(1, 0x11, 0x36, b"\x00"))
    assert c.on_answer(ok, 5) == "acknowledged" and c.busy
    assert c.poll(34) is None
    assert c.poll(35) == "retransmit" and c.take_tx() == first  # no result: the same read
    assert c.missing_results == 1
    assert c.on_result(40) == "delivered" and not c.busy  # result before its answer
    assert c.stats["delivered"] == 1 and c.stats["retransmitted"] == 1
