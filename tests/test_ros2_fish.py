"""The robot fish as a ROS 2 node (`fwbridge fish serve`): its services and /diagnostics.

`fwbridge fish --port sim://fish serve` runs in its own process, on a Zenoh router on
loopback (a free port); an independent client (tests/ros2_peer.py: plain Zenoh +
rosbags, rmw_zenoh's conventions, no fwbridge code) and `fwbridge ros2 call` call its
services from other processes. A fish that stops answering is a `fwbridge sim fish`
on a pty, stopped with SIGSTOP.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

zenoh = pytest.importorskip("zenoh", reason="the ros2 extra (eclipse-zenoh) is not installed")
pytest.importorskip("rosbags", reason="the ros2 extra (rosbags) is not installed")

from fwbridge.bridge.ros2.fish_parameters import (  # noqa: E402
    CONFIG_FIELDS,
    MAX_NAME,
    MAX_PARAMETERS,
    MAX_REASON,
    SCENES,
    check_parameters,
)
from fwbridge.bridge.ros2.router import open_router  # noqa: E402
from tests.helpers import ROOT, Lines, reaped, run_cli, spawn_verb  # noqa: E402

PEER = [sys.executable, str(ROOT / "tests" / "ros2_peer.py")]
#: The services' type hashes as rmw_zenoh's peers key them (tests/ros2_peer.py's).
TRIGGER_HASH = "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f"
SET_PARAMETERS_HASH = "RIHS01_56eed9a67e169f9cb6c1f987bc88f868c14a8fc9f743a263bc734c154015d7e0"
SERVICES = {"get_status": ("std_srvs::srv::dds_::Trigger_", TRIGGER_HASH),
            "get_config": ("std_srvs::srv::dds_::Trigger_", TRIGGER_HASH),
            "set_config": ("rcl_interfaces::srv::dds_::SetParameters_", SET_PARAMETERS_HASH),
            "stand_still": ("std_srvs::srv::dds_::Trigger_", TRIGGER_HASH)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(endpoint: str, port: str, namespace: str, *link: str) -> subprocess.Popen[bytes]:
    return spawn_verb("fish", "--port", port, *link, "serve", "--namespace", namespace,
                      "--connect", endpoint, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def network() -> Iterator[dict[str, Any]]:
    """A router, and `fish serve` on sim://fish in /fish1, its node online."""
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    router = open_router([endpoint])
    try:
        proc = _serve(endpoint, "sim://fish", "/fish1")
        with reaped(proc):
            lines = Lines(proc.stderr)
            ready = lines.wait_for("fish serve: ROS 2 node")
            lines.wait_for("Zenoh connected")  # its services are declared on the router
            yield {"endpoint": endpoint, "proc": proc, "lines": lines, "ready": ready}
    finally:
        router.close()


def _peer(endpoint: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([*PEER, endpoint, *args], capture_output=True, text=True,
                         timeout=60, check=True)
    reply: dict[str, Any] = json.loads(out.stdout.splitlines()[0])
    assert "error" not in reply, reply
    return reply


def _config(endpoint: str, ns: str = "fish1") -> dict[str, Any]:
    reply = _peer(endpoint, "call", f"0/{ns}/fish_bridge/get_config")
    assert reply["success"] is True, reply
    config: dict[str, Any] = json.loads(reply["message"])
    return config


def _call(endpoint: str, service: str, srvtype: str = "std_srvs/srv/Trigger",
          values: str = "{}") -> dict[str, Any]:
    res = run_cli("ros2", "call", service, srvtype, values, "--json", "--connect", endpoint,
                  timeout=60)
    assert res.returncode == 0, res.stderr
    reply: dict[str, Any] = json.loads(res.stdout)
    return reply


# -- SetParameters against the configuration, pure -------------------------------------------
NAMES = st.sampled_from([*CONFIG_FIELDS, SCENES, "speed", "x" * 200])
VALUES = st.one_of(st.integers(-10, 70000), st.floats(allow_nan=True), st.booleans(),
                   st.sampled_from(["[]", "[{]", '[{"sensor": "smell"}]', "{}", "x" * 9000]),
                   st.none())


@given(st.lists(st.tuples(NAMES, VALUES), max_size=MAX_PARAMETERS + 3))
def test_a_request_is_taken_whole_or_not_at_all(params: list[tuple[str, object]]) -> None:
    """One result per parameter; every one successful and the changes planned, or none
    and nothing to write; reasons bounded, a long name cut."""
    plan = check_parameters(params)
    assert len(plan.results) == len(params)
    oks = {ok for ok, _ in plan.results}
    if plan.changes is None:
        assert oks <= {False}
    else:
        assert oks <= {True} and len(params) <= MAX_PARAMETERS
        assert set(plan.changes) == {name for name, _ in params}
    for _ok, why in plan.results:
        assert len(why) <= MAX_REASON and "x" * (MAX_NAME + 1) not in why


def test_what_set_config_refuses_names_the_parameter() -> None:
    for params, why in [
            ([("avoid_mm", 70000)], "avoid_mm must be 0 to 65535, got 70000: unchanged"),
            ([("free_period_ms", 1.5)], "free_period_ms must be an integer (ParameterValue "
             "type 2), got a double"),
            ([("stored_probability_pct", True)], "got a bool"),
            ([("scenes", 3)], "scenes must be a string (ParameterValue type 4)"),
            ([("scenes", "[{]")], "scenes: not JSON"),
            ([("scenes", '[{"sensor": "smell", "op": "<", "threshold": 1, "action": "dive"}]')],
             "scenes[0].sensor"),
            ([("speed", 1)], "unknown parameter 'speed' (this service sets free_period_ms, "
             "avoid_mm, stored_probability_pct, scenes)"),
            ([("avoid_mm", 1), ("avoid_mm", 2)], "'avoid_mm' is given twice")]:
        plan = check_parameters(params)
        assert plan.changes is None and why in plan.results[-1][1], (params, plan.results)
    plan = check_parameters([("avoid_mm", 700), ("speed", 1)])
    assert plan.results[0] == (False, "not written: 'speed' refused in the same request")
    plan = check_parameters([("avoid_mm", 1)] * (MAX_PARAMETERS + 1))
    assert {why for _, why in plan.results} == {
        f"at most {MAX_PARAMETERS} parameters in one request, got {MAX_PARAMETERS + 1}"}


def test_fish_serve_refuses_bad_options_in_one_line() -> None:
    for args, says in [
            (("fish", "serve"), "Missing option '-p' / '--port'."),
            (("fish", "--port", "sim://fish", "serve", "--namespace", "fish 1"),
             "error: --namespace: ros2.namespace: must be a ROS namespace"),
            (("fish", "--port", "sim://fish", "serve", "--node-name", "fish-bridge"),
             "error: --node-name: ros2.node_name: must be a ROS node name"),
            (("fish", "--port", "sim://fish", "serve", "--connect", "localhost:7447"),
             "error: command line: ros2.connect: not a Zenoh endpoint"),
            (("fish", "--port", "/dev/no-such-fish", "serve"), "error: ")]:
        res = run_cli(*args, timeout=60)
        err = res.stderr.decode()
        assert res.returncode == 2 and says in err and "Traceback" not in err, (args, err)


# -- the node, from other processes ------------------------------------------------------------
@pytest.mark.slow
def test_fish_services_answer_an_independent_client(network: dict[str, Any]) -> None:
    """get_status, get_config and stand_still (std_srvs/srv/Trigger) from a plain Zenoh
    client in another process: the fish's status with its own sequence number and GID
    back, the configuration as `fish config get` prints it, then the fish stands still."""
    endpoint = network["endpoint"]
    assert ("ROS 2 node /fish1/fish_bridge for the fish on sim://fish" in network["ready"]
            and "/fish1/fish_bridge/set_config" in network["ready"]), network["ready"]
    reply = _peer(endpoint, "call", "0/fish1/fish_bridge/get_status")
    assert reply["success"] is True, reply
    assert (reply["seq"], reply["gid"]) == (41, reply["sent_gid"])
    assert reply["key"] == f"0/fish1/fish_bridge/get_status/{SERVICES['get_status'][0]}/" \
                           f"{TRIGGER_HASH}"
    status = json.loads(reply["message"])
    assert (status["node"], status["hardware_id"], status["link"]) == (
        "fish1/fish_bridge", "fish1:sim://fish", "up")
    assert (status["version"], status["bank"], status["error"]) == ("1.0", "A", None)
    assert status["uptime_ms"] > 0 and status["exchanges"] >= 1 and status["failures"] == 0
    config = _config(endpoint)
    assert set(config) == {"free_period_ms", "avoid_mm", "stored_probability_pct", "scenes"}
    assert all(set(s) == {"sensor", "op", "threshold", "action"} for s in config["scenes"])
    reply = _peer(endpoint, "call", "0/fish1/fish_bridge/stand_still")
    assert (reply["success"], reply["message"]) == (True, "standing still")
    status = json.loads(_peer(endpoint, "call", "0/fish1/fish_bridge/get_status")["message"])
    assert status["mode"] == "still"


@pytest.mark.slow
def test_set_config_changes_fields_and_a_refused_request_changes_nothing(
        network: dict[str, Any]) -> None:
    """~/set_config (rcl_interfaces/srv/SetParameters) from a plain Zenoh client: a field
    changed reads back with get_config; a request with one refused parameter writes none
    of its parameters; scenes as the JSON text `config get` prints."""
    endpoint, service = network["endpoint"], "0/fish1/fish_bridge/set_config"
    before = _config(endpoint)
    reply = _peer(endpoint, "set_param", service, "avoid_mm", "812")
    assert reply["results"] == [{"successful": True, "reason": f"avoid_mm 812 (was "
                                 f"{before['avoid_mm']})"}], reply
    assert (reply["seq"], reply["gid"]) == (7, reply["sent_gid"])
    assert _config(endpoint) == {**before, "avoid_mm": 812}
    reply = _peer(endpoint, "set_param", service, "avoid_mm", "700",
                  "stored_probability_pct", "150")
    assert reply["results"] == [
        {"successful": False,
         "reason": "not written: 'stored_probability_pct' refused in the same request"},
        {"successful": False,
         "reason": "stored_probability_pct must be 0 to 100, got 150: unchanged"}], reply
    (result,) = _peer(endpoint, "set_param", service, "free_period_ms", "250.0")["results"]
    assert result["successful"] is False and "must be an integer" in result["reason"]
    (result,) = _peer(endpoint, "set_param", service, "colour", "1")["results"]
    assert result["successful"] is False and "unknown parameter 'colour'" in result["reason"]
    assert _config(endpoint) == {**before, "avoid_mm": 812}  # nothing written
    scenes = [{"sensor": "sonar_left_mm", "op": "<", "threshold": 300, "action": "turn-right"}]
    reply = _peer(endpoint, "set_param", service, "scenes", "str:" + json.dumps(scenes),
                  "free_period_ms", "200")
    assert [r["successful"] for r in reply["results"]] == [True, True], reply
    assert reply["results"][0]["reason"] == f"scenes 1 scenes (was {len(before['scenes'])} " \
                                            "scenes)"
    assert _config(endpoint) == {**before, "avoid_mm": 812, "free_period_ms": 200,
                                 "scenes": scenes}
    (result,) = _peer(endpoint, "set_param", service, "scenes",
                      'str:[{"sensor": "smell", "op": "<", "threshold": 1, "action": "dive"}]'
                      )["results"]
    assert result["successful"] is False and "scenes[0].sensor" in result["reason"], result
    reply = _peer(endpoint, "set_param", service, "avoid_mm", str(before["avoid_mm"]),
                  "free_period_ms", str(before["free_period_ms"]),
                  "scenes", "str:" + json.dumps(before["scenes"]))
    assert all(r["successful"] for r in reply["results"]), reply
    assert _config(endpoint) == before


@pytest.mark.slow
def test_ros2_call_calls_the_fish_services(network: dict[str, Any]) -> None:
    endpoint = network["endpoint"]
    reply = _call(endpoint, "/fish1/fish_bridge/get_status")
    assert reply["success"] is True and json.loads(reply["message"])["link"] == "up"
    before = json.loads(_call(endpoint, "/fish1/fish_bridge/get_config")["message"])
    reply = _call(endpoint, "/fish1/fish_bridge/set_config", "rcl_interfaces/srv/SetParameters",
                  "{parameters: [{name: stored_probability_pct, value: {type: 2, "
                  "integer_value: 55}}]}")
    assert reply == {"results": [{"successful": True, "reason": "stored_probability_pct 55 "
                                  f"(was {before['stored_probability_pct']})"}]}
    after = json.loads(_call(endpoint, "/fish1/fish_bridge/get_config")["message"])
    assert after == {**before, "stored_probability_pct": 55}
    reply = _call(endpoint, "/fish1/fish_bridge/set_config", "rcl_interfaces/srv/SetParameters",
                  "{parameters: [{name: stored_probability_pct, value: {type: 2, "
                  f"integer_value: {before['stored_probability_pct']}}}}}]}}")
    assert reply["results"][0]["successful"] is True, reply
    assert _call(endpoint, "/fish1/fish_bridge/stand_still") == {"success": True,
                                                                  "message": "standing still"}


@pytest.mark.slow
def test_diagnostics_name_the_fish(network: dict[str, Any]) -> None:
    reply = _peer(network["endpoint"], "echo", "0/diagnostics/**",
                  "diagnostic_msgs/msg/DiagnosticArray", "--count", "1")
    (status,) = reply["msg"]["status"]
    assert (status["name"], status["hardware_id"], status["level"]) == (
        "fish1/fish_bridge: fish", "fish1:sim://fish", 0), status
    values = {kv["key"]: kv["value"] for kv in status["values"]}
    assert values["link"] == "up" and values["version"] == "1.0" and "uptime_ms" in values
    assert status["message"] in ("idle", "standing still"), status


@pytest.mark.slow
def test_service_tokens_carry_rmw_zenohs_type_hashes(network: dict[str, Any]) -> None:
    """An SS token per service, as test_service_keys_match_rmw_zenoh has them for the
    base; `ros2 topics` lists the servers."""
    out = subprocess.run([*PEER, network["endpoint"], "tokens"], capture_output=True,
                         text=True, timeout=60, check=True)
    servers = {}
    for key in out.stdout.splitlines():
        parts = key.split("/")
        if parts[5] == "SS" and parts[7:9] == ["%fish1", "fish_bridge"]:
            servers[parts[9]] = (parts[10], parts[11], parts[12])
    assert servers == {f"%fish1%fish_bridge%{name}": (dds, digest, "::,10:,:,:,,")
                       for name, (dds, digest) in SERVICES.items()}, out.stdout
    res = run_cli("ros2", "topics", "--connect", network["endpoint"], timeout=60)
    text = res.stdout.decode()
    assert ("/fish1/fish_bridge/set_config [rcl_interfaces/srv/SetParameters]  servers: 1 "
            "(/fish1/fish_bridge)") in text, text
    assert "/diagnostics [diagnostic_msgs/msg/DiagnosticArray]  publishers: 1" in text, text


@pytest.mark.slow
def test_a_fish_that_stops_answering_is_link_lost_then_back(network: dict[str, Any]) -> None:
    """`fwbridge sim fish` on a pty, stopped (SIGSTOP): the node says link lost, get_status
    answers at once with success false, set_config writes nothing, /diagnostics says
    error `link lost`; continued, the fish answers again. SIGTERM ends `fish serve` with
    143 and its counters."""
    endpoint = network["endpoint"]
    sim = spawn_verb("sim", "fish", "--json", stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL)
    assert sim.stdout is not None
    with reaped(sim):
        port = json.loads(sim.stdout.readline())["port"]
        serve = _serve(endpoint, port, "/fish2", "--timeout", "0.2", "--retries", "1")
        with reaped(serve):
            lines = Lines(serve.stderr)
            lines.wait_for("Zenoh connected")
            assert _call(endpoint, "/fish2/fish_bridge/get_status")["success"] is True
            sim.send_signal(signal.SIGSTOP)
            try:
                assert port in lines.wait_for("fish serve: fish: link lost")
                reply = _call(endpoint, "/fish2/fish_bridge/get_status")
                status = json.loads(reply["message"])
                assert reply["success"] is False and status["link"] == "down", status
                assert status["error"] and status["version"] == "1.0"  # the last one it gave
                reply = _call(endpoint, "/fish2/fish_bridge/set_config",
                              "rcl_interfaces/srv/SetParameters",
                              "{parameters: [{name: avoid_mm, value: {type: 2, "
                              "integer_value: 900}}]}")
                (result,) = reply["results"]
                assert result["successful"] is False and "not written" in result["reason"]
                out = subprocess.run([*PEER, endpoint, "echo", "0/diagnostics/**",
                                      "diagnostic_msgs/msg/DiagnosticArray", "--count", "6"],
                                     capture_output=True, text=True, timeout=60, check=True)
                seen = [s for line in out.stdout.splitlines()
                        for s in json.loads(line)["msg"]["status"]]
                lost = [s for s in seen if s["name"] == "fish2/fish_bridge: fish"]
                assert lost and all(s["level"] == 2 for s in lost), lost
                assert lost[-1]["message"].startswith("link lost: no answer for "), lost[-1]
            finally:
                sim.send_signal(signal.SIGCONT)
            lines.wait_for("fish serve: fish: answering again")
            assert json.loads(_call(endpoint, "/fish2/fish_bridge/get_config")["message"])[
                "avoid_mm"] != 900
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=30) == 143
            counters = lines.wait_for("fish serve: calls=")
        assert "link_lost=1" in counters and "failures=0" not in counters, counters
        sim.send_signal(signal.SIGINT)
        sim.wait(30)
