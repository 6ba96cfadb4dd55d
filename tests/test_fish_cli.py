"""The fish from the host's tools (``send PORT action``, a pty, ``fwbridge sim fish``) and
as a Webots controller."""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator
from types import ModuleType

import click
import pytest
from click.testing import CliRunner

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.link.transports import open_link
from fwbridge.bridge.sim import webots_adapter
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.models.fish import RobotFish
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.can_bus.ids import Direction, from_message
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.cli_verbs.fish import send_action_cmd
from fwbridge.cli_verbs.serial import send_group
from fwbridge.protocols import action_frame
from fwbridge.protocols.action_frame import ActionFrame, SubCommand
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.families.fish_payloads import CanErrorInfo, RobotInfo, decode_result
from tests.helpers import EXAMPLE, REPEAT, STANDIN, STEPS, drain, run_cli, world

URL = "sim://fish?pacing=afap"


@pytest.fixture
def send() -> click.Group:
    """The ``send`` group as cli.py builds it, with the action verb attached (a copy:
    the real group is left alone)."""
    group = click.Group("send", params=send_group.params, callback=send_group.callback)
    group.add_command(send_action_cmd)
    return group


def invoke(send: click.Group, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(send, [URL, "action", *args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stdout, res.stderr


def test_send_action_ack_delivers_the_worked_example(send: click.Group) -> None:
    code, out, err = invoke(send, "--type", "write-pc", "--sub", "test-action-group",
                            "--data", EXAMPLE.data.hex(), "--ack", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert (got["event"], got["attempts"], got["status"], got["result"]) == (
        "delivered", 1, "ok", None)
    assert got["sender"]["delivered"] == 1 and got["sender"]["retransmitted"] == 0


def test_send_action_query_prints_the_result(send: click.Group) -> None:
    code, out, err = invoke(send, "--type", "read-pc", "--sub", "query-servo-info", "--ack",
                            "--json")
    assert code == 0, err
    servos = json.loads(out)["result"]
    assert [s["module_id"] for s in servos] == list(range(1, 8))
    assert [s["role"] for s in servos] == ["power", "power", "direction"] + ["fin"] * 4
    code, out, err = invoke(send, "--type", "0x03", "--sub", "0x14", "--ack")
    assert code == 0, err
    assert "delivered" in out and "after 1 attempt (status ok)" in out
    assert "node module_id=0" in out and "node module_id=7" in out


def test_send_action_without_ack_writes_one_frame(send: click.Group) -> None:
    code, out, _ = invoke(send, "--type", "control-phone", "--sub", "enter-free-mode", "--json")
    assert code == 0
    assert json.loads(out) == {"event": "sent", "frame": action_frame.encode(
        ActionFrame(0, 7, SubCommand.ENTER_FREE_MODE)).hex()}


def test_send_action_reports_failure(send: click.Group) -> None:
    # Machine 5 is not the fish (0): nobody answers, every retry times out.
    code, out, err = invoke(send, "--machine", "5", "--type", "read-pc", "--sub",
                            "query-robot-info", "--ack", "--retries", "1", "--json")
    assert code == 2
    got = json.loads(out)
    assert (got["event"], got["attempts"], got["status"]) == ("failed", 2, None)
    assert got["sender"]["timeouts"] == 2
    assert err.startswith("error: not delivered") and "no answer" in err
    code, _, err = invoke(send, "--type", "write-pc", "--sub", "test-action-group",
                          "--data", "zz", "--ack")
    assert code == 2 and err.startswith("error: --data")


def test_fish_on_a_pty_with_the_wall_clock() -> None:
    """The worked example through a real tty, the world in its own thread (realtime x4)."""
    endpoint = SimEndpoint("fish", pacing="realtime", speed=4.0)
    fish = endpoint.model
    assert isinstance(fish, RobotFish)
    spy = FwBridgeBus(fish.can_channel, rx_queue_size=50_000, name="spy")
    spy.set_filters([{"can_id": 0x100, "can_mask": 0x700, "extended": False}])
    with PtyLink(endpoint) as pty:
        endpoint.start()
        port = open_link(pty.path, timeout=0.05)
        try:
            link = ActionLink(port, timeout=1.0)  # generous: the CI box is shared
            assert link.send(EXAMPLE).delivered
            end = time.monotonic() + 20.0  # a bound on waiting, not an assertion
            while fish.controller.player.stats.groups_done < 1 and time.monotonic() < end:
                time.sleep(0.02)  # polling: a bounded wait
            info = link.query(SubCommand.QUERY_ROBOT_INFO)
        finally:
            port.close()
            endpoint.stop()
            spy_cmds = []
            while (msg := spy.recv(0)) is not None:
                got = from_message(msg)
                if got is not None and got.direction is Direction.COMMAND \
                        and got.struct.command == SubCommand.SET_SERVO_POSITION:
                    spy_cmds.append((got.module, got.struct.speed, got.struct.angle))
            spy.shutdown()
            fish.close()
    assert fish.controller.player.stats.groups_done == 1
    assert isinstance(info, RobotInfo) and info.servos == 7
    for k in (1, 2, 3):
        seq = [c[1:] for c in spy_cmds if c[0] == k]
        distinct = [v for i, v in enumerate(seq) if i == 0 or seq[i - 1] != v]
        assert distinct == [(s, a) for st in STEPS for i, s, a in st if i == k] * REPEAT


def test_fwbridge_sim_fish_runs() -> None:
    res = run_cli("sim", "fish", "--pacing", "afap", "--duration", "0.3", "--json", timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    lines = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert lines[0]["event"] == "ready" and lines[0]["model"] == "fish"
    assert lines[-1]["event"] == "end" and lines[-1]["model"] == "fish"
    assert lines[-1]["t"] == 300


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The stand-in of Webots' ``controller`` module, imported as the adapter would."""
    monkeypatch.syspath_prepend(str(STANDIN))
    sys.modules.pop("controller", None)
    yield importlib.import_module("controller")
    sys.modules.pop("controller", None)


def test_fish_runs_as_a_webots_controller(standin: ModuleType) -> None:
    """The same firmware on the stand-in of Webots' controller module (8 ms steps)."""
    sim, host, _sup = world(standin, end_ms=400)
    received = bytearray()
    query = ActionFrame(0, 3, SubCommand.QUERY_CAN_ERROR_RATE)

    def peer(now: int) -> None:
        if now == 200:
            assert host.devices["tx"].send(action_frame.encode(query)) == 1  # type: ignore[attr-defined]
        received.extend(drain(host.devices["rx"]))  # type: ignore[attr-defined]

    sim.on_step.append(peer)  # type: ignore[attr-defined]
    model = webots_adapter.run_controller("fish")
    assert isinstance(model, RobotFish)
    model.close()
    frames = [r.frame for r in ActionReceiver().feed(bytes(received))]
    assert [f.data for f in frames[:1]] == [b"\x00"]  # the answer: OK
    result = decode_result(SubCommand.QUERY_CAN_ERROR_RATE, frames[1].data)
    assert isinstance(result, CanErrorInfo)
    assert result.frames > 50 and result.error_frames == 0  # its bus ran with the steps
    assert [n.module_id for n in result.nodes] == list(range(8))
