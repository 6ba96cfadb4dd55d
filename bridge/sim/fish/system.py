"""The fish main controller's system commands: status, modes, flash, IAP, error codes.

Sub-commands 0x01-0x03, 0x33-0x37, 0x41 and 0x42 of the patent's table
(layouts in :mod:`fwbridge.protocols.families.fish_commands`), executed by
:class:`SystemCommands` for the fish
(:class:`~fwbridge.bridge.sim.models.fish.RobotFish`, seen from here only as a
:class:`FishHost`) once the frame has been answered OK.
:meth:`SystemCommands.check` decides the answer first (malformed data: ``0x02``;
anything but a flash command while in CAN flash mode: ``0x05`` busy).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container
from typing import Protocol

from fwbridge.bridge.sim.fish.body import FishBody
from fwbridge.bridge.sim.fish.controller import FishController, Mode
from fwbridge.bridge.sim.fish.flash import FishFlash, Upgrade
from fwbridge.can_bus.sim.nodes import MainController
from fwbridge.can_bus.sim.nodes import Status as Health
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families import action_group
from fwbridge.protocols.families.arq import Status
from fwbridge.protocols.families.fish_commands import (
    ActionsInfo,
    ErrorCode,
    ErrorCodes,
    ErrorRecord,
    FishMode,
    IapOp,
    IapResult,
    IapStatus,
    StatusInfo,
    StoredAction,
    UserConfig,
    decode_iap,
)
from fwbridge.protocols.families.fish_payloads import Result

__all__ = ["FLASH_SUBS", "SYSTEM_SUBS", "FishHost", "SystemCommands"]

SYSTEM_SUBS = frozenset({
    SubCommand.STATUS_UPDATE, SubCommand.STAND_STILL, SubCommand.FREE_SWIMMING,
    SubCommand.WRITE_USER_CONFIG, SubCommand.ERASE_COMMAND_FLASH, SubCommand.IAP_UPGRADE,
    SubCommand.READ_USER_CONFIG, SubCommand.READ_ACTIONS, SubCommand.ROBOT_ERROR_CODE,
    SubCommand.MAIN_CAN_FLASH,
})
#: What CAN flash mode still answers.
FLASH_SUBS = frozenset({SubCommand.IAP_UPGRADE, SubCommand.MAIN_CAN_FLASH})
_READS = (InstructionType.READ_PHONE, InstructionType.READ_SIMULATOR, InstructionType.READ_PC)
MAX_ERRORS = 16


class FishHost(Protocol):
    """What the system commands use of the fish that carries them (the model is above
    this module: it passes itself in)."""

    @property
    def controller(self) -> FishController: ...
    @property
    def body(self) -> FishBody: ...
    @property
    def flash(self) -> FishFlash: ...
    @property
    def master(self) -> MainController: ...
    @property
    def modules(self) -> Container[int]: ...
    @property
    def boot_time(self) -> float: ...
    @property
    def uptime(self) -> float: ...
    def reboot_after_answer(self) -> None: ...


class SystemCommands:
    """State the system commands keep on the fish: CAN flash mode, the upgrade, errors."""

    def __init__(self, fish: FishHost) -> None:
        self.fish = fish
        self.can_flash = False  # 0x42: the main controller in CAN flash mode
        self.flashing: set[int] = set()  # 0x41 (write): modules in CAN flash mode
        self.upgrade: Upgrade | None = None
        self.errors: deque[ErrorRecord] = deque(maxlen=MAX_ERRORS)
        self.still = False  # 0x02

    def mode(self) -> FishMode:
        if self.can_flash:
            return FishMode.CAN_FLASH
        if self.fish.controller.mode is Mode.FREE:
            return FishMode.FREE
        return FishMode.STILL if self.still else FishMode.IDLE

    # -- before the answer -------------------------------------------------------------------
    def check(self, frame: ActionFrame) -> Status | None:
        """The answer's status for ``frame`` (None: OK, or the Responder decides)."""
        sub = int(frame.sub)
        if self.can_flash and sub not in FLASH_SUBS:
            return Status.BUSY
        try:
            if sub == SubCommand.WRITE_USER_CONFIG:
                UserConfig.unpack(frame.data)
            elif sub == SubCommand.IAP_UPGRADE:
                decode_iap(frame.data)
            elif sub == SubCommand.READ_ACTIONS and len(frame.data) > 1:
                return Status.LENGTH_ERROR
            elif sub == SubCommand.ROBOT_ERROR_CODE and int(frame.type) not in _READS and (
                    len(frame.data) != 1 or frame.data[0] not in self.fish.modules):
                return Status.LENGTH_ERROR  # device flash mode: one known module ID
        except FrameError:
            return Status.LENGTH_ERROR
        return None

    # -- after the answer ----------------------------------------------------------------------
    def execute(self, frame: ActionFrame, now: float) -> Result | None:
        """Do what ``frame`` asks; the result to send, if it has one."""
        fish, sub = self.fish, int(frame.sub)
        ctl = fish.controller
        if sub == SubCommand.STATUS_UPDATE:
            return self.status()
        if sub == SubCommand.STAND_STILL:
            ctl.stand_still()
            ctl.buoyancy_target = fish.body.fill  # neither rise nor sink
            self.still = True
        elif sub == SubCommand.FREE_SWIMMING:
            ctl.enter_free(now)
            self.still = False
        elif sub == SubCommand.WRITE_USER_CONFIG:
            cfg = UserConfig.unpack(frame.data)
            fish.flash.write_config(frame.data)
            ctl.apply_config(cfg)
        elif sub == SubCommand.READ_USER_CONFIG:
            return UserConfig.unpack(fish.flash.user_config)
        elif sub == SubCommand.ERASE_COMMAND_FLASH:
            fish.flash.erase_actions()
            ctl.clear_groups()
        elif sub == SubCommand.READ_ACTIONS:
            return self.actions(frame.data)
        elif sub == SubCommand.IAP_UPGRADE:
            return self.iap(frame.data, now)
        elif sub == SubCommand.ROBOT_ERROR_CODE:
            if int(frame.type) in _READS:
                return self.error_codes()
            self.flashing.add(frame.data[0])
            ctl.release(frame.data[0])
        elif sub == SubCommand.MAIN_CAN_FLASH:
            self.can_flash = True
            ctl.stop_commanding()
        return None

    def status(self) -> StatusInfo:
        fish = self.fish
        flashing = sum(1 << (k - 1) for k in self.flashing if 1 <= k <= 8)
        return StatusInfo(int(self.mode()), int(fish.controller.running), fish.flash.active,
                          fish.flash.version, fish.flash.boots & 0xFFFF,
                          len(self.error_codes().records), len(fish.controller.groups),
                          flashing, round(fish.uptime * 1000) & 0xFFFFFFFF)

    def actions(self, data: bytes) -> ActionsInfo | StoredAction:
        stored = self.fish.flash.actions
        if data:
            slot = data[0]
            return StoredAction(slot, stored[slot] if slot < len(stored) else b"")
        groups = []
        for payload in stored:
            try:
                steps = len(action_group.decode(payload).steps)
            except FrameError:
                steps = 0
            groups.append((steps, len(payload)))
        return ActionsInfo(tuple(groups))

    def error_codes(self) -> ErrorCodes:
        """Health changes of the CAN modules and the controller's own errors, newest 16."""
        boot = self.fish.boot_time
        records = list(self.errors)
        for ev in self.fish.master.events:
            if ev.time < boot:
                continue
            t = round((ev.time - boot) * 1000)
            if ev.new is Health.SILENT:
                records.append(ErrorRecord(ErrorCode.SERVO_SILENT, ev.module, t))
            elif ev.new is Health.DEGRADED:
                code = ErrorCode.WATER_INGRESS if "WATER_INGRESS" in ev.reason else (
                    ErrorCode.SERVO_FAULT)
                records.append(ErrorRecord(code, ev.module, t))
        records.sort(key=lambda r: r.time_ms)
        return ErrorCodes(tuple(records[-MAX_ERRORS:]))

    def note_error(self, code: ErrorCode, detail: int) -> None:
        self.errors.append(ErrorRecord(code, detail, round(self.fish.uptime * 1000)))

    # -- IAP -------------------------------------------------------------------------
    def iap(self, data: bytes, now: float) -> IapResult:
        op, fields, payload = decode_iap(data)
        status = IapStatus.OK
        reboot = False
        if op == IapOp.BEGIN:
            got = Upgrade.begin(*fields)
            self.upgrade, status = (got, IapStatus.OK) if isinstance(got, Upgrade) else (
                None, got)
        elif op == IapOp.ABORT:
            self.upgrade = None
        elif op == IapOp.RESET:
            reboot = True
        elif self.upgrade is None:
            status = IapStatus.NOT_STARTED
        elif op == IapOp.CHUNK:
            index, crc = fields
            status = self.upgrade.chunk(index, crc, payload)
        else:  # END: the whole image checked before the other bank is written
            status = self.upgrade.verify()
            if status == IapStatus.OK:
                self.fish.flash.install(bytes(self.upgrade.data))
                reboot = True
            self.upgrade = None
        if status != IapStatus.OK:
            self.note_error(ErrorCode.IAP_REJECTED, int(status))
        up = self.upgrade
        flash = self.fish.flash
        result = IapResult(int(status), int(op), up.next if up else 0, flash.version,
                           flash.active)
        if reboot:
            self.fish.reboot_after_answer()
        return result
