"""The shared simulated bus: a daemon owns bus time, nodes in other processes attach.

Exactness across processes (arbitration order and end-of-frame timestamps as in
one process), the CLI verbs of the README's CAN tour run as real subprocesses
against ``fwbridge can bus up``, python-can's own ``can.logger`` on it, and the
fall-back to the in-process bus.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import can
import pytest

from fwbridge.can_bus import fd
from fwbridge.can_bus.attach import SharedBusWarning
from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.daemon import BusDaemon
from fwbridge.can_bus.daemon_dir import daemon_info
from fwbridge.can_bus.interface import FwBridgeBus, SimBusInitError
from fwbridge.can_bus.sim.nodes import start_modules
from tests.helpers import bus_daemon, wait_for_line

FWBRIDGE = [sys.executable, "-c", "from fwbridge.cli import main; main()"]


@pytest.fixture
def afap(rundir: Path) -> Iterator[BusDaemon]:
    for dm, _ in bus_daemon("shared", bitrate=500_000, data_bitrate=2_000_000, pacing="afap"):
        yield dm


def test_buses_attach_and_arbitrate_exactly_through_the_daemon(afap: BusDaemon) -> None:
    a = can.Bus(interface="fwbridge", channel="shared:shared", fd=True)
    b = can.Bus(interface="fwbridge", channel="shared:shared", fd=True)
    sniffer = can.Bus(interface="fwbridge", channel="shared:shared", fd=True)
    try:
        assert isinstance(a, FwBridgeBus) and a.shared and a.node_id != b.node_id
        # queued at the same bus instant: the lowest ID wins, whoever sent it
        frames = [can.Message(arbitration_id=0x300, data=b"\x03", is_extended_id=False),
                  can.Message(arbitration_id=0x100, is_fd=True, bitrate_switch=True,
                              data=bytes(12), is_extended_id=False),
                  can.Message(arbitration_id=0x200, data=b"\x02\x02", is_extended_id=False)]
        a.send(frames[0])
        a.send(frames[1])
        b.send(frames[2])
        _ = (a.error_counters, b.error_counters)  # a call each: the daemon has their frames
        got = [sniffer.recv(2.0) for _ in range(3)]
        assert [m.arbitration_id for m in got if m is not None] == [0x100, 0x200, 0x300]
        assert got[0] is not None and got[0].is_fd and got[0].bitrate_switch
        # timestamps: end of each EOF, frames back to back from the first SOF
        model_frames = [Frame.make(0x100, bytes(12), fd=True, brs=True),
                        Frame.make(0x200, b"\x02\x02"), Frame.make(0x300, b"\x03")]
        start = got[0].timestamp - (fd.frame_seconds(model_frames[0], 5e5, 2e6) - 3 / 5e5)
        t = start
        for msg, f in zip(got, model_frames):
            t += fd.frame_seconds(f, 5e5, 2e6)
            assert msg is not None and msg.timestamp == pytest.approx(t - 3 / 5e5, abs=1e-6)
        assert a.recv(1.0) is not None  # a saw b's frame; nobody saw its own
    finally:
        for bus in (a, b, sniffer):
            bus.shutdown()


def test_lone_remote_node_is_not_acknowledged_and_advance_to_moves_time(afap: BusDaemon) -> None:
    a = can.Bus(interface="fwbridge", channel="shared:shared")
    try:
        a.send(can.Message(arbitration_id=0x10, data=b"\x01"))
        assert a.wait_sent() == 1  # nobody to acknowledge it
        tec, _ = a.error_counters
        assert tec >= 128 and a.state is can.BusState.PASSIVE
        t0 = a.time
        a.advance_to(t0 + 0.01)
        assert a.time == pytest.approx(t0 + 0.01, abs=1e-5)
    finally:
        a.shutdown()


def test_a_plain_name_is_local_and_warns_once_naming_the_shared_bus(afap: BusDaemon) -> None:
    with pytest.warns(SharedBusWarning, match="'shared:shared' attaches"):
        local = can.Bus(interface="fwbridge", channel="shared", pacing="afap")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the channel is open: no second warning
        again = can.Bus(interface="fwbridge", channel="shared")
        other = can.Bus(interface="fwbridge", channel="no-daemon-here")
    remote = can.Bus(interface="fwbridge", channel="shared:shared")
    try:
        assert isinstance(local, FwBridgeBus) and isinstance(remote, FwBridgeBus)
        assert not local.shared and not other.shared and remote.shared
        # two buses: the local pair talk to each other, the daemon's node hears none of it
        local.send(can.Message(arbitration_id=0x42, data=b"\x01"))
        assert again.recv(1.0) is not None
        assert remote.recv(0.2) is None
    finally:
        for bus in (local, again, other, remote):
            bus.shutdown()


def test_shared_without_a_daemon_is_one_clear_error(rundir: Path) -> None:
    with pytest.raises(SimBusInitError) as err:
        can.Bus(interface="fwbridge", channel="shared:nobody")
    assert str(err.value) == ("no shared bus nobody is up: start it with "
                              "'fwbridge can bus up nobody'")
    with pytest.raises(SimBusInitError, match="bus name"):
        can.Bus(interface="fwbridge", channel="shared:../x")


def test_python_can_detects_shared_buses_by_their_channel_form(afap: BusDaemon) -> None:
    found = can.detect_available_configs(interfaces=["fwbridge"])
    assert {"interface": "fwbridge", "channel": "shared:shared"} in found


def test_modules_start_on_a_shared_bus(afap: BusDaemon) -> None:
    host = can.Bus(interface="fwbridge", channel="shared:shared")
    try:
        with start_modules("shared:shared", 2) as mods:
            assert all(b.shared for b in mods.buses)  # type: ignore[attr-defined]
            host.send(can.Message(arbitration_id=0x102, data=bytes(8), is_extended_id=False))
            heard: set[int] = set()
            deadline = time.monotonic() + 20
            while (mods.modules[1].commands == 0 or len(heard) < 2) and \
                    time.monotonic() < deadline:
                got = host.recv(0.5)
                if got is not None:
                    heard.add(got.arbitration_id)
            assert heard == {0x201, 0x202} and mods.modules[1].commands == 1
            assert mods.modules[0].commands == 0 and mods.error is None
    finally:
        host.shutdown()


def test_settings_must_agree_with_the_daemon(afap: BusDaemon) -> None:
    with pytest.raises(can.CanInitializationError, match="runs at 500000"):
        can.Bus(interface="fwbridge", channel="shared:shared", bitrate=250_000)


# -- the CLI across real processes ---------------------------------------------------------------
def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FWBRIDGE, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def bus_up(rundir: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([*FWBRIDGE, "can", "bus", "up", "sim0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while daemon_info("sim0") is None:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling: a bounded wait for the daemon's socket
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)


def test_the_readme_tour_across_processes(bus_up: subprocess.Popen[str], rundir: Path) -> None:
    listing = _run("can", "bus", "list", "--json")
    assert json.loads(listing.stdout)["name"] == "sim0"
    # The modules run until the tour is over (a fixed duration could end before it
    # on a loaded machine, and leave `can record` waiting for frames).
    sim = subprocess.Popen([*FWBRIDGE, "can", "-c", "shared:sim0", "sim", "3", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(sim, "^simulating ")  # its modules are on the bus
        sniff = _run("can", "-c", "shared:sim0", "sniff", "--count", "5", "--json")
        assert sniff.returncode == 0, sniff.stderr
        rows = [json.loads(line) for line in sniff.stdout.splitlines()]
        assert len(rows) == 5 and {r["direction"] for r in rows} <= {"command", "feedback"}
        load = _run("can", "-c", "shared:sim0", "busload", "--count", "1", "--json",
                    "--interval", "0.5")
        assert load.returncode == 0, load.stderr
        report = json.loads(load.stdout.splitlines()[0])
        assert report["frames"] > 10 and 0 < report["load"] < 100
        sent = _run("can", "-c", "shared:sim0", "send", "123#DEADBEEF")
        assert sent.returncode == 0, sent.stderr
        assert "not acknowledged" not in sent.stderr
        log = rundir.parent / "tour.log"
        rec = _run("can", "-c", "shared:sim0", "record", str(log), "--count", "20")
        assert rec.returncode == 0, rec.stderr
        assert len(log.read_text().splitlines()) == 20
    finally:
        sim.send_signal(signal.SIGINT)  # as Ctrl-C ends it
        out, err = sim.communicate(timeout=60)
    assert sim.returncode == 130, err
    final = json.loads(out.splitlines()[-1])
    assert all(m["status"] == "ok" for m in final["modules"])
    # SIGTERM stops the daemon and removes its socket; 143, as every verb a signal stops
    bus_up.send_signal(signal.SIGTERM)
    bus_up.communicate(timeout=10)
    assert bus_up.returncode == 143
    assert not list(rundir.glob("sim0.*"))


def test_python_can_logger_records_across_processes(bus_up: subprocess.Popen[str],
                                                   tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    logger = subprocess.Popen([sys.executable, "-m", "can.logger", "-i", "fwbridge",
                               "-c", "shared:sim0", "-f", str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for_line(logger, "^Can Logger", stream="stdout")  # its bus is open: it receives
        for i in range(3):
            sent = _run("can", "-c", "shared:sim0", "send", f"7{i}1#0102")
            assert sent.returncode == 0, sent.stderr
    finally:
        logger.send_signal(signal.SIGINT)
        logger.communicate(timeout=20)
    lines = log.read_text().splitlines()
    assert [ln.split()[2] for ln in lines] == ["701#0102", "711#0102", "721#0102"]


def test_bus_up_refuses_a_second_daemon_and_bad_names(bus_up: subprocess.Popen[str]) -> None:
    again = _run("can", "bus", "up", "sim0")
    assert again.returncode == 2 and "already up" in again.stderr
    bad = _run("can", "bus", "up", "../x")
    assert bad.returncode == 2 and "bus name" in bad.stderr
    assert _run("can", "bus", "down", "nothing").returncode == 2


def test_bus_up_detach_then_down(rundir: Path) -> None:
    up = _run("can", "bus", "up", "bg0", "--bitrate", "250000", "--data-bitrate", "1000000",
              "--detach")
    assert up.returncode == 0, up.stderr
    info = daemon_info("bg0")
    assert info is not None and (info["bitrate"], info["data_bitrate"]) == (250_000, 1_000_000)
    bus = can.Bus(interface="fwbridge", channel="shared:bg0", fd=True)
    try:
        assert isinstance(bus, FwBridgeBus) and bus.shared and bus.sim.data_bitrate == 1_000_000
    finally:
        bus.shutdown()
    down = _run("can", "bus", "down", "bg0")
    assert down.returncode == 0, down.stderr
    assert daemon_info("bg0") is None and not list(rundir.glob("bg0.*"))
    listing = _run("can", "bus", "list")
    assert "no shared bus is up" in listing.stderr


def test_socketcand_clients_attach_on_loopback(rundir: Path) -> None:
    gen = bus_daemon("scd", socketcand=0)
    dm, _ = next(gen)
    try:
        assert dm.tcp is not None and dm.tcp.getsockname()[0] == "127.0.0.1"
        port = dm.socketcand_port
        assert daemon_info("scd")["socketcand"] == f"127.0.0.1:{port}"  # type: ignore[index]
        native = can.Bus(interface="fwbridge", channel="shared:scd")
        scd = can.Bus(interface="socketcand", host="127.0.0.1", port=port, channel="scd")
        try:
            scd.send(can.Message(arbitration_id=0x123, is_extended_id=False, data=b"\x11\x22"))
            got = native.recv(2.0)
            assert got is not None and (got.arbitration_id, bytes(got.data)) == (0x123, b"\x11\x22")
            native.send(can.Message(arbitration_id=0x1ABCDE, is_extended_id=True, data=b"\x05"))
            back = scd.recv(2.0)
            assert back is not None and back.is_extended_id
            assert (back.arbitration_id, bytes(back.data)) == (0x1ABCDE, b"\x05")
            assert abs(back.timestamp - time.time()) < 5  # bus time, wall-clock based
        finally:
            scd.shutdown()
            native.shutdown()
        # a client that names another bus is refused
        import socket as _socket

        with _socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            assert s.recv(64) == b"< hi >"
            s.sendall(b"< open other >")
            assert b"error" in s.recv(64)
    finally:
        gen.close()


def test_remote_error_frames_and_flags(afap: BusDaemon) -> None:
    a = can.Bus(interface="fwbridge", channel="shared:shared", receive_error_frames=True)
    try:
        assert a.receive_error_frames and not a.receive_own_messages
        a.send(can.Message(arbitration_id=0x10, is_extended_id=False, data=b"\x01"))
        a.wait_sent()  # lone: no ACK, error frames and an error-passive change
        got = [m for m in iter(lambda: a.recv(0.5), None)]
        assert got and all(m.is_error_frame for m in got)
        assert any(m.arbitration_id & 0x20 for m in got)  # CAN_ERR_ACK
    finally:
        a.shutdown()


def test_a_lone_cli_node_on_a_shared_bus_says_so(bus_up: subprocess.Popen[str]) -> None:
    sent = _run("can", "-c", "shared:sim0", "send", "123#01")
    assert sent.returncode == 2
    assert "the shared bus sim0 has no other node" in sent.stderr


def test_the_cli_on_a_plain_name_warns_of_the_shared_bus(bus_up: subprocess.Popen[str]) -> None:
    sent = _run("can", "-c", "sim0", "--bus-kwarg", "pacing=afap", "send", "123#01")
    lines = sent.stderr.splitlines()
    assert lines[0] == ("warning: a shared bus sim0 is up, but channel 'sim0' is this "
                        "process's own bus; channel 'shared:sim0' attaches to the shared one")
    assert sent.returncode == 2 and "-c shared:sim0" in lines[-1]  # alone on its own bus
