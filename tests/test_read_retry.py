"""Reads return their data: a read whose result frame is lost or corrupted is asked again.

The sender's state machine (:class:`StopAndWaitSender` with ``result_timeout``)
in simulated time, then the fish behind ``sim://fish?pacing=afap`` with the
result frame corrupted on the wire, then a seeded soak at 1e-4 and 1e-3
corrupted bytes per byte, all in simulated time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import serial

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.sim.faults import FaultStats
from fwbridge.bridge.sim.models.fish import RobotFish
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.bridge.sim.webots_serial import ROBOT_LINK
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.families.arq import (
    Acknowledged,
    Delivered,
    Failed,
    Retransmit,
    StopAndWaitSender,
    make_answer,
)
from fwbridge.protocols.families.fish_payloads import RobotInfo

offer_sim()  # serial.serial_for_url("sim://…") below

READ = ActionFrame(0, InstructionType.READ_PC, SubCommand.QUERY_ROBOT_INFO)


def test_sender_asks_again_when_the_result_does_not_come() -> None:
    tx = StopAndWaitSender(timeout=0.2, retries=2)
    _, deadline = tx.send(READ, 0.0, result_timeout=0.5)
    assert deadline == pytest.approx(0.2)
    assert tx.on_answer(make_answer(READ), 0.1) == [Acknowledged(READ, 1, 0.6)]
    assert tx.poll(0.59) == []
    # A second answer to the same attempt changes nothing while the result is awaited.
    assert tx.on_answer(make_answer(READ), 0.2) == []
    (ev,) = tx.poll(0.6)
    assert isinstance(ev, Retransmit) and ev.attempt == 2
    assert tx.on_result(0.7) == [Delivered(READ, 2)]
    st = tx.stats
    assert (st.sent, st.delivered, st.failed, st.missing_results, st.retransmitted) == (
        1, 1, 0, 1, 1)


def test_sender_gives_up_a_read_within_the_same_retry_budget() -> None:
    tx = StopAndWaitSender(timeout=0.2, retries=1)
    tx.send(READ, 0.0, result_timeout=0.3)
    tx.on_answer(make_answer(READ), 0.1)
    (ev,) = tx.poll(0.4)
    assert isinstance(ev, Retransmit)
    (ack,) = tx.on_answer(make_answer(READ), 0.5)
    assert isinstance(ack, Acknowledged) and ack.attempts == 2
    (failed,) = tx.poll(0.8)
    assert isinstance(failed, Failed) and failed.attempts == 2
    assert "no result" in failed.reason
    assert (tx.stats.failed, tx.stats.missing_results, tx.busy) == (1, 2, False)


def test_result_before_its_answer_delivers_the_read() -> None:
    tx = StopAndWaitSender(timeout=0.2, retries=0)
    tx.send(READ, 0.0, result_timeout=0.3)
    assert tx.on_result(0.05) == [Delivered(READ, 1)]


def test_a_write_is_delivered_by_its_answer_as_before() -> None:
    frame = ActionFrame(0, InstructionType.WRITE_PC, SubCommand.ENTER_IDLE)
    tx = StopAndWaitSender()
    tx.send(frame, 0.0)
    assert tx.on_answer(make_answer(frame), 0.1) == [Delivered(frame, 1)]
    assert tx.on_result(0.2) == []


class CorruptFrames:
    """A fault injector that flips one CRC byte of the first ``count`` frames
    longer than ``min_len`` bytes the fish sends (its result frames)."""

    def __init__(self, count: int = 1, min_len: int = 12) -> None:
        self.left = count
        self.min_len = min_len
        self.stats = FaultStats()
        self.holding = False

    def apply(self, data: bytes, now_ms: int) -> bytes:
        if self.left > 0 and len(data) > self.min_len and data[:2] == b"\xfe\xef":
            self.left -= 1
            self.stats.corrupted += 1
            buf = bytearray(data)
            buf[-3] ^= 0x5A
            return bytes(buf)
        return data

    def release(self, now_ms: int) -> bytes:
        return b""


@pytest.fixture
def fish_port() -> Iterator[serial.SerialBase]:
    port = serial.serial_for_url("sim://fish?pacing=afap", timeout=0.1)
    yield port
    port.endpoint.model.close()
    port.close()


def test_corrupted_result_is_asked_again(fish_port: serial.SerialBase) -> None:
    model: RobotFish = fish_port.endpoint.model
    bad = CorruptFrames(count=2)
    fish_port.endpoint.world.ether.set_faults(ROBOT_LINK.tx_channel, bad)
    link = ActionLink(fish_port, timeout=0.2, retries=3)
    ex = link.send(READ)
    assert bad.stats.corrupted == 2
    assert ex.delivered and ex.attempts == 3 and ex.missing_results == 2
    assert isinstance(ex.decoded(), RobotInfo)
    # The fish saw the same read three times (the last two flagged as duplicates).
    assert model.responder.stats.acks == 3 and model.stats.results == 3


def test_read_fails_when_every_result_is_lost(fish_port: serial.SerialBase) -> None:
    fish_port.endpoint.world.ether.set_faults(ROBOT_LINK.tx_channel, CorruptFrames(count=99))
    link = ActionLink(fish_port, timeout=0.2, retries=2)
    ex = link.send(READ)
    assert not ex.delivered and ex.attempts == 3 and ex.missing_results == 3
    assert "no result" in ex.reason and ex.result is None


@pytest.mark.parametrize(("rate", "exchanges"), [(1e-4, 2400), (1e-3, 600)])
def test_soak_with_corrupted_bytes_ends_with_no_failed_read(rate: float, exchanges: int) -> None:
    port = serial.serial_for_url(f"sim://fish?pacing=afap&seed=7&faults=corrupt={rate}",
                                 timeout=0.1)
    try:
        link = ActionLink(port, timeout=0.2, retries=5)
        subs = (SubCommand.QUERY_ROBOT_INFO, SubCommand.QUERY_CAN_ERROR_RATE,
                SubCommand.QUERY_SERVO_INFO, SubCommand.QUERY_BUOYANCY_INFO)
        failed = retried = 0
        for k in range(exchanges):
            ex = link.send(ActionFrame(0, InstructionType.READ_PC, subs[k % len(subs)]))
            failed += not (ex.delivered and ex.decoded() is not None)
            retried += ex.attempts > 1
        ether = port.endpoint.world.ether
        corrupted = sum(inj.stats.corrupted for inj in ether.faults().values())
        assert corrupted > 0  # the faults did happen
        assert failed == 0
        if rate >= 1e-3:
            assert retried > 0 and link.sender.stats.missing_results > 0
    finally:
        port.endpoint.model.close()
        port.close()
