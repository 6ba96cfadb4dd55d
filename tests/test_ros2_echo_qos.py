"""`fwbridge ros2 echo` takes the publishers' QoS, and `fwbridge ros2 pub` says what it does.

A bridge node (in this process, on a router on a free loopback port) publishes its
latched topics (``robot_description``, ``/tf_static``: transient_local, depth 1)
once; `ros2 echo`, started after that in another process, must still print them, as
``ros2 topic echo`` does: it reads the publishers' QoS from their liveliness tokens
and asks their caches. `ros2 pub` runs on a real terminal (tests/terminal.py) and
piped.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.echo import echo_qos
from fwbridge.bridge.ros2.keys import parse_qos, qos_key
from fwbridge.bridge.ros2.router import open_router
from fwbridge.bridge.rosmsg.topics import Qos
from tests.helpers import Lines, run_cli, spawn_verb, wait_until
from tests.terminal import Terminal

URDF = ('<?xml version="1.0"?>\n<robot name="late"><!-- Ünïcode -->'
        '<link name="base_link"/></robot>\n')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def latched() -> Iterator[dict[str, Any]]:
    """A router and one base node that has published its latched topics."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = open_router([endpoint])
    node = BaseNode(RobotConfig(sim_url="sim://mecanum", use_sim=True, rate_hz=20.0),
                    on_event=None)
    node.start()
    ros = Ros2Base(node, Ros2Settings(namespace="/late", connect=(endpoint,), urdf="r.urdf",
                                      robot_description=URDF), say=lambda _t: None)
    ros.start()
    try:
        wait_until(lambda: ros._description_sent and ros._static_sent, 20,
                   "the latched topics published")
        yield {"endpoint": endpoint, "ros": ros}
    finally:
        ros.stop()
        node.stop()
        router.close()


def test_token_qos_is_read_back() -> None:
    for qos in (Qos(), Qos("best_effort", "transient_local", "keep_last", 7),
                Qos(depth=42), Qos("reliable", "transient_local", "keep_all", 1000)):
        assert parse_qos(qos_key(qos)) == qos
    assert parse_qos("x") is None and parse_qos("9:1:,1:,:,:,,") is None


def test_echo_takes_the_publishers_qos_unless_told() -> None:
    class Token:
        def __init__(self, qos: Qos) -> None:
            self.qos = qos_key(qos)

    latched = [Token(Qos("reliable", "transient_local", "keep_last", 1))]
    mixed = [*latched, Token(Qos("best_effort", "volatile", "keep_last", 5))]
    qos, how = echo_qos(latched, "auto", "auto")  # type: ignore[arg-type]
    assert (qos.durability, qos.reliability) == ("transient_local", "reliable"), how
    qos, how = echo_qos(mixed, "auto", "auto")  # type: ignore[arg-type]
    assert (qos.durability, qos.reliability) == ("volatile", "best_effort"), how
    qos, how = echo_qos([], "auto", "auto")
    assert (qos.durability, qos.reliability) == ("volatile", "reliable")
    assert "no publisher yet" in how
    qos, how = echo_qos(latched, "volatile", "best_effort")  # type: ignore[arg-type]
    assert (qos.durability, qos.reliability) == ("volatile", "best_effort")


@pytest.mark.slow
def test_echo_started_after_the_publisher_gets_robot_description(
        latched: dict[str, Any]) -> None:
    """robot_description went out once, before echo started: echo prints it (its type
    from the graph), then ends after --count 1."""
    res = run_cli("ros2", "echo", "/late/robot_description", "--count", "1", "--json",
                  "--connect", latched["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"data": URDF}
    assert "ros2 echo: 1 messages on /late/robot_description" in res.stderr.decode()


@pytest.mark.slow
def test_echo_of_tf_static_with_the_options_spelled_out(latched: dict[str, Any]) -> None:
    res = run_cli("ros2", "echo", "/tf_static", "--type", "tf2_msgs/msg/TFMessage",
                  "--qos-durability", "transient_local", "--qos-reliability", "reliable",
                  "--count", "1", "--json", "--connect", latched["endpoint"], timeout=60)
    assert res.returncode == 0, res.stderr
    (tf,) = json.loads(res.stdout)["transforms"]
    assert (tf["header"]["frame_id"], tf["child_frame_id"]) == ("base_link", "imu_link")


@pytest.mark.slow
def test_echo_on_a_terminal_says_which_qos(latched: dict[str, Any]) -> None:
    with Terminal("ros2", "echo", "/late/robot_description", "--count", "1",
                  "--connect", latched["endpoint"]) as term:
        term.expect(r"ros2 echo: /late/robot_description \[std_msgs/msg/String\], "
                    r"reliable, transient_local \(durability of the publishers\)")
        term.expect(r"data: .*Ünïcode")
        assert term.wait(30) == 0


@pytest.mark.slow
def test_echo_refuses_a_bad_qos_word() -> None:
    res = run_cli("ros2", "echo", "/x", "--qos-durability", "latched")
    assert res.returncode == 2 and b"--qos-durability" in res.stderr, res.stderr


@pytest.mark.slow
def test_pub_on_a_terminal_says_what_and_counts(latched: dict[str, Any]) -> None:
    """On a terminal: the topic, type and rate at once, the count as it goes, the total
    at the end."""
    with Terminal("ros2", "pub", "/late/chatter", "std_msgs/msg/String", "{data: hi}",
                  "--rate", "20", "--times", "30", "--connect", latched["endpoint"]) as term:
        term.expect(r"ros2 pub: std_msgs/msg/String on /late/chatter, 30 times at 20 Hz")
        term.expect(r"published \d+/30 on /late/chatter")
        assert term.wait(30) == 0
        term.expect(r"published 30 messages on /late/chatter")


@pytest.mark.slow
def test_pub_piped_says_only_the_total(latched: dict[str, Any]) -> None:
    proc = spawn_verb("ros2", "pub", "/late/chatter", "std_msgs/msg/String", "{data: hi}",
                      "--times", "2", "--rate", "50", "--connect", latched["endpoint"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = Lines(proc.stderr)
    assert proc.wait(60) == 0
    assert err.rest().strip() == "published 2 messages on /late/chatter"
    assert proc.stdout is not None and proc.stdout.read() == b""
