"""The protocol stacks people run on CAN, unmodified, on the simulated bus.

can-isotp (a 4 KiB transfer, classic and FD, and under bit errors), canopen (NMT,
heartbeat, SDO download and upload between a LocalNode and a RemoteNode on two
buses, with the actuator module's EDS), udsoncan over ISO-TP (read data by
identifier from a simulated ECU). Realtime pacing: the stacks run their own
threads and timers, as on a real bus. Installed by the ``canstacks`` extra.
"""

from __future__ import annotations

import importlib.resources
import itertools
import os
import threading
import time
from collections.abc import Iterator

import can
import pytest

isotp = pytest.importorskip("isotp", reason="can-isotp: pip install -e '.[canstacks]'")
canopen = pytest.importorskip("canopen", reason="canopen: pip install -e '.[canstacks]'")
udsoncan = pytest.importorskip("udsoncan", reason="udsoncan: pip install -e '.[canstacks]'")

from udsoncan.client import Client  # noqa: E402
from udsoncan.connections import PythonIsoTpConnection  # noqa: E402

_names = itertools.count()
PAYLOAD = bytes((i * 37 + 11) & 0xFF for i in range(4096))


def _channel() -> str:
    return f"stacks-{os.getpid()}-{next(_names)}"


def _params(fd: bool) -> dict[str, object]:
    return {"stmin": 0, "blocksize": 16, "tx_data_length": 64 if fd else 8, "can_fd": fd,
            "bitrate_switch": fd, "max_frame_size": 8192, "rx_consecutive_frame_timeout": 2000,
            "rx_flowcontrol_timeout": 2000}


def _address(tx: int, rx: int) -> object:
    return isotp.Address(isotp.AddressingMode.Normal_11bits, txid=tx, rxid=rx)


class _Pair:
    """Two buses on one channel, an ISO-TP stack on each (tester 0x7E0 <-> ECU 0x7E8)."""

    def __init__(self, fd: bool, ber: float = 0.0) -> None:
        ch = _channel()
        self.a = can.Bus(interface="fwbridge", channel=ch, bitrate=500_000, fd=fd,
                         data_bitrate=2_000_000 if fd else None)
        self.b = can.Bus(interface="fwbridge", channel=ch, fd=fd, bit_error_rate=ber,
                         fault_seed=7)
        self.sa = isotp.CanStack(self.a, address=_address(0x7E0, 0x7E8), params=_params(fd))
        self.sb = isotp.CanStack(self.b, address=_address(0x7E8, 0x7E0), params=_params(fd))

    def close(self) -> None:
        for stack in (self.sa, self.sb):
            stack.stop()
        for bus in (self.a, self.b):
            bus.shutdown()


@pytest.fixture
def pair_factory() -> Iterator[list[_Pair]]:
    made: list[_Pair] = []
    yield made
    for p in made:
        p.close()


@pytest.mark.parametrize("fd", [False, True], ids=["classic", "fd"])
def test_isotp_4kib_transfer(fd: bool, pair_factory: list[_Pair]) -> None:
    p = _Pair(fd)
    pair_factory.append(p)
    p.sa.start()
    p.sb.start()
    p.sa.send(PAYLOAD)
    got = p.sb.recv(block=True, timeout=20)
    assert got == PAYLOAD
    frames = p.a.sim.model.frames
    # first frame + consecutive frames + flow control: 4096 bytes in 7 (or 63) per frame
    per = 62 if fd else 7
    assert frames >= (4096 - (62 if fd else 6)) // per + 1
    if fd:
        assert frames < 80  # 64-byte FD frames: ~66 frames instead of ~590


def test_isotp_under_bit_errors_the_controllers_retransmit(pair_factory: list[_Pair]) -> None:
    """BER 1e-4 on the receiving node: error frames destroy frames, the CAN controllers
    resend them, ISO-TP sees the payload whole. A frame destroyed by a flag on the
    last EOF bit reaches the receivers twice (ISO 11898-1 accepts that duplicate); ISO-TP
    then reports a sequence error and the application sends again: at most 3 tries."""
    p = _Pair(False, ber=1e-4)
    pair_factory.append(p)
    p.sa.start()
    p.sb.start()
    got = None
    for _ in range(3):
        p.sa.send(PAYLOAD)
        got = p.sb.recv(block=True, timeout=20)
        if got == PAYLOAD:
            break
    assert got == PAYLOAD
    assert p.a.sim.model.error_frames > 0  # errors did happen, and were recovered


def test_canopen_nmt_heartbeat_and_sdo_between_two_buses() -> None:
    eds = importlib.resources.files("fwbridge.can_bus") / "eds" / "actuator.eds"
    ch = _channel()
    net1, net2 = canopen.Network(), canopen.Network()
    net1.connect(interface="fwbridge", channel=ch, bitrate=500_000)
    net2.connect(interface="fwbridge", channel=ch, bitrate=500_000)
    try:
        local = canopen.LocalNode(3, str(eds))
        net1.add_node(local)
        remote = canopen.RemoteNode(3, str(eds))
        net2.add_node(remote)
        # SDO download (expedited) into the module, and upload back
        remote.sdo["Actuator command"]["Target angle"].raw = -20
        remote.sdo["Actuator command"]["Speed"].raw = 60
        assert local.sdo["Actuator command"]["Target angle"].raw == -20
        local.sdo["Actuator feedback"]["Angle"].raw = 17
        assert remote.sdo["Actuator feedback"]["Angle"].raw == 17
        assert remote.sdo["Actuator command"]["Speed"].raw == 60
        assert remote.sdo["Identity object"]["Product code"].raw == 1
        # NMT from the master, then the module's heartbeat
        remote.nmt.state = "OPERATIONAL"
        deadline = time.monotonic() + 5
        while local.nmt.state != "OPERATIONAL":
            assert time.monotonic() < deadline
            time.sleep(0.01)  # polling: a bounded wait
        local.nmt.start_heartbeat(50)
        assert remote.nmt.wait_for_heartbeat(timeout=2) == "OPERATIONAL"
        remote.nmt.state = "PRE-OPERATIONAL"
        deadline = time.monotonic() + 5
        while remote.nmt.wait_for_heartbeat(timeout=2) != "PRE-OPERATIONAL":
            assert time.monotonic() < deadline
        local.nmt.stop_heartbeat()
    finally:
        net1.disconnect()
        net2.disconnect()


VIN = "FWBRIDGE000000017"


class _Ecu:
    """A simulated ECU: UDS ReadDataByIdentifier 0xF190 (VIN) over ISO-TP, else NRC 0x31."""

    def __init__(self, stack: object) -> None:
        self.stack = stack
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            req = self.stack.recv(block=True, timeout=0.1)  # type: ignore[attr-defined]
            if req is None:
                continue
            if bytes(req) == b"\x22\xf1\x90":
                self.stack.send(b"\x62\xf1\x90" + VIN.encode())  # type: ignore[attr-defined]
            else:
                self.stack.send(bytes([0x7F, req[0], 0x31]))  # type: ignore[attr-defined]


@pytest.mark.parametrize("fd", [False, True], ids=["classic", "fd"])
def test_udsoncan_read_data_by_identifier(fd: bool, pair_factory: list[_Pair]) -> None:
    p = _Pair(fd)
    pair_factory.append(p)
    p.sb.start()
    ecu = _Ecu(p.sb)
    ecu.thread.start()
    config = dict(udsoncan.configs.default_client_config)
    config["data_identifiers"] = {0xF190: udsoncan.AsciiCodec(17), 0xF191: udsoncan.AsciiCodec(4)}
    try:
        with Client(PythonIsoTpConnection(p.sa), config=config, request_timeout=5) as client:
            resp = client.read_data_by_identifier(0xF190)
            assert resp.positive and resp.service_data.values[0xF190] == VIN
            with pytest.raises(udsoncan.exceptions.NegativeResponseException):
                client.read_data_by_identifier(0xF191)
    finally:
        ecu.stop.set()
        ecu.thread.join(2)
