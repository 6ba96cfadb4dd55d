"""``can decode FILE.log`` by blocks of lines: the per-message path's lines, byte for byte."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.cli_verbs import can_blocks, can_files

HEX = "0123456789ABCDEFabcdef"


@st.composite
def candump_line(draw: st.DrawFn, plain: bool = False) -> str:
    """A line of a candump log: mostly plain actuator frames, and every other kind
    (``plain``: only the plain ones, actuator frames or others)."""
    t = draw(st.integers(0, 10**12)) / 10**6
    stamp = f"({t:.6f})"
    kind = draw(st.sampled_from([0, 7]) if plain else st.integers(0, 12))
    data = draw(st.binary(min_size=8, max_size=8)).hex()
    if draw(st.booleans()):
        data = data.upper()
    ident = draw(st.sampled_from([0x100, 0x101, 0x1FF, 0x200, 0x20B, 0x2FF]))
    if kind == 0:  # another frame, any length
        ident = draw(st.sampled_from([0x000, 0x080, 0x0FF, 0x300, 0x7FF]))
        data = draw(st.binary(max_size=8)).hex()
    elif kind == 1:  # a malformed actuator frame: not 8 bytes
        data = draw(st.binary(max_size=7)).hex()
    elif kind == 2:
        return f"{stamp} can0 {ident:03X}#R"
    elif kind == 3:
        return f"{stamp} can0 {ident:08X}#{data}"  # extended: not an actuator frame
    elif kind == 4:
        return f"{stamp} can0 {ident:03X}##1{data}"  # CAN FD
    elif kind == 5:
        return draw(st.sampled_from(["", "   ", f"{stamp} vcan1 {ident:03X}#{data} R",
                                     f"{stamp}  can0 {ident:03X}#{data}",
                                     f"{stamp} can0 {ident:03X}#{data} T",
                                     f"{stamp} can0 {ident:03X}#{data}\r"]))
    elif kind == 6:
        return f"{stamp} can0 20000080#0000000000000000"  # an error frame
    return f"{stamp} can0 {ident:03X}#{data}"


def _run(args: list[str], blocks: bool) -> Any:
    real = can_files.CANDUMP_BLOCKS
    can_files.CANDUMP_BLOCKS = blocks
    try:
        return CliRunner().invoke(can_files.decode_cmd, args)
    finally:
        can_files.CANDUMP_BLOCKS = real


@settings(max_examples=80, deadline=None)
@st.composite
def logs(draw: st.DrawFn) -> list[str]:
    """Lines of every kind; or plain ones only; or plain ones and one damaged line (text
    before the timestamp: a parse error at that line, wherever the line sits in a block)."""
    kind = draw(st.integers(0, 2))
    lines = draw(st.lists(candump_line(plain=kind > 0), max_size=80))
    if kind == 2:
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, "x" + draw(candump_line(plain=True)))
    return lines


@given(logs(), st.booleans(), st.booleans(),
       st.one_of(st.none(), st.integers(1, 60)), st.integers(30, 400), st.booleans())
def test_blocks_print_what_the_per_message_path_prints(
        lines: list[str], as_json: bool, absolute: bool, count: int | None, block: int,
        newline: bool) -> None:
    text = "\n".join(lines) + ("\n" if newline and lines else "")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bus.log"
        log.write_text(text)
        args = [*(["--json"] * as_json), *(["--absolute"] * absolute),
                *(["--count", str(count)] if count else []), str(log)]
        real = can_blocks.BLOCK_BYTES
        can_blocks.BLOCK_BYTES = block  # many blocks, and lines cut across reads
        try:
            fast, slow = _run(args, True), _run(args, False)
        finally:
            can_blocks.BLOCK_BYTES = real
    assert (fast.exit_code, fast.stdout, fast.stderr) == (slow.exit_code, slow.stdout,
                                                          slow.stderr)


def test_a_plain_log_is_read_by_blocks(tmp_path: Path) -> None:
    log = tmp_path / "bus.log"
    log.write_text("".join(f"({k}.5) can0 1{k % 16:02X}#01020304050607{k % 256:02X}\n"
                           for k in range(3000)))
    seen: list[int] = []
    real = can_blocks.CandumpBlocks.per_message_block

    def spy(self: Any, block: bytes) -> bool:
        seen.append(len(block))
        return real(self, block)

    can_blocks.CandumpBlocks.per_message_block = spy  # type: ignore[method-assign]
    try:
        fast = _run([str(log)], True)
    finally:
        can_blocks.CandumpBlocks.per_message_block = real  # type: ignore[method-assign]
    assert fast.exit_code == 0 and fast.stdout.count("\n") == 3000
    assert seen == []  # no block went through python-can's parser
    assert fast.stdout == _run([str(log)], False).stdout
