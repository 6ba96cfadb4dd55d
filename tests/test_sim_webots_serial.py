"""The Webots serial emulation: packet semantics, WebotsSerialDrv, clock, faults, world."""

from __future__ import annotations

import pytest

from fwbridge.bridge.sim.clock import SimClock
from fwbridge.bridge.sim.faults import FaultInjector, FaultSpec
from fwbridge.bridge.sim.webots_serial import (
    ROBOT_LINK,
    SUPERVISOR_LINK,
    Emitter,
    Ether,
    Receiver,
    WebotsSerialDrv,
)
from fwbridge.bridge.sim.world import World


class Owner:
    """A robot, as far as the ether is concerned: an identity."""


def pair(ether: Ether, channel: int = 3, buffer_size: int = -1) -> tuple[Emitter, Receiver]:
    a, b = Owner(), Owner()
    em = Emitter(ether, "tx", a, channel=channel, buffer_size=buffer_size)
    rx = Receiver(ether, "rx", b, channel=channel)
    rx.enable(1)
    return em, rx


def step(ether: Ether, now: list[int], dt: int = 1) -> None:
    now[0] += dt
    ether.deliver(now[0], dt)


def test_a_packet_is_readable_only_after_the_step() -> None:
    ether = Ether()
    em, rx = pair(ether)
    t = [0]
    assert em.send(b"hello") == 1
    assert rx.getQueueLength() == 0  # not during the step it was sent in
    step(ether, t)
    assert rx.getQueueLength() == 1
    assert rx.getDataSize() == 5 and rx.getBytes() == b"hello"
    rx.nextPacket()
    assert rx.getQueueLength() == 0
    with pytest.raises(RuntimeError, match="empty"):
        rx.getDataSize()  # illegal in Webots too


def test_one_send_is_one_packet_and_order_is_kept() -> None:
    ether = Ether()
    em, rx = pair(ether)
    for chunk in (b"ab", b"cde", b"f"):
        em.send(chunk)
    step(ether, [0])
    got = []
    while rx.getQueueLength():
        got.append(rx.getBytes())
        rx.nextPacket()
    assert got == [b"ab", b"cde", b"f"]


def test_never_delivered_to_the_sender_itself() -> None:
    ether = Ether()
    robot, other = Owner(), Owner()
    em = Emitter(ether, "serialComTx", robot, channel=4)
    own = Receiver(ether, "serialComRx", robot, channel=4)  # same channel, same robot
    theirs = Receiver(ether, "rx", other, channel=4)
    own.enable(1)
    theirs.enable(1)
    em.send(b"x")
    step(ether, [0])
    assert own.getQueueLength() == 0
    assert theirs.getQueueLength() == 1


def test_full_emitter_buffer_refuses_the_packet() -> None:
    ether = Ether()
    em, rx = pair(ether, buffer_size=40)
    assert em.getBufferSize() == 40
    assert em.send(bytes(19)) == 1
    assert em.send(bytes(19)) == 1
    assert em.send(bytes(19)) == 0  # 57 > 40: refused whole, nothing queued
    assert ether.stats.refused_full == 1
    step(ether, [0])
    assert rx.getQueueLength() == 2
    assert em.send(bytes(19)) == 1  # the queue left with the step


def test_serial_driver_refuses_when_full() -> None:
    ether = Ether()
    em, rx = pair(ether, buffer_size=15)
    drv = WebotsSerialDrv(em, rx)
    assert drv.write(bytes(15)) == 15
    assert drv.write(b"\x01") == 0
    assert drv.refused == 1


def test_channels_and_broadcast() -> None:
    ether = Ether()
    a, b = Owner(), Owner()
    em = Emitter(ether, "tx", a, channel=3)
    on3 = Receiver(ether, "r3", b, channel=3)
    on4 = Receiver(ether, "r4", b, channel=4)
    every = Receiver(ether, "all", b, channel=-1)
    for r in (on3, on4, every):
        r.enable(1)
    em.send(b"3")
    em.setChannel(Emitter.CHANNEL_BROADCAST)
    em.send(b"*")
    step(ether, [0])
    assert on3.getQueueLength() == 2  # its own channel, and the broadcast
    assert on4.getQueueLength() == 1 and on4.getBytes() == b"*"
    assert every.getQueueLength() == 2
    on4.setChannel(3)
    em.setChannel(3)
    em.send(b"again")
    step(ether, [1])
    assert on4.getQueueLength() == 2


def test_disabled_receiver_gets_nothing_and_sampling_period_delays() -> None:
    ether = Ether()
    em, rx = pair(ether)
    rx.disable()
    em.send(b"lost")
    t = [0]
    step(ether, t)
    assert rx.getQueueLength() == 0 and ether.stats.dropped_disabled == 1
    rx.enable(8)  # sampled every 8 ms from now (t=1): at 9, 17, ...
    em.send(b"late")
    step(ether, t)  # t=2: arrived, not yet sampled
    assert rx.getQueueLength() == 0
    for _ in range(6):
        step(ether, t)
    assert t[0] == 8 and rx.getQueueLength() == 0
    step(ether, t)  # t=9: the first sampling instant
    assert rx.getQueueLength() == 1


def test_receiver_buffer_overflow_drops_packets() -> None:
    ether = Ether()
    a, b = Owner(), Owner()
    em = Emitter(ether, "tx", a, channel=1)
    rx = Receiver(ether, "rx", b, channel=1, buffer_size=10)
    rx.enable(1)
    em.send(bytes(6))
    em.send(bytes(6))
    step(ether, [0])
    assert rx.getQueueLength() == 1
    assert ether.stats.dropped_overflow == 1


def test_baud_rate_spreads_packets_over_steps() -> None:
    ether = Ether()
    em, rx = pair(ether)
    em.baud_rate, em.byte_size = 115200, 10  # 11.52 bytes per ms
    em.send(bytes(19))
    t = [0]
    step(ether, t)
    assert rx.getQueueLength() == 0  # 11.5 bytes of credit < 19
    step(ether, t)
    assert rx.getQueueLength() == 1


def test_serial_driver_head_packet_semantics() -> None:
    """available() counts the head packet only; readBytes never crosses into the next."""
    ether = Ether()
    em, rx = pair(ether)
    drv = WebotsSerialDrv(em, rx)
    assert drv.available() == 0 and drv.readBytes(4) == b""
    em.send(b"ABCDE")
    em.send(b"xyz")
    step(ether, [0])
    assert drv.available() == 5
    assert drv.readBytes(2) == b"AB"
    assert drv.available() == 3
    assert drv.readBytes(10) == b"CDE"  # the rest of the head packet, not more
    assert drv.available() == 3
    assert drv.readBytes(3) == b"xyz"
    assert drv.available() == 0
    assert rx.getQueueLength() == 0


def test_robot_link_channels_face_each_other() -> None:
    assert ROBOT_LINK.tx_name == "serialComTx" and ROBOT_LINK.rx_name == "serialComRx"
    assert {ROBOT_LINK.tx_channel, ROBOT_LINK.rx_channel} == {3, 4}
    assert SUPERVISOR_LINK.tx_name == "supervisorComTx"
    assert {SUPERVISOR_LINK.tx_channel, SUPERVISOR_LINK.rx_channel} == {1, 2}
    assert ROBOT_LINK.peer == (ROBOT_LINK.rx_channel, ROBOT_LINK.tx_channel)


# -- clock and world ------------------------------------------------------------------
def test_clock_delay_steps_until_the_time_has_passed() -> None:
    steps = []
    clock = SimClock(8)
    clock.stepper = lambda: steps.append(clock.advance()) or 0
    clock.delay(20)
    assert clock.millis() == 24 and steps == [8, 16, 24]
    assert clock.micros() == 24_000
    with pytest.raises(ValueError):
        SimClock(0)


class Counter:
    """A minimal model: counts its loops, can block in a delay."""

    name = "counter"

    def __init__(self) -> None:
        self.loops = 0
        self.block_at: int | None = None

    def setup(self, board: object) -> None:
        self.clock = board.clock  # type: ignore[attr-defined]

    def physics(self, dt: float) -> None:
        pass

    def loop(self) -> None:
        self.loops += 1
        if self.block_at is not None and self.clock.millis() == self.block_at:
            self.clock.delay(10)  # an Arduino-style blocking call inside loop()

    def status(self) -> dict[str, int]:
        return {}

    @property
    def pose(self) -> tuple[float, float, float]:
        return 0.0, 0.0, 0.0


def test_world_steps_robots_in_lock_step_and_a_blocked_loop_is_skipped() -> None:
    world = World(1)
    a, b = Counter(), Counter()
    world.add_robot(a, "a")
    world.add_robot(b, "b")
    a.block_at = 5
    world.run_for(20)
    assert world.clock.millis() == 20
    assert b.loops == 20  # never blocked: one loop per step
    assert a.loops == 10  # its loop did not run during its own 10 ms delay
    world.stop()
    assert world.step() == -1


def test_world_packets_between_robots_arrive_after_one_step() -> None:
    world = World(1)
    ra = world.add_robot(Counter(), "a")
    rb = world.add_robot(Counter(), "b")
    tx = ra.getDevice(ROBOT_LINK.tx_name)
    rx = rb.getDevice(ROBOT_LINK.rx_name)
    assert isinstance(tx, Emitter) and isinstance(rx, Receiver)
    rx.setChannel(tx.getChannel())
    rx.enable(1)
    tx.send(b"ping")
    assert rx.getQueueLength() == 0
    world.step()
    assert rx.getQueueLength() == 1


# -- faults ---------------------------------------------------------------------------
def stream(inj: FaultInjector, data: bytes, cuts: list[int]) -> bytes:
    out = bytearray()
    pos = 0
    for now, size in enumerate([*cuts, len(data)]):
        chunk = data[pos : pos + size]
        pos += len(chunk)
        if chunk:
            out += inj.apply(chunk, now)
        out += inj.release(now + 1)
    out += inj.release(10**9)
    return bytes(out)


def test_faults_are_off_by_default_and_parse() -> None:
    assert not FaultSpec().enabled
    spec = FaultSpec.parse("drop=0.01, corrupt=0.02,delay=0.001,delay_ms=50", seed=4)
    assert (spec.drop, spec.corrupt, spec.delay, spec.delay_ms, spec.seed) == (
        0.01,
        0.02,
        0.001,
        50,
        4,
    )
    assert str(spec) == "drop=0.01,corrupt=0.02,delay=0.001,delay_ms=50"
    for bad in ("drop", "bogus=1", "drop=x", "corrupt=1.5"):
        with pytest.raises(ValueError):
            FaultSpec.parse(bad)


def test_same_seed_same_faults_whatever_the_packets() -> None:
    data = bytes(range(256)) * 40
    spec = FaultSpec(drop=0.01, corrupt=0.01, insert=0.01, seed=9)
    one = stream(FaultInjector(spec, "s"), data, [len(data)])
    many = stream(FaultInjector(spec, "s"), data, [1, 7, 100, 3] * 20)
    assert one == many != data
    other = stream(
        FaultInjector(FaultSpec(drop=0.01, corrupt=0.01, insert=0.01, seed=10), "s"),
        data,
        [len(data)],
    )
    assert other != one


def test_fault_rates_and_counters() -> None:
    data = bytes(20000)
    inj = FaultInjector(FaultSpec(drop=0.02, corrupt=0.03, insert=0.01, seed=1), "x")
    out = stream(inj, data, [500] * 40)
    st = inj.stats
    assert 300 < st.dropped < 500 and 450 < st.corrupted < 750 and 120 < st.inserted < 280
    assert len(out) == len(data) - st.dropped + st.inserted
    assert sum(1 for b in out if b) >= st.corrupted  # corrupted and inserted bytes
    assert st.bytes_in == len(data) and st.bytes_out == len(out)


def test_delay_stalls_the_stream_in_order() -> None:
    inj = FaultInjector(FaultSpec(delay=1.0, delay_ms=5, seed=0), "d")
    assert inj.apply(b"abc", 0) == b""  # stalled at the first byte
    assert inj.apply(b"def", 1) == b""  # queues behind, order kept
    assert inj.release(4) == b""
    assert inj.release(5) == b"abcdef"
    assert inj.stats.delayed == 1
