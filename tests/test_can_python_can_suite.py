"""python-can's own expectations of a bus, on the simulated one.

- Its Back2Back suite (tests/third_party/python_can, python-can 4.6.1's
  test/back2back_test.py, unmodified), two ``fwbridge`` nodes on one channel,
  CAN FD on, realtime pacing; and the same on ``can.ThreadSafeBus``.
- A Bus nobody shuts down is cleaned up when collected (python-can's
  ``test_bus_attempts_self_cleanup``): it leaves the bus, so it no longer
  acknowledges frames and its receive queue no longer grows.
- The channel keeps the type it was given (``0`` stays ``0``).
"""

from __future__ import annotations

import gc
import os
from unittest.mock import patch

import can
import pytest

from fwbridge.can_bus.interface import FwBridgeBus
from tests.third_party.python_can import back2back_test as b2b

CHANNEL = f"b2b-{os.getpid()}"


class TestFwBridgeBack2Back(b2b.Back2BackTestCase):
    INTERFACE_1 = INTERFACE_2 = "fwbridge"
    CHANNEL_1 = CHANNEL_2 = CHANNEL


class TestFwBridgeThreadSafeBack2Back(b2b.TestThreadSafeBus):
    INTERFACE_1 = INTERFACE_2 = "fwbridge"
    CHANNEL_1 = CHANNEL_2 = CHANNEL + "-ts"


def test_the_suite_runs_fd_on() -> None:
    assert b2b.TEST_CAN_FD


@patch.object(can.bus.BusABC, "shutdown")
def test_bus_attempts_self_cleanup(mock_shutdown: object) -> None:
    bus = can.Bus(interface="fwbridge", channel=CHANNEL + "-gc")
    del bus
    gc.collect()
    mock_shutdown.assert_called()  # type: ignore[attr-defined]


def test_a_bus_not_shut_down_leaves_the_bus_when_collected() -> None:
    ch = CHANNEL + "-leave"
    tx = FwBridgeBus(ch, pacing="afap")
    forgotten = FwBridgeBus(ch)
    tx.send(can.Message(arbitration_id=0x10, data=b"\x01"))
    assert tx.wait_sent() == 0  # acknowledged by the forgotten node
    port = forgotten._node.port  # type: ignore[attr-defined]  # a node of this process
    del forgotten
    gc.collect()
    assert port.closed and len(tx.sim.endpoints) == 1
    for i in range(20):
        tx.send(can.Message(arbitration_id=0x10, data=bytes([i])), timeout=0)
    tx.wait_sent()
    assert not port.rx or len(port.rx) <= 1  # nothing queued for a node that is gone
    assert tx.error_counters[0] >= 8  # lone now: no ACK
    tx.shutdown()


@pytest.mark.parametrize("channel", [0, 7, "can0x"])
def test_the_channel_keeps_its_type(channel: object) -> None:
    a = can.Bus(interface="fwbridge", channel=channel, pacing="afap")
    b = can.Bus(interface="fwbridge", channel=channel)
    try:
        a.send(can.Message(arbitration_id=1, data=b"\x01"))
        got = b.recv(1.0)
        assert got is not None and got.channel == channel and type(got.channel) is type(channel)
    finally:
        a.shutdown()
        b.shutdown()


def test_a_bus_collected_while_a_channel_opens_does_not_deadlock() -> None:
    import threading

    from fwbridge.can_bus.simchannel import SimChannel

    class Holder:
        pass

    holder = Holder()
    holder.bus = FwBridgeBus(CHANNEL + "-cycle")  # type: ignore[attr-defined]
    holder.me = holder  # type: ignore[attr-defined]  # a cycle: only the collector frees it
    del holder
    original = SimChannel.__init__

    def init(self: SimChannel, *args: object, **kwargs: object) -> None:
        gc.collect()  # the collector runs at an allocation inside open_channel
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    opened: list[FwBridgeBus] = []
    with patch.object(SimChannel, "__init__", init):
        t = threading.Thread(target=lambda: opened.append(FwBridgeBus(CHANNEL + "-other")),
                             daemon=True)
        t.start()
        t.join(10)
    assert not t.is_alive() and opened
    opened[0].shutdown()
