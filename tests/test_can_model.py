"""The sans-I/O bus model: arbitration, timing, fault confinement, injected faults."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.can_bus.bits import (
    EOF_END,
    TAIL_BITS,
    Frame,
    arbitration_key,
    frame_length,
    stuffed_length,
    wire_bits,
)
from fwbridge.can_bus.model import (
    BusModel,
    ErrorFrame,
    ErrorState,
    Event,
    FrameDelivered,
    StateChanged,
)


def run_all(model: BusModel, limit: int = 100_000) -> list[Event]:
    """Run event by event until nothing is left (bounded)."""
    events: list[Event] = []
    for _ in range(limit):
        t = model.next_event_time()
        if t is None:
            return events
        events += model.run_until(t)
    raise AssertionError("the model did not go idle")


def delivered(events: list[Event]) -> list[FrameDelivered]:
    return [e for e in events if isinstance(e, FrameDelivered)]


def changes(events: list[Event], node: int) -> list[StateChanged]:
    return [e for e in events if isinstance(e, StateChanged) and e.node == node]


def test_single_frame_timing() -> None:
    m = BusModel(500_000)
    a, b = m.add_node("a"), m.add_node("b")
    m.run_until(1000)
    f = Frame.make(0x123, b"\x01\x02")
    m.submit(a, f)
    (ev,) = run_all(m)
    assert isinstance(ev, FrameDelivered)
    assert ev.start == 1000  # SOF as soon as the idle bus has a frame
    assert ev.time == 1000 + stuffed_length(f) + EOF_END == 1000 + 54 + 10
    assert ev.transmitters == (a,) and ev.receivers == (b,)
    assert m.seconds(ev.time) == pytest.approx(1064 / 500_000)
    assert m.busy_bits == frame_length(f)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x7FF), st.booleans(), st.booleans()),
                min_size=2, max_size=12, unique_by=lambda x: x[0] * 4 + x[1] * 2 + x[2]))
def test_pending_frames_go_out_in_arbitration_order(specs: list[tuple[int, bool, bool]]) -> None:
    """N nodes with one frame each, all pending at the same instant."""
    m = BusModel(1_000_000)
    frames = {}
    for can_id, ext, rtr in specs:
        nid = m.add_node()
        f = Frame.make(can_id << 18 | 0x155 if ext else can_id, b"" if rtr else b"\xaa",
                       extended=ext, remote=rtr, dlc=1)
        frames[nid] = f
    for nid, f in frames.items():
        m.submit(nid, f)
    out = delivered(run_all(m))
    assert [e.frame for e in out] == sorted(frames.values(), key=arbitration_key)
    # back to back: each SOF right after the previous frame's intermission
    for prev, nxt in itertools.pairwise(out):
        assert nxt.start == prev.start + frame_length(prev.frame)
        assert nxt.time == nxt.start + stuffed_length(nxt.frame) + EOF_END


def test_low_id_stream_starves_a_high_id() -> None:
    """A node that always has a 0x100 frame pending keeps 0x101 off the bus."""
    m = BusModel(500_000)
    fast, slow, _rx = m.add_node("fast"), m.add_node("slow"), m.add_node("rx")
    m.submit(fast, Frame.make(0x100, b"\x00"))
    m.submit(slow, Frame.make(0x101, b"\x00"))
    order: list[int] = []
    while len(order) < 101:
        t = m.next_event_time()
        assert t is not None
        for e in delivered(m.run_until(t)):
            order.append(e.frame.can_id)
            if e.frame.can_id == 0x100 and len(order) < 100:
                # queued during the intermission: in time for the next arbitration
                m.submit(fast, Frame.make(0x100, bytes([len(order)])))
    assert order[:100] == [0x100] * 100  # 0x101 lost every arbitration
    assert order[100] == 0x101
    assert m.node(slow).tec == 0  # losing arbitration is not an error


def test_node_sends_its_lowest_id_first() -> None:
    m = BusModel(500_000)
    a, _ = m.add_node(), m.add_node()
    for can_id in (0x300, 0x100, 0x200):
        m.submit(a, Frame.make(can_id))
    assert [e.frame.can_id for e in delivered(run_all(m))] == [0x100, 0x200, 0x300]


def test_error_counters_active_passive_busoff_recovery() -> None:
    """A transmitter in bit error on every attempt: TEC + 8 each, receivers REC + 1."""
    m = BusModel(500_000)
    a, b, c = m.add_node("a"), m.add_node("b"), m.add_node("c")
    m.set_faults(a, bit_error_rate=1.0)  # misreads SOF: a bit error every time
    m.submit(a, Frame.make(0x100, b"\x01"))
    events: list[Event] = []
    while not any(e.new is ErrorState.BUS_OFF for e in changes(events, a)):
        t = m.next_event_time()
        assert t is not None
        events += m.run_until(t)
    errors = [e for e in events if isinstance(e, ErrorFrame)]
    assert len(errors) == 32 and {e.kind for e in errors} == {"bit"}
    to_passive, to_off = changes(events, a)
    assert (to_passive.new, to_passive.tec) == (ErrorState.PASSIVE, 128)  # 16 x 8
    assert to_passive.time == errors[15].time
    assert (to_off.new, to_off.tec) == (ErrorState.BUS_OFF, 256)  # 32 x 8 > 255
    assert to_off.time == errors[31].time
    assert (m.node(b).rec, m.node(c).rec) == (32, 32)  # + 1 per error frame
    assert m.node(b).state is ErrorState.ACTIVE
    # an error-passive transmitter waits 8 bits more before each retry
    assert errors[17].start - errors[16].start == errors[1].start - errors[0].start + 8

    m.set_faults(a, bit_error_rate=0.0)
    recovered = changes(run_all(m), a)
    assert [(e.old, e.new, e.tec, e.rec) for e in recovered] == [
        (ErrorState.BUS_OFF, ErrorState.ACTIVE, 0, 0)]
    # idle bus: 128 occurrences of 11 recessive bits after the error frame ended
    assert recovered[0].time == to_off.time + 128 * 11
    assert m.node(a).tx_ok == 1  # its frame, kept queued, went out after recovery
    assert m.node(b).rec == 31  # a good reception: REC - 1


def test_recovery_counts_frame_tails_on_a_busy_bus() -> None:
    """Every frame ends with 11 recessive bits (ACK delimiter, EOF, IFS): one occurrence."""
    m = BusModel(500_000)
    a, b, _ = m.add_node("a"), m.add_node("b"), m.add_node("c")
    m.set_faults(a, bit_error_rate=1.0)
    m.submit(a, Frame.make(0x100))
    while m.node(a).state is not ErrorState.BUS_OFF:
        t = m.next_event_time()
        assert t is not None
        m.run_until(t)
    m.set_faults(a, bit_error_rate=0.0)
    for i in range(200):  # back to back from the error frame's end
        m.submit(b, Frame.make(0x200, bytes([i])))
    events = run_all(m)
    frames = [e for e in delivered(events) if e.transmitters == (b,)]
    (back,) = changes(events, a)
    # the error frame's own delimiter + intermission is occurrence 1, then one per frame
    assert back.time == frames[126].time + 3
    # back in time for the next SOF, where its queued 0x100 beats b's 0x200
    own = [e for e in delivered(events) if e.transmitters == (a,)]
    assert own[0].start == back.time and frames[127].start > back.time


def test_faulty_receiver_goes_passive_before_the_transmitter() -> None:
    """ISO's point: REC + 9 for the receiver that flags first vs TEC + 8 for the sender."""
    m = BusModel(500_000)
    tx, bad, good = m.add_node("tx"), m.add_node("bad"), m.add_node("good")
    m.set_faults(bad, bit_error_rate=1.0)
    for i in range(40):
        m.submit(tx, Frame.make(0x100, bytes([i])))
    events = run_all(m)
    (to_passive,) = changes(events, bad)
    assert to_passive.new is ErrorState.PASSIVE and to_passive.rec == 15 * 9
    assert m.node(tx).state is ErrorState.ACTIVE  # peaked at 15 x 8 = 120
    got = delivered(events)
    assert [e.frame.data[0] for e in got] == list(range(40))  # nothing lost
    assert all(bad not in e.receivers and good in e.receivers for e in got)
    assert m.node(tx).tec == 120 - 40 and m.node(good).rec == 0
    m.set_faults(bad, bit_error_rate=0.0)
    m.submit(tx, Frame.make(0x100, b"\xff"))
    (back,) = changes(run_all(m), bad)
    assert (back.new, back.rec) == (ErrorState.ACTIVE, 127)  # > 127 -> 127 on a good reception


def test_same_id_different_data_is_a_bit_error() -> None:
    m = BusModel(500_000)
    a, b, c = m.add_node("a"), m.add_node("b"), m.add_node("c")
    m.submit(a, Frame.make(0x100, b"\x01"))  # ...0000 0001
    m.submit(b, Frame.make(0x100, b"\x02"))  # ...0000 0010: b sends recessive first
    m.run_until(0)  # SOF: both start, same arbitration field
    first = m.run_until(m.next_event_time() or 0)
    (err,) = first
    assert isinstance(err, ErrorFrame) and err.kind == "bit" and err.detector == b
    assert err.transmitters == (a, b)
    assert (m.node(a).tec, m.node(b).tec, m.node(c).rec) == (8, 8, 1)
    events = first + run_all(m)
    errors = [e for e in events if isinstance(e, ErrorFrame)]
    assert len(errors) == 16  # both error-active: every attempt collides
    out = delivered(events)
    # both passive: b's passive flag no longer disturbs a, which gets through
    assert [(e.transmitters, e.frame.data) for e in out] == [((a,), b"\x01"), ((b,), b"\x02")]
    assert m.node(a).tec == 127 and m.node(b).tec == 128 + 8 - 1


def test_same_id_same_frame_is_one_frame_from_two_nodes() -> None:
    m = BusModel(500_000)
    a, b, c = m.add_node(), m.add_node(), m.add_node()
    f = Frame.make(0x100, b"\x07")
    m.submit(a, f)
    m.submit(b, f)
    (ev,) = run_all(m)
    assert isinstance(ev, FrameDelivered) and ev.transmitters == (a, b) and ev.receivers == (c,)


def test_lone_node_gets_no_ack_and_stops_at_error_passive() -> None:
    m = BusModel(500_000)
    a = m.add_node("a")
    m.submit(a, Frame.make(0x10, b"\x01"))
    events = run_all(m)
    acks = [e for e in events if isinstance(e, ErrorFrame)]
    assert len(acks) == 16 and {e.kind for e in acks} == {"ack"}
    assert m.node(a).tec == 128 and m.node(a).state is ErrorState.PASSIVE  # exception 1
    assert m.next_event_time() is None  # waits for a receiver, spends no events
    b = m.add_node("b")
    (ev,) = delivered(run_all(m))
    assert ev.receivers == (b,) and m.node(a).tec == 127


def test_disconnected_node_is_alone_while_the_others_talk() -> None:
    m = BusModel(500_000)
    a, b, c = m.add_node("a"), m.add_node("b"), m.add_node("c")
    m.set_faults(a, disconnected=True)
    m.submit(a, Frame.make(0x100, b"\xaa"))
    for i in range(5):
        m.submit(b, Frame.make(0x200, bytes([i])))
    events = run_all(m)
    out = delivered(events)
    assert [e.frame.can_id for e in out] == [0x200] * 5
    assert all(e.receivers == (c,) for e in out)  # a hears nothing either
    assert m.node(a).tec == 128 and m.node(a).state is ErrorState.PASSIVE
    assert all(e.local for e in events if isinstance(e, ErrorFrame))
    m.set_faults(a, disconnected=False)
    (ev,) = delivered(run_all(m))
    assert ev.frame.can_id == 0x100 and set(ev.receivers) == {b, c}


def test_stuck_dominant_node_is_isolated() -> None:
    m = BusModel(500_000, dominant_timeout=0.001)
    a, b, c = m.add_node("a", auto_recovery=False), m.add_node("b"), m.add_node("c")
    m.run_until(10_000)
    m.set_faults(a, stuck_dominant=True)
    m.submit(a, Frame.make(0x050, b"\x01"))
    for i in range(20):
        m.submit(b, Frame.make(0x200, bytes([i])))
        m.submit(c, Frame.make(0x300, bytes([i])))
    events = run_all(m)
    (burst,) = [e for e in events if isinstance(e, ErrorFrame) and e.kind == "dominant"]
    assert burst.start == 10_000 and burst.time == 10_000 + 500  # 1 ms at 500 kbit/s
    # rule 6 through 500 dominant bits: everyone error-passive, nobody bus-off by REC
    assert [e.new for e in changes(events, b)] == [ErrorState.PASSIVE, ErrorState.ACTIVE]
    assert changes(events, a)[-1].new is ErrorState.BUS_OFF  # its SOFs are bit errors
    out = delivered(events)
    assert sorted(e.frame.data[0] for e in out if e.frame.can_id == 0x200) == list(range(20))
    assert all(e.start >= burst.time for e in out)
    assert m.node(a).tx_ok == 0 and all(a not in e.receivers for e in out[-5:])
    assert m.node(b).state is ErrorState.ACTIVE and m.node(c).state is ErrorState.ACTIVE


def test_faulty_module_isolated_while_others_keep_talking() -> None:
    """Random bit errors on one node (seeded): it goes bus-off, no frame of the others is lost."""
    m = BusModel(500_000, seed=7)
    nodes = [m.add_node(f"n{k}", auto_recovery=k != 0) for k in range(4)]
    bad = nodes[0]
    m.set_faults(bad, bit_error_rate=0.02, seed=3)
    rnd = random.Random(1)
    sent: dict[int, list[int]] = {n: [] for n in nodes[1:]}
    events: list[Event] = []
    for step in range(400):
        m.submit(bad, Frame.make(0x101, bytes([step & 0xFF])))
        for n in nodes[1:]:
            if rnd.random() < 0.5:
                m.submit(n, Frame.make(0x200 + n, bytes([step & 0xFF])))
                sent[n].append(step & 0xFF)
        events += m.run_until((step + 1) * 1000)
    events += run_all(m)
    assert m.node(bad).state is ErrorState.BUS_OFF and m.node(bad).bus_offs == 1
    for n in nodes[1:]:
        got = [e.frame.data[0] for e in delivered(events) if e.transmitters == (n,)]
        assert got == sent[n]  # every frame, once, in order
        assert m.node(n).state is ErrorState.ACTIVE and m.node(n).bus_offs == 0
    assert any(isinstance(e, ErrorFrame) for e in events)


def test_recovery_on_request_only() -> None:
    m = BusModel(500_000)
    a, _ = m.add_node("a", auto_recovery=False), m.add_node("b")
    m.set_faults(a, bit_error_rate=1.0)
    m.submit(a, Frame.make(0x1))
    run_all(m)
    assert m.node(a).state is ErrorState.BUS_OFF
    m.set_faults(a, bit_error_rate=0.0)
    m.run_until(m.now + 100_000)
    assert m.node(a).state is ErrorState.BUS_OFF  # no automatic recovery
    m.request_recovery(a)
    asked = m.now
    (back, *_) = run_all(m)
    assert isinstance(back, StateChanged) and back.time == asked + 128 * 11


def test_passive_transmitter_lets_others_go_first() -> None:
    """Suspend transmission: 8 more recessive bits after an error-passive node's frame."""
    m = BusModel(500_000)
    a, b, _ = m.add_node("a"), m.add_node("b"), m.add_node("c")
    m.node(a).tec = 130  # error-passive without waiting through 17 errors
    m.node(a).state = ErrorState.PASSIVE
    m.submit(a, Frame.make(0x100))
    m.submit(a, Frame.make(0x101))
    m.submit(b, Frame.make(0x200))
    order = [e.frame.can_id for e in delivered(run_all(m))]
    assert order == [0x100, 0x200, 0x101]


def test_time_never_goes_back_and_idle_is_free() -> None:
    m = BusModel(250_000)
    a, _ = m.add_node(), m.add_node()
    m.run_until(5000)
    assert m.run_until(10) == [] and m.now == 5000
    m.submit(a, Frame.make(0x1))
    assert m.next_event_time() == 5000  # its SOF
    m.run_until(5000)
    assert m.next_event_time() == 5000 + stuffed_length(Frame.make(0x1)) + EOF_END
    run_all(m)
    assert m.busy_until == 5000 + frame_length(Frame.make(0x1))
    assert frame_length(Frame.make(0x1)) == stuffed_length(Frame.make(0x1)) + TAIL_BITS


def reference_bus(queues: dict[int, list[Frame]]) -> list[tuple[Frame, int, int]]:
    """Bit by bit: at each idle every head frame drives the wire, dominant (0) wins the
    wired AND, a node that reads 0 after sending 1 drops out. (frame, start, end of EOF)."""
    queues = {n: sorted(q, key=arbitration_key) for n, q in queues.items()}  # lowest ID first
    t, out = 0, []
    while any(queues.values()):
        wires = {n: wire_bits(q[0]) for n, q in queues.items() if q}
        alive = set(wires)
        i = 0
        while len(alive) > 1:  # distinct arbitration fields: one is left before they end
            bus = min(wires[n][i] for n in alive)
            alive = {n for n in alive if wires[n][i] == bus}
            i += 1
        (winner,) = alive
        frame = queues[winner].pop(0)
        out.append((frame, t, t + len(wires[winner])))
        t += len(wires[winner]) + 3  # intermission
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 0x7FF), st.booleans(),
                          st.booleans(), st.binary(max_size=8)),
                min_size=1, max_size=20, unique_by=lambda x: (x[1], x[2], x[3])))
def test_fast_path_equals_bitwise_reference(specs: list[tuple[int, int, bool, bool, bytes]]
                                            ) -> None:
    """The model picks winners from keys and lengths from tables; the reference drives bits."""
    queues: dict[int, list[Frame]] = {}
    for node, can_id, ext, rtr, data in specs:
        f = Frame.make(can_id << 18 | 0x2A5 if ext else can_id, b"" if rtr else data,
                       extended=ext, remote=rtr, dlc=len(data))
        queues.setdefault(node, []).append(f)
    m = BusModel(500_000)
    ids = {node: m.add_node() for node in sorted(queues)}
    m.add_node("listener")  # someone to acknowledge
    for node, frames in queues.items():
        for f in frames:
            m.submit(ids[node], f)
    got = [(e.frame, e.start, e.time) for e in delivered(run_all(m))]
    assert got == reference_bus(queues)
