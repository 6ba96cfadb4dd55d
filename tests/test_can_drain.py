"""Draining a bus without blocking: the node's filter, applied by drain, reads past frames
for others on interfaces that filter in software."""

from __future__ import annotations

import can

from fwbridge.can_bus.ids import accept, accepts, command_filter, drain, filters_on_receive


def test_a_software_filter_on_the_bus_stops_recv0_at_the_head_frame() -> None:
    # Why drain takes the filter: python-can's recv(0) gives up at the first frame that
    # fails a filter the bus applies in software, though a matching one waits behind it.
    tx = can.Bus(interface="virtual", channel="drain-why")
    rx = can.Bus(interface="virtual", channel="drain-why")
    try:
        rx.set_filters(command_filter(3))
        for k in (1, 3):
            tx.send(can.Message(arbitration_id=0x100 + k, data=bytes(8), is_extended_id=False))
        assert rx.recv(0) is None  # the head frame (0x101) failed the filter
        got = rx.recv(0)
        assert got is not None and got.arbitration_id == 0x103
    finally:
        tx.shutdown()
        rx.shutdown()


def test_drain_reads_past_frames_for_others_on_the_virtual_bus() -> None:
    tx = can.Bus(interface="virtual", channel="drain-test")
    rx = can.Bus(interface="virtual", channel="drain-test")
    try:
        for k in (1, 2, 3, 4, 3):
            tx.send(can.Message(arbitration_id=0x100 + k, data=bytes(8), is_extended_id=False))
        got = drain(rx, command_filter(3))
        assert [m.arbitration_id for m in got] == [0x103, 0x103]
        assert drain(rx, command_filter(3)) == []
    finally:
        tx.shutdown()
        rx.shutdown()


def test_drain_on_a_bus_that_filters_as_it_receives() -> None:
    # fwbridge applies a Bus's filters at delivery: the same frames, the filter on the bus
    tx = can.Bus(interface="fwbridge", channel="drain-hw", pacing="afap")
    rx = can.Bus(interface="fwbridge", channel="drain-hw", can_filters=command_filter(3))
    try:
        for k in (1, 2, 3, 4, 3):
            tx.send(can.Message(arbitration_id=0x100 + k, data=bytes(8), is_extended_id=False))
        assert tx.wait_sent() == 0
        assert [m.arbitration_id for m in drain(rx, command_filter(3))] == [0x103, 0x103]
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


def test_accepts_has_python_cans_filter_semantics() -> None:
    std = can.Message(arbitration_id=0x123, is_extended_id=False)
    ext = can.Message(arbitration_id=0x123, is_extended_id=True)
    assert accepts(None, std) and accepts([], ext)
    f_any = [{"can_id": 0x120, "can_mask": 0x7F0}]
    assert accepts(f_any, std) and accepts(f_any, ext)  # type: ignore[arg-type]
    f_std = [{"can_id": 0x123, "can_mask": 0x7FF, "extended": False}]
    assert accepts(f_std, std) and not accepts(f_std, ext)  # type: ignore[arg-type]
    assert not accepts([{"can_id": 0x124, "can_mask": 0x7FF}], std)  # type: ignore[list-item]


def test_accept_puts_the_filter_on_buses_that_filter_as_frames_arrive() -> None:
    virtual = can.Bus(interface="virtual", channel="drain-accept")
    sim = can.Bus(interface="fwbridge", channel="drain-accept")
    try:
        assert accept(virtual, command_filter(2)) == command_filter(2)
        assert virtual.filters is None  # software: the node filters, recv(0) reads every frame
        accept(sim, command_filter(2))
        assert sim.filters == command_filter(2) and filters_on_receive(sim)
        assert not filters_on_receive(virtual)
    finally:
        virtual.shutdown()
        sim.shutdown()
