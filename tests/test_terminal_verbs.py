"""Every long-running verb on a real pseudo-terminal, as a person runs it.

Each test starts the verb on a new pty (a window of 100 x 24, TERM=xterm-256color),
waits for what it draws once it runs, types Ctrl-C (the byte 0x03: the line discipline
sends SIGINT, as a keypress does) and checks what the person sees: the exit status of
the README's table, the summary, no ``error:`` and the terminal as it was (the cursor
shown again, the line settings restored). The pipes of the other CLI tests never see
the live status lines these verbs draw on a terminal.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.protocols import cmd_frame
from fwbridge.protocols.families.fish_commands import make_image
from tests.helpers import FirmwarePeer, reaped, run_cli, spawn_verb
from tests.terminal import Terminal, cursor_restored

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")


def ended(term: Terminal, status: int, summary: str, *, timeout: float = 30.0) -> str:
    """The verb ended with ``status``, its summary on the screen, no error, the terminal
    as it was; returns the screen's text."""
    rc = term.wait(timeout)
    text = term.text
    assert rc == status, text
    assert re.search(summary, text), text
    assert "error:" not in text and "Traceback" not in text, text
    assert "not properly shut down" not in text, text
    assert cursor_restored(term.raw), text
    assert term.attrs_restored()
    return text


def interrupted(term: Terminal, summary: str) -> str:
    """Ctrl-C: exit status 130 after the summary."""
    term.interrupt()
    return ended(term, 130, summary)


# -- the simulators ------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["mecanum", "zumo", "fish", "echo"])
def test_sim_status_line_on_a_terminal_and_ctrl_c(model: str) -> None:
    with Terminal("sim", model) as term:
        term.expect(rf"{model} firmware on /dev/pts/\d+")
        term.expect(r"t=\s+\d+\.\d+s\s+x\d+\.\d")  # the live status line, realtime
        assert b"\x1b[?25l" in term.raw  # drawn as a live line: the cursor is hidden
        interrupted(term, r"host port: bytes_in=\d+ bytes_out=\d+")


@pytest.mark.parametrize("way", ["SIGTERM", "SIGHUP", "duration"])
def test_sim_restores_the_cursor_on_every_way_out(way: str) -> None:
    args = ("--duration", "1") if way == "duration" else ()
    with Terminal("sim", "mecanum", *args) as term:
        term.expect(r"odom=[1-9]")
        if way != "duration":
            term.kill(getattr(signal, way))
        ended(term, 0 if way == "duration" else 128 + getattr(signal, way),
              r"firmware: cmd_applied=0")


def test_sim_whose_terminal_closes_ends_with_129(tmp_path: Path) -> None:
    """The window closed under it: SIGHUP, no one to tell, the same clean-up (the link)."""
    link = tmp_path / "robot"
    with Terminal("sim", "mecanum", "--link", str(link)) as term:
        term.expect(r"odom=[1-9]")
        assert link.is_symlink()
        term.hang_up()
        assert term.wait() == 129
    assert not link.is_symlink()


def test_sim_scara_on_a_terminal() -> None:
    with Terminal("sim", "scara") as term:
        term.expect(r"theta1=[-+]\d")
        interrupted(term, r"sim scara: ran \d+\.\d s, modules at theta1=")


# -- the serial host verbs against a simulated base ----------------------------------------
def test_sniff_realtime_on_a_terminal(mecanum: str) -> None:
    with Terminal("sniff", mecanum, "-p", "odom") as term:
        term.expect(r"odom: [1-9]\d* frames, \d+/s, 0 errors")  # the status line
        term.expect(r"vx=0 vy=0 wz=0")  # the frames, above it
        interrupted(term, r"counters: frames=[1-9]")


def test_sniff_piped_to_head_keeps_its_line_on_the_terminal(mecanum: str) -> None:
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert head.stdin is not None and head.stdout is not None
    with reaped(head), Terminal("sniff", mecanum, "-p", "odom", stdout=head.stdin) as term:
        head.stdin.close()
        assert b"vx=0" in head.stdout.read()
        ended(term, 0, r"counters: frames=[1-9]")  # the reader went away: 0, quietly


def test_sniff_whose_port_goes_away_says_so_and_restores_the_cursor() -> None:
    proc = spawn_verb("sim", "mecanum", "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    with reaped(proc):
        port = json.loads(proc.stdout.readline())["port"]
        with Terminal("sniff", port, "-p", "odom") as term:
            term.expect(r"odom: [1-9]\d* frames")
            proc.send_signal(signal.SIGINT)  # the device is unplugged
            assert term.wait() == 2
            assert re.search(r"error: .* went away", term.text), term.text
            assert cursor_restored(term.raw) and term.attrs_restored()


def test_record_and_replay_on_a_terminal(mecanum: str, tmp_path: Path) -> None:
    capture = tmp_path / "run.pcapng"
    with Terminal("record", mecanum, str(capture), "--duration", "1") as term:
        ended(term, 0, r"recorded [1-9]\d* packets")  # the end of --duration
    # A wide window: the status line (cut to the window) keeps the long test path whole.
    with Terminal("record", mecanum, str(tmp_path / "more.pcapng"), cols=250) as term:
        term.expect(r"more\.pcapng: [1-9]")  # the status line
        text = interrupted(term, r"recorded [1-9]\d* packets")
    n = int(re.findall(r"recorded (\d+) packets", text)[-1])
    assert len(list(read_capture(tmp_path / "more.pcapng"))) == n  # closed whole
    with Terminal("replay", str(capture), mecanum, "--loop") as term:
        term.expect(r"replay .* [1-9]\d* packets")
        text = interrupted(term, r"replayed [1-9]\d* rx packets")
    assert "None" not in text  # a loop has no total


def test_bridge_on_a_terminal(mecanum: str, tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "{mecanum}"\n')
    with Terminal("bridge", str(cfg)) as term:
        term.expect(r"link up  odom \d+/s  x=[-+]\d")  # the live line (JSON: --json or piped)
        interrupted(term, r"bridge: commands=[1-9]")
    with Terminal("bridge", str(cfg), "--json") as term:
        term.expect(r'"seq":\s*[1-9]')
        interrupted(term, r"bridge: commands=[1-9]")


def test_teleop_ctrl_c_gives_130_and_stops_the_base(pair: PtyPair, peer: FirmwarePeer) -> None:
    with Terminal("teleop", pair.path, "--rate", "50") as term:
        term.expect(r"teleop on .* q quits")
        assert not term.attrs_restored()  # raw mode while it runs
        term.send(b"w")
        assert peer.wait_for(lambda a: bool(a) and a[-1].frame.vx > 0.19, timeout=20)
        interrupted(term, r"teleop: sent \d+ frames, then zero velocity")
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO, timeout=5)


def test_teleop_q_quits_with_0(pair: PtyPair, peer: FirmwarePeer) -> None:
    with Terminal("teleop", pair.path, "--rate", "50") as term:
        term.expect(r"teleop on .* q quits")
        term.send(b"a")
        assert peer.wait_for(lambda a: bool(a) and a[-1].frame.wz > 0.49, timeout=20)
        term.send(b"q")
        ended(term, 0, r"then zero velocity")
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO, timeout=5)


def test_sniff_whose_terminal_closes_ends_with_129(mecanum: str) -> None:
    with Terminal("sniff", mecanum, "-p", "odom") as term:
        term.expect(r"odom: [1-9]\d* frames")  # the status line is up
        term.hang_up()
        assert term.wait() == 129


def test_teleop_whose_terminal_closes_stops_the_base(pair: PtyPair, peer: FirmwarePeer) -> None:
    with Terminal("teleop", pair.path, "--rate", "50") as term:
        term.expect(r"teleop on .* q quits")
        term.send(b"w")
        assert peer.wait_for(lambda a: bool(a) and a[-1].frame.vx > 0.19, timeout=20)
        term.hang_up()
        assert term.wait() == 129
    assert peer.wait_for(lambda a: a[-1].frame == cmd_frame.ZERO, timeout=5)


def test_demo_on_a_terminal() -> None:
    with Terminal("demo") as term:
        term.expect(r"side 1/4 drive\s+odom x=\+0\.\d+")
        interrupted(term, r"demo: stopped before the square was done")


# -- CAN: a shared bus, its modules, a sniffer and a recorder, each on its own terminal -----
def test_can_bus_sim_sniff_record_on_terminals(tmp_path: Path) -> None:
    name = f"tty{os.getpid()}"  # in the suite's own runtime directory (conftest)
    with Terminal("can", "bus", "up", name) as bus:
        bus.expect(rf"bus {name} up at 500000 bit/s .* Ctrl-C stops it")
        with Terminal("can", "-c", f"shared:{name}", "sim", "2") as sim:
            sim.expect(r"frames=[1-9]\d* errors=0 .*1:ok 2:ok")  # its live status line
            with Terminal("can", "-c", f"shared:{name}", "sniff") as sniff:
                sniff.expect(r"module\s+1 feedback")
                interrupted(sniff, r"counters: frames=[1-9]")
            log = tmp_path / "bus.log"
            with Terminal("can", "-c", f"shared:{name}", "record", str(log), cols=250) as rec:
                rec.expect(rf"{name} -> .*bus\.log: [1-9]\d* frames")
                text = interrupted(rec, r"recorded [1-9]\d* frames")
            n = int(re.findall(r"recorded (\d+) frames", text)[-1])
            assert len(log.read_text().splitlines()) == n
            interrupted(sim, r"bus: [1-9]\d* frames, 0 error frames")
        interrupted(bus, rf"bus {name} down")


# -- the fish and the arm ------------------------------------------------------------------
def test_fish_flash_on_a_terminal(tmp_path: Path) -> None:
    image = tmp_path / "fish-2.1.bin"
    image.write_bytes(make_image(0x0201, b"fish firmware 2.1" * 400))
    proc = spawn_verb("sim", "fish", "--json", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    with reaped(proc):
        port = json.loads(proc.stdout.readline())["port"]
        with Terminal("fish", "-p", port, "flash", str(image), "--chunk", "8") as term:
            term.expect(r"chunk [1-9]\d*/\d+")
            interrupted(term, r"fish flash: stopped after chunk \d+ of \d+")
        with Terminal("fish", "-p", port, "--timeout", "2", "flash", str(image)) as term:
            ended(term, 0, r"version_after: 2\.1", timeout=60)


def test_fw_run_on_a_terminal() -> None:
    """The board's counters on the live line; Ctrl-C stops QEMU, the counters at the end."""
    from tests.qemu_fw import qemu_build

    qemu_build()
    with Terminal("fw", "run") as term:
        term.expect(r"fwref firmware on /dev/pts/\d+")
        term.expect(r"t=\s+\d+\.\d+s\s+v=\(")  # the live line, once a second
        assert b"\x1b[?25l" in term.raw  # drawn as a live line: the cursor is hidden
        interrupted(term, r"firmware command receiver: frames=\d+")


def test_arm_pick_place_on_a_terminal() -> None:
    with Terminal("arm", "pick-place", "--realtime") as term:
        term.expect(r"reset-lift\s+reached")
        interrupted(term, r"pick and place: stopped, \d+ waypoints reached")
    with Terminal("arm", "pick-place") as term:
        ended(term, 0, r"result\s+│ done", timeout=60)


# -- ROS 2 over Zenoh: a fleet and an echo, peers on loopback (no router) ------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_fleet_and_ros2_echo_on_terminals() -> None:
    pytest.importorskip("zenoh")
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    nowhere = f"tcp/127.0.0.1:{_free_port()}"  # no router: the peers meet directly
    with Terminal("fleet", "1", "--connect", nowhere, "--listen", endpoint) as fleet:
        fleet.expect(r"1 simulated bases as ROS 2 nodes")
        with Terminal("ros2", "echo", "/robot1/odom", "--connect", endpoint) as echo:
            echo.expect(r"child_frame_id: .*base_link", timeout=30)
            interrupted(echo, r"ros2 echo: [1-9]\d* messages on /robot1/odom")
        interrupted(fleet, r"fleet /robot1: commands=[1-9]")


def test_fish_serve_on_a_terminal_answers_then_ctrl_c() -> None:
    """`fish serve` as a peer (no router): a `ros2 call` reaches its node, Ctrl-C ends it
    with 130 and its counters."""
    pytest.importorskip("zenoh")
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    nowhere = f"tcp/127.0.0.1:{_free_port()}"
    with Terminal("fish", "--port", "sim://fish", "serve", "--connect", nowhere, "--listen",
                  endpoint, cols=250) as serve:
        serve.expect(r"ROS 2 node /fish1/fish_bridge for the fish on sim://fish")
        res = run_cli("ros2", "call", "/fish1/fish_bridge/get_status", "std_srvs/srv/Trigger",
                      "--json", "--connect", endpoint, timeout=60)
        assert res.returncode == 0, res.stderr
        assert json.loads(json.loads(res.stdout)["message"])["link"] == "up"
        interrupted(serve, r"fish serve: calls=1 exchanges=[1-9]")


# -- the pieces underneath -----------------------------------------------------------------
def test_a_signal_while_a_line_is_drawn_waits_for_the_drawing() -> None:
    """stopping.held(): SIGINT inside the block is raised at its end, not in its middle;
    inside the verb's clean-up (after its loop) it only sets the exit status."""
    from fwbridge.cli_verbs import stopping

    steps: list[str] = []
    with stopping.stop_signals():
        with pytest.raises(stopping.Stopped):
            with stopping.held():
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("drawn whole")  # the handler ran, and did not raise here
            steps.append("never")
        assert steps == ["drawn whole"] and stopping.exit_code() == 130
    with stopping.stop_signals():
        with stopping.stoppable():
            pass  # the loop ended: the clean-up is shielded
        with stopping.held():
            os.kill(os.getpid(), signal.SIGTERM)
        assert stopping.exit_code() == 143  # recorded, never raised
