"""``fwbridge can decode FILE.log``: a candump log read and printed a block of lines at a time.

python-can's candump reader makes a ``can.Message`` per line and parses its
data a byte at a time; for a log of millions of frames that is most of the
time. This reads the log in blocks of whole lines, and a block whose every
line has the plain shape ``(SECONDS) CHANNEL ID#DATA`` (3-digit standard IDs,
data in whole bytes, an optional ``R``/``T`` direction) is taken by one regular
expression and printed with one ``%`` template per line: the table lines and
JSON objects of the per-message path, byte for byte (the tests compare them).
Any other block (remote or FD frames, extended IDs, error frames, blank or
damaged lines, a malformed actuator frame) goes through python-can's own
parser, line for line as the per-message path reads the file.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from functools import cache
from itertools import chain, product, repeat
from operator import sub
from typing import Any

import can

from fwbridge.bridge.record.can_logs import LINE_LIMIT, CaptureReadError, LongLineCount
from fwbridge.can_bus.ids import (
    COMMAND_BASE,
    FEEDBACK_BASE,
    MAX_MODULE,
    ActuatorMessage,
    Direction,
)
from fwbridge.cli_verbs.can_common import actuator_fields, actuator_text
from fwbridge.protocols.families import actuator

__all__ = ["BLOCK_BYTES", "LINE", "CandumpBlocks", "LineBlocks"]

#: Bytes of the log read at a time (cut after the block's last newline).
BLOCK_BYTES = 1 << 18
#: One plain candump line: timestamp, channel, a 3-digit ID, hex data, its newline. Not
#: anchored at the line's start (the scan for ``(`` is several times faster): a block is
#: plain when its matches are as many as its lines and cover all its bytes.
LINE = re.compile(rb"\((\d{1,12}\.\d{1,9})\) ([^\s()]+) ([0-9A-Fa-f]{3})#([0-9A-Fa-f]{0,16})"
                  rb"( [RrTt])?\n")
#: The bytes of a plain line outside its groups: ``(``, ``) ``, `` ``, ``#``, the newline.
FIXED = 6
_LO, _HI = COMMAND_BASE, FEEDBACK_BASE + MAX_MODULE


class LineBlocks(LongLineCount):
    """The file's bytes in blocks of whole lines (the last may lack its newline).

    No line longer than ``limit`` bytes is held: one that outgrows it is read
    past and counted, as the per-message path's
    :class:`~fwbridge.bridge.record.can_logs.BoundedLines` does (a plain block's
    lines are short by their shape; another block's are measured when parsed,
    :meth:`lines`); :meth:`check` then names the file and the first one.
    """

    def __init__(self, path: str, limit: int = LINE_LIMIT) -> None:
        super().__init__(path, limit)
        self._line = 0  # lines before the block last yielded
        self._at = 0  # its byte offset

    def __iter__(self) -> Iterator[bytes]:
        with open(self.path, "rb") as fh:
            pending = b""
            skipping = False  # inside an over-long line: dropped up to its newline
            while True:
                more = fh.read(BLOCK_BYTES)
                if not more:
                    if pending and not skipping:
                        yield from self._out(pending)
                    return
                if skipping:
                    end = more.find(b"\n")
                    if end < 0:
                        self._at += len(more)
                        continue
                    self._at += end + 1
                    self._line += 1
                    more, skipping = more[end + 1:], False
                pending += more
                cut = pending.rfind(b"\n") + 1
                if cut:
                    yield from self._out(pending[:cut])
                    pending = pending[cut:]
                if len(pending) > self.limit:  # a line with no end in sight
                    self.skipped(self._line + 1, self._at)
                    self._at += len(pending)
                    pending, skipping = b"", True

    def _out(self, block: bytes) -> Iterator[bytes]:
        line, at = self._line, self._at
        self._line += block.count(b"\n")
        self._at += len(block)
        self.block_start = (line, at)
        yield block

    def lines(self, block: bytes) -> str:
        """The block as text for python-can's parser, over-long lines left out and counted."""
        if len(block) > self.limit:
            line, at = self.block_start
            kept = []
            for n, text in enumerate(block.split(b"\n")):
                if len(text) > self.limit:
                    self.skipped(line + n + 1, at)
                else:
                    kept.append(text)
                at += len(text) + 1
            block = b"\n".join(kept)
        return block.decode("utf-8")


@cache
def _labels() -> tuple[list[str], list[str], list[str], list[str]]:
    """Per byte value: the table's ``cmd=`` and ``fault=`` texts, JSON's command and faults.

    Taken from the per-message path's own formatting, once per value, so the
    two cannot drift apart.
    """
    cmd_text, fault_text, cmd_json, faults_json = [], [], [], []
    for v in range(256):
        s = actuator.decode(bytes([0, 0, 0, 0, v, v, 0, 0]))
        item = ActuatorMessage(Direction.COMMAND, 0, s, 0.0)
        line = actuator_text(item, 0.0)
        cmd_text.append(line.split(" cmd=", 1)[1].split(" fault=", 1)[0])
        fault_text.append(line.rsplit(" fault=", 1)[1])
        fields = actuator_fields(item, 0.0)
        cmd_json.append(json.dumps(fields["command"]))
        faults_json.append(json.dumps(fields["faults"], separators=(",", ":")))
    return cmd_text, fault_text, cmd_json, faults_json


def _parsed(block: bytes, lines: LineBlocks | None = None) -> Iterator[can.Message]:
    """python-can's parse of a block's lines; its errors as the per-message path reports them."""
    try:
        text = lines.lines(block) if lines is not None else block.decode("utf-8")
        yield from can.CanutilsLogReader(io.StringIO(text))
    except (ValueError, IndexError, KeyError, EOFError) as exc:  # what its parser hits
        raise CaptureReadError(f"corrupt or truncated .log data: {exc}") from exc


JSON = ('{"t":%r,%s,"angle":%d,"speed":%d,"current_ma":%d,'
        '"module_id":%d,"command":%s,"fault":%d,"faults":%s,"reserved":[%d,%d]}\n')


class CandumpBlocks:
    """The actuator structs of candump blocks as text, with the per-message path's state.

    ``per_message`` takes the messages of a block that is not plain (python-can's
    parse of its lines) and prints them as the per-message path does; it
    returns False when ``--count`` is reached. ``stamp`` is that path's clock.
    """

    def __init__(self, as_json: bool, stamp: Any, stats: Any, count: int | None,
                 per_message: Callable[[Iterator[can.Message]], bool],
                 lines: LineBlocks | None = None) -> None:
        self.lines = lines  # where the blocks come from: it measures a parsed block's lines
        self.as_json = as_json
        self.stamp = stamp
        self.stats = stats
        self.count = count
        self.per_message = per_message

    def take(self, block: bytes) -> tuple[str, bool]:
        """(text to print, whether to go on) for one block of whole lines."""
        if not block.endswith(b"\n"):  # the file's last line: read alike without its newline
            block += b"\n"
        rows = LINE.findall(block)
        text = None
        if (len(rows) == block.count(b"\n")
                and sum(map(len, chain.from_iterable(rows))) + FIXED * len(rows) == len(block)):
            text = self._plain(rows)
        if text is None:
            return "", self.per_message_block(block)
        return text

    def per_message_block(self, block: bytes) -> bool:
        """A block that is not plain: python-can's parser, line for line."""
        return self.per_message(_parsed(block, self.lines))

    def _plain(self, rows: list[tuple[bytes, ...]]) -> tuple[str, bool] | None:
        ids = _actuator_ids()
        picked = [(ts, ident, data) for ts, _, ident, data, _ in rows if ident in ids]
        if not set(map(len, [d for _, _, d in picked])) <= {16}:
            return None  # a malformed actuator frame: its own stderr line
        go_on = True
        if self.count is not None:
            room = self.count - self.stats["structs"]
            if len(picked) >= room:
                picked, go_on = picked[:room], False
        if not picked:
            return "", go_on
        raw = bytes.fromhex(b"".join(d for _, _, d in picked).decode())
        stamp = self.stamp  # the per-message path's clock (can_common.Stamps), inlined
        seconds = list(map(float, [ts for ts, _, _ in picked]))
        if stamp.absolute:
            times = seconds
        else:
            if stamp.t0 is None:
                stamp.t0 = seconds[0]
            t0 = stamp.t0
            times = list(map(round, map(sub, seconds, repeat(t0)), repeat(6)))
        who = [ids[ident] for _, ident, _ in picked]
        angle = _int8(raw[0::8])
        speed, module_id, cmd, fault = raw[1::8], raw[3::8], raw[4::8], raw[5::8]
        _, fault_text, cmd_json, faults_json = _labels()
        self.stats["structs"] += len(picked)
        if self.as_json:
            current = [c * 100 for c in raw[2::8]]
            out = map(JSON.__mod__, zip(times, [w[3] for w in who], angle, speed, current,
                                        module_id, [cmd_json[c] for c in cmd], fault,
                                        [faults_json[f] for f in fault], raw[6::8], raw[7::8]))
        else:  # each field's text looked up per byte value, each line one join
            cells = _cells()
            ends = [cells[5][f] if k == w[0] else
                    f"fault={fault_text[f]} (struct says module {k})\n"
                    for f, k, w in zip(fault, module_id, who)]
            out = map(" ".join, zip(map("%17.6f".__mod__, times), [w[2] for w in who],
                                    [cells[0][b] for b in raw[0::8]], [cells[1][b] for b in speed],
                                    [cells[2][b] for b in raw[2::8]], [cells[4][c] for c in cmd],
                                    ends))
        return "".join(out), go_on


@cache
def _cells() -> tuple[list[str], ...]:
    """Per byte value, the table's text of each struct field (as ``actuator_text`` writes
    it): angle, speed, current, module (unused), command, fault with the line's end."""
    cmd_text, fault_text, _, _ = _labels()
    values = range(256)
    return ([f"angle={v - 256 if v > 127 else v:4d}" for v in values],
            [f"speed={v:3d}" for v in values], [f"current={v * 100:5d}mA" for v in values],
            [], [f"cmd={cmd_text[v]}" for v in values],
            [f"fault={fault_text[v]}\n" for v in values])


def _int8(data: bytes) -> list[int]:
    """The bytes as signed values."""
    return list(memoryview(data).cast("b"))


@cache
def _actuator_ids() -> dict[bytes, tuple[int, Direction, str, str]]:
    """Every spelling of an actuator ID (3 hex digits, either case) -> (module, direction,
    the table's ``ARROW module MOD DIRECTION`` and JSON's direction and module)."""
    out: dict[bytes, tuple[int, Direction, str, str]] = {}
    for can_id in range(_LO, _HI + 1):
        direction = Direction.FEEDBACK if can_id >= FEEDBACK_BASE else Direction.COMMAND
        module = can_id - (FEEDBACK_BASE if direction is Direction.FEEDBACK else COMMAND_BASE)
        arrow = "->" if direction is Direction.COMMAND else "<-"
        entry = (module, direction, f"{arrow} module {module:3d} {direction.value:8s}",
                 f'"direction":"{direction.value}","module":{module}')
        text = f"{can_id:03x}"
        for variant in {"".join(c) for c in product(*({ch, ch.upper()} for ch in text))}:
            out[variant.encode()] = entry
    return out
