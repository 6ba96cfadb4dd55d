"""Build and drive firmware_ref/ (the C reference firmware) from the tests.

``firmware()`` runs ``make`` once per test session and returns a
:class:`Firmware` with the ctypes library (``build/libfw_host.so``, the
firmware sources plus the flat wrappers of ``firmware_ref/host/fw_host.c``)
and the paths of the compiled programs. Without a C compiler or make the
tests that need it are skipped, with the reason.
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRMWARE = ROOT / "firmware_ref"
BUILD = FIRMWARE / "build"

SUM8_STATS = ("frames", "bytes", "checksum_errors", "discarded", "resyncs", "nonfinite",
              "overlapping")
ACTION_STATS = ("frames", "bytes", "discarded", "resyncs", "header_errors", "length_errors",
                "trailer_errors", "checksum_errors", "truncated", "relaxed_accepts")
RESPONDER_STATS = ("answered", "acks", "naks", "duplicates")
ARQ_STATS = ("sent", "retransmitted", "delivered", "failed", "timeouts", "naks", "ignored")
REJECT_REASONS = {1: "length", 2: "trailer", 3: "crc", 4: "truncated"}
ARQ_EVENTS = {0: None, 1: "retransmit", 2: "delivered", 3: "failed", 4: "acknowledged"}

u8p = ctypes.POINTER(ctypes.c_uint8)
u32p = ctypes.POINTER(ctypes.c_uint32)


def _compiler() -> str | None:
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            return cc
    return None


@functools.cache
def _build() -> Path | str:
    """Run make once; the library path, or why it cannot be built."""
    if _compiler() is None:
        return "no C compiler (cc/gcc/clang) on this machine"
    if shutil.which("make") is None:
        return "make is not installed"
    proc = subprocess.run(["make", "-s", "-j2", "-C", str(FIRMWARE), "all", "unit", "fuzz"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        # A compiler is there and the build fails: that is a test failure, not a skip.
        pytest.fail(f"firmware_ref build failed:\n{proc.stdout}\n{proc.stderr}")
    return BUILD / "libfw_host.so"


def _sig(fn: Any, restype: Any, *argtypes: Any) -> None:
    fn.restype = restype
    fn.argtypes = list(argtypes)


def _buf(data: bytes) -> Any:
    return (ctypes.c_uint8 * max(1, len(data))).from_buffer_copy(data or b"\0")


class Firmware:
    """The compiled firmware: ctypes entry points and program paths."""

    def __init__(self, lib_path: Path) -> None:
        self.harness = BUILD / "fw_harness"
        self.unit = BUILD / "san" / "fw_unit"
        self.fuzz_dir = BUILD / "san"
        lib = self.lib = ctypes.CDLL(str(lib_path))
        sz, vp, cp = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
        ui, i = ctypes.c_uint, ctypes.c_int
        _sig(lib.fwh_sum8_rx_sizeof, sz)
        _sig(lib.fwh_sum8_rx_init, None, vp, ui)
        _sig(lib.fwh_sum8_feed, sz, vp, u8p, sz, u32p, ctypes.POINTER(ctypes.c_float), sz, i)
        _sig(lib.fwh_sum8_finish, sz, vp)
        _sig(lib.fwh_sum8_stats, None, vp, u32p)
        _sig(lib.fwh_odom_encode, sz, ctypes.POINTER(ctypes.c_float), u8p)
        _sig(lib.fwh_cmd_encode, sz, ctypes.POINTER(ctypes.c_float), u8p)
        _sig(lib.fwh_sum8_decode, i, u8p, sz, sz, ctypes.POINTER(ctypes.c_float))
        _sig(lib.fwh_crc16_preset_count, sz)
        _sig(lib.fwh_crc16_preset_name, cp, sz)
        _sig(lib.fwh_crc16, ctypes.c_long, cp, u8p, sz)
        _sig(lib.fwh_action_encode, sz, cp, ui, ui, ui, u8p, sz, u8p, sz)
        _sig(lib.fwh_action_check, i, cp, u8p, sz)
        _sig(lib.fwh_action_sizeof, sz)
        _sig(lib.fwh_action_open, i, vp, cp, ui, i, i, ui, ui, i)
        _sig(lib.fwh_action_feed, sz, vp, u8p, sz, i)
        _sig(lib.fwh_action_finish, sz, vp)
        _sig(lib.fwh_action_take_log, sz, vp, u8p, sz)
        _sig(lib.fwh_action_pending, sz, vp)
        _sig(lib.fwh_action_stats, None, vp, u32p)
        _sig(lib.fwh_arq_sizeof, sz)
        _sig(lib.fwh_arq_open, i, vp, cp, ctypes.c_uint32, ui)
        _sig(lib.fwh_arq_send, i, vp, ui, ui, ui, u8p, sz, ctypes.c_uint32)
        _sig(lib.fwh_arq_on_answer, i, vp, u8p, sz, ctypes.c_uint32)
        _sig(lib.fwh_arq_send_read, i, vp, ui, ui, ui, u8p, sz, ctypes.c_uint32,
             ctypes.c_uint32)
        _sig(lib.fwh_arq_on_result, i, vp, ctypes.c_uint32)
        _sig(lib.fwh_arq_missing_results, ctypes.c_uint32, vp)
        _sig(lib.fwh_arq_poll, i, vp, ctypes.c_uint32)
        _sig(lib.fwh_arq_busy, i, vp)
        _sig(lib.fwh_arq_deadline, ctypes.c_uint32, vp)
        _sig(lib.fwh_arq_take_tx, sz, vp, u8p, sz)
        _sig(lib.fwh_arq_stats, None, vp, u32p)
        _sig(lib.fwh_actuator_pack, None, ctypes.POINTER(ctypes.c_int), u8p)
        _sig(lib.fwh_actuator_unpack, None, u8p, ctypes.POINTER(ctypes.c_int))

    # -- sum-8 ----------------------------------------------------------------
    def sum8_receiver(self, frame_size: int) -> Sum8Rx:
        return Sum8Rx(self, frame_size)

    def odom_encode(self, bits: Iterable[int]) -> bytes:
        """Encode an odometry frame from four float32 bit patterns (exact, NaN payloads too)."""
        vals = (ctypes.c_float * 4).from_buffer_copy(struct.pack("<4I", *bits))
        out = (ctypes.c_uint8 * 19)()
        n = self.lib.fwh_odom_encode(vals, out)
        return bytes(out[:n])

    def cmd_encode(self, bits: Iterable[int]) -> bytes:
        vals = (ctypes.c_float * 3).from_buffer_copy(struct.pack("<3I", *bits))
        out = (ctypes.c_uint8 * 15)()
        n = self.lib.fwh_cmd_encode(vals, out)
        return bytes(out[:n])

    def sum8_decode(self, data: bytes, frame_size: int) -> tuple[int, tuple[int, ...]]:
        """(check code, float32 bit patterns of the fields)."""
        nf = (frame_size - 3) // 4
        out = (ctypes.c_float * 4)()
        rc = self.lib.fwh_sum8_decode(_buf(data), len(data), frame_size, out)
        return rc, struct.unpack(f"<{nf}I", bytes(out)[: 4 * nf])

    # -- CRC and action frames --------------------------------------------------
    def crc_presets(self) -> list[str]:
        return [self.lib.fwh_crc16_preset_name(k).decode()
                for k in range(self.lib.fwh_crc16_preset_count())]

    def crc16(self, name: str, data: bytes) -> int:
        return int(self.lib.fwh_crc16(name.encode(), _buf(data), len(data)))

    def action_encode(self, machine: int, itype: int, sub: int, data: bytes,
                      crc: str = "crc-ccitt-false") -> bytes:
        out = (ctypes.c_uint8 * (11 + len(data)))()
        n = self.lib.fwh_action_encode(crc.encode(), machine, itype, sub, _buf(data), len(data),
                                       out, len(out))
        assert n == 11 + len(data)
        return bytes(out)

    def action_check(self, data: bytes, crc: str = "crc-ccitt-false") -> int:
        return int(self.lib.fwh_action_check(crc.encode(), _buf(data), len(data)))

    def action_receiver(self, **kw: Any) -> ActionRx:
        return ActionRx(self, **kw)

    def arq_sender(self, timeout: int, retries: int, crc: str = "crc-ccitt-false") -> ArqTx:
        return ArqTx(self, timeout, retries, crc)

    # -- actuator ----------------------------------------------------------------
    def actuator_pack(self, fields: Iterable[int]) -> bytes:
        vals = (ctypes.c_int * 8)(*fields)
        out = (ctypes.c_uint8 * 8)()
        self.lib.fwh_actuator_pack(vals, out)
        return bytes(out)

    def actuator_unpack(self, data: bytes) -> tuple[int, ...]:
        out = (ctypes.c_int * 8)()
        self.lib.fwh_actuator_unpack(_buf(data), out)
        return tuple(out)


class Sum8Rx:
    """firmware_ref's sum-8 receiver: feed() -> [(offset, float32 bits...)]."""

    def __init__(self, fw: Firmware, frame_size: int) -> None:
        self.lib = fw.lib
        self.size = frame_size
        self.nf = (frame_size - 3) // 4
        self.mem = ctypes.create_string_buffer(self.lib.fwh_sum8_rx_sizeof())
        self.lib.fwh_sum8_rx_init(self.mem, frame_size)

    def feed(self, data: bytes, bytewise: bool = False) -> list[tuple[int, tuple[int, ...]]]:
        cap = len(data) + 1  # at most one frame per byte
        offs = (ctypes.c_uint32 * cap)()
        vals = (ctypes.c_float * (cap * self.nf))()
        n = self.lib.fwh_sum8_feed(self.mem, _buf(data), len(data), offs, vals, cap,
                                   int(bytewise))
        raw = bytes(vals)
        return [(offs[k], struct.unpack_from(f"<{self.nf}I", raw, 4 * self.nf * k))
                for k in range(n)]

    def finish(self) -> int:
        return int(self.lib.fwh_sum8_finish(self.mem))

    @property
    def stats(self) -> dict[str, int]:
        out = (ctypes.c_uint32 * len(SUM8_STATS))()
        self.lib.fwh_sum8_stats(self.mem, out)
        return dict(zip(SUM8_STATS, out))


@dataclass(frozen=True)
class CFrame:
    offset: int
    defects: int
    machine: int
    type: int
    sub: int
    data: bytes


@dataclass(frozen=True)
class CReject:
    offset: int
    reason: str
    machine: int
    type: int
    sub: int | None


@dataclass(frozen=True)
class CAnswer:
    duplicate: bool
    data: bytes


class ActionRx:
    """firmware_ref's action receiver (with the responder answering every event)."""

    def __init__(self, fw: Firmware, *, crc: str = "crc-ccitt-false", max_length: int = 1024,
                 relaxed: bool = False, alt_header: bytes | None = b"\xfe\xff",
                 answer: bool = True) -> None:
        self.lib = fw.lib
        self.mem = ctypes.create_string_buffer(self.lib.fwh_action_sizeof())
        alt = alt_header or b"\0\0"
        rc = self.lib.fwh_action_open(self.mem, crc.encode(), max_length, int(relaxed),
                                      int(alt_header is not None), alt[0], alt[1], int(answer))
        if rc != 0:
            raise ValueError(f"bad receiver settings: {crc!r}, {max_length}")

    def feed(self, data: bytes, bytewise: bool = False) -> list[CFrame | CReject | CAnswer]:
        self.lib.fwh_action_feed(self.mem, _buf(data), len(data), int(bytewise))
        return self._events()

    def finish(self) -> list[CFrame | CReject | CAnswer]:
        self.lib.fwh_action_finish(self.mem)
        return self._events()

    @property
    def pending(self) -> int:
        return int(self.lib.fwh_action_pending(self.mem))

    def _events(self) -> list[CFrame | CReject | CAnswer]:
        cap = 1 << 20
        out = (ctypes.c_uint8 * cap)()
        n = self.lib.fwh_action_take_log(self.mem, out, cap)
        assert n != ctypes.c_size_t(-1).value, "event log overflow"
        log = bytes(out[:n])
        events: list[CFrame | CReject | CAnswer] = []
        i = 0
        while i < len(log):
            tag = log[i]
            if tag == ord("F"):
                off, defects, machine, itype, sub, ln = struct.unpack_from("<IBBBBH", log, i + 1)
                events.append(CFrame(off, defects, machine, itype, sub, log[i + 11: i + 11 + ln]))
                i += 11 + ln
            elif tag == ord("R"):
                off, reason, machine, itype, sub, has_sub = struct.unpack_from("<IBBBBB", log,
                                                                               i + 1)
                events.append(CReject(off, REJECT_REASONS[reason], machine, itype,
                                      sub if has_sub else None))
                i += 10
            else:
                assert tag == ord("A"), f"bad log tag {tag}"
                ln = log[i + 2]
                events.append(CAnswer(bool(log[i + 1]), log[i + 3: i + 3 + ln]))
                i += 3 + ln
        return events

    @property
    def stats(self) -> dict[str, int]:
        out = (ctypes.c_uint32 * (len(ACTION_STATS) + len(RESPONDER_STATS)))()
        self.lib.fwh_action_stats(self.mem, out)
        return dict(zip(ACTION_STATS, out[: len(ACTION_STATS)]))

    @property
    def responder_stats(self) -> dict[str, int]:
        out = (ctypes.c_uint32 * (len(ACTION_STATS) + len(RESPONDER_STATS)))()
        self.lib.fwh_action_stats(self.mem, out)
        return dict(zip(RESPONDER_STATS, out[len(ACTION_STATS):]))


class ArqTx:
    """firmware_ref's stop-and-wait sender; time in integer ticks."""

    def __init__(self, fw: Firmware, timeout: int, retries: int, crc: str) -> None:
        self.lib = fw.lib
        self.mem = ctypes.create_string_buffer(self.lib.fwh_arq_sizeof())
        if self.lib.fwh_arq_open(self.mem, crc.encode(), timeout, retries) != 0:
            raise ValueError("bad sender settings")

    def send(self, machine: int, itype: int, sub: int, data: bytes, now: int) -> int:
        return int(self.lib.fwh_arq_send(self.mem, machine, itype, sub, _buf(data), len(data),
                                         now & 0xFFFFFFFF))

    def send_read(self, machine: int, itype: int, sub: int, data: bytes, now: int,
                  result_timeout: int) -> int:
        """A read: delivered by its result (PROTOCOLS.md 3.3), re-asked without one."""
        return int(self.lib.fwh_arq_send_read(self.mem, machine, itype, sub, _buf(data),
                                              len(data), now & 0xFFFFFFFF,
                                              result_timeout & 0xFFFFFFFF))

    def on_result(self, now: int) -> str | None:
        return ARQ_EVENTS[self.lib.fwh_arq_on_result(self.mem, now & 0xFFFFFFFF)]

    @property
    def missing_results(self) -> int:
        return int(self.lib.fwh_arq_missing_results(self.mem))

    def on_answer(self, frame: bytes, now: int) -> str | None:
        rc = self.lib.fwh_arq_on_answer(self.mem, _buf(frame), len(frame), now & 0xFFFFFFFF)
        assert rc >= 0, "answer bytes failed the frame check"
        return ARQ_EVENTS[rc]

    def poll(self, now: int) -> str | None:
        return ARQ_EVENTS[self.lib.fwh_arq_poll(self.mem, now & 0xFFFFFFFF)]

    @property
    def busy(self) -> bool:
        return bool(self.lib.fwh_arq_busy(self.mem))

    def take_tx(self) -> bytes:
        cap = 1 << 18
        out = (ctypes.c_uint8 * cap)()
        n = self.lib.fwh_arq_take_tx(self.mem, out, cap)
        return bytes(out[:n])

    @property
    def stats(self) -> dict[str, int]:
        out = (ctypes.c_uint32 * 8)()
        self.lib.fwh_arq_stats(self.mem, out)
        return dict(zip(ARQ_STATS, out[:7]))


@functools.cache
def _firmware() -> Firmware | str:
    built = _build()
    return built if isinstance(built, str) else Firmware(built)


@pytest.fixture(scope="session")
def firmware() -> Firmware:
    """The built firmware (make runs once per session); skips without a C compiler."""
    fw = _firmware()
    if isinstance(fw, str):
        pytest.skip(f"firmware_ref not built: {fw}")
    return fw
