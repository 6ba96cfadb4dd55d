"""fwbridge as a ROS 2 node over Zenoh: rmw_zenoh's formats, and the whole path on loopback.

Every Zenoh session here listens on (or connects to) 127.0.0.1 on a free port,
multicast scouting off. The independent peer (tests/ros2_peer.py: plain
Zenoh + rosbags) runs in another process.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

zenoh = pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from fwbridge.bridge.link.link_urls import is_loopback_address  # noqa: E402
from fwbridge.bridge.node.config import ConfigError  # noqa: E402
from fwbridge.bridge.ros2 import keys  # noqa: E402
from fwbridge.bridge.ros2.config import MAX_URDF, Ros2Settings, load_ros2, parse_ros2  # noqa: E402
from fwbridge.bridge.ros2.fleet import Fleet  # noqa: E402
from fwbridge.bridge.ros2.participant import Participant, zenoh_config  # noqa: E402
from fwbridge.bridge.ros2.router import DEFAULT_LISTEN, open_router, router_config  # noqa: E402
from fwbridge.bridge.rosmsg import cdr, plain_data, topics  # noqa: E402
from fwbridge.bridge.rosmsg.topics import Qos  # noqa: E402
from fwbridge.bridge.sim.scheme import register as offer_sim  # noqa: E402
from tests.helpers import (  # noqa: E402
    ROOT,
    Lines,
    cli_env,
    fwbridge_argv,
    reaped,
    run_cli,
    spawn_verb,
)

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "ros2_rmw_zenoh_golden.json")
                    .read_text())
PEER = [sys.executable, str(ROOT / "tests" / "ros2_peer.py")]
#: The fleet's robot_description: UTF-8 beyond ASCII, as a URDF's comments may be.
URDF = '<?xml version="1.0"?>\n<robot name="base"><!-- Müller --><link name="base_link"/></robot>\n'


# -- formats (no network) --------------------------------------------------------------------
def test_liveliness_tokens_match_rmw_zenoh() -> None:
    zid = GOLDEN["zid"]
    assert keys.liveliness_key(0, zid, 0, 0, "NN", "/", "base_bridge") == GOLDEN["node_root"]
    assert keys.liveliness_key(
        7, zid, 2, 5, "MP", "/robot1", "base_bridge", topic="/robot1/odom",
        msgtype="nav_msgs/msg/Odometry", type_hash=cdr.type_hash("nav_msgs/msg/Odometry"),
    ) == GOLDEN["odom_publisher_domain7"]
    assert keys.liveliness_key(
        0, zid, 0, 3, "MS", "/robot1", "base_bridge", topic="/robot1/cmd_vel",
        msgtype="geometry_msgs/msg/Twist",
        type_hash=cdr.type_hash("geometry_msgs/msg/Twist", "humble"),
    ) == GOLDEN["cmd_vel_subscription_humble"]
    assert keys.liveliness_key(
        0, zid, 0, 2, "MP", "/", "base_bridge", topic="/tf", msgtype="tf2_msgs/msg/TFMessage",
        type_hash=cdr.type_hash("tf2_msgs/msg/TFMessage"), qos=topics.TOPICS["tf"].qos,
    ) == GOLDEN["tf_publisher_depth100"]
    assert keys.qos_key(Qos("best_effort", "transient_local", "keep_last", 7)) == GOLDEN[
        "qos_best_effort_transient_local_depth7"]
    parsed = keys.parse_liveliness(GOLDEN["odom_publisher_domain7"])
    assert parsed is not None and (parsed.domain, parsed.node, parsed.topic, parsed.msgtype) == (
        7, "/robot1/base_bridge", "/robot1/odom", "nav_msgs/msg/Odometry")
    assert keys.parse_liveliness("@ros2_lv/0/x/NN") is None


def test_data_keys_match_rmw_zenoh() -> None:
    odom = cdr.type_hash("nav_msgs/msg/Odometry")
    assert keys.data_key(0, "/robot1/odom", "nav_msgs/msg/Odometry", odom) == GOLDEN[
        "data_odom_jazzy"]
    assert keys.data_key(0, "/chatter", "std_msgs/msg/String", "TypeHashNotSupported") == GOLDEN[
        "data_chatter_humble"]
    assert cdr.type_hash("geometry_msgs/msg/Twist") == GOLDEN["data_twist_jazzy_hash"]
    assert keys.resolve_name("odom", "/robot1") == "/robot1/odom"
    assert keys.resolve_name("/tf", "/robot1") == "/tf"
    assert keys.resolve_name("odom", "/") == "/odom"


def test_attachment_matches_zenoh_serializer() -> None:
    att = keys.Attachment(1, 1_700_000_000_123_456_789, bytes(range(16)))
    assert att.encode().hex() == GOLDEN["attachment_seq1_ts1700000000123456789_gid00to0f"]
    # the same bytes from Zenoh's own serializer (what zenoh-cpp's Serializer writes)
    from zenoh.ext import Int64, UInt8, z_serialize

    ref = z_serialize((Int64(1), Int64(1_700_000_000_123_456_789), [UInt8(b) for b in range(16)]))
    assert ref.to_bytes() == att.encode()
    assert keys.Attachment.decode(att.encode()) == att
    with pytest.raises(cdr.MessageError):
        keys.Attachment.decode(b"\x01" * 20)


def test_freshness_drops_what_waited_longer_than_max_age_whatever_the_clocks() -> None:
    """A sample that waited on the way longer than max_age beyond the quickest one of its
    source is stale, with the sender's clock 1000 s off or not; sources apart."""
    for skew in (0, 1000 * 10**9, -1000 * 10**9):
        fresh = keys.Freshness(0.5)
        gid, other = bytes(16), bytes(range(16))

        def at(sent_ms: int, got_ms: int, source: bytes = gid, fresh: keys.Freshness = fresh,
               skew: int = skew) -> bool:
            return fresh.fresh(keys.Attachment(1, sent_ms * 10**6 + skew, source),
                               got_ms * 10**6)

        assert at(0, 3)  # the first sets the offset
        assert at(50, 52) and at(100, 590)  # 488 ms late: still fresh
        assert not at(200, 5000)  # a partition's backlog, delivered at once
        assert at(5000, 5001)
        assert at(0, 4000, other)  # another source: its own offset
        assert fresh.last_age_ns == 4000 * 10**6 - skew


def test_service_keys_match_rmw_zenoh() -> None:
    """std_srvs/srv/Trigger's hash as on a ROS 2 installation's wire (its ServiceEventInfo
    client_gid is uint8[16] in the type description); keys and SS tokens as rmw_zenoh's."""
    from fwbridge.bridge.ros2.services import SERVICE_QOS, service_type_hash

    trigger = service_type_hash("std_srvs/srv/Trigger")
    assert trigger == "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f"
    assert service_type_hash("std_srvs/srv/Trigger", "humble") == "TypeHashNotSupported"
    assert keys.data_key(0, "/robot1/base_bridge/get_status", "std_srvs/srv/Trigger",
                         trigger) == ("0/robot1/base_bridge/get_status/"
                                      f"std_srvs::srv::dds_::Trigger_/{trigger}")
    token = keys.liveliness_key(0, "z", 1, 9, "SS", "/robot1", "base_bridge",
                                topic="/robot1/base_bridge/get_status",
                                msgtype="std_srvs/srv/Trigger", type_hash=trigger,
                                qos=SERVICE_QOS)
    assert token.split("/")[5:] == ["SS", "%", "%robot1", "base_bridge",
                                    "%robot1%base_bridge%get_status",
                                    "std_srvs::srv::dds_::Trigger_", trigger, "::,10:,:,:,,"]
    with pytest.raises(cdr.MessageError, match="unknown service type"):
        service_type_hash("std_srvs/srv/Nope")


def test_set_parameters_hash_is_rosidls() -> None:
    """rcl_interfaces/srv/SetParameters' RIHS01 as rosidl generates it (its request holds
    rcl_interfaces/msg/Parameter, described as the store has it: the same hash)."""
    from fwbridge.bridge.ros2.services import SET_PARAMETERS, service_type_hash

    assert service_type_hash(SET_PARAMETERS) == ("RIHS01_56eed9a67e169f9cb6c1f987bc88f868c1"
                                                 "4a8fc9f743a263bc734c154015d7e0")
    assert service_type_hash(SET_PARAMETERS, "humble") == "TypeHashNotSupported"


def test_gid_is_xxh3_of_the_token() -> None:
    gid = keys.entity_gid(GOLDEN["node_root"])
    assert len(gid) == 16 and gid != keys.entity_gid(GOLDEN["odom_publisher_domain7"])


def test_ros2_table(monkeypatch: pytest.MonkeyPatch) -> None:
    s = parse_ros2({"enabled": True, "namespace": "robot1", "distro": "humble",
                    "connect": ["tcp/10.0.0.2:7447"], "topics": {"odom": "wheel_odom"}})
    assert (s.namespace, s.distro, s.topic("odom"), s.topic("cmd_vel")) == (
        "/robot1", "humble", "wheel_odom", "cmd_vel")
    assert Ros2Settings().connect == ("tcp/localhost:7447",) and Ros2Settings().listen == ()
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert Ros2Settings().domain == 42 and Ros2Settings(domain_id=3).domain == 3
    for bad, field in [({"distro": "iron"}, "ros2.distro"), ({"connect": ["localhost"]},
                       "ros2.connect"), ({"topics": {"odm": "x"}}, "ros2.topics.odm"),
                       ({"domain_id": 300}, "ros2.domain_id"), ({"colour": 1}, "ros2.colour"),
                       ({"frame_prefix": "/robot1"}, "ros2.frame_prefix"),
                       ({"frame_prefix": "robot 1/"}, "ros2.frame_prefix"),
                       ({"frame_prefix": 1}, "ros2.frame_prefix")]:
        with pytest.raises(ConfigError, match=field):
            parse_ros2(bad)


def test_urdf_of_the_ros2_table_is_read_beside_the_robot_file(tmp_path: Path) -> None:
    (tmp_path / "robot.urdf").write_text(URDF, encoding="utf-8")
    robot = tmp_path / "robot.toml"
    robot.write_text('[ros2]\nurdf = "robot.urdf"\n')
    s = load_ros2(robot)
    assert (s.urdf, s.robot_description) == (str(tmp_path / "robot.urdf"), URDF)
    assert URDF not in repr(s)  # a 1 MiB text is not what a settings' repr should print
    assert Ros2Settings().robot_description is None
    with pytest.raises(ConfigError, match=r"^<config>: ros2.urdf: must be the path of a URDF "
                       r"file, got 3$"):
        parse_ros2({"urdf": 3})


@pytest.mark.parametrize(("content", "why"), [
    (None, r"cannot read \S+/robot.urdf: No such file or directory"),
    (b"\xff\xfe<robot/>", r"\S+/robot.urdf is not UTF-8 text \(byte 0 is 0xff\)"),
    (b"<robot>\x00</robot>", r"is not text \(a NUL character at 7\)"),
    (b"x" * (MAX_URDF + 1), rf"is {MAX_URDF + 1} bytes, more than {MAX_URDF}"),
    ("a directory", r"is not a regular file"),
    (b" \n", r"is empty"),
], ids=["missing", "not-utf8", "nul", "too-big", "directory", "empty"])
def test_a_bad_urdf_is_one_error_naming_the_setting_and_nothing_starts(
        tmp_path: Path, content: bytes | str | None, why: str) -> None:
    """The URDF file is untrusted input: read at start, bounded, UTF-8 text; otherwise
    one `error:` line naming ros2.urdf, exit status 2, and no link opened."""
    urdf = tmp_path / "robot.urdf"
    if isinstance(content, bytes):
        urdf.write_bytes(content)
    elif content is not None:
        urdf.mkdir()
    robot = tmp_path / "robot.toml"
    robot.write_text('use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\nurdf = "robot.urdf"\n')
    res = run_cli("bridge", str(robot), "--ros2", "--duration", "5")
    lines = res.stderr.decode().splitlines()
    assert res.returncode == 2 and res.stdout == b"", res.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {robot}: ros2.urdf: "), lines
    assert re.search(why, lines[0]), lines[0]


def test_frame_prefix_of_the_ros2_table() -> None:
    """frame_prefix takes "robot1" or "robot1/" (the usual TF prefix); none by default."""
    assert Ros2Settings().frame("odom") == "odom"
    for given in ("robot1", "robot1/"):
        s = parse_ros2({"frame_prefix": given})
        assert (s.frame("odom"), s.frame("base_link")) == ("robot1/odom", "robot1/base_link")
    assert parse_ros2({"frame_prefix": "site_a/robot1"}).frame("odom") == "site_a/robot1/odom"
    assert parse_ros2({"frame_prefix": ""}).frame("odom") == "odom"


def test_nothing_listens_without_listen() -> None:
    cfg = json.loads(str(zenoh_config(["tcp/127.0.0.1:1"])))
    assert cfg["mode"] == "client" and cfg["listen"]["endpoints"] == []
    assert cfg["scouting"]["multicast"]["enabled"] is False
    assert cfg["timestamping"]["enabled"] is True  # transient_local's advanced publishers
    assert json.loads(str(zenoh_config([], ["tcp/127.0.0.1:0"])))["mode"] == "peer"
    cfg = json.loads(str(router_config(connect=["tcp/10.0.0.2:7447"])))
    assert cfg["connect"]["endpoints"] == ["tcp/10.0.0.2:7447"]
    assert cfg["connect"]["timeout_ms"] == -1 and cfg["connect"]["exit_on_failure"] is False


# -- on loopback ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _router(endpoint: str) -> Any:
    return open_router([endpoint])


@pytest.fixture(scope="module")
def network() -> Iterator[dict[str, Any]]:
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    state: dict[str, Any] = {"endpoint": endpoint, "router": _router(endpoint)}
    fleet = Fleet(4, Ros2Settings(connect=(endpoint,), domain_id=0, urdf="base.urdf",
                                  robot_description=URDF), rate_hz=50.0)
    fleet.start()
    assert fleet.participant is not None and fleet.participant.wait_open(10)
    state["fleet"] = fleet
    try:
        yield state
    finally:
        fleet.stop()
        state["router"].close()


def _echo(endpoint: str, key: str, msgtype: str, count: int) -> list[dict[str, Any]]:
    out = subprocess.run([*PEER, endpoint, "echo", key, msgtype, "--count", str(count)],
                         capture_output=True, text=True, timeout=30, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()[:count]]


def _bridge(fleet: Fleet, ns: str) -> Any:
    return next(b for b in fleet.bridges if b.settings.namespace == ns)


def _wait(pred: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)  # polling: a bounded wait
    return False


@pytest.mark.slow
def test_odometry_decoded_by_an_independent_subscriber(network: dict[str, Any]) -> None:
    (sample,) = _echo(network["endpoint"], "0/robot2/odom/**", "nav_msgs/msg/Odometry", 1)
    assert sample["key"] == GOLDEN["data_odom_jazzy"].replace("robot1", "robot2")
    assert sample["gid_len"] == 16 and len(sample["attachment"]) == 66 and sample["seq"] >= 1
    assert bytes.fromhex(sample["gid"]) == _bridge(network["fleet"], "/robot2").odom_pub.gid
    msg = sample["msg"]
    assert (msg["header"]["frame_id"], msg["child_frame_id"]) == ("robot2/odom",
                                                                  "robot2/base_link")
    assert abs(msg["header"]["stamp"]["sec"] - time.time()) < 60  # ROS time, not monotonic
    (tf,) = _echo(network["endpoint"], "0/tf/**", "tf2_msgs/msg/TFMessage", 1)
    assert tf["msg"]["transforms"][0]["child_frame_id"].endswith("/base_link")
    (diag,) = _echo(network["endpoint"], "0/diagnostics/**",
                    "diagnostic_msgs/msg/DiagnosticArray", 1)
    values = {kv["key"] for kv in diag["msg"]["status"][0]["values"]}
    assert {"frames", "checksum_errors", "watchdog_trips", "reconnects", "link"} <= values


@pytest.mark.slow
def test_cmd_vel_moves_one_robot_and_the_watchdog_stops_it(network: dict[str, Any]) -> None:
    fleet = network["fleet"]
    moving = {"vx": 0.0}
    robot3 = _bridge(fleet, "/robot3")
    others = [_bridge(fleet, ns) for ns in ("/robot1", "/robot2", "/robot4")]
    before = [b.cmd_sub.received for b in others]

    def watch(odom: Any) -> None:
        moving["vx"] = odom.vx

    from fwbridge.bridge.node.sinks import CallbackSink

    sink = CallbackSink(on_odometry=watch)
    robot3.node.sinks.add(sink)
    try:
        trips = robot3.node.stats()["watchdog_trips"]
        subprocess.run([*PEER, network["endpoint"], "pub", "0/robot3/cmd_vel", "0.3", "0", "2"],
                       check=True, timeout=30, capture_output=True)
        assert robot3.cmd_sub.received > 5
        assert _wait(lambda: robot3.node.stats()["watchdog_trips"] > trips)
        assert _wait(lambda: abs(moving["vx"]) < 0.01)  # the base came to rest
    finally:
        robot3.node.sinks.remove(sink)
    assert [b.cmd_sub.received for b in others] == before  # namespaces kept apart


@pytest.mark.slow
def test_base_services_answer_an_independent_client_and_ros2_call(
        network: dict[str, Any]) -> None:
    """~/get_status and ~/stop (std_srvs/srv/Trigger) on each base node: a plain Zenoh
    client in another process gets the status with its own sequence number and GID
    back; `fwbridge ros2 call` too; `ros2 topics` lists the servers."""
    out = subprocess.run([*PEER, network["endpoint"], "call", "0/robot2/base_bridge/get_status"],
                         capture_output=True, text=True, timeout=60, check=True)
    reply = json.loads(out.stdout.splitlines()[0])
    assert reply.get("success") is True, reply
    assert (reply["seq"], reply["gid"]) == (41, reply["sent_gid"])
    status = json.loads(reply["message"])
    assert status["node"] == "robot2/base_bridge" and status["link"] == "up"
    assert status["frames"] > 0 and "operator" in status
    res = run_cli("ros2", "call", "/robot3/base_bridge/stop", "std_srvs/srv/Trigger", "--json",
                  "--connect", network["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"success": True, "message": "zero velocity requested"}
    res = run_cli("ros2", "call", "/robot9/base_bridge/stop", "std_srvs/srv/Trigger",
                  "--timeout", "1", "--connect", network["endpoint"], timeout=60)
    assert res.returncode == 2 and b"no reply within 1 s" in res.stderr, res.stderr
    res = run_cli("ros2", "topics", "--connect", network["endpoint"], timeout=60)
    assert ("/robot1/base_bridge/get_status [std_srvs/srv/Trigger]  servers: 1 "
            "(/robot1/base_bridge)") in res.stdout.decode()


@pytest.mark.slow
def test_tf_static_is_latched_for_a_late_subscriber(network: dict[str, Any]) -> None:
    """Each base publishes robotK/base_link -> robotK/imu_link once on /tf_static
    (transient_local, depth 1); a plain Zenoh advanced subscriber joining long after gets
    every robot's from the publishers' caches, as rmw_zenoh's late joiners do (with tf2's
    static listener's depth, 100: a subscriber's history depth is per key, and every
    robot publishes on the one /tf_static key)."""
    fleet = network["fleet"]
    assert _wait(lambda: all(b._static_sent for b in fleet.bridges))
    token = _bridge(fleet, "/robot1").tf_static_pub.token_key
    assert token.split("/")[-1] == ":1:,1:,:,:,,"  # reliable (default), transient_local, 1
    got = _echo_latched(network["endpoint"], "0/tf_static/**", "tf2_msgs/msg/TFMessage", 4)
    frames = {(t["header"]["frame_id"], t["child_frame_id"])
              for sample in got for t in sample["msg"]["transforms"]}
    assert frames == {(f"robot{k}/base_link", f"robot{k}/imu_link") for k in range(1, 5)}


def _echo_latched(endpoint: str, key: str, msgtype: str, count: int) -> list[dict[str, Any]]:
    out = subprocess.run([*PEER, endpoint, "latched", key, msgtype, "--count", str(count)],
                         capture_output=True, text=True, timeout=60, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()[:count]]


@pytest.mark.slow
def test_robot_description_is_latched_for_a_late_subscriber(network: dict[str, Any]) -> None:
    """With a URDF in the settings each base publishes its text once on its
    robot_description (transient_local, depth 1, as robot_state_publisher); a plain Zenoh
    advanced subscriber joining after that gets it from the publisher's cache."""
    robot2 = _bridge(network["fleet"], "/robot2")
    assert _wait(lambda: robot2._description_sent)
    pub = robot2.description_pub
    assert pub is not None and pub.topic == "/robot2/robot_description"
    assert pub.token_key.split("/")[-1] == ":1:,1:,:,:,,"  # reliable, transient_local, 1
    (got,) = _echo_latched(network["endpoint"], "0/robot2/robot_description/**",
                           "std_msgs/msg/String", 1)
    assert got["key"] == ("0/robot2/robot_description/std_msgs::msg::dds_::String_/"
                          + cdr.type_hash("std_msgs/msg/String"))
    assert got["msg"]["data"] == URDF


def _set_param(endpoint: str, service: str, name: str, value: str) -> dict[str, Any]:
    out = subprocess.run([*PEER, endpoint, "set_param", service, name, value],
                         capture_output=True, text=True, timeout=60, check=True)
    reply: dict[str, Any] = json.loads(out.stdout.splitlines()[0])
    return reply


@pytest.mark.slow
def test_set_watchdog_changes_the_timeout_the_robot_then_stops_after(
        network: dict[str, Any]) -> None:
    """~/set_watchdog (rcl_interfaces/srv/SetParameters, watchdog_timeout in s): a plain
    Zenoh client in another process sets 5 s and is refused outside 0.05..5 s (nothing
    changes); `fwbridge ros2 call` sets 0.1 s; cmd_vel from another process, then none:
    the watchdog trips 0.1 s after the last, counted on the node's clock."""
    from fwbridge.bridge.node.sinks import CallbackSink

    endpoint, robot1 = network["endpoint"], _bridge(network["fleet"], "/robot1")
    service = "0/robot1/base_bridge/set_watchdog"
    events: list[Any] = []
    sink = CallbackSink(on_event=events.append)
    robot1.node.sinks.add(sink)
    try:
        reply = _set_param(endpoint, service, "watchdog_timeout", "5.0")
        assert reply["results"] == [{"successful": True,
                                     "reason": "watchdog_timeout 5 s (was 0.5 s)"}], reply
        assert (reply["seq"], reply["gid"]) == (7, reply["sent_gid"])
        assert robot1.node.core.cmd_timeout == robot1.node.config.cmd_timeout == 5.0
        for name, value, why in (
                ("watchdog_timeout", "10.0", "must be 0.05 to 5 s, got 10: unchanged"),
                ("watchdog_timeout", "0.01", "must be 0.05 to 5 s, got 0.01: unchanged"),
                ("watchdog_timeout", "nan", "must be finite, got nan: unchanged"),
                ("watchdog_timeout", "1", "is a double (ParameterValue type 3), got integer "
                 "(write 1.0, not 1): unchanged"),
                ("speed", "1.0", "unknown parameter 'speed'")):
            (result,) = _set_param(endpoint, service, name, value)["results"]
            assert result["successful"] is False and why in result["reason"], result
        assert robot1.node.core.cmd_timeout == 5.0
        res = run_cli("ros2", "call", "/robot1/base_bridge/set_watchdog",
                      "rcl_interfaces/srv/SetParameters",
                      "{parameters: [{name: watchdog_timeout, value: {type: 3, double_value: "
                      "0.1}}]}", "--json", "--connect", endpoint, timeout=60)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == {"results": [
            {"successful": True, "reason": "watchdog_timeout 0.1 s (was 5 s)"}]}
        assert robot1.cmd_sub.freshness is not None
        assert robot1.cmd_sub.freshness.max_age_ns == 100_000_000  # stale cmd_vel: 0.1 s too
        received = robot1.cmd_sub.received
        subprocess.run([*PEER, endpoint, "pub", "0/robot1/cmd_vel", "0.2", "0", "1.5",
                        "--rate", "50"], check=True, timeout=30, capture_output=True)
        assert robot1.cmd_sub.received > received + 5

        def holding() -> bool:  # the last word after the last cmd_vel: the watchdog's
            kinds = [e.kind for e in events if e.kind in ("watchdog", "resumed")]
            return bool(kinds) and kinds[-1] == "watchdog"

        assert _wait(holding)
        trip = [e for e in events if e.kind == "watchdog"][-1]
        found = re.search(r"no velocity request for ([\d.]+) s \(cmd_timeout 0.1 s\)",
                          trip.message)
        assert found is not None, trip.message
        assert 0.1 <= float(found.group(1)) < 5.0  # the node's clock: the new timeout, not 5 s
        sets = [e.message for e in events if e.kind == "watchdog-set"]
        assert sets == ["watchdog: cmd_timeout 0.5 s -> 5 s",
                        "watchdog: cmd_timeout 5 s -> 0.1 s"]
        res = run_cli("ros2", "topics", "--connect", endpoint, timeout=60)
        assert ("/robot1/base_bridge/set_watchdog [rcl_interfaces/srv/SetParameters]  "
                "servers: 1 (/robot1/base_bridge)") in res.stdout.decode()
    finally:
        robot1.node.sinks.remove(sink)
        robot1.node.set_cmd_timeout(0.5)  # the module's fleet, as the other tests expect it
        robot1.cmd_sub.set_max_age(0.5)


@pytest.mark.slow
def test_bad_cmd_vel_is_counted_and_dropped(network: dict[str, Any]) -> None:
    robot4 = _bridge(network["fleet"], "/robot4")
    sub = robot4.cmd_sub
    m0, r0 = sub.malformed, sub.refused
    subprocess.run([*PEER, network["endpoint"], "pub", "0/robot4/cmd_vel", "0", "0", "0.5",
                    "--raw", "000100000102"], check=True, timeout=30, capture_output=True)
    assert _wait(lambda: sub.malformed > m0)
    subprocess.run([*PEER, network["endpoint"], "pub", "0/robot4/cmd_vel", "nan", "0", "0.5"],
                   check=True, timeout=30, capture_output=True)
    subprocess.run([*PEER, network["endpoint"], "pub", "0/robot4/cmd_vel", "1e9", "0", "0.5"],
                   check=True, timeout=30, capture_output=True)
    assert _wait(lambda: sub.refused > r0 + 1)
    assert robot4.node.running and robot4.node.core.target(robot4.node.clock()).vx == 0.0


@pytest.mark.slow
def test_ros2_topics_lists_the_fleet(network: dict[str, Any]) -> None:
    res = run_cli("ros2", "topics", "--json", "--connect", network["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    pubs = {(r["topic"], r["node"]) for r in rows if r["kind"] == "MP"}
    for k in range(1, 5):
        assert (f"/robot{k}/odom", f"/robot{k}/base_bridge") in pubs
        assert {"kind": "MS", "topic": f"/robot{k}/cmd_vel", "type": "geometry_msgs/msg/Twist"
                }.items() <= next(r for r in rows if r["topic"] == f"/robot{k}/cmd_vel").items()


@pytest.mark.slow
def test_a_router_that_comes_and_goes_is_survived(network: dict[str, Any]) -> None:
    fleet = network["fleet"]
    robot1 = _bridge(fleet, "/robot1")
    network["router"].close()
    frames = robot1.node.stats()["frames"]
    assert _wait(lambda: not fleet.participant.reachable())
    assert _wait(lambda: robot1.node.stats()["frames"] > frames + 20)  # still bridging serial
    network["router"] = _router(network["endpoint"])
    assert _wait(lambda: fleet.participant.reachable(), 15)
    (sample,) = _echo(network["endpoint"], "0/robot1/odom/**", "nav_msgs/msg/Odometry", 1)
    assert sample["msg"]["child_frame_id"] == "robot1/base_link"


@pytest.mark.slow
def test_bridge_without_a_router_says_so_and_bridges(tmp_path: Path) -> None:
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    robot = tmp_path / "robot.toml"
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'namespace = "/robot9"\nconnect = ["{endpoint}"]\n')
    res = run_cli("bridge", str(robot), "--ros2", "--duration", "2.5", "--every", "1000")
    assert res.returncode == 0, res.stderr
    err = res.stderr.decode()
    assert err.count("no Zenoh router reachable") == 1
    assert "start one: fwbridge ros2 router" in err
    assert "odometry_published=0" in err and "frames=" in err and " frames=0 " not in err


def test_ros2_pub_refuses_bad_input() -> None:
    res = run_cli("ros2", "pub", "/robot1/cmd_vel", "geometry_msgs/msg/Twist",
                  "{linear: {x: .nan}}", "--connect", "tcp/127.0.0.1:1")
    assert res.returncode == 2 and b"error: cmd_vel: linear.x is not finite" in res.stderr
    res = run_cli("ros2", "pub", "/x", "geometry_msgs/msg/Twist", "{linear: {w: 1}}")
    assert res.returncode == 2 and b"unknown field 'w'" in res.stderr


@pytest.mark.slow
def test_demo_drives_the_square_through_ros2() -> None:
    res = run_cli("demo", "--ros2", "--side", "0.3", "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    end = json.loads(res.stdout.splitlines()[-1])
    assert end["completed"] and end["bridge"]["cmd_vel_received"] > 100
    assert end["bridge"]["odom_received_by_driver"] > 100
    assert end["truth_closing_m"] < end["tolerance_m"]


@pytest.mark.slow
def test_arm_joint_states_and_module_health() -> None:
    """joint_states from the simulated arm's feedback, and each CAN module's health, as a
    subscriber on the same domain decodes them."""
    import can

    from fwbridge.bridge.robots.arm.can_arm import ArmLink, arm_specs, run_modules
    from fwbridge.bridge.robots.arm.kinematics import ScaraGeometry
    from fwbridge.bridge.ros2.arm import Ros2Arm, arm_link_health
    from fwbridge.bridge.ros2.participant import Participant

    geom = ScaraGeometry()
    kw = {"interface": "fwbridge", "channel": f"ros2-arm-{time.monotonic_ns()}",
          "pacing": "afap"}
    host = can.Bus(**kw)
    modules, buses = run_modules(lambda: can.Bus(**kw), geom)
    link = ArmLink(host, arm_specs(geom))
    got: dict[str, list[Any]] = {"joints": [], "diag": []}
    with Participant(connect=(), mode="peer") as p:
        watcher = p.node("watcher")
        watcher.subscription("/joint_states", "sensor_msgs/msg/JointState", got["joints"].append)
        watcher.subscription("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray",
                             got["diag"].append)
        arm = Ros2Arm(p)
        try:
            for step in range(50):
                now = step * 0.01
                host.advance_to(now)  # type: ignore[attr-defined]
                for m in modules[:4]:  # the gripper module (5) stays silent
                    m.step(now)
                link.poll(now)
            names = {s.module_id: s.name for s in arm_specs(geom)}
            arm.publish_joints({names[k]: v for k, v in sorted(link.values.items())})
            arm.publish_health(arm_link_health(link, 0.5))
            assert _wait(lambda: got["joints"] and got["diag"], 5)
        finally:
            for b in (host, *buses):
                b.shutdown()
    js = got["joints"][0]
    assert js.name == ["theta1", "theta2", "d3", "theta4"] and len(js.position) == 4
    levels = {s.hardware_id: s.level for s in got["diag"][0].status}
    assert levels == {"can:1": 0, "can:2": 0, "can:3": 0, "can:4": 0, "can:5": 3}


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_fleet_stops_cleanly_on_a_signal(sig: str) -> None:
    import signal

    from tests.helpers import cli_env, fwbridge_argv

    proc = subprocess.Popen([*fwbridge_argv(), "fleet", "2", "--connect",
                             f"tcp/127.0.0.1:{_free_port()}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert "2 simulated bases" in line, line  # printed inside its loop's stop block: ready
    proc.send_signal(getattr(signal, sig))
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + getattr(signal, sig), err  # the stop convention
    text = err.decode()
    assert "fleet /robot1: commands=" in text and "fleet /robot2: commands=" in text


def test_humble_publishes_without_type_hash() -> None:
    """distro = "humble": keys and tokens carry TypeHashNotSupported, samples still flow."""
    from fwbridge.bridge.ros2.participant import Participant

    got: list[Any] = []
    with Participant(connect=(), mode="peer", distro="humble") as p:
        node = p.node("humble_node", "/r")
        node.subscription("chatter", "std_msgs/msg/String", got.append)
        pub = node.publisher("chatter", "std_msgs/msg/String")
        assert pub.key == GOLDEN["data_chatter_humble"].replace("0/chatter", "0/r/chatter")
        assert pub.token_key.split("/")[11] == "TypeHashNotSupported"
        assert _wait(lambda: (pub.publish(plain_data.message_from_dict(
            "std_msgs/msg/String", {"data": "hi"}, "humble")), bool(got))[1], 5)
    assert got[0].data == "hi"


@pytest.mark.slow
def test_bridge_cli_with_ros2_takes_cmd_vel(tmp_path: Path) -> None:
    """`fwbridge bridge robot.toml --ros2` with a router: cmd_vel from another process
    drives it, the watchdog stops it when cmd_vel stops."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = _router(endpoint)
    robot = tmp_path / "robot.toml"
    (tmp_path / "robot7.urdf").write_text(URDF, encoding="utf-8")
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'namespace = "/robot7"\nconnect = ["{endpoint}"]\nurdf = "robot7.urdf"\n')
    try:
        from tests.helpers import cli_env, fwbridge_argv, wait_for_line

        proc = subprocess.Popen([*fwbridge_argv(), "bridge", str(robot), "--ros2", "--duration",
                                 "6", "--every", "1000"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT)
        ready = wait_for_line(proc, "ROS 2 node ", 60)  # its cmd_vel subscriber is declared
        subprocess.run([*PEER, endpoint, "pub", "0/robot7/cmd_vel", "0.2", "0", "1.5"],
                       check=True, timeout=30, capture_output=True)
        _out, err = proc.communicate(timeout=60)
    finally:
        router.close()
    text = err.decode()
    assert proc.returncode == 0, text
    assert "ROS 2 node /robot7/base_bridge" in ready and "sending zero velocity" in text
    assert ready.rstrip().endswith(", /robot7/robot_description"), ready
    counters = dict(kv.split("=") for kv in text.split("ros2: ")[1].split())
    assert int(counters["cmd_vel_received"]) > 5 and int(counters["odometry_published"]) > 50


# -- the router, and what is said about it ------------------------------------------------------
def test_router_config_mirrors_rmw_zenohd() -> None:
    """rmw_zenohd's default config where it matters, but on loopback by default."""
    cfg = json.loads(str(router_config()))
    assert DEFAULT_LISTEN == ("tcp/127.0.0.1:7447",)
    assert cfg["mode"] == "router" and cfg["listen"]["endpoints"] == ["tcp/127.0.0.1:7447"]
    assert cfg["connect"]["endpoints"] == []
    assert cfg["scouting"]["multicast"]["enabled"] is False
    assert cfg["timestamping"]["enabled"] is True  # rmw_zenoh's transient_local caches
    assert cfg["adminspace"]["permissions"] == {"read": True, "write": False}
    for local in ("tcp/127.0.0.1:7447", "tcp/[::1]:7447", "tcp/localhost:7447",
                  "udp/127.0.0.2:7447", "unixsock-stream//tmp/zenoh.sock"):
        assert is_loopback_address(local), local
    for remote in ("tcp/0.0.0.0:7447", "tcp/[::]:7447", "tcp/192.168.1.10:7447",
                   "tcp/no-such-host.invalid:7447"):
        assert not is_loopback_address(remote), remote


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_ros2_router_routes_between_clients_until_a_signal(sig: str) -> None:
    """`fwbridge ros2 router`: one readiness line, two client sessions (which only reach
    each other through a router) exchange a message, a signal ends it with 128 + N."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    proc = spawn_verb("ros2", "router", "--listen", endpoint, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    with reaped(proc):
        lines = Lines(proc.stderr)
        assert lines.wait_for("router: listening on") == f"router: listening on {endpoint}\n"
        got: list[Any] = []
        with Participant(connect=(endpoint,), wait=10) as a, \
                Participant(connect=(endpoint,), wait=10) as b:
            assert a.is_open and b.is_open and a.connections() == (1, 0)
            b.node("listener").subscription("/chatter", "std_msgs/msg/String", got.append)
            pub = a.node("talker").publisher("/chatter", "std_msgs/msg/String")
            hello = plain_data.message_from_dict("std_msgs/msg/String", {"data": "through"})
            assert _wait(lambda: (pub.publish(hello), bool(got))[1], 10)
        assert got[0].data == "through"
        proc.send_signal(getattr(signal, sig))
        assert proc.wait(timeout=30) == 128 + getattr(signal, sig)
        err = lines.rest()
    assert "warning" not in err and "Traceback" not in err, err


def test_ros2_router_warns_off_loopback_and_refuses_what_it_cannot_open() -> None:
    # 198.51.100.0/24 is documentation space: never this machine's, so nothing listens
    far = f"tcp/198.51.100.7:{_free_port()}"
    res = run_cli("ros2", "router", "--listen", far)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert f"warning: router: {far} is not a loopback address" in err
    assert f"error: router: cannot listen on {far}: Cannot assign requested address" in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = f"tcp/127.0.0.1:{busy.getsockname()[1]}"
        res = run_cli("ros2", "router", "--listen", taken)
    err = res.stderr.decode()
    assert res.returncode == 2 and err.splitlines() == [
        f"error: router: cannot listen on {taken}: Address already in use"], err
    res = run_cli("ros2", "router", "--listen", "127.0.0.1:7447")
    assert res.returncode == 2 and b"error: --listen: not a Zenoh endpoint" in res.stderr
    res = run_cli("ros2", "router", "--connect", "10.0.0.2:7447")
    assert res.returncode == 2 and b"error: --connect: not a Zenoh endpoint" in res.stderr


@pytest.mark.slow
def test_no_router_messages_say_how_to_start_one() -> None:
    nowhere = f"tcp/127.0.0.1:{_free_port()}"
    for args in (("ros2", "topics", "--connect", nowhere), ("arm", "pick-place", "--ros2",
                                                             nowhere)):
        res = run_cli(*args, timeout=60)
        err = res.stderr.decode()
        assert res.returncode == 2, err
        assert f"error: no Zenoh router reachable at {nowhere} (start one: fwbridge ros2 " \
               "router)" in err, err


@pytest.mark.slow
def test_fleet_with_listen_says_peers_may_connect_and_they_do() -> None:
    """With --listen the fleet is a peer others reach directly: it says so (not that no
    router is reachable, as if nothing could get its samples), and a peer gets them."""
    here, nowhere = (f"tcp/127.0.0.1:{_free_port()}" for _ in range(2))
    proc = spawn_verb("fleet", "1", "--listen", here, "--connect", nowhere,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with reaped(proc):
        lines = Lines(proc.stderr)
        assert f"listening on {here}" in lines.wait_for("simulated bases")
        said = lines.wait_for("Zenoh")  # the first word on reachability, ~1 s in
        assert "no Zenoh router reachable" not in said, said
        assert f"listening on {here} for peers" in said and nowhere in said, said
        assert "fwbridge ros2 router" in said, said
        (sample,) = _echo(here, "0/robot1/odom/**", "nav_msgs/msg/Odometry", 1)
        assert sample["msg"]["child_frame_id"] == "robot1/base_link"
        with Participant(connect=(here,), mode="peer"):  # one that stays: the fleet sees it
            said = lines.wait_for("Zenoh connected")
        assert f"1 peer(s) on {here}" in said and "ROS 2 node /robot1/base_bridge" in said, said
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
        assert "fleet /robot1: commands=" in lines.rest()


# -- a fleet's robots apart ---------------------------------------------------------------------
@pytest.mark.slow
def test_fleet_robots_keep_their_own_frames_and_diagnostics(network: dict[str, Any]) -> None:
    """Every robot's transform is robotK/odom -> robotK/base_link on the shared /tf, and
    its diagnostics name it, so neither a TF listener nor an aggregator mixes them up."""
    parents: dict[str, set[str]] = {}
    for sample in _echo(network["endpoint"], "0/tf/**", "tf2_msgs/msg/TFMessage", 200):
        for tf in sample["msg"]["transforms"]:
            parents.setdefault(tf["child_frame_id"], set()).add(tf["header"]["frame_id"])
    assert parents == {f"robot{k}/base_link": {f"robot{k}/odom"} for k in range(1, 5)}
    names, hardware = set(), set()
    for sample in _echo(network["endpoint"], "0/diagnostics/**",
                        "diagnostic_msgs/msg/DiagnosticArray", 16):
        for status in sample["msg"]["status"]:
            names.add(status["name"])
            hardware.add(status["hardware_id"])
    assert names == {f"robot{k}/base_bridge: {what}" for k in range(1, 5)
                     for what in ("base link", "cmd_vel")}
    from fwbridge.bridge.ros2.fleet import SIM_URL

    assert SIM_URL.startswith("sim://mecanum")
    assert hardware == {f"robot{k}:{SIM_URL}" for k in range(1, 5)}


@pytest.mark.slow
def test_ros2_echo_prints_fields_not_constants(network: dict[str, Any]) -> None:
    """DiagnosticStatus's OK/WARN/ERROR/STALE are constants of the type, not fields."""
    res = run_cli("ros2", "echo", "/diagnostics", "--json", "--count", "1", "--connect",
                  network["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    status = json.loads(res.stdout.splitlines()[0])["status"][0]
    assert set(status) == {"level", "name", "message", "hardware_id", "values"}
    res = run_cli("ros2", "echo", "/diagnostics", "--count", "1", "--connect",
                  network["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    text = res.stdout.decode()
    assert "hardware_id:" in text and "STALE" not in text and "OK:" not in text, text


@pytest.mark.slow
def test_frame_prefix_of_a_robot_file_names_odometry_tf_and_diagnostics() -> None:
    from fwbridge.bridge.node.base_node import BaseNode
    from fwbridge.bridge.node.config import RobotConfig
    from fwbridge.bridge.ros2.base import Ros2Base

    settings = parse_ros2({"namespace": "/r9", "frame_prefix": "site_a/r9"})
    got: dict[str, list[Any]] = {"odom": [], "tf": [], "diag": []}
    offer_sim()
    node = BaseNode(RobotConfig(sim_url="sim://mecanum", use_sim=True, source="<test>"))
    with Participant(connect=(), mode="peer") as p:
        watcher = p.node("watcher")
        watcher.subscription("/r9/odom", "nav_msgs/msg/Odometry", got["odom"].append)
        watcher.subscription("/tf", "tf2_msgs/msg/TFMessage", got["tf"].append)
        watcher.subscription("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray",
                             got["diag"].append)
        node.start()
        bridge = Ros2Base(node, settings, participant=p, say=lambda _t: None)
        bridge.start()
        try:
            assert _wait(lambda: all(got.values()), 10)
        finally:
            bridge.stop()
            node.stop()
    odom, tf = got["odom"][0], got["tf"][0].transforms[0]
    assert (odom.header.frame_id, odom.child_frame_id) == ("site_a/r9/odom",
                                                           "site_a/r9/base_link")
    assert (tf.header.frame_id, tf.child_frame_id) == ("site_a/r9/odom", "site_a/r9/base_link")
    status = got["diag"][0].status[0]
    assert (status.name, status.hardware_id) == ("r9/base_bridge: base link",
                                                 "r9:sim://mecanum")


@pytest.mark.slow
def test_ros2_sink_on_the_asyncio_runtime_publishes_and_takes_cmd_vel() -> None:
    """The same ROS 2 sink on AsyncBaseNode (sim://mecanum): odom and /tf reach a Zenoh
    subscriber, cmd_vel from another node moves the base."""
    import asyncio

    from fwbridge.bridge.node.aio import AsyncBaseNode
    from fwbridge.bridge.node.config import RobotConfig
    from fwbridge.bridge.ros2.base import Ros2Base

    settings = parse_ros2({"namespace": "/a1"})
    got: dict[str, list[Any]] = {"odom": [], "tf": []}
    offer_sim()
    node = AsyncBaseNode(RobotConfig(sim_url="sim://mecanum", use_sim=True, source="<test>",
                                     cmd_timeout=30.0), on_event=None)
    with Participant(connect=(), mode="peer") as p:
        watcher = p.node("watcher")
        watcher.subscription("/a1/odom", "nav_msgs/msg/Odometry", got["odom"].append)
        watcher.subscription("/tf", "tf2_msgs/msg/TFMessage", got["tf"].append)
        cmd = watcher.publisher("/a1/cmd_vel", "geometry_msgs/msg/Twist")
        types = cdr.typestore().types
        vec = types["geometry_msgs/msg/Vector3"]
        bridge = Ros2Base(node, settings, participant=p, say=lambda _t: None)

        async def drive() -> bool:
            task = asyncio.create_task(node.run())
            for _ in range(1000):
                if node.connected:
                    break
                await asyncio.sleep(0.01)  # polling: the node links up on the loop
            bridge.start()
            moved = False
            for _ in range(500):
                cmd.publish(types["geometry_msgs/msg/Twist"](
                    linear=vec(x=0.3, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=0.0)))
                await asyncio.sleep(0.02)  # pacing: cmd_vel at 50 Hz, as a teleop sends it
                if any(o.twist.twist.linear.x > 0.1 for o in got["odom"]):
                    moved = True
                    break
            node.stop()
            await asyncio.wait_for(task, 10.0)
            return moved

        try:
            moved = asyncio.run(drive())
        finally:
            bridge.stop()
    assert moved, got["odom"][-3:]
    assert got["tf"] and got["tf"][0].transforms[0].child_frame_id == "base_link"
    assert bridge.published >= len(got["odom"]) > 0
    assert bridge.stats()["cmd_vel_received"] > 0
    assert node.stats()["sink_errors"] == 0


@pytest.mark.slow
def test_the_three_lines_of_the_docs(tmp_path: Path) -> None:
    """README's and docs/ROS2.md's three lines, each the CLI in its own process: the
    router, a bridge with `--ros2`, and `ros2 echo` of its odometry (on a free port
    instead of 7447, so the test never meets another router)."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    robot = tmp_path / "robot.toml"
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'namespace = "/robot1"\nconnect = ["{endpoint}"]\n')
    router = spawn_verb("ros2", "router", "--listen", endpoint, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    with reaped(router):
        assert Lines(router.stderr).wait_for("router: listening on")
        bridge = spawn_verb("bridge", str(robot), "--ros2", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        with reaped(bridge):
            bridge_err = Lines(bridge.stderr)
            bridge_err.wait_for("ROS 2 node /robot1/base_bridge")
            echo = run_cli("ros2", "echo", "/robot1/odom", "--json", "--count", "1",
                           "--connect", endpoint, timeout=60)
            bridge.send_signal(signal.SIGINT)
            assert bridge.wait(timeout=30) == 130
            assert "odometry_published=" in bridge_err.rest()
        router.send_signal(signal.SIGINT)
        assert router.wait(timeout=30) == 130
    assert echo.returncode == 0, echo.stderr.decode()
    msg = json.loads(echo.stdout.splitlines()[0])
    assert msg["header"]["frame_id"] == "odom" and msg["child_frame_id"] == "base_link"


def test_ros2_pub_refuses_out_of_range_numbers_and_bad_names() -> None:
    """Out-of-range values name their field (exit 2), and topic names follow ROS's rules,
    checked before anything reaches Zenoh."""
    for args, says in [
        (["/x", "std_msgs/msg/UInt8", "{data: 256}"], "data: 256 is out of range for uint8"),
        (["/x", "std_msgs/msg/Int8", "{data: -129}"], "out of range for int8"),
        (["/x", "std_msgs/msg/Float32", "{data: 1.0e39}"], "out of range for float32"),
        (["/robot1/**", "std_msgs/msg/String"], "'*' is not allowed"),
        (["/robot1/cmd vel", "std_msgs/msg/String"], "' ' is not allowed"),
        (["/robot1//cmd_vel", "std_msgs/msg/String"], "must not hold '//'"),
        (["/robot1/", "std_msgs/msg/String"], "must not end with '/'"),
        (["/1robot/odom", "std_msgs/msg/String"], "must not start with a digit"),
    ]:
        res = run_cli("ros2", "pub", *args, "--connect", "tcp/127.0.0.1:9")
        err = res.stderr.decode()
        assert res.returncode == 2 and err.startswith("error: ") and says in err, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
    res = run_cli("ros2", "echo", "/robot1/**", "--connect", "tcp/127.0.0.1:9")
    assert res.returncode == 2 and "'*' is not allowed" in res.stderr.decode()


def test_ros2_echo_piped_to_head_ends_quietly(network: dict[str, Any]) -> None:
    """`ros2 echo ... | head -1`: the reader goes away, echo ends with 0 and says nothing."""
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {' '.join(fwbridge_argv())} ros2 echo /robot1/odom "
                       f"--json --connect {network['endpoint']} | head -1"],
        capture_output=True, timeout=60, env=cli_env(), cwd=ROOT)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert json.loads(proc.stdout.decode())["child_frame_id"].endswith("base_link")
    assert "Traceback" not in err and "BrokenPipe" not in err and "error" not in err, err
