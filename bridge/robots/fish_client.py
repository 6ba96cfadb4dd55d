"""The fish's system commands from the host: status, configuration, actions, firmware upgrade.

:class:`FishClient` wraps an :class:`~fwbridge.bridge.link.action_link.ActionLink`
(acknowledgement, retransmission, reads re-asked until their result comes)
with one method per command of the patent's table that
:mod:`fwbridge.protocols.families.fish_commands` lays out. Reads use type 0x03 (read,
PC software), writes 0x06 (write, PC software). Anything the fish does not
accept raises :class:`FishError` (a :class:`~fwbridge.bridge.link.action_link.LinkFailed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fwbridge.bridge.link.action_link import ActionLink, LinkFailed
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families.fish_commands import (
    ActionsInfo,
    ErrorCodes,
    IapOp,
    IapResult,
    IapStatus,
    StatusInfo,
    StoredAction,
    UserConfig,
    iap_begin,
    iap_chunk,
    iap_op,
    image_version,
)

__all__ = ["FishClient", "FishError", "FlashReport"]

T = TypeVar("T")
MAX_CHUNK = 512  # bytes of image per frame (the receiver's default limit is 1024)


class FishError(LinkFailed):
    """The fish refused a command or an upgrade, or the link gave up."""


@dataclass(frozen=True)
class FlashReport:
    """How an upgrade went: versions and banks before and after, chunks sent again."""

    version_before: int
    version_after: int
    bank_before: int
    bank_after: int
    chunks: int
    chunks_resent: int
    attempts: int  # frames sent in all (retransmissions included)

    def as_dict(self) -> dict[str, Any]:
        from fwbridge.protocols.families.fish_commands import version_text

        return {"version_before": version_text(self.version_before),
                "version_after": version_text(self.version_after),
                "bank_before": "AB"[self.bank_before & 1], "bank_after": "AB"[self.bank_after & 1],
                "chunks": self.chunks, "chunks_resent": self.chunks_resent,
                "attempts": self.attempts}


class FishClient:
    """One method per system command, on ``link`` (machine code ``machine``)."""

    def __init__(self, link: ActionLink, machine: int = 0) -> None:
        self.link = link
        self.machine = machine
        self.attempts = 0  # frames written, retransmissions included

    # -- plumbing --------------------------------------------------------------------------
    def _read(self, sub: int, data: bytes, kind: type[T], *, write: bool = False) -> T:
        itype = InstructionType.WRITE_PC if write else InstructionType.READ_PC
        ex = self.link.send(ActionFrame(self.machine, itype, sub, data), want_result=True)
        self.attempts += ex.attempts
        if not ex.delivered:
            raise FishError(f"0x{sub:02x}: {ex.reason} (last answer: {_status(ex.status)})")
        try:
            got = ex.decoded()
        except FrameError as exc:
            raise FishError(f"0x{sub:02x}: malformed result: {exc}") from None
        if not isinstance(got, kind):
            raise FishError(f"0x{sub:02x}: unexpected result {type(got).__name__}")
        return got

    def _write(self, sub: int, data: bytes = b"",
               itype: InstructionType = InstructionType.WRITE_PC) -> None:
        ex = self.link.send(ActionFrame(self.machine, itype, sub, data), want_result=False)
        self.attempts += ex.attempts
        if not ex.delivered:
            raise FishError(f"0x{sub:02x} not delivered: {ex.reason} "
                            f"(last answer: {_status(ex.status)})")

    # -- commands ----------------------------------------------------------------------------
    def status(self) -> StatusInfo:
        """0x01."""
        return self._read(SubCommand.STATUS_UPDATE, b"", StatusInfo)

    def stand_still(self) -> None:
        """0x02."""
        self._write(SubCommand.STAND_STILL, itype=InstructionType.CONTROL_PHONE)

    def free_swimming(self) -> None:
        """0x03."""
        self._write(SubCommand.FREE_SWIMMING, itype=InstructionType.CONTROL_PHONE)

    def config_get(self) -> UserConfig:
        """0x36."""
        return self._read(SubCommand.READ_USER_CONFIG, b"", UserConfig)

    def config_set(self, cfg: UserConfig) -> None:
        """0x33 (the fish writes it to its flash and applies it)."""
        self._write(SubCommand.WRITE_USER_CONFIG, cfg.pack())

    def actions(self) -> ActionsInfo:
        """0x37: the stored action groups."""
        return self._read(SubCommand.READ_ACTIONS, b"", ActionsInfo)

    def action(self, slot: int) -> StoredAction:
        """0x37 with a slot: that group's payload (empty: no such slot)."""
        return self._read(SubCommand.READ_ACTIONS, bytes((slot,)), StoredAction)

    def erase_actions(self) -> None:
        """0x34."""
        self._write(SubCommand.ERASE_COMMAND_FLASH)

    def error_codes(self) -> ErrorCodes:
        """0x41, read."""
        return self._read(SubCommand.ROBOT_ERROR_CODE, b"", ErrorCodes)

    def device_flash_mode(self, module: int) -> None:
        """0x41, write: ``module`` enters its CAN flash mode."""
        self._write(SubCommand.DEVICE_CAN_FLASH, bytes((module,)))

    def main_flash_mode(self) -> None:
        """0x42: the main controller enters CAN flash mode (until reset)."""
        self._write(SubCommand.MAIN_CAN_FLASH)

    def iap(self, data: bytes) -> IapResult:
        """One 0x35 operation and its result."""
        return self._read(SubCommand.IAP_UPGRADE, data, IapResult, write=True)

    def reset(self) -> IapResult:
        """0x35 reset: reboot (leaves CAN flash mode)."""
        return self.iap(iap_op(IapOp.RESET))

    def flash(self, image: bytes, *, chunk_size: int = 256,
              progress: Callable[[int, int], None] | None = None) -> FlashReport:
        """Upgrade the fish's firmware to ``image`` and check the version it reports after
        its reboot. A chunk refused for its CRC is sent again (at most 3 times each)."""
        version = image_version(image)
        if version is None:
            raise FishError("not a firmware image (no FWFI header, or larger than a bank)")
        if not 1 <= chunk_size <= MAX_CHUNK:
            raise FishError(f"chunk size {chunk_size} is not in 1..{MAX_CHUNK}")
        before = self.status()
        begin = self.iap(iap_begin(image, chunk_size))
        _require(begin, "begin")
        chunks = [image[k:k + chunk_size] for k in range(0, len(image), chunk_size)]
        resent = 0
        for index, payload in enumerate(chunks):
            for _ in range(4):
                res = self.iap(iap_chunk(index, payload))
                if res.status != IapStatus.BAD_CHUNK_CRC:
                    break
                resent += 1
            _require(res, f"chunk {index}")
            if progress is not None:
                progress(index + 1, len(chunks))
        try:
            end: IapResult | None = self.iap(iap_op(IapOp.END))
        except FishError:
            end = None  # the result may be lost in the reboot: the status says how it went
        if end is not None and end.status not in (IapStatus.OK, IapStatus.NOT_STARTED):
            _require(end, "end")
        after = self.status()
        if after.version != version or after.bank == before.bank:
            raise FishError(f"the fish runs {after.version:#06x} in bank {'AB'[after.bank & 1]} "
                            f"after the upgrade to {version:#06x}: not installed")
        return FlashReport(before.version, after.version, before.bank, after.bank, len(chunks),
                           resent, self.attempts)


def _require(res: IapResult, what: str) -> None:
    if not res.ok:
        name = IapStatus(res.status).name.lower() if res.status in IapStatus._value2member_map_ \
            else str(res.status)
        raise FishError(f"upgrade refused at {what}: {name} (next chunk {res.next_chunk})")


def _status(status: Any) -> str:
    if status is None:
        return "none"
    return getattr(status, "name", str(status)).lower()
