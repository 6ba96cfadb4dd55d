"""The fish main controller's flash: user configuration, action commands, two firmware banks.

A simulated flash that outlives the simulator when it is given a file
(``fwbridge sim fish --flash FILE``): every change is written at once, to a
temporary file that then replaces the old one (``os.replace``), so a
simulator killed at any moment leaves either the old flash or the new one.

Firmware banks (the classic dual-bank rule): an upgrade (:class:`Upgrade`)
collects the image in RAM, checks every chunk's CRC-16 as it comes and the
whole image's size and CRC-32 at the end, and only then writes the image to
the bank that is *not* running and switches to it. An upgrade that is
interrupted (power lost: the simulator restarted) or corrupt never touches
the running bank.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbridge.protocols.action_frame import MAX_LENGTH
from fwbridge.protocols.config_text import TextLimitError, parse_json_bytes, read_limited
from fwbridge.protocols.crc import crc16
from fwbridge.protocols.errors import ConfigError, FrameError
from fwbridge.protocols.families.fish_commands import (
    DEFAULT_CONFIG,
    MAX_IMAGE,
    IapStatus,
    UserConfig,
    image_version,
    make_image,
)

__all__ = ["FACTORY_IMAGE", "FORMAT", "MAX_ACTIONS", "MAX_FLASH_FILE", "FishFlash", "FlashError",
           "Upgrade", "write_whole"]

FORMAT = "fwbridge-fish-flash-1"
MAX_ACTIONS = 16
#: The largest flash file read: both banks and every action group at their largest, as hex,
#: with room to spare (a larger file is not one the simulator wrote).
MAX_FLASH_FILE = 2 * (2 * MAX_IMAGE + MAX_ACTIONS * MAX_LENGTH) + (1 << 16)
#: The image bank A holds when the flash is new: version 1.0.
FACTORY_IMAGE = make_image(0x0100, b"fish main controller, factory image")


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a temporary file beside it, synced, then renamed."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:  # named by the file, not by the temporary one beside it
        raise FlashError(f"{path}: cannot be written: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise FlashError(f"{path}: cannot be written: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FlashError(ConfigError):
    """The flash file cannot be read (not one of ours, or damaged)."""


def _text(v: object, key: str) -> str:
    if not isinstance(v, str):
        raise FlashError(f"{key}: hex text expected, not {type(v).__name__}")
    return v


def _list(v: object, key: str) -> list[Any]:
    if not isinstance(v, list):
        raise FlashError(f"{key}: a list expected, not {type(v).__name__}")
    return v


def _count(v: object, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
        raise FlashError(f"{key}: a count (0..2^32-1) expected, not {v!r:.40}")
    return v


@dataclass
class FishFlash:
    """User configuration, stored action groups (payload bytes) and the two banks."""

    path: Path | None = None
    user_config: bytes = field(default_factory=DEFAULT_CONFIG.pack)
    actions: list[bytes] = field(default_factory=list)
    banks: list[bytes | None] = field(default_factory=lambda: [FACTORY_IMAGE, None])
    active: int = 0
    boots: int = 0
    writes: int = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None) -> FishFlash:
        """The flash kept in ``path`` (a new one when the file does not exist yet)."""
        if path is None:
            return cls()
        p = Path(path)
        if p.is_symlink():  # a link is written through: the file it names is the flash
            p = Path(os.path.realpath(p))
        if not p.exists():
            flash = cls(p)
            flash.save()
            return flash
        try:
            with open(p, "rb") as fh:  # bounded: a device or a huge file is not read whole
                d = parse_json_bytes(read_limited(fh.read, str(p), MAX_FLASH_FILE), str(p),
                                     MAX_FLASH_FILE)
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                raise FlashError(f"{p}: not a fish flash file (no \"format\": \"{FORMAT}\")")
            banks = [None if b is None else bytes.fromhex(_text(b, "banks")) for b in
                     _list(d["banks"], "banks")]
            flash = cls(p, bytes.fromhex(_text(d["user_config"], "user_config")),
                        [bytes.fromhex(_text(a, "actions"))
                         for a in _list(d["actions"], "actions")][:MAX_ACTIONS],
                        banks, _count(d["active"], "active"), _count(d.get("boots", 0), "boots"))
        except TextLimitError as exc:
            raise FlashError(f"{p}: damaged fish flash file: {exc.reason}") from None
        except FlashError as exc:
            if str(exc).startswith(f"{p}:"):
                raise
            raise FlashError(f"{p}: damaged fish flash file: {exc}") from None
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else \
                f"{exc}" if not isinstance(exc, KeyError) else f"no {exc}"
            raise FlashError(f"{p}: damaged fish flash file: {why}") from None
        if len(banks) != 2 or flash.active not in (0, 1) or banks[flash.active] is None:
            raise FlashError(f"{p}: damaged fish flash file: no running bank")
        try:  # what the firmware reads back must be what it can answer with
            UserConfig.unpack(flash.user_config)
        except FrameError as exc:
            raise FlashError(f"{p}: damaged fish flash file: user_config: {exc}") from None
        return flash

    @property
    def version(self) -> int:
        image = self.banks[self.active]
        return (image_version(image) or 0) if image is not None else 0

    def save(self) -> None:
        """Write the file whole (temporary file, then rename); no file: nothing."""
        self.writes += 1
        if self.path is None:
            return
        doc: dict[str, Any] = {
            "format": FORMAT, "active": self.active, "boots": self.boots,
            "user_config": self.user_config.hex(), "actions": [a.hex() for a in self.actions],
            "banks": [None if b is None else b.hex() for b in self.banks],
        }
        write_whole(self.path, json.dumps(doc))

    # -- what the commands change ------------------------------------------------------------
    def write_config(self, data: bytes) -> None:
        self.user_config = bytes(data)
        self.save()

    def store_action(self, payload: bytes) -> int | None:
        if len(self.actions) >= MAX_ACTIONS:
            return None
        self.actions.append(bytes(payload))
        self.save()
        return len(self.actions) - 1

    def erase_actions(self) -> None:
        self.actions.clear()
        self.save()

    def boot(self) -> None:
        self.boots += 1
        self.save()

    def install(self, image: bytes) -> None:
        """Write ``image`` (verified) to the bank not running and switch to it."""
        other = 1 - self.active
        self.banks[other] = bytes(image)
        self.active = other
        self.save()


class Upgrade:
    """One IAP upgrade, chunk by chunk, held in RAM until verified (sans-I/O)."""

    def __init__(self, total: int, chunks: int, chunk_size: int, crc32: int) -> None:
        self.total, self.chunks, self.chunk_size, self.crc32 = total, chunks, chunk_size, crc32
        self.data = bytearray()
        self.next = 0  # the chunk index expected next
        self._last: tuple[int, bytes] | None = None

    @staticmethod
    def begin(total: int, chunks: int, chunk_size: int, crc32: int) -> Upgrade | IapStatus:
        if not 6 <= total <= MAX_IMAGE or chunk_size < 1 or chunks != -(-total // chunk_size):
            return IapStatus.WRONG_TOTAL if total <= MAX_IMAGE else IapStatus.BAD_IMAGE
        return Upgrade(total, chunks, chunk_size, crc32)

    def chunk(self, index: int, crc: int, payload: bytes) -> IapStatus:
        if crc16(payload) != crc:
            return IapStatus.BAD_CHUNK_CRC
        if self._last is not None and index == self.next - 1:
            # The same chunk again (its acknowledgement was lost): already kept.
            return IapStatus.OK if self._last == (index, payload) else IapStatus.MISSING_CHUNK
        if index != self.next:
            return IapStatus.MISSING_CHUNK
        if index >= self.chunks or len(self.data) + len(payload) > self.total or (
                len(payload) != self.chunk_size and index != self.chunks - 1):
            return IapStatus.WRONG_TOTAL
        self.data += payload
        self.next += 1
        self._last = (index, payload)
        return IapStatus.OK

    def verify(self) -> IapStatus:
        """The whole image, before anything is written."""
        if self.next < self.chunks and len(self.data) < self.total:
            return IapStatus.MISSING_CHUNK
        if len(self.data) != self.total:
            return IapStatus.WRONG_TOTAL
        if zlib.crc32(self.data) != self.crc32:
            return IapStatus.IMAGE_CRC
        if image_version(bytes(self.data)) is None:
            return IapStatus.BAD_IMAGE
        return IapStatus.OK
