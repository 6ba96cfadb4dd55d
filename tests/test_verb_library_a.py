"""The runs behind ``bridge``, ``can sim``, ``sim scara``, ``arm pick-place``, ``fw run``
and ``fish serve``, called as library functions: no CLI, no subprocess."""

from __future__ import annotations

import contextlib
import io
import itertools
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import can
import pytest

from fwbridge.bridge.base_run import (
    BaseRunConfig,
    BaseRunHooks,
    RunFailed,
    read_requests,
    run_base,
)
from fwbridge.bridge.node.config import load_config
from fwbridge.bridge.robots.arm.arm_runs import (
    PickPlaceJob,
    PickPlaceProgress,
    ScaraBus,
    open_scara,
    pick_place,
    scara_bus,
    serve_scara,
)
from fwbridge.bridge.robots.arm.kinematics import ScaraGeometry
from fwbridge.bridge.robots.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig
from fwbridge.bridge.sim.board_run import run_board
from fwbridge.can_bus.sim.swim import SwimConfig, SwimHooks, parse_fault, run_swim
from fwbridge.cli_verbs.bridge_run import parse_request
from tests.helpers import ROOT

MECANUM = ROOT / "examples" / "mecanum.toml"
_names = itertools.count()


@pytest.fixture
def sim_scheme() -> Iterator[None]:
    """``sim://`` served, as the command line serves it, for one test."""
    from fwbridge.bridge.link.link_urls import URL_HANDLERS
    from fwbridge.bridge.sim.scheme import register

    before = dict(URL_HANDLERS)
    register()
    try:
        yield
    finally:
        URL_HANDLERS.clear()
        URL_HANDLERS.update(before)


class _Blocks:
    """A JSON-lines writer that keeps what it is given (``JsonBlocks``'s shape)."""

    period = 0.02

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, obj: dict[str, Any], now: float) -> None:
        import json

        self.lines.append(json.dumps(obj))

    def add_line(self, line: str, now: float) -> None:
        self.lines.append(line)

    def flush(self) -> None:
        pass


# -- bridge: run_base -------------------------------------------------------------------

class _Node:
    def __init__(self) -> None:
        self.requests: list[tuple[float, float, float]] = []

    def request(self, vx: float, vy: float, wz: float) -> None:
        self.requests.append((vx, vy, wz))


def test_read_requests_stops_the_base_on_a_bad_line_and_counts_it() -> None:
    node, refused, said = _Node(), [0], []
    stream = io.StringIO("0.1 0 0\nnot a request\n# a comment\n" + "9" * 5000 + "\n0 0 0.2\n")
    read_requests(node, stream, refused, parse_request, 1.0, 2.0, said.append)  # type: ignore[arg-type]
    assert node.requests == [(0.1, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.2)]
    assert refused == [2]
    assert said[0].startswith("error: stdin line 2 ignored, the base stops: ")
    assert said[1].startswith("error: stdin line 4 ignored")


@pytest.mark.pty
@pytest.mark.usefixtures("sim_scheme")
def test_run_base_streams_odometry_and_stops_the_base() -> None:
    blocks, said = _Blocks(), []
    nodes: list[Any] = []

    def ros2(node: Any) -> Any:  # the hook sees the node: kept to check its end
        nodes.append(node)
        return None

    cfg = BaseRunConfig(load_config(MECANUM, use_sim=True), duration=0.6, every=5)
    result = run_base(cfg, BaseRunHooks(say=said.append, out=blocks, start_ros2=ros2))
    assert result.error is None
    assert result.stats["commands"] > 0 and result.stats["odometry"] > 0
    assert blocks.lines and all(line.startswith("{") for line in blocks.lines)
    assert any(" active, " in line for line in said)
    assert not nodes[0].running  # the safe stop ran


@pytest.mark.pty
@pytest.mark.usefixtures("sim_scheme")
def test_run_base_stops_the_node_when_a_hook_raises_and_leaves_no_capture(
        tmp_path: Path) -> None:
    nodes: list[Any] = []

    def broken(node: Any) -> Any:
        nodes.append(node)
        raise RuntimeError("no network")

    out = tmp_path / "run.mcap"
    cfg = BaseRunConfig(load_config(MECANUM, use_sim=True), record=str(out))
    with pytest.raises(RuntimeError, match="no network"):
        run_base(cfg, BaseRunHooks(say=lambda _: None, out=_Blocks(), start_ros2=broken))
    assert not nodes[0].running
    assert out.exists()  # published once the link was up, closed whole by the safe stop


@pytest.mark.usefixtures("sim_scheme")
def test_run_base_refuses_a_capture_it_cannot_make(tmp_path: Path) -> None:
    cfg = BaseRunConfig(load_config(MECANUM, use_sim=True),
                        record=str(tmp_path / "no" / "such" / "dir" / "run.pcapng"))
    with pytest.raises(RunFailed, match="--record"):
        run_base(cfg, BaseRunHooks(say=lambda _: None, out=_Blocks()))
    assert list(tmp_path.iterdir()) == []


# -- can sim: run_swim -------------------------------------------------------------------

def test_run_swim_reports_every_module_and_closes_every_bus() -> None:
    channel = f"swim{next(_names)}"
    opened: list[can.BusABC] = []
    ticks: list[float] = []

    def open_bus(**extra: Any) -> can.BusABC:
        bus = can.Bus(interface="fwbridge", channel=channel, ignore_config=True, **extra)
        opened.append(bus)
        return bus

    cfg = SwimConfig(3, duration=1.0, pacing="afap", faults=(parse_fault("2:stuck@0.5"),))
    result = run_swim(cfg, SwimHooks(open_bus=open_bus,
                                     on_tick=lambda ctrl, now, sim: ticks.append(now)))
    assert result.error is None
    assert result.label == f"fwbridge:{opened[0].channel_info}"
    assert [m["module"] for m in result.modules] == [1, 2, 3]
    assert [m["kind"] for m in result.modules] == ["servo", "servo-motor", "stepper"]
    assert result.stats is not None and result.stats["frames"] > 0
    assert any(e["module"] == 2 for e in result.events)  # the stuck bus was seen
    assert len(opened) == 4 and all(b._is_shutdown for b in opened)


def test_run_swim_closes_the_buses_it_opened_when_one_cannot_open() -> None:
    channel = f"swim{next(_names)}"
    opened: list[can.BusABC] = []

    def open_bus(**extra: Any) -> can.BusABC:
        if len(opened) == 2:
            raise OSError("no third bus")
        bus = can.Bus(interface="fwbridge", channel=channel, ignore_config=True, **extra)
        opened.append(bus)
        return bus

    with pytest.raises(OSError, match="no third bus"):
        run_swim(SwimConfig(3, duration=0.1, pacing="afap"), SwimHooks(open_bus=open_bus))
    assert len(opened) == 2 and all(b._is_shutdown for b in opened)


# -- sim scara and arm pick-place --------------------------------------------------------

def test_scara_bus_reads_the_python_can_configuration() -> None:
    assert scara_bus({}) == ScaraBus("fwbridge", "sim0", 1_000_000, False, "sim0")
    shared = scara_bus({"interface": "fwbridge", "channel": "shared:arm0"})
    assert (shared.shared, shared.bitrate, shared.name) == (True, None, "arm0")
    assert scara_bus({"interface": "virtual", "channel": "shared:x"}).shared is False


def test_serve_scara_steps_the_modules_and_shuts_the_buses() -> None:
    arm = open_scara(ScaraBus(channel=f"scara{next(_names)}"), ScaraGeometry())
    events: list[str] = []
    result = serve_scara(arm, 0.3, on_ready=lambda: events.append("ready"),
                         on_status=lambda t, pos: events.append(f"status {sorted(pos)}"))
    assert events[0] == "ready" and events[1].startswith("status ['d3', 'gripper'")
    assert set(result.positions) == {"theta1", "theta2", "d3", "theta4", "gripper"}
    assert not result.interrupted and result.ran >= 0.3
    assert all(b._is_shutdown for b in arm.buses)


def test_serve_scara_ends_normally_on_a_stop_and_shuts_the_buses() -> None:
    arm = open_scara(ScaraBus(channel=f"scara{next(_names)}"), ScaraGeometry())

    def stop(t: float, pos: dict[str, float]) -> None:
        raise KeyboardInterrupt

    result = serve_scara(arm, None, on_status=stop)
    assert result.interrupted
    assert all(b._is_shutdown for b in arm.buses)


def test_pick_place_reports_each_waypoint_once() -> None:
    geom = ScaraGeometry()
    task = PickAndPlace(geom, PickPlaceConfig())
    seen: list[Phase] = []
    progress = PickPlaceProgress()
    run = pick_place(PickPlaceJob(task, geom), lambda r, fb: seen.append(r.phase), progress)
    assert run.task.failure is None and run.task.done
    assert seen == [r.phase for r in run.task.reached] and progress.reported == len(seen)


class _Participant:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class _RosArm:
    def __init__(self, stop: bool = False) -> None:
        self.participant, self.stop, self.published = _Participant(), stop, 0

    def publish_joints(self, joints: dict[str, float]) -> None:
        self.published += 1
        if self.stop:
            raise KeyboardInterrupt  # a stop signal in a control step


def test_pick_place_closes_ros_on_a_stop() -> None:
    geom = ScaraGeometry()
    ros = _RosArm(stop=True)
    progress = PickPlaceProgress()
    with pytest.raises(KeyboardInterrupt):
        pick_place(PickPlaceJob(PickAndPlace(geom, PickPlaceConfig()), geom, ros_arm=ros),
                   progress=progress)
    assert ros.published == 1 and ros.participant.closed == 1 and progress.reported == 0


def test_pick_place_shuts_the_bus_it_opened() -> None:
    geom = ScaraGeometry()
    bus = can.Bus(interface="virtual", channel=f"arm{next(_names)}")  # no arm on it
    ros = _RosArm()
    run = pick_place(PickPlaceJob(PickAndPlace(geom, PickPlaceConfig()), geom,
                                  open_bus=lambda: bus, ros_arm=ros))
    assert run.task.failure  # no module answers
    assert bus._is_shutdown and ros.participant.closed == 1


# -- fw run: run_board -------------------------------------------------------------------

class _Board:
    def __init__(self, statuses: list[dict[str, Any]], stays: bool = False) -> None:
        self.statuses, self.stays = statuses, stays
        self.latest: dict[str, Any] | None = None
        self.stopped = 0

    @property
    def running(self) -> bool:
        return self.stays or bool(self.statuses)

    def wait_status(self, after_ms: int = -1, timeout: float = 10.0) -> dict[str, Any] | None:
        if not self.statuses:
            return None
        self.latest = self.statuses.pop(0)
        assert self.latest["ms"] > after_ms
        return self.latest

    def stop(self) -> None:
        self.stopped += 1


def test_run_board_follows_the_counters_and_names_an_early_end() -> None:
    board, seen, closed = _Board([{"ms": 1000}, {"ms": 2000}]), [], []
    res = run_board(board, None, on_status=lambda st, line: seen.append(st["ms"]),
                    on_close=lambda: closed.append(1))
    assert seen == [1000, 2000] and res.status == {"ms": 2000}
    assert res.ended_early and not res.interrupted
    assert board.stopped == 1 and closed == [1]


def test_run_board_stops_the_board_on_every_way_out() -> None:
    board = _Board([], stays=True)
    res = run_board(board, 0.05)  # the deadline
    assert not res.ended_early and board.stopped == 1

    def stop(st: dict[str, Any], line: Any) -> None:
        raise KeyboardInterrupt

    board = _Board([{"ms": 1}], stays=True)
    assert run_board(board, None, on_status=stop).interrupted and board.stopped == 1

    def refuse() -> None:
        raise ValueError("--link taken")

    board, closed = _Board([], stays=True), []
    with pytest.raises(ValueError, match="--link taken"):
        run_board(board, None, on_ready=refuse, on_close=lambda: closed.append(1))
    assert board.stopped == 1 and closed == [1]


# -- fish serve: serve_fish --------------------------------------------------------------

@pytest.mark.pty
@pytest.mark.usefixtures("sim_scheme")
def test_serve_fish_serves_until_the_deadline_and_closes_the_port() -> None:
    pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
    pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")
    from fwbridge.bridge.link.transports import open_link
    from fwbridge.bridge.robots.fish_serve import FishServeConfig, serve_fish
    from fwbridge.bridge.ros2.config import parse_ros2
    from fwbridge.bridge.ros2.router import open_router

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"tcp/127.0.0.1:{s.getsockname()[1]}"
    router = open_router([endpoint])
    try:
        settings = parse_ros2({"connect": [endpoint], "namespace": "/fish7"})
        port = open_link("sim://fish", 115200)
        ready: list[Any] = []
        result = serve_fish(FishServeConfig(settings, "sim://fish", duration=0.5), port,
                            on_ready=ready.append)
    finally:
        router.close()
    assert ready[0].fqn.startswith("fish7/") and ready[0].service_names
    assert "attempts" in result.stats and not result.interrupted
    assert not port.is_open


def test_no_library_run_prints(capsys: pytest.CaptureFixture[str]) -> None:
    board = _Board([{"ms": 5}])
    with contextlib.suppress(Exception):
        run_board(board, None)
    scara_bus({})
    assert capsys.readouterr() == ("", "")
