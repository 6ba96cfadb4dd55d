"""The arm on the command line, and the host loop on python-can's virtual bus."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import can

from fwbridge.bridge.robots.arm.can_arm import drive_pick_place, run_modules
from fwbridge.bridge.robots.arm.kinematics import ScaraGeometry
from fwbridge.bridge.robots.arm.pick_place import Phase, PickAndPlace, PickPlaceConfig
from tests.helpers import ROOT, cli_env, fwbridge_argv, reaped, run_cli, shared_bus


def test_pick_place_cli_on_the_simulated_arm() -> None:
    res = run_cli("arm", "pick-place", "--pick", "0.45", "0.15", "0.12",
                  "--place", "0.2", "-0.25", "0.15", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.decode().splitlines()]
    waypoints = [r for r in rows if "waypoint" in r]
    assert [w["waypoint"] for w in waypoints][-1] == "home" and len(waypoints) == 11
    # The seed's defaults: joints within 0.015 (rad, m) of each waypoint's.
    assert all(w["error_mm"] <= 15.0 for w in waypoints)
    assert rows[-1]["done"] is True and rows[-1]["frames"] > 1000
    assert rows[-1]["grip"] == "held"


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
    geom = ScaraGeometry(z_min=0.0, z_max=0.4)
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
        task = PickAndPlace(geom, PickPlaceConfig().precise())
        run = drive_pick_place(host, task, geom, clock=lambda: clock[0], sleep=sleep)
    finally:
        for b in (host, *buses):
            b.shutdown()
    assert task.phase is Phase.DONE, task.failure
    assert all(r.error_m <= 0.001 for r in task.reached)
    assert run.bus_frames > 1000


# -- the arm of 'sim scara' on a shared bus, driven from another process ------------------------


def test_pick_place_drives_the_arm_of_sim_scara_on_a_shared_bus(rundir: Path) -> None:
    with shared_bus("arm0"):  # its own rate (500 kbit/s): the arm's nodes take it
        arm = subprocess.Popen([*fwbridge_argv(), "sim", "scara", "--json"], cwd=ROOT,
                               env=cli_env({"CAN_INTERFACE": "fwbridge",
                                            "CAN_CHANNEL": "shared:arm0"}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert arm.stdout is not None
        with reaped(arm):
            ready = json.loads(arm.stdout.readline())
            assert ready["event"] == "ready" and ready["shared"] is True, ready
            start = json.loads(arm.stdout.readline())  # the pose before the run
            res = run_cli("arm", "pick-place", "-i", "fwbridge", "-c", "shared:arm0", "--json",
                          timeout=120)
            arm.send_signal(signal.SIGTERM)
            out, err = arm.communicate(timeout=20)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.decode().splitlines()[-1])["done"] is True
    poses = [json.loads(line) for line in out.decode().splitlines()]
    # the arm of the other process is the one that moved (down to the part: d3 grows)
    assert max(p["d3"] for p in poses) > start["d3"] + 0.02, (start, poses)
    assert "in this process" not in err.decode()


def test_pick_place_refuses_a_channel_without_an_arm(rundir: Path) -> None:
    res = run_cli("arm", "pick-place", "-i", "fwbridge", "-c", "shared:arm9")
    lines = res.stderr.decode().strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, lines
    assert "no shared bus arm9 is up" in lines[0] and "fwbridge can bus up arm9" in lines[0]
    assert res.stdout == b""  # no run on a bus of its own
    plain = run_cli("arm", "pick-place", "-i", "fwbridge", "-c", "arm9")
    lines = plain.stderr.decode().strip().splitlines()
    assert plain.returncode == 2 and len(lines) == 1, lines
    assert "-c shared:arm9" in lines[0] and plain.stdout == b""


def test_sim_scara_on_a_shared_bus_at_another_rate_names_the_fix(rundir: Path) -> None:
    with shared_bus("arm1"):
        res = run_cli("sim", "scara", "--duration", "0.2",
                      env={"CAN_INTERFACE": "fwbridge", "CAN_CHANNEL": "shared:arm1",
                           "CAN_BITRATE": "1000000"})
    lines = res.stderr.decode().strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, lines
    assert "runs at 500000 bit/s" in lines[0]
    assert "fwbridge can bus up arm1 --bitrate 1000000" in lines[0]
