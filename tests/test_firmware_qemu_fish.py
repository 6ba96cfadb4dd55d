"""The fish's system commands on firmware_ref's C main controller, on QEMU's Cortex-M3.

The host side is the real one: ``fwbridge fish --port PORT ...`` as a
subprocess, and :class:`~fwbridge.bridge.robots.fish_client.FishClient` for the
upgrade steps a correct client never sends (a bad chunk CRC, a chunk out of
order). Power loss is QEMU killed and started again: the emulated board's
stand-in for flash is RAM, which a soft reset keeps and a power cycle clears
(a real part keeps it in flash; firmware_ref/README.md).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.robots.fish_client import FishClient
from fwbridge.cli_verbs.link import open_port
from fwbridge.protocols.families.fish_commands import (
    IapOp,
    IapStatus,
    iap_begin,
    iap_chunk,
    iap_op,
    make_image,
)
from tests.helpers import run_verb
from tests.qemu_fw import FwRun, fw_run


def fish(run: FwRun, *args: str) -> dict[str, Any]:
    """``fwbridge fish --port PORT ARGS`` (JSON out: ``config get`` prints it as is)."""
    flag = () if args[:2] == ("config", "get") else ("--json",)
    proc = run_verb("fish", "--port", run.port, *args, *flag, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    out: dict[str, Any] = json.loads(text if flag == () else text.splitlines()[-1])
    return out


@contextmanager
def client(run: FwRun) -> Iterator[FishClient]:
    port = open_port(run.port, 115200)
    try:
        # QEMU reads a pty only once it has seen it opened (it looks about once a second):
        # a request sent before then waits, its answer comes after the client's timeout,
        # and the retransmission runs the command twice. One byte neither receiver takes,
        # counted by the firmware, says the link is read.
        before = run.status()["rx_bytes"]
        port.write(b"\x00")
        run.status(lambda st: st["rx_bytes"] > before)
        yield FishClient(ActionLink(port, timeout=0.5, retries=3))
    finally:
        port.close()


def test_status_config_and_upgrade_through_the_fish_verbs(tmp_path: Path) -> None:
    image = make_image(0x0203, os.urandom(3000))
    (tmp_path / "fw.bin").write_bytes(image)
    cfg = {"free_period_ms": 250, "avoid_mm": 450, "stored_probability_pct": 55,
           "scenes": [{"sensor": "light_left_lux", "op": ">", "threshold": 10,
                       "action": "turn-left"}]}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    with fw_run() as run:
        st = fish(run, "status")
        assert (st["mode"], st["bank"], st["version"], st["boots"]) == ("idle", "A", "1.0", 1)
        assert fish(run, "config", "get")["scenes"][0]["sensor"] == "water_ingress"  # factory
        proc = run_verb("fish", "--port", run.port, "config", "set", str(tmp_path / "cfg.json"))
        assert proc.returncode == 0, proc.stderr.decode()
        assert fish(run, "config", "get") == cfg
        report = fish(run, "flash", str(tmp_path / "fw.bin"), "--chunk", "200")
        assert (report["version_before"], report["version_after"]) == ("1.0", "2.3")
        assert (report["bank_before"], report["bank_after"]) == ("A", "B")
        # The controller rebooted into bank B; the store survived the soft reset.
        st = fish(run, "status")
        assert (st["bank"], st["version"], st["boots"]) == ("B", "2.3", 2)
        assert fish(run, "config", "get") == cfg
        assert fish(run, "actions") == {"groups": []}
        rc, _ = run.stop()
    assert rc == 143


def test_iap_refusals_leave_the_running_bank(tmp_path: Path) -> None:
    image = make_image(0x0300, os.urandom(1000))
    chunks = [image[k:k + 256] for k in range(0, len(image), 256)]
    with fw_run() as run:
        with client(run) as fc:
            assert fc.iap(iap_op(IapOp.END)).status == IapStatus.NOT_STARTED
            assert fc.iap(iap_begin(image, 256)).ok
            bad = bytearray(iap_chunk(0, chunks[0]))
            bad[3] ^= 0xFF  # the chunk's own CRC-16, not the frame's: the frame is intact
            assert fc.iap(bytes(bad)).status == IapStatus.BAD_CHUNK_CRC
            assert fc.iap(iap_chunk(1, chunks[1])).status == IapStatus.MISSING_CHUNK
            assert fc.iap(iap_chunk(0, chunks[0])).ok
            assert fc.iap(iap_chunk(0, chunks[0])).ok  # sent again (answer lost): kept once
            res = fc.iap(iap_op(IapOp.END))  # chunks 1..3 missing
            assert (res.status, res.bank, res.version) == (IapStatus.MISSING_CHUNK, 0, 0x0100)
            errors = fc.error_codes().records
            assert [(e.code, e.module) for e in errors] == [
                (4, IapStatus.NOT_STARTED), (4, IapStatus.BAD_CHUNK_CRC),
                (4, IapStatus.MISSING_CHUNK), (4, IapStatus.MISSING_CHUNK)]
            st = fc.status()
            assert (st.bank, st.version, st.errors) == (0, 0x0100, 4)
        run.stop()


def test_power_loss_during_an_upgrade() -> None:
    image = make_image(0x0400, os.urandom(900))
    with fw_run() as run:
        with client(run) as fc:
            assert fc.iap(iap_begin(image, 300)).ok
            assert fc.iap(iap_chunk(0, image[:300])).ok
        # Power loss: QEMU killed, not stopped.
        os.kill(run.ready["qemu_pid"], signal.SIGKILL)
        rc, _ = run.stop()
    assert rc in (2, 143)
    with fw_run() as run:
        with client(run) as fc:
            res = fc.iap(iap_chunk(1, image[300:600]))
            assert res.status == IapStatus.NOT_STARTED
            assert (res.bank, res.version) == (0, 0x0100)  # the running bank, as it was
            st = fc.status()
            assert (st.bank, st.version) == (0, 0x0100)
        run.stop()


#: The patent's worked example (PROTOCOLS.md 3.4): its 69 data bytes are a two-step group.
EXAMPLE = bytes.fromhex(
    "FEFF00064500320000BFFB000000004000020002000000030018000300400D07000000"
    "01503C00023C3200031E1400030018000300400D070000000150C4FF023CCEFF031EECFF"
    "000000DAF39A40FDDF")


def test_stored_action_groups_listed_read_and_erased() -> None:
    from fwbridge.protocols.action_frame import ActionFrame, InstructionType

    group = EXAMPLE[7:7 + 69]
    with fw_run() as run:
        with client(run) as fc:
            ex = fc.link.send(ActionFrame(0, InstructionType.WRITE_PC, 0x31, group),
                              want_result=False)
            assert ex.delivered
            again = fc.link.send(ActionFrame(0, InstructionType.WRITE_PC, 0x31, group),
                                 want_result=False)  # the same frame: a duplicate, kept once
            assert again.delivered
            slot = fc.link.send(ActionFrame(0, InstructionType.READ_PC, 0x37, b"\x00"),
                                want_result=True)
            assert slot.delivered and slot.result is not None
            assert bytes(slot.result.data) == b"\x00\x01\x00" + group  # status, kind 1, slot 0
        assert fish(run, "actions") == {"groups": [{"slot": 0, "steps": 2, "bytes": 69}]}
        assert fish(run, "status")["stored_groups"] == 1
        proc = run_verb("fish", "--port", run.port, "erase")
        assert proc.returncode == 0, proc.stderr.decode()
        assert fish(run, "actions") == {"groups": []}
        run.stop()
