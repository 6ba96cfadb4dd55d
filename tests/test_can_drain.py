"""Draining a bus that filters in software: matching frames behind others still arrive."""

from __future__ import annotations

import can

from fwbridge.can_bus.ids import command_filter, drain


def test_drain_reads_past_filtered_frames_on_the_virtual_bus() -> None:
    tx = can.Bus(interface="virtual", channel="drain-test")
    rx = can.Bus(interface="virtual", channel="drain-test")
    try:
        rx.set_filters(command_filter(3))
        for k in (1, 2, 3, 4, 3):
            tx.send(can.Message(arbitration_id=0x100 + k, data=bytes(8), is_extended_id=False))
        # What a recv(0) loop would see: nothing, the head frame (0x101) fails the filter.
        assert rx.recv(0) is None
        got = drain(rx)
        assert [m.arbitration_id for m in got] == [0x103, 0x103]
        assert drain(rx) == []
    finally:
        tx.shutdown()
        rx.shutdown()


def test_drain_is_bounded() -> None:
    tx = can.Bus(interface="virtual", channel="drain-bound")
    rx = can.Bus(interface="virtual", channel="drain-bound")
    try:
        for _ in range(50):
            tx.send(can.Message(arbitration_id=0x201, data=bytes(8), is_extended_id=False))
        assert len(drain(rx, limit=20)) == 20
        assert len(drain(rx)) == 30
    finally:
        tx.shutdown()
        rx.shutdown()
