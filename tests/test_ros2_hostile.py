"""ROS 2 over Zenoh against hostile and unusual peers: requests beyond bounds, floods of
malformed requests, rclpy's own bytes, the attachment of earlier rmw_zenoh releases.

The nodes are fwbridge's (a fleet's base in this process, ``fwbridge fish serve`` in
its own); the clients are plain Zenoh sessions speaking rmw_zenoh's conventions
(tests/ros2_peer.py's session, keys and hashes: no fwbridge code on their side), on
a router on loopback, a free port.
"""

from __future__ import annotations

import json
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

zenoh = pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from zenoh.ext import Int64, z_deserialize, z_serialize  # noqa: E402

from fwbridge.bridge.ros2 import keys, services  # noqa: E402
from fwbridge.bridge.ros2.base_parameters import MAX_PARAMETERS  # noqa: E402
from fwbridge.bridge.ros2.config import Ros2Settings  # noqa: E402
from fwbridge.bridge.ros2.fleet import Fleet  # noqa: E402
from fwbridge.bridge.ros2.router import open_router  # noqa: E402
from fwbridge.bridge.rosmsg import cdr  # noqa: E402
from tests.helpers import Lines, reaped, spawn_verb  # noqa: E402
from tests.ros2_peer import SET_PARAMETERS_HASH, TRIGGER_HASH, session  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
RCLPY = json.loads((FIXTURES / "rclpy_golden.json").read_text())["requests"]
SET_PARAMETERS = "rcl_interfaces::srv::dds_::SetParameters_/" + SET_PARAMETERS_HASH
TRIGGER = "std_srvs::srv::dds_::Trigger_/" + TRIGGER_HASH
GID = bytes(range(100, 116))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _attachment(seq: int = 5, keyed: bool = False) -> bytes:
    if keyed:  # the layout of earlier rmw_zenoh releases, by Zenoh's own serializer
        return bytes(z_serialize(("sequence_number", Int64(seq), "source_timestamp",
                                  Int64(time.time_ns()), "source_gid", GID)).to_bytes())
    return struct.pack("<qqB16s", seq, time.time_ns(), 16, GID)


def _ask(s: Any, key: str, payload: bytes, attachment: bytes | None = None,
         timeout: float = 10.0) -> tuple[str, bytes, bytes]:
    """One query as rmw_zenoh's clients send it: ("ok", payload, attachment), ("err",
    text, b"") or ("none", b"", b"")."""
    att = _attachment() if attachment is None else attachment
    for reply in s.get(key, payload=payload, attachment=att, timeout=timeout):
        if reply.ok is not None:
            ratt = reply.ok.attachment
            return "ok", reply.ok.payload.to_bytes(), b"" if ratt is None else ratt.to_bytes()
        if reply.err is not None:
            return "err", reply.err.payload.to_bytes(), b""
    return "none", b"", b""


def _served(s: Any, key: str, timeout: float = 20.0) -> None:
    """Until the service answers a Trigger (its queryable's route is in)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _ask(s, key, bytes([0, 1, 0, 0, 0]), timeout=1.0)[0] == "ok":
            return
    raise AssertionError(f"{key} never answered")


def _set_parameters(params: list[tuple[str, float]]) -> bytes:
    req = services.parameters_request(dict(params))
    return cdr.serialize(req, services.SET_PARAMETERS + "_Request")


def _results(data: bytes) -> list[tuple[bool, str]]:
    services.register(services.SET_PARAMETERS)
    resp = cdr.deserialize(data, services.SET_PARAMETERS + "_Response")
    return [(bool(r.successful), str(r.reason)) for r in resp.results]


# -- pure ----------------------------------------------------------------------------------
def test_a_request_is_bounded_before_it_is_decoded() -> None:
    """Bytes and the count of a leading sequence, from the CDR's header and length only."""
    one = _set_parameters([("watchdog_timeout", 0.2)])
    assert services.request_refusal(services.SET_PARAMETERS, one) is None
    many = one[:4] + struct.pack("<I", 400_000)  # says 400k parameters, holds none
    assert services.request_refusal(services.SET_PARAMETERS, many, max_items=16) == (
        "request of 400000 items, at most 16")
    big = b"\x00\x01\x00\x00" + bytes(25 << 20)
    assert services.request_refusal("std_srvs/srv/Trigger", big) == (
        f"request of {len(big)} bytes, at most {services.MAX_REQUEST}")
    assert services.leading_sequence(services.SET_PARAMETERS)
    assert not services.leading_sequence("std_srvs/srv/SetBool")


def test_throttle_says_at_most_one_line_a_second_with_the_count_since() -> None:
    t = services.Throttle(1.0)
    said = [t.hit(0.001 * i) for i in range(3000)]  # 3000 in 3 s
    assert [n for n in said if n] == [1, 1000, 1000]
    assert t.flush() == 999 and t.flush() == 0 and t.total == 3000


def test_set_parameters_as_rclpy_serializes_them_are_read() -> None:
    """rclpy's serialize_message: the message, then the rest of rmw_fastrtps's estimated
    buffer (padding nobody zeroed); read as Fast CDR reads it."""
    services.register(services.SET_PARAMETERS)
    for case in RCLPY.values():
        data = bytes.fromhex(case["hex"])
        msg = cdr.deserialize(data, services.SET_PARAMETERS + "_Request")
        assert [services.typed_parameter_value(p) for p in msg.parameters] == [
            (name, value) for name, _kind, value in case["params"]]
    data = bytes.fromhex(RCLPY["watchdog_timeout_0.2"]["hex"])
    assert len(data) == 88
    # more after the message than it holds is not padding
    with pytest.raises(cdr.MessageError, match="more than padding"):
        cdr.deserialize(data + bytes(100), services.SET_PARAMETERS + "_Request")
    for cut in (70, 20):  # inside a number, inside the name
        with pytest.raises(cdr.MessageError, match="malformed CDR"):
            cdr.deserialize(data[:cut], services.SET_PARAMETERS + "_Request")


def test_the_keyed_attachment_of_earlier_rmw_zenoh_releases_is_read_and_written() -> None:
    att = _attachment(seq=9, keyed=True)
    decoded = keys.Attachment.decode(att)
    assert (decoded.sequence_number, decoded.source_gid, decoded.keyed) == (9, GID, True)
    assert decoded.encode() == att
    assert not keys.Attachment.decode(_attachment(seq=9)).keyed
    for bad in (att[:-1], att.replace(b"source_gid", b"source_gix"), b""):
        with pytest.raises(cdr.MessageError):
            keys.Attachment.decode(bad)


# -- a base node's services ----------------------------------------------------------------
@pytest.fixture(scope="module")
def base() -> Iterator[dict[str, Any]]:
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = open_router([endpoint])
    fleet = Fleet(1, Ros2Settings(connect=(endpoint,), domain_id=0), rate_hz=50.0)
    try:
        fleet.start()
        s = session(endpoint)
        try:
            _served(s, "0/robot1/base_bridge/get_status/" + TRIGGER)
            yield {"session": s, "fleet": fleet, "bridge": fleet.bridges[0], "endpoint": endpoint,
                   "set_watchdog": "0/robot1/base_bridge/set_watchdog/" + SET_PARAMETERS,
                   "get_status": "0/robot1/base_bridge/get_status/" + TRIGGER}
        finally:
            s.close()
    finally:
        fleet.stop()
        router.close()


def test_an_oversized_set_watchdog_is_refused_unread_with_a_reason(
        base: dict[str, Any]) -> None:
    """100k parameters (7 MB) and a request that only says 400k: error replies naming
    the bound, nothing decoded, nothing changed; the node goes on answering."""
    bridge = base["bridge"]
    before = bridge.node.config.cmd_timeout
    refused = bridge.watchdog_srv.refused
    one = _set_parameters([("watchdog_timeout", 0.2)])
    param = one[8:]  # one Parameter's CDR, a multiple of 8 bytes: it repeats aligned
    assert len(param) % 8 == 0
    huge = one[:4] + struct.pack("<I", 100_000) + param * 100_000
    kind, text, _ = _ask(base["session"], base["set_watchdog"], huge, timeout=30)
    assert kind == "err", (kind, text[:200])
    assert f"request of {len(huge)} bytes, at most {services.MAX_REQUEST}".encode() in text
    liar = one[:4] + struct.pack("<I", 400_000) + param
    kind, text, _ = _ask(base["session"], base["set_watchdog"], liar)
    assert kind == "err" and b"request of 400000 items, at most 16" in text, text
    seventeen = one[:4] + struct.pack("<I", MAX_PARAMETERS + 1) + param * (MAX_PARAMETERS + 1)
    kind, text, _ = _ask(base["session"], base["set_watchdog"], seventeen)
    assert kind == "err" and b"items, at most 16" in text, text
    assert bridge.watchdog_srv.refused == refused + 3
    assert bridge.node.config.cmd_timeout == before
    kind, data, _ = _ask(base["session"], base["get_status"], bytes([0, 1, 0, 0, 0]))
    assert kind == "ok"
    assert json.loads(data[12:-1].decode())["requests_refused"] >= 3


def test_fwbridges_own_client_says_the_services_reason(base: dict[str, Any]) -> None:
    """RosClient (``fwbridge ros2 call``) turns the error reply into one error naming
    the reason, at once, not a timeout."""
    from fwbridge.bridge.ros2.participant import Participant

    with Participant(connect=(base["endpoint"],), wait=10.0) as p:
        client = p.node("operator").client("/robot1/base_bridge/set_watchdog",
                                           services.SET_PARAMETERS)
        request = services.parameters_request({f"p{i}": 1.0 for i in range(MAX_PARAMETERS + 1)})
        end, said = time.monotonic() + 20, ""
        while "answered with an error" not in said and time.monotonic() < end:
            try:  # until the route to the service is in
                client.call(request, timeout=2.0)
            except cdr.MessageError as exc:
                said = str(exc)
        assert said == ("/robot1/base_bridge/set_watchdog: the service answered with an "
                        "error: /robot1/base_bridge/set_watchdog: request refused: "
                        "request of 17 items, at most 16"), said


def test_set_watchdog_takes_rclpys_bytes(base: dict[str, Any]) -> None:
    """The 88 bytes real rclpy makes of SetParameters(watchdog_timeout=0.2) set it."""
    data = bytes.fromhex(RCLPY["watchdog_timeout_0.2"]["hex"])
    before = base["bridge"].node.config.cmd_timeout
    kind, payload, _ = _ask(base["session"], base["set_watchdog"], data)
    assert kind == "ok", payload
    assert _results(payload) == [(True, f"watchdog_timeout 0.2 s (was {before:g} s)")]
    assert base["bridge"].node.config.cmd_timeout == pytest.approx(0.2)
    _ask(base["session"], base["set_watchdog"], _set_parameters([("watchdog_timeout", before)]))


def test_a_client_of_an_earlier_rmw_zenoh_gets_its_reply_in_its_layout(
        base: dict[str, Any]) -> None:
    kind, payload, att = _ask(base["session"], base["get_status"], bytes([0, 1, 0, 0, 0]),
                              attachment=_attachment(seq=77, keyed=True))
    assert kind == "ok", payload
    names_values = z_deserialize(tuple[str, Int64, str, Int64, str, bytes],
                                 zenoh.ZBytes(att))
    assert names_values[0::2] == ("sequence_number", "source_timestamp", "source_gid")
    assert names_values[1] == 77 and names_values[5] == GID


def test_a_request_without_rmw_zenohs_attachment_is_refused_with_a_reason(
        base: dict[str, Any]) -> None:
    kind, text, _ = _ask(base["session"], base["get_status"], bytes([0, 1, 0, 0, 0]),
                         attachment=b"\x01\x02")
    assert kind == "err" and b"not an rmw_zenoh attachment (2 bytes: 01 02)" in text, text


def test_a_handler_that_fails_gets_an_error_reply_and_one_line(
        base: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    from fwbridge.bridge.ros2.participant import Participant

    def broken(_request: Any) -> Any:
        raise RuntimeError("a bug\x1b[2J")

    with Participant(connect=(base["endpoint"],), wait=10.0) as p:
        srv = p.node("broken_node").service("~/get_status", "std_srvs/srv/Trigger", broken)
        key = "0/broken_node/get_status/" + TRIGGER
        end, kind, text = time.monotonic() + 20, "none", b""
        with caplog.at_level("WARNING", logger="fwbridge.ros2"):
            while kind != "err" and time.monotonic() < end:  # until its route is in
                kind, text, _ = _ask(base["session"], key, bytes([0, 1, 0, 0, 0]), timeout=1.0)
            for _ in range(20):
                _ask(base["session"], key, bytes([0, 1, 0, 0, 0]))
        assert kind == "err" and b"request failed: RuntimeError: a bug\\x1b[2J" in text, text
        assert srv.failed >= 21 and srv.calls == 0
    said = [r for r in caplog.records if "request(s) failed" in r.getMessage()]
    assert 1 <= len(said) <= 3 and said[0].exc_info is not None, said


def test_malformed_samples_of_every_kind_are_said_once_a_second(
        base: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """Two kinds of bad cmd_vel, alternating: counted, and a line a second, not a line
    each (one line per kind change was 300 lines)."""
    sub = base["bridge"].cmd_sub
    before = sub.malformed
    key = ("0/robot1/cmd_vel/geometry_msgs::msg::dds_::Twist_/"
           f"{cdr.type_hash('geometry_msgs/msg/Twist')}")
    publisher = base["session"].declare_publisher(key)
    try:
        with caplog.at_level("WARNING", logger="fwbridge.ros2"):
            start = time.monotonic()
            for i in range(300):
                publisher.put(b"\x00\x01\x00\x00" if i % 2 else b"\xff",
                              attachment=_attachment(i + 1))
            end = time.monotonic() + 10
            while sub.malformed < before + 300 and time.monotonic() < end:
                time.sleep(0.02)  # polling: the counter, within the deadline
            elapsed = time.monotonic() - start
    finally:
        publisher.undeclare()
    assert sub.malformed == before + 300
    said = [r for r in caplog.records if "sample(s) dropped" in r.getMessage()]
    assert 1 <= len(said) <= elapsed + 2, [r.getMessage() for r in said]


# -- a flood of malformed requests at `fwbridge fish serve` ----------------------------------
def test_a_flood_of_malformed_requests_is_counted_and_said_once_a_second() -> None:
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = open_router([endpoint])
    try:
        proc = spawn_verb("fish", "--port", "sim://fish", "serve", "--namespace", "/fish1",
                          "--connect", endpoint, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        with reaped(proc):
            lines = Lines(proc.stderr)
            lines.wait_for("Zenoh connected")
            s = session(endpoint)
            try:
                status = "0/fish1/fish_bridge/get_status/" + TRIGGER
                _served(s, status)
                key = "0/fish1/fish_bridge/set_config/" + SET_PARAMETERS
                start, sent = time.monotonic(), 0
                while time.monotonic() - start < 2.0 and sent < 5000:
                    s.get(key, payload=b"\x07", attachment=_attachment(sent))
                    sent += 1
                end, report = time.monotonic() + 20, {}
                while time.monotonic() < end:
                    kind, data, _ = _ask(s, status, bytes([0, 1, 0, 0, 0]))
                    if kind == "ok":
                        (n,) = struct.unpack_from("<I", data, 8)
                        report = json.loads(data[12:12 + n - 1])
                        if report.get("requests_refused", -1) >= sent:
                            break
                elapsed = time.monotonic() - start  # the flood sent and taken
            finally:
                s.close()
            proc.terminate()
            err = lines.rest()
    finally:
        router.close()
    said = [line for line in err.splitlines() if "request(s) refused" in line]
    assert sent > 100, sent
    assert "Traceback" not in err, err[-3000:]
    assert report.get("requests_refused") == sent, (report, sent)
    assert 1 <= len(said) <= elapsed + 2, said  # a line a second, and the last at the end
    assert "set_config: 1 request(s) refused since the last report (1 in all); the latest: " \
           "rcl_interfaces/srv/SetParameters_Request: not CDR (header 07)" in said[0], said


# -- the robot file's urdf: its own folder, no link followed -------------------------------
URDF = '<robot name="base"><link name="base_link"/></robot>\n'


@pytest.fixture
def robot_dir(tmp_path: Path) -> Path:
    """A robot's folder, and beside it a private key the robot file must not reach."""
    key = tmp_path / "key.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nsecret\n")
    key.chmod(0o600)
    folder = tmp_path / "robot"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("value", [
    "../key.pem", "sub/../../key.pem", "{tmp}/key.pem", "~/key.pem", "$HOME/key.pem",
], ids=["dotdot", "dotdot-below", "absolute", "home", "variable"])
def test_a_robot_files_urdf_outside_its_folder_is_refused(robot_dir: Path, value: str) -> None:
    from fwbridge.bridge.node.config import ConfigError
    from fwbridge.bridge.ros2.config import load_ros2

    value = value.replace("{tmp}", str(robot_dir.parent))
    robot = robot_dir / "robot.toml"
    robot.write_text(f'[ros2]\nurdf = "{value}"\n')
    with pytest.raises(ConfigError) as err:
        load_ros2(robot)
    text = str(err.value)
    assert text.startswith(f"{robot}: ros2.urdf: {value!r} is not a file in the robot "
                           "file's folder"), text
    assert "--urdf PATH" in text and "secret" not in text


@pytest.mark.parametrize("link", ["robot.urdf", "sub"], ids=["file", "folder-on-the-way"])
def test_a_symbolic_link_on_the_way_to_the_urdf_is_not_followed(robot_dir: Path,
                                                                link: str) -> None:
    from fwbridge.bridge.node.config import ConfigError
    from fwbridge.bridge.ros2.config import load_ros2

    elsewhere = robot_dir.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "robot.urdf").symlink_to(robot_dir.parent / "key.pem")
    if link == "sub":
        (robot_dir / "sub").symlink_to(elsewhere)
    else:
        (robot_dir / "robot.urdf").symlink_to(robot_dir.parent / "key.pem")
    name = "sub/robot.urdf" if link == "sub" else "robot.urdf"
    robot = robot_dir / "robot.toml"
    robot.write_text(f'[ros2]\nurdf = "{name}"\n')
    with pytest.raises(ConfigError, match=rf"ros2.urdf: \S+: {link} is a symbolic link") as err:
        load_ros2(robot)
    assert "secret" not in str(err.value)


def test_a_urdf_below_the_robot_files_folder_is_read(robot_dir: Path) -> None:
    from fwbridge.bridge.ros2.config import load_ros2

    (robot_dir / "description").mkdir()
    (robot_dir / "description" / "robot.urdf").write_text(URDF)
    robot = robot_dir / "robot.toml"
    robot.write_text('[ros2]\nurdf = "./description/robot.urdf"\n')
    s = load_ros2(robot)
    assert s.robot_description == URDF and s.urdf == str(robot_dir / "description/robot.urdf")


def test_the_command_line_names_a_urdf_anywhere(robot_dir: Path) -> None:
    """`--urdf FILE`: the user's own path, read as given (with the same bounds)."""
    from tests.helpers import run_cli

    elsewhere = robot_dir.parent / "shared" / "base.urdf"
    elsewhere.parent.mkdir()
    elsewhere.write_text(URDF)
    robot = robot_dir / "robot.toml"
    endpoint = f"tcp/127.0.0.1:{_free_port()}"  # no router there: the bridge says so, bridges
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'namespace = "/robot9"\nconnect = ["{endpoint}"]\n'
                     f'urdf = "../shared/base.urdf"\n')
    res = run_cli("bridge", str(robot), "--ros2", "--duration", "1", "--every", "1000")
    assert res.returncode == 2 and b"ros2.urdf: '../shared/base.urdf' is not a file" in \
        res.stderr, res.stderr
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'namespace = "/robot9"\nconnect = ["{endpoint}"]\n')
    res = run_cli("bridge", str(robot), "--ros2", "--urdf", str(elsewhere), "--duration", "1",
                  "--every", "1000")
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert "/robot9/robot_description" in err, err
    res = run_cli("bridge", str(robot), "--ros2", "--urdf", str(robot_dir / "none.urdf"),
                  "--duration", "1")
    assert res.returncode == 2 and res.stderr.decode().splitlines() == [
        f"error: --urdf: cannot read {robot_dir / 'none.urdf'}: No such file or directory"]


# -- listening beyond loopback: one warning, the same words, everywhere ---------------------
@pytest.mark.parametrize("verb", ["bridge", "fleet", "fish serve", "ros2", "router"])
def test_every_listener_off_loopback_says_so_in_the_same_line(tmp_path: Path,
                                                              verb: str) -> None:
    """198.51.100.0/24 is documentation space, never this machine's: nothing listens
    there, and each verb says the same line before trying."""
    from tests.helpers import run_cli

    far = f"tcp/198.51.100.7:{_free_port()}"
    nowhere = f"tcp/127.0.0.1:{_free_port()}"
    robot = tmp_path / "robot.toml"
    robot.write_text(f'use_sim = true\n[sim]\nurl = "sim://mecanum"\n[ros2]\n'
                     f'connect = ["{nowhere}"]\nlisten = ["{far}"]\n')
    args = {"bridge": ("bridge", str(robot), "--ros2", "--duration", "1", "--every", "1000"),
            "fleet": ("fleet", "1", "--listen", far, "--connect", nowhere, "--duration", "1"),
            "fish serve": ("fish", "--port", "sim://fish", "serve", "--listen", far,
                           "--connect", nowhere, "--duration", "1"),
            "ros2": ("ros2", "topics", "--config", str(robot), "--wait", "0.2"),
            "router": ("ros2", "router", "--listen", far)}[verb]
    res = run_cli(*args, timeout=60)
    err = res.stderr.decode()
    assert "Traceback" not in err, err
    line = (f"warning: {verb}: {far} is not a loopback address: other machines can connect "
            "to it")
    assert err.splitlines().count(line) == 1, err
    here = f"tcp/127.0.0.1:{_free_port()}"
    quiet = {"fleet": ("fleet", "1", "--listen", here, "--connect", nowhere, "--duration",
                       "0.5")}.get(verb)
    if quiet is not None:
        res = run_cli(*quiet, timeout=60)
        assert b"warning" not in res.stderr, res.stderr


# -- the docs' examples beside a ROS 2 developer's router ------------------------------------
def test_the_docs_examples_run_beside_a_router_on_zenohs_port(tmp_path: Path) -> None:
    """A developer with rmw_zenohd running holds 7447: every docs' line that would reach
    7447 runs on a free port of its own instead, and the router line runs there."""
    import os
    import sys

    from tests import doc_examples

    state = doc_examples.DocState("docs/ROS2.md", tmp_path, {
        **os.environ, "PATH": os.pathsep.join((str(Path(sys.executable).parent),
                                               os.environ.get("PATH", ""))),
        "NO_COLOR": "1"})
    for text in ("fwbridge ros2 router", "fwbridge fish --port /dev/pts/7 serve",
                 "fwbridge fleet 4 --first 5 --connect tcp/192.168.1.10:7447",
                 "fwbridge ros2 echo /robot1/odom --count 1",
                 "fwbridge bridge examples/mecanum.toml --record run.mcap --foxglove"):
        moved = doc_examples.free_ports(text, state)
        assert "7447" not in moved and (
            f":{state.zenoh_port}" in moved or "--foxglove-port 0" in moved), moved
    failure = doc_examples.run_line(
        doc_examples.Command("fwbridge ros2 router", 357, None), state)
    assert failure is None, failure
