"""The arm on the command line, and the host loop on python-can's virtual bus."""

from __future__ import annotations

import json
from pathlib import Path

import can

from fwbridge.bridge.arm.can_arm import drive_pick_place, run_modules
from fwbridge.bridge.arm.kinematics import ScaraGeometry
from fwbridge.bridge.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig
from tests.helpers import run_cli


def test_pick_place_cli_on_the_simulated_arm() -> None:
    res = run_cli("arm", "pick-place", "--pick", "0.45", "0.15", "0.12",
                  "--place", "0.2", "-0.25", "0.15", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.decode().splitlines()]
    waypoints = [r for r in rows if "waypoint" in r]
    assert [w["waypoint"] for w in waypoints][-1] == "home" and len(waypoints) == 11
    assert all(w["error_mm"] <= 1.0 for w in waypoints)
    assert rows[-1]["done"] is True and rows[-1]["frames"] > 1000


def test_unreachable_targets_are_one_error_line() -> None:
    res = run_cli("arm", "pick-place", "--pick", "1.5", "0", "0.1")
    assert res.returncode != 0
    assert res.stderr.decode().strip().splitlines() == [
        "error: target (1.5000, 0.0000) at r=1.5000 m is outside the workspace "
        "0.1500 <= r <= 0.9500 m"]
    res = run_cli("arm", "ik", "0", "0", "0.1")
    assert res.returncode != 0 and b"outside the workspace" in res.stderr


def test_arm_table_of_the_robot_file(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text("[link]\nurl = '/dev/ttyUSB0'\n[arm]\nl1 = 0.6\nl2 = 0.4\n")
    res = run_cli("arm", "ik", "0.98", "0", "0.1", "--config", str(cfg), "--json")
    assert res.returncode == 0, res.stderr  # 0.98 m is only reachable with l1 = 0.6
    cfg.write_text("[arm]\nl3 = 0.1\n")
    res = run_cli("arm", "ik", "0.5", "0", "0.1", "--config", str(cfg))
    assert b"arm.l3: unknown key" in res.stderr


def test_sim_scara_runs_the_modules() -> None:
    res = run_cli("sim", "scara", "--duration", "0.3", "--json")
    assert res.returncode == 0, res.stderr
    ready = json.loads(res.stdout.decode().splitlines()[0])
    assert ready["event"] == "ready" and "theta1=0x101" in ready["modules"]


def test_host_loop_drives_modules_on_the_virtual_bus() -> None:
    """The same host loop as on vcan or a real adapter, on python-can's virtual bus."""
    geom = ScaraGeometry()
    channel = "arm-virtual"
    modules, buses = run_modules(lambda: can.Bus(interface="virtual", channel=channel), geom)
    host = can.Bus(interface="virtual", channel=channel)
    clock = [0.0]

    def sleep(dt: float) -> None:  # simulated time: the modules run while the host waits
        end = clock[0] + dt
        while clock[0] < end:
            clock[0] = min(end, clock[0] + 0.002)
            for m in modules:
                m.step(clock[0])

    try:
        task = PickAndPlace(geom, PickPlaceConfig())
        run = drive_pick_place(host, task, geom, clock=lambda: clock[0], sleep=sleep)
    finally:
        for b in (host, *buses):
            b.shutdown()
    assert task.phase is Phase.DONE, task.failure
    assert all(r.error_m <= 0.001 for r in task.reached)
    assert run.bus_frames > 1000
