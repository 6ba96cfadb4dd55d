"""The ``fwbridge`` python-can interface: API semantics, threads, and python-can's own tools."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import can
import pytest

from fwbridge.can_bus.bits import EOF_END, Frame, frame_length, stuffed_length
from fwbridge.can_bus.interface import FwBridgeBus
from fwbridge.can_bus.sim.nodes import start_modules
from fwbridge.can_bus.simchannel import get_channel
from tests.helpers import shared_bus

ROOT = Path(__file__).resolve().parents[1]
_names = itertools.count()


@pytest.fixture
def channel() -> str:
    """A channel name no other test uses (channels are per process)."""
    return f"t{os.getpid()}-{next(_names)}"


@pytest.fixture
def buses() -> Iterator[list[can.BusABC]]:
    opened: list[can.BusABC] = []
    yield opened
    for bus in opened:
        bus.shutdown()


def std(can_id: int, data: bytes = b"") -> can.Message:
    return can.Message(arbitration_id=can_id, is_extended_id=False, data=data)


def test_entry_point_and_arbitration_through_python_can(channel: str,
                                                        buses: list[can.BusABC]) -> None:
    senders = [can.Bus(interface="fwbridge", channel=channel, pacing="afap", epoch=0.0)
               for _ in range(5)]
    rx = can.Bus(interface="fwbridge", channel=channel)
    buses += [*senders, rx]
    assert all(isinstance(b, FwBridgeBus) for b in buses)
    ids = [0x305, 0x104, 0x203, 0x102, 0x301]
    for bus, can_id in zip(senders, ids):  # queued at the same bus instant: they arbitrate
        bus.send(std(can_id, bytes([can_id & 0xFF])))
    got = [rx.recv(1.0) for _ in ids]
    assert [m.arbitration_id for m in got if m] == sorted(ids)
    # timestamps: end of EOF in bus time (epoch 0), frames back to back
    t = 0
    for msg in got:
        assert msg is not None
        f = Frame(msg.arbitration_id, False, False, 1, bytes(msg.data))
        assert msg.timestamp == pytest.approx((t + stuffed_length(f) + EOF_END) / 500_000,
                                              abs=1e-12)
        assert msg.channel == channel and msg.is_rx
        t += frame_length(f)
    assert rx.recv(0) is None


def test_filters_own_messages_and_remote_frames(channel: str, buses: list[can.BusABC]) -> None:
    a = can.Bus(interface="fwbridge", channel=channel, pacing="afap", receive_own_messages=True)
    b = can.Bus(interface="fwbridge", channel=channel,
                can_filters=[{"can_id": 0x200, "can_mask": 0x700, "extended": False}])
    buses += [a, b]
    a.send(std(0x123, b"\x01"))
    a.send(std(0x201, b"\x02"))
    a.send(can.Message(arbitration_id=0x201, is_extended_id=True, data=b"\x03"))
    a.send(can.Message(arbitration_id=0x2AB, is_extended_id=False, is_remote_frame=True, dlc=5))
    got = [b.recv(1.0) for _ in range(2)]
    assert [(m.arbitration_id, m.is_remote_frame, m.dlc) for m in got if m] == [
        (0x201, False, 1), (0x2AB, True, 5)]
    assert b.recv(0.05) is None  # 0x123 and the extended 0x201 filtered out
    own = [a.recv(1.0) for _ in range(4)]
    assert all(m is not None and not m.is_rx for m in own)
    b.set_filters(None)
    a.send(std(0x123))
    msg = b.recv(1.0)
    assert msg is not None and msg.arbitration_id == 0x123


def test_state_follows_fault_confinement(channel: str, buses: list[can.BusABC]) -> None:
    lone = can.Bus(interface="fwbridge", channel=channel, pacing="afap", tx_queue_size=1,
                   auto_recovery=False)
    buses.append(lone)
    assert lone.state is can.BusState.ACTIVE
    lone.send(std(0x10))
    with pytest.raises(can.CanOperationError, match="no acknowledgement"):
        lone.send(std(0x11))  # the queue's one frame is waiting for an ACK
    assert lone.state is can.BusState.PASSIVE and lone.error_counters == (128, 0)
    other = can.Bus(interface="fwbridge", channel=channel)
    buses.append(other)
    msg = other.recv(1.0)
    assert msg is not None and msg.arbitration_id == 0x10
    assert lone.error_counters == (127, 0) and lone.state is can.BusState.ACTIVE
    lone.inject(bit_error_rate=1.0)
    lone.send(std(0x12))
    lone.wait_sent()
    assert lone.state is can.BusState.ERROR
    lone.inject(bit_error_rate=0.0)
    lone.state = can.BusState.ACTIVE  # recovery on request
    msg = other.recv(1.0)  # the afap bus runs through the 128 x 11 recessive bits
    assert msg is not None and msg.arbitration_id == 0x12
    assert lone.state is can.BusState.ACTIVE
    lone.state = can.BusState.PASSIVE  # listen-only
    with pytest.raises(can.CanOperationError, match="listen-only"):
        lone.send(std(0x13))


def test_error_frames_are_socketcan_style(channel: str, buses: list[can.BusABC]) -> None:
    a = can.Bus(interface="fwbridge", channel=channel, pacing="afap", bit_error_rate=1.0)
    b = can.Bus(interface="fwbridge", channel=channel, receive_error_frames=True)
    buses += [a, b]
    a.send(std(0x100))
    first = b.recv(1.0)
    assert first is not None and first.is_error_frame
    assert first.arbitration_id & 0x08  # CAN_ERR_PROT
    assert first.data[2] == 0x01 and first.data[7] == 1  # bit error; b's REC
    a.inject(bit_error_rate=0.0)


def test_threads_realtime(channel: str, buses: list[can.BusABC]) -> None:
    """python-can tools receive in one thread and send in another."""
    tx = can.Bus(interface="fwbridge", channel=channel, bitrate=1_000_000)
    rx = can.Bus(interface="fwbridge", channel=channel)
    buses += [tx, rx]
    n = 200
    got: list[can.Message] = []

    def reader() -> None:
        while len(got) < n:
            msg = rx.recv(2.0)
            if msg is None:
                return
            got.append(msg)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(n):  # one ID: a backlog keeps its order (several IDs go lowest first)
        tx.send(std(0x100, i.to_bytes(2, "big")))
    thread.join(10)
    assert [int.from_bytes(m.data, "big") for m in got] == list(range(n))
    stamps = [m.timestamp for m in got]
    assert all(b >= a + 40e-6 for a, b in itertools.pairwise(stamps))  # a frame takes >= 47 bits


def test_channel_settings_must_agree(channel: str, buses: list[can.BusABC]) -> None:
    buses.append(can.Bus(interface="fwbridge", channel=channel, bitrate=250_000))
    with pytest.raises(can.CanInitializationError, match="250000"):
        can.Bus(interface="fwbridge", channel=channel, bitrate=500_000)
    with pytest.raises(can.CanInitializationError, match="data phase at 250000"):
        can.Bus(interface="fwbridge", channel=channel, fd=True, data_bitrate=2_000_000)
    with pytest.raises(can.CanInitializationError, match="pacing"):
        can.Bus(interface="fwbridge", channel=channel + "x", pacing="warp")
    configs = can.detect_available_configs("fwbridge")
    assert {"interface": "fwbridge", "channel": channel} in configs


def test_shutdown_sends_what_is_queued(channel: str, tmp_path: Path) -> None:
    path = tmp_path / "tap.log"
    tap = FwBridgeBus(channel, pacing="afap", capture=str(path))
    tx = FwBridgeBus(channel)
    for i in range(10):
        tx.send(std(0x300 - i, bytes([i])))
    tx.shutdown()  # afap: the bus runs until its queue is empty
    tap.shutdown()
    with can.LogReader(path) as reader:
        assert [m.arbitration_id for m in reader] == [0x300 - i for i in range(9, -1, -1)]
    assert get_channel(channel) is None  # the last user closed it


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_python_can_logger_and_player_run_on_fwbridge(tmp_path: Path, rundir: Path) -> None:
    # python-can's tools take a channel: shared:NAME reaches modules of another process
    log, replayed = tmp_path / "log.log", tmp_path / "replayed.log"
    with shared_bus("tools0"), start_modules("shared:tools0", 3) as modules:
        logger = subprocess.Popen(
            [sys.executable, "-m", "can.logger", "-i", "fwbridge", "-c", "shared:tools0",
             "-f", str(log)],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and (not log.exists() or log.stat().st_size < 1500):
                time.sleep(0.05)  # polling: a bounded wait for frames in the log
        finally:
            logger.send_signal(signal.SIGINT)  # how a user stops can.logger
            out, err = logger.communicate(timeout=20)
        assert modules.error is None
    assert logger.returncode == 0, err
    assert "FwBridgeBus" in out
    with can.LogReader(log) as reader:
        recorded = list(reader)
    assert {m.arbitration_id for m in recorded} == {0x201, 0x202, 0x203}  # module feedback
    player = subprocess.run(
        [sys.executable, "-m", "can.player", "-i", "fwbridge",
         # fifo: a lagging player then bursts, and priority order would reorder its frames
         "--bus-kwargs", f"capture={replayed}", "tx_order=fifo", "-c", "sim1", str(log)],
        env=_env(), capture_output=True, text=True, timeout=60)
    assert player.returncode == 0, player.stderr
    with can.LogReader(replayed) as reader:
        played = list(reader)
    assert [(m.arbitration_id, bytes(m.data)) for m in played] == [
        (m.arbitration_id, bytes(m.data)) for m in recorded]
    # timing kept: the player waits for each recorded offset, so never plays it faster
    span = recorded[-1].timestamp - recorded[0].timestamp
    assert played[-1].timestamp - played[0].timestamp >= 0.9 * span


@pytest.mark.parametrize("suffix", [".pcapng", ".mcap", ".asc"])
def test_capture_opens_its_writer_through_python_cans_dispatch(channel: str, tmp_path: Path,
                                                               suffix: str) -> None:
    path = tmp_path / f"tap{suffix}"
    tap = FwBridgeBus(channel, pacing="afap", capture=str(path))
    tx = FwBridgeBus(channel)
    for i in range(3):
        tx.send(std(0x120 + i, bytes([i])))
    tx.shutdown()
    tap.shutdown()
    with can.LogReader(path) as reader:
        assert [m.arbitration_id for m in reader] == [0x120, 0x121, 0x122]


def test_capture_of_an_unknown_format_is_one_error(channel: str, tmp_path: Path) -> None:
    with pytest.raises(can.CanInitializationError) as err:
        FwBridgeBus(channel, capture=str(tmp_path / "tap.nosuch"))
    assert str(err.value).startswith(f"capture={tmp_path / 'tap.nosuch'}: ")
    assert "\n" not in str(err.value) and get_channel(channel) is None  # nothing left open


def test_the_interface_imports_no_capture_module() -> None:
    # capture= goes through can.Logger: python-can loads its writer plugins itself
    probe = ("import sys, fwbridge.can_bus.interface\n"
             "print(sorted(m for m in sys.modules if m.startswith('fwbridge.')))\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)
    loaded = res.stdout
    assert "fwbridge.can_bus.interface" in loaded  # the probe saw the interface
    for module in ("capture", "mcap_capture", "mcap_writer", "pcapng", "nodes"):
        assert f"'fwbridge.can_bus.{module}'" not in loaded
    for source in ("interface.py", "local_node.py", "attach.py", "bus_node.py"):
        assert not {m for m in _imports(ROOT / "can_bus" / source)
                    if m.rpartition(".")[2] in ("capture", "mcap_capture", "pcapng", "nodes")}


def _imports(path: Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):  # every level: deferred, TYPE_CHECKING
        if isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_interface_and_remote_do_not_import_each_other() -> None:
    can_bus = ROOT / "can_bus"
    assert not any(m.startswith("fwbridge.can_bus.remote") for m in
                   _imports(can_bus / "interface.py"))
    assert not any(m.startswith("fwbridge.can_bus.interface") for m in
                   _imports(can_bus / "remote.py"))
