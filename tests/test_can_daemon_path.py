"""The shared bus's frame path: who holds bus time (afap lockstep), when a realtime frame
is handed out (never before its end), and that bursts and lone frames keep their order.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import can
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.can_bus.daemon import BusDaemon
from fwbridge.can_bus.daemon_nodes import QUEUE_BUDGET, Client
from fwbridge.protocols import bus_wire
from fwbridge.protocols.bus_wire import Kind, PacketReader
from tests.helpers import bus_daemon


@pytest.fixture
def afap(rundir: Path) -> Iterator[BusDaemon]:
    # a node may hold bus time for a minute: holding is never cut short in these tests
    for dm, _ in bus_daemon("path", pacing="afap", hold_limit=60.0):
        yield dm


@pytest.fixture
def realtime(rundir: Path) -> Iterator[BusDaemon]:
    for dm, _ in bus_daemon("path", bitrate=125_000, pacing="realtime"):
        yield dm


def _msg(i: int) -> can.Message:
    return can.Message(arbitration_id=0x100 + i, is_extended_id=False, data=bytes([i & 255]))


@pytest.mark.parametrize("lockstep", [True, False])
def test_a_receiver_holds_afap_bus_time_only_if_it_asks_for_lockstep(
        afap: BusDaemon, lockstep: bool) -> None:
    n = 100  # more than one batch of the bus (64 events)
    slow = can.Bus(interface="fwbridge", channel="shared:path", lockstep=lockstep)
    tx = can.Bus(interface="fwbridge", channel="shared:path", tx_order="fifo")
    rx = can.Bus(interface="fwbridge", channel="shared:path")
    gate = threading.Event()
    seen: list[int] = []

    def slow_reader() -> None:
        m = slow.recv(10.0)  # waits for traffic, is handed the first frame, then dawdles
        if m is not None:
            seen.append(m.arbitration_id)
        gate.wait(30.0)
        while len(seen) < n and (m := slow.recv(10.0)) is not None:
            seen.append(m.arbitration_id)

    t = threading.Thread(target=slow_reader, daemon=True)
    try:
        t.start()
        deadline = time.monotonic() + 10
        while not any(c.mode == "wait" for c in list(afap.clients.values())):
            assert time.monotonic() < deadline
            time.sleep(0.01)  # polling: the slow node's wait has reached the daemon
        for i in range(n):
            tx.send(_msg(i))
        got: list[int] = []
        while len(got) < n and (m := rx.recv(1.0 if lockstep else 10.0)) is not None:
            got.append(m.arbitration_id)
        if lockstep:  # bus time stands still for the slow node: the rest waits for it
            assert 0 < len(got) < n
        else:  # it did not ask: the others' frames go on while it dawdles
            assert len(got) == n
        gate.set()
        while len(got) < n and (m := rx.recv(10.0)) is not None:
            got.append(m.arbitration_id)
        t.join(30)
        want = [0x100 + i for i in range(n)]
        assert got == want and seen == want  # order exact either way
        assert "not_listening" not in afap.info
    finally:
        gate.set()
        for b in (slow, tx, rx):
            b.shutdown()


def test_a_realtime_frame_is_handed_out_at_its_end_never_before(realtime: BusDaemon) -> None:
    a = can.Bus(interface="fwbridge", channel="shared:path")
    b = can.Bus(interface="fwbridge", channel="shared:path", receive_own_messages=True)
    ch = realtime.ch
    try:
        for i in range(20):
            a.send(_msg(i))
            for bus in (b, a):  # a receives nothing of its own; b both ways
                m = bus.recv(0.2 if bus is a else 5.0)
                if bus is a:
                    assert m is None or m.arbitration_id != 0x100 + i
                    continue
                assert m is not None and m.arbitration_id == 0x100 + i
                ends = ch.t0 + (m.timestamp - ch.epoch)  # the frame's end, monotonic
                assert time.monotonic() >= ends
            b.send(_msg(i + 100))
            own = b.recv(5.0)  # its own frame, echoed: held until its end too
            assert own is not None and own.arbitration_id == 0x100 + i + 100
            assert time.monotonic() >= ch.t0 + (own.timestamp - ch.epoch)
            other = a.recv(5.0)
            assert other is not None and other.timestamp == own.timestamp
    finally:
        a.shutdown()
        b.shutdown()


def test_a_node_that_does_not_hold_gets_realtime_frames_at_their_end(
        realtime: BusDaemon) -> None:
    """A client whose hello does not say ``hold`` (an older node, say) is sent each frame
    only once it has ended, as before."""
    tx = can.Bus(interface="fwbridge", channel="shared:path")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(realtime.path))
        s.sendall(bus_wire.pack_hello(bus_wire.Hello(name="plain")))
        s.settimeout(5.0)
        reader = PacketReader("node")
        got: list[tuple[Kind, bytes]] = []
        while not any(k is Kind.WELCOME for k, _ in got):
            got += list(reader.feed(s.recv(1 << 16)))
        ch = realtime.ch
        try:
            for i in range(10):
                tx.send(_msg(i))
                frame = None
                while frame is None:
                    for kind, body in reader.feed(s.recv(1 << 16)):
                        if kind is Kind.MESSAGE:
                            frame = bus_wire.unpack_message(body)
                arrived = time.monotonic()
                assert frame.can_id == 0x100 + i
                assert arrived >= ch.t0 + (frame.timestamp - ch.epoch)
        finally:
            tx.shutdown()


class _Host:
    def __init__(self) -> None:
        self.pending: set[Client] = set()
        self.held: set[Client] = set()
        self.by_node: dict[int, Client] = {}
        self.queued = self.queued_peak = 0
        self.queue_budget = QUEUE_BUDGET

    def wake(self) -> None:
        pass


def _ids(c: Client) -> list[int]:
    return [bus_wire.unpack_message(body).can_id for _, body in PacketReader("node").feed(
        bytes(c.out))]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=1, max_size=30),
       st.floats(-1.0, 1.0, allow_nan=False))
def test_kept_frames_leave_in_order_once_ended(ends: list[float], cut: float) -> None:
    """Sans-I/O: a client that does not hold gets each frame once its end has passed, in the
    order the bus delivered them, whatever the clock says meanwhile."""
    a, b = socket.socketpair()
    try:
        c = Client(a, _Host())
        c.offset = time.monotonic()  # a frame's end: its timestamp + this
        ts = sorted(ends)  # the bus delivers in time order
        for i, t in enumerate(ts):
            c.put(bus_wire.message_packet(t, i, 0, 0, b""), t)
        c.release(c.offset + cut)
        out = _ids(c)
        assert out == list(range(len(out)))  # a prefix: order kept
        clock = max(time.monotonic(), c.offset + cut)  # the time release() was told
        assert all(t + c.offset <= clock for t in ts[:len(out)])  # none before its end
        assert len(out) >= sum(1 for t in ts if t <= cut)  # every one ended by the cut
        c.release(math.inf)
        assert _ids(c) == list(range(len(ts)))
    finally:
        a.close()
        b.close()


def test_fd_frames_of_every_length_cross_the_daemon(rundir: Path) -> None:
    """An FD frame's DLC is its length in python-can (up to 64): the wire takes them all
    (a frame of more than 15 bytes was refused, and its sender dropped)."""
    for dm, _ in bus_daemon("fdpath", pacing="afap", data_bitrate=2_000_000):
        a = can.Bus(interface="fwbridge", channel="shared:fdpath", fd=True)
        b = can.Bus(interface="fwbridge", channel="shared:fdpath", fd=True)
        try:
            for n in (0, 8, 12, 16, 20, 24, 32, 48, 64):
                a.send(can.Message(arbitration_id=0x123, is_extended_id=False, is_fd=True,
                                   bitrate_switch=True, data=bytes(range(n))))
                m = b.recv(5.0)
                assert m is not None and m.is_fd and bytes(m.data) == bytes(range(n))
                assert m.dlc == n
            assert dm.bugs == 0 and len(dm.clients) == 2
        finally:
            a.shutdown()
            b.shutdown()
