"""The patent's whole command table on the fish, end to end over a pty.

Each test sends frames through a real pseudo-terminal to the fish firmware
(its world in its own thread, realtime x2), reads the answer and the result,
decodes the payload and checks the fish's state. The fish keeps its flash in
a per-test file; "power loss" is the simulator stopped and a new one started
on the same file.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.link.transports import open_link
from fwbridge.bridge.robots.fish_client import FishClient, FishError
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.fish.flash import FACTORY_IMAGE, FishFlash, FlashError
from fwbridge.bridge.sim.models.fish import FishParams, RobotFish
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.families import action_group
from fwbridge.protocols.families.actuator import Fault
from fwbridge.protocols.families.arq import Status
from fwbridge.protocols.families.fish_commands import (
    DEFAULT_CONFIG,
    ErrorCode,
    FishMode,
    IapOp,
    IapStatus,
    Scene,
    SceneOp,
    SceneSensor,
    UserConfig,
    iap_begin,
    iap_chunk,
    iap_op,
    make_image,
)
from tests.helpers import EXAMPLE

IMAGE_2 = make_image(0x0200, bytes(range(256)) * 7 + b"fish 2.0")


class PtyFish:
    """The fish behind a pty, with its flash in ``flash``; restartable (a power cycle)."""

    def __init__(self, flash: Path) -> None:
        self.flash = flash
        self._start()

    def _start(self) -> None:
        self.model = RobotFish(FishParams(flash=str(self.flash)))
        self.endpoint = SimEndpoint(self.model, pacing="realtime", speed=2.0)
        self.pty = PtyLink(self.endpoint)
        self.endpoint.start()
        self.port = open_link(self.pty.path, timeout=0.05)
        self.link = ActionLink(self.port, timeout=1.0, retries=3)  # generous: a shared box
        self.client = FishClient(self.link)

    def stop(self) -> None:
        self.port.close()
        self.endpoint.stop()
        self.pty.close()
        self.model.close()

    def restart(self) -> None:
        self.stop()
        self._start()

    def send(self, sub: int, data: bytes = b"", itype: int = InstructionType.WRITE_PC,
             **kw: bool) -> tuple[bool, Status | int | None]:
        ex = self.link.send(ActionFrame(0, itype, sub, data), **kw)
        return ex.delivered, ex.status

    def wait(self, cond: object, limit: float = 10.0) -> bool:
        end = time.monotonic() + limit  # a bound on waiting, not an assertion on time
        while time.monotonic() < end:
            if callable(cond) and cond():
                return True
            time.sleep(0.02)  # polling: a bounded wait
        return False


@pytest.fixture
def fish(tmp_path: Path) -> Iterator[PtyFish]:
    f = PtyFish(tmp_path / "fish-flash.json")
    yield f
    f.stop()


def test_status_stand_still_and_free_swimming(fish: PtyFish) -> None:
    st = fish.client.status()
    assert (st.mode, st.bank, st.version, st.boots) == (FishMode.IDLE, 0, 0x0100, 1)
    assert st.as_dict()["version"] == "1.0" and st.errors == 0
    fish.client.free_swimming()
    assert fish.client.status().mode == FishMode.FREE
    assert fish.model.controller.mode.name == "FREE"
    fish.client.stand_still()
    st = fish.client.status()
    assert st.mode == FishMode.STILL and st.running == 0
    # Every servo commanded to 0° and getting there.
    assert {k: t.angle for k, t in fish.model.master.targets.items()} == {k: 0 for k in range(1, 8)}
    fish.model.modules[1].position = 40.0  # pushed away: the servo comes back
    assert fish.wait(lambda: abs(fish.model.modules[1].angle) < 2)


def test_user_configuration_is_written_applied_and_kept(fish: PtyFish) -> None:
    assert fish.client.config_get() == DEFAULT_CONFIG
    cfg = UserConfig(free_period_ms=250, avoid_mm=900, stored_probability_pct=55, scenes=(
        Scene(SceneSensor.SONAR_LEFT_MM, SceneOp.BELOW, 300, 3),  # turn-right
        Scene(SceneSensor.DEPTH_CM, SceneOp.ABOVE, 150, 5),  # ascend
    ))
    fish.client.config_set(cfg)
    assert fish.client.config_get() == cfg
    ctl = fish.model.controller
    assert (ctl.free_period, ctl.behaviour.avoid_distance) == (0.25, 0.9)
    assert [s.action for s in ctl.behaviour.scenes] == ["turn-right", "ascend"]
    fish.restart()  # power cycle: the configuration is in the flash file
    assert fish.client.config_get() == cfg
    assert fish.model.controller.free_period == 0.25
    assert json.loads(fish.flash.read_text())["user_config"] == cfg.pack().hex()
    # A malformed configuration is refused (length error) and changes nothing.
    fish.link.sender.retries = 0
    assert fish.send(SubCommand.WRITE_USER_CONFIG, cfg.pack()[:-1]) == (False,
                                                                       Status.LENGTH_ERROR)
    assert fish.client.config_get() == cfg


def test_action_commands_are_stored_read_and_erased(fish: PtyFish) -> None:
    assert fish.client.actions().groups == ()
    assert fish.send(SubCommand.WRITE_ACTION_GROUP, EXAMPLE.data) == (True, Status.OK)
    listed = fish.client.actions()
    assert listed.groups == ((2, len(EXAMPLE.data)),)
    assert fish.client.action(0).payload == EXAMPLE.data
    assert fish.client.action(5).payload == b""  # no such slot
    fish.restart()
    assert fish.client.actions().groups == ((2, len(EXAMPLE.data)),)
    assert fish.model.controller.groups == [action_group.decode(EXAMPLE.data)]
    fish.client.erase_actions()
    assert fish.client.actions().groups == () and fish.model.controller.groups == []
    fish.restart()
    assert fish.client.actions().groups == ()


def test_error_codes_and_device_flash_mode(fish: PtyFish) -> None:
    assert fish.client.error_codes().records == ()
    fish.model.modules[6].faults = Fault.WATER_INGRESS
    assert fish.wait(lambda: fish.model.master.health[6].status.value == "degraded")
    (rec,) = fish.client.error_codes().records
    assert (rec.code, rec.module) == (ErrorCode.WATER_INGRESS, 6)
    # 0x41 with a write type and a module ID: that module enters its CAN flash mode.
    fish.client.device_flash_mode(4)
    st = fish.client.status()
    assert st.as_dict()["flashing_modules"] == [4]
    assert 4 not in fish.model.master.targets and 4 not in fish.model.controller.servos
    fish.link.sender.retries = 0
    assert fish.send(SubCommand.DEVICE_CAN_FLASH, b"\x09") == (False, Status.LENGTH_ERROR)


def test_main_controller_can_flash_mode_until_reset(fish: PtyFish) -> None:
    fish.client.free_swimming()
    fish.client.main_flash_mode()
    master = fish.model.master
    assert master.targets == {}
    sent = {k: h.commands_sent for k, h in master.health.items()}
    time.sleep(0.3)  # not a readiness wait: the world runs meanwhile, nothing goes to the servos
    assert {k: h.commands_sent for k, h in master.health.items()} == sent
    # Only flash commands are answered; the rest is busy.
    fish.link.sender.retries = 0
    for sub in (SubCommand.STATUS_UPDATE, SubCommand.ENTER_FREE_MODE,
                SubCommand.SET_SERVO_POSITION):
        assert fish.send(sub, b"\x01\x10\x00\x00", itype=InstructionType.WRITE_PC,
                         want_result=False) == (False, Status.BUSY)
    fish.link.sender.retries = 3
    assert fish.client.reset().ok  # IAP reset: reboot
    st = fish.client.status()
    assert (st.mode, st.boots) == (FishMode.IDLE, 2)
    assert set(master.targets) == set(range(1, 8))  # commanding again (holding)


def test_iap_upgrade_installs_in_the_other_bank_and_survives_a_restart(fish: PtyFish) -> None:
    report = fish.client.flash(IMAGE_2, chunk_size=200)
    assert (report.version_before, report.version_after) == (0x0100, 0x0200)
    assert (report.bank_before, report.bank_after, report.chunks) == (0, 1, 10)
    assert fish.model.stats.reboots == 1
    fish.restart()
    st = fish.client.status()
    assert (st.version, st.bank) == (0x0200, 1)
    flash = FishFlash.open(fish.flash)
    assert flash.banks == [FACTORY_IMAGE, IMAGE_2]  # the old image kept in bank A
    # The next upgrade goes to bank A.
    image_3 = make_image(0x0301, b"three")
    assert fish.client.flash(image_3).bank_after == 0
    assert FishFlash.open(fish.flash).banks == [image_3, IMAGE_2]


def _iap(fish: PtyFish, data: bytes) -> tuple[int, int]:
    res = fish.client.iap(data)
    return res.status, res.next_chunk


def _unchanged(fish: PtyFish) -> None:
    st = fish.client.status()
    assert (st.version, st.bank) == (0x0100, 0)
    assert FishFlash.open(fish.flash).banks == [FACTORY_IMAGE, None]


def test_iap_bad_chunk_crc_is_refused_and_sent_again(fish: PtyFish) -> None:
    image = IMAGE_2[:600]
    assert _iap(fish, iap_begin(image, 200)) == (IapStatus.OK, 0)
    bad = bytearray(iap_chunk(0, image[:200]))
    bad[-1] ^= 0xFF  # the chunk's bytes, not the frame: the frame's CRC is right
    assert _iap(fish, bytes(bad)) == (IapStatus.BAD_CHUNK_CRC, 0)
    assert _iap(fish, iap_chunk(0, image[:200])) == (IapStatus.OK, 1)
    assert _iap(fish, iap_chunk(0, image[:200])) == (IapStatus.OK, 1)  # a repeat is harmless
    codes = [r.code for r in fish.client.error_codes().records]
    assert codes == [ErrorCode.IAP_REJECTED]


def test_iap_missing_chunk_is_refused_and_the_old_image_kept(fish: PtyFish) -> None:
    image = IMAGE_2[:600]
    assert _iap(fish, iap_begin(image, 200)) == (IapStatus.OK, 0)
    assert _iap(fish, iap_chunk(0, image[:200])) == (IapStatus.OK, 1)
    assert _iap(fish, iap_chunk(2, image[400:])) == (IapStatus.MISSING_CHUNK, 1)
    assert _iap(fish, iap_op(IapOp.END))[0] == IapStatus.MISSING_CHUNK
    assert _iap(fish, iap_chunk(1, image[200:400]))[0] == IapStatus.NOT_STARTED  # dropped
    _unchanged(fish)


def test_iap_wrong_total_and_image_crc_are_refused(fish: PtyFish) -> None:
    image = IMAGE_2[:600]
    # The last chunk shorter than BEGIN declared: END finds the total short.
    assert _iap(fish, iap_begin(image, 200))[0] == IapStatus.OK
    for k in range(2):
        assert _iap(fish, iap_chunk(k, image[200 * k:200 * k + 200]))[0] == IapStatus.OK
    assert _iap(fish, iap_chunk(2, image[400:550]))[0] == IapStatus.OK
    assert _iap(fish, iap_op(IapOp.END))[0] == IapStatus.WRONG_TOTAL
    # BEGIN declares one byte fewer than is sent: the last chunk overflows.
    assert _iap(fish, iap_begin(image[:599], 200))[0] == IapStatus.OK
    for k in range(2):
        _iap(fish, iap_chunk(k, image[200 * k:200 * k + 200]))
    assert _iap(fish, iap_chunk(2, image[400:600])) == (IapStatus.WRONG_TOTAL, 2)
    # More chunks than declared.
    assert _iap(fish, iap_begin(image, 200))[0] == IapStatus.OK
    for k in range(3):
        _iap(fish, iap_chunk(k, image[200 * k:200 * k + 200]))
    assert _iap(fish, iap_chunk(3, b"extra"))[0] == IapStatus.WRONG_TOTAL
    # Every chunk right, the whole image's CRC-32 not.
    begin = bytearray(iap_begin(image, 200))
    begin[-4:] = (zlib.crc32(image) ^ 1).to_bytes(4, "little")
    assert _iap(fish, bytes(begin))[0] == IapStatus.OK
    for k in range(3):
        _iap(fish, iap_chunk(k, image[200 * k:200 * k + 200]))
    assert _iap(fish, iap_op(IapOp.END))[0] == IapStatus.IMAGE_CRC
    # Not an image at all (no FWFI header), CRCs right.
    junk = b"JUNK" + image[4:]
    _iap(fish, iap_begin(junk, 200))
    for k in range(3):
        _iap(fish, iap_chunk(k, junk[200 * k:200 * k + 200]))
    assert _iap(fish, iap_op(IapOp.END))[0] == IapStatus.BAD_IMAGE
    _unchanged(fish)
    # Each refusal is an error record: IAP rejected, with the IapStatus as its detail.
    assert [(r.code, r.module) for r in fish.client.error_codes().records] == [
        (ErrorCode.IAP_REJECTED, s) for s in (IapStatus.WRONG_TOTAL, IapStatus.WRONG_TOTAL,
                                              IapStatus.WRONG_TOTAL, IapStatus.IMAGE_CRC,
                                              IapStatus.BAD_IMAGE)]


def test_power_loss_mid_upgrade_keeps_the_old_image(fish: PtyFish) -> None:
    image = IMAGE_2
    assert _iap(fish, iap_begin(image, 256))[0] == IapStatus.OK
    for k in range(3):
        assert _iap(fish, iap_chunk(k, image[256 * k:256 * k + 256]))[0] == IapStatus.OK
    fish.restart()  # power lost and back: the image in RAM is gone
    assert _iap(fish, iap_chunk(3, image[768:1024]))[0] == IapStatus.NOT_STARTED
    assert _iap(fish, iap_op(IapOp.END))[0] == IapStatus.NOT_STARTED
    _unchanged(fish)
    assert fish.client.status().boots == 2
    # The host starts over and it works.
    assert fish.client.flash(image).version_after == 0x0200


def test_flash_client_refuses_what_is_not_an_image(fish: PtyFish) -> None:
    with pytest.raises(FishError, match="not a firmware image"):
        fish.client.flash(b"hello")


def test_damaged_flash_file_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "flash.json"
    bad.write_text("{not json")
    with pytest.raises(FlashError, match="damaged fish flash file"):
        RobotFish(FishParams(flash=str(bad)))
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(FlashError, match="not a fish flash file"):
        FishFlash.open(bad)


def test_an_unclosed_fish_is_shut_down_later_not_by_the_collector() -> None:
    """The collector can run inside the CAN simulator's registry lock (opening a
    channel); a finalizer that shut nodes down there would deadlock. It only queues
    them; the next fish to start shuts them down."""
    import gc

    from fwbridge.bridge.sim.world import World
    from fwbridge.can_bus import simchannel

    world = World(1)
    lost = RobotFish()
    world.add_robot(lost)
    channel = lost.can_channel
    del world, lost
    gc.collect()
    assert channel in simchannel.channels()  # queued, not shut down in the collector
    world = World(1)
    fresh = RobotFish()
    world.add_robot(fresh)
    try:
        assert channel not in simchannel.channels()  # the next fish did it
    finally:
        fresh.close()
