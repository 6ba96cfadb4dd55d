"""The runs behind ``sim``, ``demo``, ``sniff``, ``decode`` and ``ros2 echo``, in-process.

Each verb builds a config, calls one library function and prints what its
callbacks and result hand back; these tests call those functions without the
CLI: the ends of a run (its duration, a stop asked for, a failed start, a port
that went away, a stop signal) and that every way out stops what it started.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serial

from fwbridge.bridge.record.sniff import SniffConfig, run_sniff
from fwbridge.bridge.robots.demo import SquareConfig, run_square_demo
from fwbridge.bridge.robots.square import OdomSlot, SquareDriver, SquareResult, steer_square
from fwbridge.bridge.rosmsg.cdr import MessageError
from fwbridge.bridge.sim.session import SimHooks, SimRunConfig, SimStartError, run_sim
from fwbridge.protocols import odom_frame
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.engine.builtin_records import OdomFrame
from fwbridge.protocols.engine.stream_decode import decode_stream


def _odom_bytes(n: int) -> bytes:
    return b"".join(odom_frame.encode(OdomFrame(0.01 * k, -0.5, 0.25, float(k % 360)))
                    for k in range(n))


# -- sim: run_sim ---------------------------------------------------------------------
@pytest.mark.pty
def test_run_sim_ends_at_its_duration_and_removes_its_ports(tmp_path: Path) -> None:
    ready: list[dict[str, Any]] = []
    statuses: list[dict[str, Any]] = []
    existed: list[bool] = []
    alias = tmp_path / "robot"

    def on_ready(r: dict[str, Any]) -> None:
        ready.append(r)
        existed.append(os.path.exists(r["port"]) and alias.is_symlink())

    @contextlib.contextmanager
    def view() -> Iterator[Any]:
        yield statuses.append

    config = SimRunConfig("mecanum", pacing="afap", duration_ms=300, link_path=str(alias))
    res = run_sim(config, SimHooks(on_ready=on_ready, status_view=view))
    assert ready[0]["model"] == "mecanum" and ready[0]["pacing"] == "afap"
    assert existed == [True]
    assert res.status["t"] == 300 and not res.interrupted and res.error is None
    assert res.status["wall_s"] >= 0.0 and "link" in res.status
    # every way out removes what the run made: the pty's name and the --link alias
    assert not os.path.exists(ready[0]["port"]) and not alias.is_symlink()


@pytest.mark.pty
def test_run_sim_stops_when_asked_and_on_a_stop_signal() -> None:
    asked = [0]

    def stop_requested() -> bool:
        asked[0] += 1
        return asked[0] >= 2

    res = run_sim(SimRunConfig("mecanum"), SimHooks(stop_requested=stop_requested))
    assert asked[0] == 2 and not res.interrupted and res.status["t"] > 0

    def interrupt(_st: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def view() -> Iterator[Any]:
        yield interrupt

    ports: list[str] = []
    res = run_sim(SimRunConfig("mecanum"),
                  SimHooks(on_ready=lambda r: ports.append(r["port"]), status_view=view))
    assert res.interrupted and res.error is None
    assert not os.path.exists(ports[0])


@pytest.mark.pty
def test_run_sim_failed_start_and_failed_tap_leave_nothing() -> None:
    with pytest.raises(SimStartError, match="pacing"):
        run_sim(SimRunConfig("mecanum", pacing="sideways"))
    seen: list[str] = []

    def open_tap(link: Any) -> None:
        seen.append(link.path)
        raise RuntimeError("no room for the capture")

    with pytest.raises(RuntimeError, match="no room"):
        run_sim(SimRunConfig("mecanum"), SimHooks(open_tap=open_tap))
    assert seen and not os.path.exists(seen[0])


# -- demo: steer_square, run_square_demo ----------------------------------------------
def test_steer_square_sends_zero_velocity_on_every_way_out() -> None:
    """The loop's end stops the base: after a stop asked for, the last command is zero."""
    slot = OdomSlot()
    sent: list[tuple[float, float, float]] = []
    stop = threading.Event()
    from fwbridge.bridge.node.odometry import Odometry

    def send(vx: float, vy: float, wz: float) -> None:
        sent.append((vx, vy, wz))
        if len(sent) == 5:
            stop.set()
        # the base moves a little each command: fresh odometry for the next tick
        n = slot.count + 1
        slot.put(Odometry(n, 0.0, 0.0, 0.01 * n, 0.0, 0.0, (0.0, 0.0, 0.0, 1.0), vx, vy, wz))

    slot.put(Odometry(0, 0.0, 0.0, 0.0, 0.0, 0.0, (0.0, 0.0, 0.0, 1.0), 0.0, 0.0, 0.0))
    res = steer_square(SquareDriver(side=1.0), lambda: (0.0, 0.0, 0.0), slot, send,
                       SquareResult(), rate_hz=1000.0, stop=stop)
    assert len(sent) == 6 and sent[-1] == (0.0, 0.0, 0.0)
    assert any(c != (0.0, 0.0, 0.0) for c in sent[:-1])
    assert not res.completed and len(res.odom_path) == 5
    assert res.odom_end[0] == pytest.approx(0.01 * slot.count)  # the last odometry


@pytest.mark.pty
def test_run_square_demo_stopped_early_stops_the_base_and_reports() -> None:
    ticks: list[bool] = []
    stop = threading.Event()

    def on_tick(_drv: SquareDriver, odom: Any, _truth: Any) -> None:
        ticks.append(odom is not None)
        if sum(ticks) >= 5:  # five ticks on odometry: the node and the simulation run
            stop.set()

    res = run_square_demo(SquareConfig(side=0.5), on_tick=on_tick, stop=stop)
    assert not res.completed and sum(ticks) >= 5
    assert res.node_stats["commands"] > 0 and res.node_stats["frames"] > 0
    assert res.sim_status["firmware"]["cmd_applied"] > 0
    assert res.tolerance > 0


@pytest.mark.pty
def test_run_square_demo_through_ros2_stopped_early_closes_everything() -> None:
    """The ROS 2 run: the driver's commands reach the node as cmd_vel, its odometry comes
    back; a stop ends it with the node, the ROS 2 face, the session and the simulation
    stopped (their counters are final)."""
    pytest.importorskip("zenoh")
    stop = threading.Event()
    fresh: list[int] = []

    def on_tick(_drv: SquareDriver, odom: Any, _truth: Any) -> None:
        if odom is not None and odom.seq not in fresh:
            fresh.append(odom.seq)
        if len(fresh) >= 5:
            stop.set()

    res = run_square_demo(SquareConfig(side=0.5, ros2=True), on_tick=on_tick, stop=stop)
    assert not res.completed and len(fresh) >= 5
    assert res.node_stats["cmd_vel_received"] > 0 and res.node_stats["odom_received_by_driver"] > 0
    assert res.sim_status["firmware"]["cmd_applied"] > 0


# -- sniff: run_sniff -----------------------------------------------------------------
def test_run_sniff_decodes_what_arrives_and_closes_the_link() -> None:
    link = serial.serial_for_url("loop://", timeout=0.02)
    link.write(_odom_bytes(20))
    frames: list[Any] = []
    statuses: list[dict[str, int]] = []

    @contextlib.contextmanager
    def view() -> Iterator[Any]:
        yield statuses.append

    res = run_sniff(link, receiver_for(odom_frame.DESCRIPTION), SniffConfig(duration=0.2),
                    frames.append, view=view)
    assert [f.offset for f in frames] == [19 * k for k in range(20)]
    assert res.stats["frames"] == 20 and res.garbage is None and res.lost is None
    assert statuses and statuses[-1]["frames"] == 20
    assert not link.is_open


def test_run_sniff_ends_on_garbage_and_on_a_port_that_went_away() -> None:
    link = serial.serial_for_url("loop://", timeout=0.02)
    link.write(bytes(random.Random(1).randrange(256) for _ in range(4000)).replace(b"\xaa", b""))
    res = run_sniff(link, receiver_for(odom_frame.DESCRIPTION),
                    SniffConfig(garbage_timeout=0.1), lambda _f: None)
    assert res.garbage is not None and res.stats["frames"] == 0 and not link.is_open

    class Gone:
        closed = False
        timeout = 0.01

        @property
        def in_waiting(self) -> int:
            raise OSError(5, "Input/output error")

        def close(self) -> None:
            self.closed = True

    gone = Gone()
    res = run_sniff(gone, receiver_for(odom_frame.DESCRIPTION), SniffConfig(), lambda _f: None)
    assert isinstance(res.lost, OSError) and gone.closed


# -- decode: decode_stream ------------------------------------------------------------
def test_decode_stream_gives_the_same_frames_whatever_the_chunking() -> None:
    data = _odom_bytes(50) + b"\x00junk" + _odom_bytes(3)
    whole: list[Any] = []
    counters = decode_stream(receiver_for(odom_frame.DESCRIPTION), [data], whole.extend)
    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(data)), 40))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    batches: list[list[Any]] = []
    again = decode_stream(receiver_for(odom_frame.DESCRIPTION), chunks, batches.append)
    assert [f.offset for f in whole] == [f.offset for b in batches for f in b]
    assert len(whole) == 53 and counters == again and counters["frames"] == 53
    assert len(batches) == len(chunks) + 1  # one batch a chunk, and the tail's
    fed: list[bytes] = []
    rx = receiver_for(odom_frame.DESCRIPTION)
    decode_stream(rx, chunks, lambda _b: None, feed=lambda c: (fed.append(c), rx.feed(c)))
    assert fed == chunks and rx.stats.as_dict() == counters


# -- ros2 echo: run_echo --------------------------------------------------------------
def test_run_echo_shows_count_messages_and_closes_the_participant() -> None:
    pytest.importorskip("zenoh")
    from fwbridge.bridge.ros2.echo import EchoConfig, run_echo
    from fwbridge.bridge.ros2.participant import Participant
    from fwbridge.bridge.rosmsg import cdr

    p = Participant(connect=(), mode="peer")
    pub = p.node("talker").publisher("/vlb/chatter", "std_msgs/msg/String")
    string = cdr.typestore().types["std_msgs/msg/String"]
    quiet = threading.Event()

    def talk() -> None:
        n = 0
        while not quiet.wait(0.02):
            n += 1
            try:
                pub.publish(string(data=f"hello {n}"))
            except Exception:  # the run closed the participant: the talk is over
                return

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    shown: list[dict[str, Any]] = []
    subscribed: list[tuple[str, str, str]] = []
    try:
        res = run_echo(p, EchoConfig("/vlb/chatter", "std_msgs/msg/String", "volatile",
                                     "reliable", count=3),
                       lambda d: shown.append(d) is None,
                       on_subscribed=lambda *a: subscribed.append(a))
    finally:
        quiet.set()
        talker.join(5)
    assert res.seen == 3 and len(shown) == 3 and not res.interrupted
    assert all(d["data"].startswith("hello ") for d in shown)
    assert subscribed == [("/vlb/chatter", "std_msgs/msg/String", "reliable, volatile")]
    assert p.closed

    q = Participant(connect=(), mode="peer")
    with pytest.raises(MessageError):
        run_echo(q, EchoConfig("/vlb/x", "no_pkg/msg/Nothing", "volatile", "reliable"),
                 lambda _d: True)
    assert q.closed
