"""The action-frame CLI pieces: ``encode action``, the ``action`` decoder, group tables."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rich.console import Console

from fwbridge.cli_verbs.action import action_decoder, action_group_table, encode_action
from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.hextext import parse_hex
from tests.conftest import FIXTURES

EXAMPLE = parse_hex((FIXTURES / "patent_example.hex").read_text())


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(encode_action, list(args))
    return res.exit_code, res.output


def test_encode_by_name_and_by_number_agree() -> None:
    by_name = invoke("--machine", "0", "--type", "write-pc", "--sub", "test-action-group",
                     "--data", "01 02 fd df")
    by_number = invoke("--type", "0x06", "--sub", "50", "--data", "0102FDDF")
    assert by_name == by_number
    code, out = by_name
    assert code == 0
    frame = af.decode(bytes.fromhex(out.strip().replace(" ", "")))
    assert frame == ActionFrame(0, 6, 0x32, b"\x01\x02\xfd\xdf")


def test_encode_with_another_crc_and_no_separator() -> None:
    code, out = invoke("--type", "read-pc", "--sub", "query-servo-info", "--crc", "xmodem",
                       "--sep", "")
    assert code == 0
    assert af.decode(bytes.fromhex(out.strip()), crc="xmodem") == ActionFrame(0, 3, 0x12)


def test_alias_name_is_accepted() -> None:
    assert invoke("--type", "6", "--sub", "device-can-flash") == invoke("--type", "6", "--sub",
                                                                       "0x41")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--type", "write-everything", "--sub", "1"], "write-pc"),
        (["--type", "6", "--sub", "0x100"], "0..255"),
        (["--type", "6", "--sub", "1", "--crc", "crc-99"], "crc-ccitt-false"),
        (["--type", "6", "--sub", "1", "--data", "0g"], "--data"),
        (["--machine", "300", "--type", "6", "--sub", "1"], "300"),
    ],
)
def test_errors_exit_non_zero_with_a_message(args: list[str], message: str) -> None:
    code, out = invoke(*args)
    assert code == 2 and message in out


def test_decoder_rows_strict_and_relaxed() -> None:
    dec = action_decoder()
    assert "machine" in dec.columns and "sub" in dec.columns
    strict = dec.make({})
    assert strict.feed(EXAMPLE) == [] and strict.stats.header_errors == 1
    relaxed = dec.make({"relaxed": True, "crc": "crc-ccitt-false"})
    (item,) = relaxed.feed(EXAMPLE)
    row = dec.row(item)
    assert row["type"] == "write-pc" and row["sub"] == "test-action-group"
    assert row["length"] == 69 and row["machine"] == 0 and row["defects"] == "header,crc"
    unknown = dec.row(dec.make({}).feed(af.encode(ActionFrame(1, 0x99, 0x77)))[0])
    assert unknown["type"] == "0x99" and "defects" not in unknown


def test_action_group_table_lists_the_steps() -> None:
    frame = af.decode(EXAMPLE, relaxed=True)
    console = Console(record=True, width=160)
    console.print(action_group_table(frame))
    text = console.export_text()
    assert "2 steps" in text
    for servo, speed, angle in [(1, 80, "+60"), (2, 60, "-50"), (3, 30, "+20")]:
        assert any(f" {servo} " in line and f" {speed} " in line and angle in line
                   for line in text.splitlines())
    assert "trailer_raw 00 00 00 da f3" in text  # the raw trailer is shown, not dropped
