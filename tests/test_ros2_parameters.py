"""The base node's parameters, /parameter_events and /rosout, as rclcpp's node has them.

The end-to-end test drives them from another process with an independent client
(tests/ros2_param_peer.py: plain Zenoh + rosbags, rosidl's type hashes, no fwbridge
code) through a router on a free loopback port: it lists, gets, describes and sets
parameters, sees each change on /parameter_events and in what the node does with
cmd_vel, and gets the node's warnings on /rosout.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.parameters import MAX_NAMES, Parameter, ParameterTable
from fwbridge.bridge.ros2.rosout import RateLimit, Rosout
from fwbridge.bridge.ros2.router import open_router
from fwbridge.bridge.ros2.services import service_type_hash
from fwbridge.bridge.sim.scheme import register as offer_sim
from tests.helpers import ROOT, Lines, wait_until
from tests.ros2_param_peer import SERVICES

PEER = [sys.executable, str(ROOT / "tests" / "ros2_param_peer.py")]
NODE = "/robot1/base_bridge"


# -- no network ---------------------------------------------------------------------------
@pytest.mark.parametrize("srvtype", [s for s in SERVICES if s.startswith("rcl_interfaces")])
def test_parameter_service_hashes_are_rosidls(srvtype: str) -> None:
    assert service_type_hash(srvtype) == SERVICES[srvtype][0]
    assert service_type_hash(srvtype, "humble") == "TypeHashNotSupported"


def _table() -> tuple[ParameterTable, dict[str, Any]]:
    state: dict[str, Any] = {"gain": 1.5, "mode": "auto"}

    def set_gain(value: float) -> str:
        state["gain"] = value
        return f"gain {value:g}"

    return ParameterTable([
        Parameter("gain", 3, "a gain", lambda: state["gain"], set_gain, 0.0, 2.0),
        Parameter("mode", 4, "read at start", lambda: state["mode"]),
        Parameter("filter.depth", 2, "nested", lambda: 3),
    ]), state


def test_set_refuses_wrong_type_range_read_only_and_unknown_each_with_a_reason() -> None:
    table, state = _table()
    results, changed = table.set([("gain", 3, 0.5), ("gain", 2, 1), ("gain", 3, 9.0),
                                  ("gain", 3, float("nan")), ("mode", 4, "manual"),
                                  ("x" * 500, 3, 1.0), ("gain", 0, None)])
    assert results[0] == (True, "gain 0.5") and changed == ["gain"]
    reasons = [why for ok, why in results[1:]]
    assert all(not ok for ok, _ in results[1:])
    assert "gain is a double (ParameterValue type 3), got integer (write 1.0" in reasons[0]
    assert "gain must be 0 to 2, got 9: unchanged" in reasons[1]
    assert "must be finite" in reasons[2]
    assert "mode is read-only" in reasons[3]
    assert reasons[4].startswith("unknown parameter 'xxxx") and len(reasons[4]) < 140
    assert "got not set" in reasons[5]
    assert state == {"gain": 0.5, "mode": "auto"} and (table.accepted, table.refused) == (1, 6)


def test_set_atomically_is_all_or_none() -> None:
    table, state = _table()
    (ok, why), changed = table.set_atomically([("gain", 3, 0.25), ("mode", 4, "x")])
    assert not ok and "mode is read-only" in why and "nothing set" in why and not changed
    assert state["gain"] == 1.5
    (ok, why), changed = table.set_atomically([("gain", 3, 0.25)])
    assert ok and changed == ["gain"] and state["gain"] == 0.25
    too_many = [("gain", 3, 1.0)] * (MAX_NAMES + 1)
    assert table.set_atomically(too_many)[0][0] is False
    assert all(not ok for ok, _ in table.set(too_many)[0]) and state["gain"] == 0.25


def test_list_get_as_rclcpp() -> None:
    table, _ = _table()
    assert table.listed([], 0) == (["gain", "mode", "filter.depth"], ["filter"])
    assert table.listed([], 1) == (["gain", "mode"], [])
    assert table.listed(["filter"], 0) == (["filter.depth"], ["filter"])
    values = table.values(["mode", "gain"])
    assert values is not None and [v for _p, v in values] == ["auto", 1.5]
    assert table.values(["gain", "nope"]) is None  # rclcpp answers with nothing
    assert table.values(["gain"] * (MAX_NAMES + 1)) is None


def test_rate_limit_lets_a_burst_through_then_its_rate() -> None:
    limit = RateLimit(rate=2.0, burst=3)
    assert [limit.allow(10.0) for _ in range(5)] == [True, True, True, False, False]
    assert limit.allow(10.4) is False and limit.allow(10.5) is True  # 0.5 s: one more
    assert limit.allow(100.0) and limit.allow(100.0) and limit.allow(100.0)
    assert not limit.allow(100.0)  # refilled to the burst, no further


class _Pub:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def publish(self, msg: Any) -> bool:
        self.sent.append(msg)
        return True


class _Ros:
    namespace, name = "/robot1/left", "base_bridge"

    def __init__(self) -> None:
        self.pub = _Pub()

    def publisher(self, topic: str, msgtype: str, qos: Any) -> _Pub:
        assert (topic, msgtype, qos.durability, qos.depth) == (
            "/rosout", "rcl_interfaces/msg/Log", "transient_local", 1000)
        return self.pub


def test_rosout_names_the_node_limits_the_rate_and_says_what_it_left_out() -> None:
    import logging

    now = [0.0]
    ros = _Ros()
    rosout = Rosout(ros, limit=RateLimit(rate=1.0, burst=2), clock=lambda: now[0])
    logger = logging.getLogger("fwbridge.test_rosout")
    logger.propagate = False
    handler = rosout.handler(lambda r: "robot1/left/" in r.getMessage())
    logger.addHandler(handler)
    try:
        logger.info("/robot1/left/x: only news")  # below WARNING: not on /rosout
        logger.warning("/robot2/cmd_vel: another node's")
        for k in range(5):
            logger.warning("/robot1/left/cmd_vel: sample dropped %d", k)
        now[0] = 1.0
        logger.error("/robot1/left/odom: " + "y" * 5000)
    finally:
        logger.removeHandler(handler)
    msgs = ros.pub.sent
    assert [m.msg for m in msgs[:2]] == ["/robot1/left/cmd_vel: sample dropped 0",
                                         "/robot1/left/cmd_vel: sample dropped 1"]
    assert {m.name for m in msgs} == {"robot1.left.base_bridge"}
    assert [m.level for m in msgs] == [30, 30, 40]
    assert msgs[2].msg.endswith("(3 earlier messages left out: rate limit)")
    assert "(5019 characters)" in msgs[2].msg and len(msgs[2].msg) < 2100
    assert msgs[0].file.endswith("test_ros2_parameters.py") and msgs[0].line > 0
    assert rosout.stats() == {"rosout_published": 3, "rosout_suppressed": 3}


# -- on loopback, against an independent client -------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Peer:
    """tests/ros2_param_peer.py in another process, spoken to in JSON lines."""

    def __init__(self, endpoint: str) -> None:
        self.proc = subprocess.Popen([*PEER, endpoint], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        self.lines = Lines(self.proc.stdout)
        self.lines.wait_for('"ready"')
        self.ids = 0

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def call(self, service: str, srvtype: str, request: dict[str, Any]) -> Any:
        self.ids += 1
        self.send({"call": f"0{NODE}/{service}", "srv": f"{srvtype}", "request": request,
                   "id": self.ids})
        reply = json.loads(self.lines.wait_for(f'{{"id": {self.ids}, ', timeout=40))
        assert "response" in reply, reply
        assert (reply["gid"], reply["seq"]) == (reply["sent_gid"], reply["seq"])
        return reply["response"]

    def samples(self, tag: str) -> list[Any]:
        self.lines.drain()
        return [json.loads(line)["msg"] for line in self.lines.seen
                if f'"tag": "{tag}"' in line]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def robot() -> Iterator[tuple[Peer, Ros2Base]]:
    """A router; the peer subscribed to /parameter_events and /rosout; then the node."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = open_router([endpoint])
    peer = Peer(endpoint)
    node = ros = None
    try:
        for tag, key, msgtype in (("events", "0/parameter_events/**",
                                   "rcl_interfaces/msg/ParameterEvent"),
                                  ("rosout", "0/rosout/**", "rcl_interfaces/msg/Log")):
            peer.send({"sub": key, "type": msgtype, "tag": tag})
            peer.lines.wait_for(f'{{"subscribed": "{tag}"}}')
        offer_sim()  # the node's link: sim:// is offered by whoever asks for it
        node = BaseNode(RobotConfig(sim_url="sim://mecanum", use_sim=True, rate_hz=50.0),
                        on_event=None)
        node.start()
        ros = Ros2Base(node, Ros2Settings(namespace="/robot1", connect=(endpoint,)),
                       say=lambda _t: None)
        ros.start()
        yield peer, ros
    finally:
        peer.close()
        if ros is not None:
            ros.stop()
        if node is not None:
            node.stop()
        router.close()


def _param(name: str, kind: int, value: Any) -> dict[str, Any]:
    field = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value"}[kind]
    return {"name": name, "value": {"type": kind, field: value}}


def _values(params: list[Any]) -> dict[str, Any]:
    field = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value"}
    return {p["name"]: p["value"][field[p["value"]["type"]]] for p in params}


@pytest.mark.slow
def test_an_independent_client_lists_gets_sets_and_sees_events_and_rosout(
        robot: tuple[Peer, Ros2Base]) -> None:
    peer, ros = robot
    rcl = "rcl_interfaces/srv/"
    # the start event: every parameter, as new
    peer.lines.wait_for('"tag": "events"', timeout=40)
    (start,) = peer.samples("events")
    assert start["node"] == NODE and not start["changed_parameters"]
    assert _values(start["new_parameters"])["watchdog_timeout"] == 0.5

    names = peer.call("list_parameters", rcl + "ListParameters", {})["result"]["names"]
    assert {"watchdog_timeout", "max_linear_speed", "max_angular_speed", "rate_hz",
            "link_url"} <= set(names)
    got = peer.call("get_parameters", rcl + "GetParameters",
                    {"names": ["watchdog_timeout", "max_linear_speed", "link_url"]})
    assert [(v["type"], v["double_value"] or v["string_value"]) for v in got["values"]] == [
        (3, 0.5), (3, 10.0), (4, "sim://mecanum")]
    assert peer.call("get_parameters", rcl + "GetParameters",
                     {"names": ["watchdog_timeout", "nope"]}) == {"values": []}
    types = peer.call("get_parameter_types", rcl + "GetParameterTypes",
                      {"names": ["rate_hz", "watchdog", "link_url"]})
    assert types == {"types": [3, 1, 4]}
    (wd, url) = peer.call("describe_parameters", rcl + "DescribeParameters",
                          {"names": ["watchdog_timeout", "link_url"]})["descriptors"]
    assert (wd["read_only"], wd["floating_point_range"][0]["from_value"],
            wd["floating_point_range"][0]["to_value"]) == (False, 0.05, 5.0)
    assert url["read_only"] is True and "read when the node starts" in url[
        "additional_constraints"]

    # one set, each parameter on its own: the limit changes, the read-only one does not
    results = peer.call("set_parameters", rcl + "SetParameters", {"parameters": [
        _param("max_linear_speed", 3, 0.5), _param("rate_hz", 3, 5.0),
        _param("watchdog_timeout", 3, 10.0), _param("watchdog_timeout", 2, 1)]})["results"]
    assert results[0] == {"successful": True,
                          "reason": "max_linear_speed 0.5 m/s (was 10 m/s)"}
    assert [r["successful"] for r in results[1:]] == [False, False, False]
    assert "read-only" in results[1]["reason"]
    assert "must be 0.05 to 5 s, got 10: unchanged" in results[2]["reason"]
    assert "write 1.0, not 1" in results[3]["reason"]
    assert ros.max_linear == 0.5 and ros.node.config.rate_hz == 50.0
    peer.lines.wait_for('"changed_parameters": [{"name": "max_linear_speed"')
    changed = peer.samples("events")[-1]
    assert changed["node"] == NODE and _values(changed["changed_parameters"]) == {
        "max_linear_speed": 0.5}

    # all or none
    result = peer.call("set_parameters_atomically", rcl + "SetParametersAtomically",
                       {"parameters": [_param("watchdog_timeout", 3, 0.3),
                                       _param("max_angular_speed", 3, 50.0)]})["result"]
    assert result["successful"] is False and "nothing set" in result["reason"]
    assert ros.node.config.cmd_timeout == 0.5
    result = peer.call("set_parameters_atomically", rcl + "SetParametersAtomically",
                       {"parameters": [_param("watchdog_timeout", 3, 0.3)]})["result"]
    assert result["successful"] is True and ros.node.config.cmd_timeout == 0.3
    peer.lines.wait_for('"changed_parameters": [{"name": "watchdog_timeout"')

    # the node does what the parameter says: 1 m/s is now beyond its limit, refused,
    # and the node's warning comes on /rosout
    peer.send({"twist": "0/robot1/cmd_vel", "vx": 1.0, "count": 5})
    peer.lines.wait_for('{"sent": 5}')
    line = peer.lines.wait_for("beyond \\u00b10.5", timeout=20)
    log = json.loads(line)["msg"]
    assert (log["level"], log["name"]) == (30, "robot1.base_bridge"), log
    assert log["msg"].startswith("/robot1/cmd_vel: ")
    assert "cmd_vel: linear.x = 1 is beyond ±0.5" in log["msg"]
    status = json.loads(peer.call("get_status", "std_srvs/srv/Trigger", {})["message"])
    assert status["cmd_vel_refused"] == 5 and status["cmd_timeout_s"] == 0.3
    assert status["parameters_set"] == 2 and status["rosout_published"] >= 1

    # an event of the node (the watchdog trips after the last cmd_vel) is a warning too
    peer.send({"twist": "0/robot1/cmd_vel", "vx": 0.2, "count": 3})
    peer.lines.wait_for('{"sent": 3}')
    line = peer.lines.wait_for("no velocity request for", timeout=20)
    assert json.loads(line)["msg"]["level"] == 30
    wait_until(lambda: ros.node.stats()["watchdog_trips"] >= 1, 10, "the watchdog trip")


def test_the_fish_says_link_lost_on_rosout() -> None:
    """The fish node's warning that its fish stopped answering is a Log on /rosout, which
    a transient_local subscription made afterwards still gets (rcl's QoS)."""
    import serial

    from fwbridge.bridge import ActionLink
    from fwbridge.bridge.robots.fish_client import FishClient
    from fwbridge.bridge.ros2.participant import Participant
    from fwbridge.bridge.ros2.rosout import ROSOUT_QOS

    offer_sim()
    port = serial.serial_for_url("sim://fish", timeout=0.1)
    session = Participant(connect=(), mode="peer")
    from fwbridge.bridge.ros2.fish import Ros2Fish

    fish = Ros2Fish(FishClient(ActionLink(port, timeout=0.5)), Ros2Settings(namespace="/fish1"),
                    link_url="sim://fish", participant=session, say=lambda _t: None)
    got: list[Any] = []
    try:
        fish.start()
        fish._failed("no answer for 1.5 s")
        assert fish.rosout is not None and fish.rosout.published == 1
        session.node("console").subscription("/rosout", "rcl_interfaces/msg/Log",
                                              got.append, ROSOUT_QOS)
        wait_until(lambda: got, 10, "the Log from the publisher's cache")
    finally:
        fish.stop()
        session.close()
        port.close()
    assert (got[0].level, got[0].name) == (30, "fish1.fish_bridge")
    assert got[0].msg == "fish: link lost (sim://fish): no answer for 1.5 s"
