"""The numpy checks the fixed-size frame receivers share
(:mod:`~fwbridge.protocols.engine.fixed_receiver`,
:mod:`~fwbridge.protocols.engine.fixed_columns`): a description's structured dtype, the CRC of
many candidate rows at once by per-position tables, and the screen for frames whose
float (or scaled) fields are not finite.
"""

from __future__ import annotations

import struct
from functools import cache
from math import isfinite
from typing import TYPE_CHECKING, Any

import crcmod
import numpy as np

from fwbridge.protocols.checksums import Algorithm
from fwbridge.protocols.descriptions.model import FieldSpec
from fwbridge.protocols.engine.codec import FrameCodec

if TYPE_CHECKING:
    from fwbridge.protocols.engine.fixed_received import FixedReceived

__all__ = ["FiniteCheck", "check_table", "crc_position_tables", "crc_rows", "numpy_dtype",
           "xor_rows"]


def numpy_dtype(codec: FrameCodec[Any]) -> np.dtype[Any]:
    """The structured dtype of the fields of a fixed-size description."""
    parts: list[tuple[Any, ...]] = []
    for f in codec.desc.fields:
        if f.type == "bytes":
            parts.append((f.name, "u1", (f.size,)))
            continue
        order = "<" if f.byte_order == "little" else ">"
        kind = {"uint": "u", "int": "i", "float": "f"}[f.info.kind]
        parts.append((f.name, f"{order}{kind}{f.info.size}"))
    return np.dtype(parts)


@cache
def crc_position_tables(algo: Algorithm, n: int) -> tuple[np.ndarray[Any, Any], int]:
    """Per-position tables for ``n``-byte messages, flat, and the CRC of ``n`` zeros.

    A CRC is affine over GF(2): crc(m) = crc(zeros) ^ XOR of T_k[m[k]], where
    T_k[v] is the zero-init, zero-xor-out register for v at position k and zeros
    after it. Every row's CRC is then one gather and one XOR-reduce, with no
    serial chain of numpy steps per byte. Built from the last position back: one
    zero byte through the register per position.
    """
    w = algo.width
    crc = crcmod.Crc(algo.poly | (1 << w), initCrc=0, rev=algo.reverse, xorOut=0)
    t1 = np.array(crc.table, dtype=np.uint64)
    eight, ff, mask = np.uint64(8), np.uint64(0xFF), np.uint64((1 << w) - 1)
    top = np.uint64(w - 8)
    dt = np.uint16 if w <= 16 else np.uint32 if w <= 32 else np.uint64
    out = np.empty((n, 256), dtype=dt)
    r = t1.copy()  # one byte v into a zero register: t1[v] either way round
    for k in range(n - 1, -1, -1):
        out[k] = r
        r = (r >> eight) ^ t1[r & ff] if algo.reverse else (
            ((r << eight) ^ t1[(r >> top) & ff]) & mask)
    out.setflags(write=False)
    return out.reshape(-1), algo.func(bytes(n))


@cache
def check_table(algo: Algorithm, n: int, size: int, order: str) -> tuple[
        np.ndarray[Any, Any], Any]:
    """:func:`crc_position_tables` for ``n`` bytes, then the check field's ``size`` bytes.

    A check byte's entry is its value shifted to its place in the field, so the
    XOR over a whole candidate equals the CRC of ``n`` zeros when the check matches.
    """
    table, zeros = crc_position_tables(algo, n)
    v = np.arange(256, dtype=table.dtype)
    shifts = [8 * (j if order == "little" else size - 1 - j) for j in range(size)]
    check = [v << table.dtype.type(s) for s in shifts]
    out = np.concatenate([table, *check])
    out.setflags(write=False)
    return out, table.dtype.type(zeros)


def crc_rows(algo: Algorithm, block: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The CRC of every row of ``block`` (uint8): one table gather and one XOR-reduce."""
    rows, n = block.shape
    table, zeros = crc_position_tables(algo, n)
    if not n or not rows:
        return np.full(rows, zeros, dtype=np.uint64)
    reg = xor_rows(table, (np.arange(n, dtype=np.intp) << 8)[:, None], block)
    out: np.ndarray[Any, Any] = (reg ^ reg.dtype.type(zeros)).astype(np.uint64)
    return out


def xor_rows(table: np.ndarray[Any, Any], pos: np.ndarray[Any, Any],
              block: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """XOR over each row of ``table[pos[k] + block[row, k]]``: the gather and reduce of a CRC.

    The indexes are laid out (position, row) so the reduce runs along whole rows, and
    the row count is padded to fill 64-bit words: the XOR then runs on 8 bytes at a time
    (a quarter of the steps for 16-bit entries); the padding rows are dropped after.
    """
    rows = len(block)
    lanes = 8 // table.itemsize
    padded = -(-rows // lanes) * lanes
    idx = np.zeros((block.shape[1], padded), dtype=np.intp)
    np.copyto(idx[:, :rows], block.T)
    idx += pos
    words = table[idx].view(np.uint64)
    out: np.ndarray[Any, Any] = np.bitwise_xor.reduce(words, axis=0).view(table.dtype)[:rows]
    return out


class FiniteCheck:
    """Counts the frames with a field decoded NaN or infinite, from the fields' bytes.

    Float fields, and scaled ones whose range times the scale can overflow (an
    ``i16`` times 0.01 never does: those are not looked at).
    """

    def __init__(self, fields: tuple[FieldSpec, ...], dtype: np.dtype[Any]) -> None:
        self.names: list[tuple[str, float | None, float]] = []
        #: (position in the fields' bytes, numpy type, scale or None, offset) per field checked
        self.columns: list[tuple[int, np.dtype[Any], float | None, float]] = []
        #: (unpack_from, position in a record, scale or None, offset) per field checked
        self.items: list[tuple[Any, int, float | None, float]] = []
        self.screen: list[int] | None = []  # high byte of each float in a record
        self.uniform: np.dtype[Any] | None = None
        for f in fields:
            scale = (f.scale if f.scale is not None else 1.0) if f.scaled else None
            offset = f.offset or 0.0
            if f.type == "bytes":
                continue
            bound = max(abs(f.info.lo), abs(f.info.hi)) * abs(scale or 0.0) + abs(offset)
            if f.info.kind != "float" and (scale is None or isfinite(bound)):
                continue  # an integer, or scaled into a range a double holds
            at = 8 + dtype.fields[f.name][1] if dtype.fields else 8
            order = "<" if f.byte_order == "little" else ">"
            self.names.append((f.name, scale, offset))
            self.columns.append((at - 8, np.dtype(dtype[f.name]), scale, offset))
            self.items.append((struct.Struct(order + f.info.code).unpack_from, at, scale, offset))
            if f.info.kind == "float" and scale is None and self.screen is not None:
                # NaN and infinity have every exponent bit set: the high byte is 7F or FF
                self.screen.append(at + f.info.size - 1 if order == "<" else at)
            else:
                self.screen = None  # a scaled value: no screen, every frame is computed
        self.record_size = 8 + dtype.itemsize
        # Every high byte at 3 mod 4 (float32 little-endian fields, each 4-byte aligned in
        # the record): one slice screens them all, and the offset's bytes 3 and 7 (a false
        # alarm only for offsets from 2**31 up, which then costs the exact count).
        self.screen_by_4 = bool(self.screen) and self.record_size % 4 == 0 and all(
            p % 4 == 3 for p in self.screen or ())
        kinds = {dtype[k] for k in range(len(dtype.names or ()))}
        if (len(self.names) == len(dtype.names or ()) and len(kinds) == 1
                and all(s is None for _, s, _ in self.names)):
            self.uniform = next(iter(kinds))  # one view: the odometry frame's four float32s

    def count_rows(self, body: np.ndarray[Any, Any]) -> int:
        """Over the accepted frames' field bytes (uint8 rows), in numpy."""
        if not self.names:
            return 0
        n = len(body)
        if self.uniform is not None:
            values = np.ascontiguousarray(body).view(self.uniform)
            # A float64 sum of float32 values cannot overflow: finite exactly when they are.
            if self.uniform.itemsize == 4:
                # inf - inf in the sum is NaN: numpy's warning is not the caller's business
                with np.errstate(invalid="ignore", over="ignore"):
                    total = values.sum(dtype=np.float64)
                if isfinite(total):
                    return 0
            finite = np.isfinite(values)
            return 0 if finite.all() else int(n - np.count_nonzero(finite.all(axis=1)))
        ok = np.ones(n, dtype=bool)
        for at, dt, scale, offset in self.columns:
            col = np.ascontiguousarray(body[:, at:at + dt.itemsize]).view(dt).ravel()
            if scale is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    col = col.astype(np.float64) * scale + offset  # as the constructor does
            ok &= np.isfinite(col)
        return int(n - np.count_nonzero(ok))

    def count_records(self, records: list[FixedReceived]) -> int:
        """Over a small call's records (their bytes), in Python: a screen, then each frame."""
        if not self.names:
            return 0
        if self.screen is not None:
            blob = b"".join(records)
            high = blob[3::4] if self.screen_by_4 else b"".join(
                [blob[p::self.record_size] for p in self.screen])
            if b"\x7f" not in high and b"\xff" not in high:
                return 0
        bad = 0
        for r in records:
            for unpack_from, at, scale, offset in self.items:
                v = unpack_from(r, at)[0]
                if not isfinite(v if scale is None else v * scale + offset):
                    bad += 1
                    break
        return bad
