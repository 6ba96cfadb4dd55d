"""A fleet across machines: three hosts (network namespaces), two routers, 32 robots.

    host A (10.77.1.1)            host B (10.77.1.2, 10.77.2.2)        host C (10.77.2.1)
    fwbridge fleet 16  --------   fwbridge ros2 router   ----------   fwbridge fleet 16 --first 17
    fwbridge ros2 router          the operator (tests/fleet_operator.py:
      --connect tcp/10.77.1.2       plain Zenoh + rosbags)

The operator on B steers every robot of A and C, each at its own speed, and
reads every robot's odometry; an observer on A (the same script, commanding
none), connected to A's fleet directly (``--listen``), sees A's robots and
their diagnostics while A is cut off from B or its router is down. Every
process runs a bounded time and every wait is bounded; the namespaces and
their links are deleted at the end (tests/netns.py). Skipped, with the reason,
where network namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from tests.helpers import ROOT, Lines, cli_env, fwbridge_argv
from tests.netns import Hosts, Reports, unavailable

_why = unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

OPERATOR = [sys.executable, str(ROOT / "tests" / "fleet_operator.py")]
RELAY = [sys.executable, str(ROOT / "tests" / "lossy_relay.py")]
A_ROBOTS, C_ROBOTS = range(1, 17), range(17, 33)
PORT = 7447
CUT = 5.0  # s: how long a partition or a router restart lasts
LIFETIME = 240  # s: every process of the fixture ends by itself after this


@dataclass
class World:
    net: Hosts
    endpoints: dict[str, str]
    procs: dict[str, subprocess.Popen[Any]]
    lines: dict[str, Lines]
    operator: Reports
    observer: Reports
    send: Any

    def start(self, name: str, host: str, argv: list[str], ready: str) -> None:
        """(Re)start a fwbridge process ``name`` on ``host`` and wait for its readiness line."""
        proc = self.net.popen(host, [*fwbridge_argv(), *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT)
        self.procs[name], self.lines[name] = proc, Lines(proc.stderr)
        self.lines[name].wait_for(ready, 60)

    def router(self, host: str) -> None:
        e = self.endpoints
        if host == "b":
            argv = ["ros2", "router", "--listen", e["b-from-a"], "--listen", e["b-from-c"]]
        else:
            argv = ["ros2", "router", "--listen", e["a-local"], "--connect", e["b-from-a"]]
        self.start(f"router-{host}", host, argv, "router: listening on")


def _speed(k: int, scale: float) -> float:
    return scale * 0.02 * k


def _at_speed(report: dict[str, Any], robots: range, scale: float, *,
              since: dict[int, int] | None = None) -> bool:
    """Every robot's latest odometry at its own commanded speed (and fresh since ``since``):
    within 0.008 m/s (the simulated encoders' step is 0.007 m/s), less than half the 0.02
    m/s between two robots' speeds."""
    vx, n = report["vx"], report["n"]
    return all(k in vx and abs(vx[k] - _speed(k, scale)) < 0.008 and
               (since is None or n.get(k, 0) > since.get(k, 0) + 5) for k in robots)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with Hosts("a", "b", "c") as net:
        ab, cb = net.link("a", "b"), net.link("c", "b")
        endpoints = {"b-from-a": f"tcp/{ab.addr_b}:{PORT}", "b-from-c": f"tcp/{cb.addr_b}:{PORT}",
                     "a-local": f"tcp/127.0.0.1:{PORT}", "a-fleet": f"tcp/127.0.0.1:{PORT + 1}"}
        w = World(net, endpoints, {}, {}, None, None, None)  # type: ignore[arg-type]
        w.router("b")
        w.router("a")
        for host, argv in (("a", ["fleet", "16", "--connect", endpoints["a-local"],
                                  "--listen", endpoints["a-fleet"]]),
                           ("c", ["fleet", "16", "--first", "17", "--connect",
                                  endpoints["b-from-c"]])):
            w.start(f"fleet-{host}", host, [*argv, "--duration", str(LIFETIME)],
                    "simulated bases")
        op = net.popen("b", [*OPERATOR, endpoints["b-from-a"], "1", "32", str(LIFETIME)],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, cwd=ROOT)
        obs = net.popen("a", [*OPERATOR, endpoints["a-fleet"], "1", "0", str(LIFETIME)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        Lines(op.stderr).wait_for("ready", 30)
        Lines(obs.stderr).wait_for("ready", 30)
        w.operator, w.observer = Reports(op.stdout), Reports(obs.stdout)

        def send(command: str) -> None:
            assert op.stdin is not None
            op.stdin.write(command + "\n")
            op.stdin.flush()

        w.send = send
        try:
            yield w
        finally:
            send("quit")


def _alive(world: World) -> None:
    for name in ("fleet-a", "fleet-c"):
        assert world.procs[name].poll() is None, world.lines[name].drain()


def test_every_robot_is_steered_from_another_host_and_seen_there(world: World) -> None:
    """B steers each of A's and C's 32 robots at its own speed and sees each one's odometry
    at that speed: every command reached its robot, and no other."""
    world.send("scale 1")
    world.operator.wait(lambda r: _at_speed(r, range(1, 33), 1.0), 60,
                        "every robot at its own speed, seen from B")
    world.send("scale 0")
    world.operator.wait(lambda r: _at_speed(r, range(1, 33), 0.0), 30, "every robot at rest")
    _alive(world)


def test_ros2_topics_on_b_lists_the_nodes_of_a_and_c(world: World) -> None:
    res = world.net.run("b", [*fwbridge_argv(), "ros2", "topics", "--json", "--connect",
                              world.endpoints["b-from-a"], "--wait", "2"],
                        capture_output=True, text=True, timeout=60, env=cli_env(), cwd=ROOT)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    pubs = {(r["topic"], r["node"]) for r in rows if r["kind"] == "MP"}
    subs = {(r["topic"], r["node"]) for r in rows if r["kind"] == "MS"}
    for k in range(1, 33):
        assert (f"/robot{k}/odom", f"/robot{k}/base_bridge") in pubs, k
        assert (f"/robot{k}/cmd_vel", f"/robot{k}/base_bridge") in subs, k
    zids = {r["zid"] for r in rows if r["topic"] == "/robot1/odom"} | {
        r["zid"] for r in rows if r["topic"] == "/robot17/odom"}
    assert len(zids) == 2  # two processes, on two hosts


def _cut_off(world: World, scale_before: float, what: str,
             cut: Any, restore: Any, robots: range) -> None:
    """``robots`` moving, then cut off from B by ``cut()``: each is held at zero by its
    watchdog and says the operator is lost; what B sends meanwhile (scale -2) is queued
    on the way, then ``restore()``: the robots take fresh commands (scale 0.5) again, and
    never the queued ones."""
    world.send(f"scale {scale_before}")
    world.operator.wait(lambda r: _at_speed(r, robots, scale_before), 60, f"{what}: moving")
    cut()
    t_cut = time.monotonic()
    world.send("scale -2")  # queued while cut off: must never move a robot of A
    stopped = world.observer.wait(
        lambda r: all(abs(r["vx"].get(k, 1.0)) < 0.004 for k in robots if k in A_ROBOTS),
        30, f"{what}: robots of A at rest")
    lost = world.observer.wait(
        lambda r: all(r["diag"].get(k, [0, ""])[1].startswith("operator lost: no cmd_vel for")
                      and r["diag"][k][0] == 1 for k in robots if k in A_ROBOTS),
        30, f"{what}: operator lost in /diagnostics")
    assert stopped["t"] >= t_cut and lost["t"] >= t_cut
    # the cut lasts CUT s; its last second B sends fresh commands (scale 0.5), so that
    # what is still on the way when it ends is not older than the watchdog
    time.sleep(max(0.0, t_cut + CUT - 1.0 - time.monotonic()))  # pacing: the cut lasts CUT s
    # while cut off each robot of A says so again every second, the time growing
    said = {r["diag"][1][1] for r in world.observer.since(lost["t"]) if 1 in r["diag"]}
    assert len({m for m in said if m.startswith("operator lost")}) >= 2, said
    world.send("scale 0.5")
    time.sleep(1.0)  # pacing: a second of fresh commands before the link returns
    restore()
    t_back = time.monotonic()
    world.operator.wait(lambda r: _at_speed(r, robots, 0.5), 30, f"{what}: resumed, seen on B")
    world.observer.wait(lambda r: all(r["diag"].get(k, [0, ""])[1] == "cmd_vel coming"
                                      for k in robots if k in A_ROBOTS), 30,
                        f"{what}: cmd_vel coming in /diagnostics")
    _alive(world)
    seen_on_a = world.observer.since(t_cut)
    backwards = [(r["t"] - t_back, k, r["vx"][k]) for r in seen_on_a for k in A_ROBOTS
                 if k in robots and r["vx"].get(k, 0.0) < -0.002]
    assert not backwards, f"{what}: a command queued while cut off moved a robot: {backwards[:5]}"


def test_a_partition_stops_the_robots_and_they_resume_after_it(world: World) -> None:
    ab = world.net.links[0]
    _cut_off(world, 1.0, "partition A-B", lambda: world.net.set_link(ab, up=False),
             lambda: world.net.set_link(ab, up=True), A_ROBOTS)
    stale = sum(int(world.observer.latest["diag"][k][2]["cmd_vel_stale"]) for k in A_ROBOTS)
    print(f"cmd_vel delivered late after the partition and dropped: {stale}")


def test_a_restart_of_the_router_on_a_is_survived(world: World) -> None:
    def cut() -> None:
        world.procs["router-a"].terminate()
        assert world.procs["router-a"].wait(30) == 143

    _cut_off(world, 1.0, "router A restart", cut, lambda: world.router("a"), A_ROBOTS)


def test_a_restart_of_the_router_on_b_is_survived(world: World) -> None:
    def cut() -> None:
        world.procs["router-b"].terminate()
        assert world.procs["router-b"].wait(30) == 143

    _cut_off(world, 1.0, "router B restart", cut, lambda: world.router("b"), range(1, 33))


def test_a_slow_lossy_link_keeps_commands_fresh_and_odometry_flowing(world: World) -> None:
    """Two more robots on C reach B through 100 ms of delay with 20 % of the chunks
    lost (and so 0.2 s later, as TCP resends them): they take the latest command each
    time, their odometry keeps coming, and each reports the latency it sees."""
    cb = world.net.links[1]
    relay = f"{cb.addr_b}:{PORT + 3}"
    proc = world.net.popen("b", [*RELAY, relay, f"{cb.addr_b}:{PORT}", "0.1", "0.2",
                                 str(LIFETIME)], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    Lines(proc.stderr).wait_for("ready", 30)
    world.start("fleet-slow", "c", ["fleet", "2", "--first", "33", "--connect", f"tcp/{relay}",
                                    "--duration", str(LIFETIME)], "simulated bases")
    op = world.net.popen("b", [*OPERATOR, world.endpoints["b-from-c"], "33", "34",
                               str(LIFETIME)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    Lines(op.stderr).wait_for("ready", 30)
    reports = Reports(op.stdout)
    assert op.stdin is not None
    slow = range(33, 35)
    for scale in (1.0, 0.5, -1.0):  # each time the latest command wins
        op.stdin.write(f"scale {scale}\n")
        op.stdin.flush()
        reports.wait(lambda r, s=scale: _at_speed(r, slow, s), 60, f"slow link: at {scale}")
    before = dict(reports.latest["n"])
    flowing = reports.wait(lambda r: all(r["n"].get(k, 0) > before[k] + 50 for k in slow), 30,
                           "slow link: odometry flowing")
    diag = reports.wait(lambda r: all(k in r["diag"] and r["diag"][k][0] == 0 for k in slow), 30,
                        "slow link: cmd_vel status")
    for k in slow:
        assert float(diag["diag"][k][2]["cmd_vel_latency_ms"]) >= 100.0, diag["diag"][k]
        assert flowing["age_ms"][k] >= 100.0, flowing["age_ms"]
    op.stdin.write("quit\n")
    op.stdin.flush()
    assert world.procs["fleet-slow"].poll() is None
