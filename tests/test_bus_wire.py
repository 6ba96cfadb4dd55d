"""The shared bus's wire, sans-I/O: what one end packs the other end's checks read back."""

from __future__ import annotations

import math
from typing import Any

import can
import pytest

from fwbridge.can_bus.daemon_client import pack_message, unpack_message
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


def test_hold_and_lockstep_travel_in_the_hello_and_default_as_before() -> None:
    hello = Hello(name="log", hold=True, lockstep=False)
    assert bus_wire.parse_hello(_one(bus_wire.pack_hello(hello), "daemon")[1]) == hello
    older = bus_wire.parse_hello(b'{"name": "old"}')  # a hello from before these fields
    assert (older.hold, older.lockstep) == (False, True)
    for bad in (b'{"hold": 1}', b'{"lockstep": "no"}'):
        with pytest.raises(WireError):
            bus_wire.parse_hello(bad)


@pytest.mark.parametrize("kw", [
    {"arbitration_id": 0x123, "is_extended_id": False, "data": b"\x01\x02"},
    {"arbitration_id": 0x1ABCDE, "is_extended_id": True, "is_remote_frame": True, "dlc": 3},
    {"arbitration_id": 0x42, "is_extended_id": False, "is_fd": True, "bitrate_switch": True,
     "error_state_indicator": True, "data": bytes(range(24))},
    {"arbitration_id": 0x80, "is_extended_id": True, "is_error_frame": True, "data": bytes(8)},
])
def test_a_node_reads_a_frame_packet_as_python_can_builds_the_message(
        kw: dict[str, Any]) -> None:
    want = can.Message(timestamp=12.25, is_rx=True, channel="shared:x", check=False, **kw)
    got = unpack_message(pack_message(want), "shared:x")
    assert got.equals(want, timestamp_delta=0.0, check_channel=True, check_direction=True)
    assert type(got.data) is bytearray and got.dlc == want.dlc


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
