"""The shared bus's wire, sans-I/O: what one end packs the other end's checks read back."""

from __future__ import annotations

import math

import pytest

from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import FLAG_EXT, FLAG_FD, FLAG_RX, Hello, Kind, WireError


def _one(pkt: bytes, to: str) -> tuple[Kind, bytes]:
    got = list(bus_wire.PacketReader(to=to).feed(pkt))
    assert len(got) == 1
    return got[0]


def test_a_hello_packed_by_a_node_is_the_hello_the_daemon_reads() -> None:
    hello = Hello(name="m1", fd=True, fifo=True, bitrate=500_000, pacing="afap")
    kind, body = _one(bus_wire.pack_hello(hello), "daemon")
    assert kind is Kind.HELLO and bus_wire.parse_hello(body) == hello


def test_wait_done_and_call_round_trip() -> None:
    for horizon in (0.0, 1.5, math.inf):
        kind, body = _one(bus_wire.pack_wait(horizon), "daemon")
        assert kind is Kind.WAIT and bus_wire.parse_wait(body) == horizon
    kind, body = _one(bus_wire.pack_done(7), "node")
    assert kind is Kind.DONE and bus_wire.parse_done(body) == 7
    kind, body = _one(bus_wire.pack_call(3, "inject", bit_error_rate=0.5), "daemon")
    call = bus_wire.parse_call(body)
    assert kind is Kind.CALL
    assert (call.id, call.op, call.args["bit_error_rate"]) == (3, "inject", 0.5)


def test_a_delivery_packed_once_reads_back_whole() -> None:
    flags = bus_wire.frame_flags(extended=True, fd=True, rx=True)
    assert flags == FLAG_EXT | FLAG_FD | FLAG_RX
    pkt = bus_wire.message_packet(12.5, 0x1ABCDE, flags, 12, bytes(range(12)))
    kind, body = _one(pkt, "node")
    assert kind is Kind.MESSAGE
    assert bus_wire.unpack_message(body) == bus_wire.packet_message(pkt) == (
        12.5, 0x1ABCDE, flags, 12, bytes(range(12)))


def test_a_kind_for_the_other_side_is_refused() -> None:
    with pytest.raises(WireError, match="unknown packet kind"):
        _one(bus_wire.pack_done(1), "daemon")
