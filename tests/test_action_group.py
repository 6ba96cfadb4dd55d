"""Action-group payload (sub-commands 0x31/0x32): the worked example, round trips, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols import action_frame as af
from fwbridge.protocols.action_frame import ActionFrame
from fwbridge.protocols.errors import FieldValueError, FrameError, LengthError
from fwbridge.protocols.families import action_group as ag
from fwbridge.protocols.families.action_group import ActionGroup, ServoEntry, Step
from fwbridge.protocols.hextext import parse_hex
from tests.conftest import FIXTURES

EXAMPLE = af.decode(parse_hex((FIXTURES / "patent_example.hex").read_text()), relaxed=True)

servos = st.builds(ServoEntry, st.integers(0, 255), st.integers(0, 255),
                   st.integers(-32768, 32767))
steps = st.builds(Step, st.lists(servos, max_size=6).map(tuple), st.binary(min_size=2, max_size=2),
                  st.binary(min_size=8, max_size=8))
groups = st.builds(ActionGroup, st.lists(steps, max_size=4).map(tuple),
                   st.binary(min_size=16, max_size=16), st.binary(max_size=11))


def test_worked_example_steps() -> None:
    group = ag.from_frame(EXAMPLE)
    assert len(group.steps) == 2
    assert [s.step_length for s in group.steps] == [0x18, 0x18]
    entries = [(e.servo_id, e.speed, e.angle) for s in group.steps for e in s.servos]
    # head 30 at ±20°, body 60 at ±50°, tail 80 at ±60°
    assert entries == [(1, 80, 60), (2, 60, 50), (3, 30, 20), (1, 80, -60), (2, 60, -50),
                       (3, 30, -20)]
    assert group.header_raw == bytes.fromhex("0000bffb000000004000020002000000")
    assert group.steps[0].prefix_raw == b"\x03\x00"
    assert group.steps[0].params_raw == bytes.fromhex("0300400d07000000")
    assert group.trailer_raw == bytes.fromhex("000000daf3")


def test_worked_example_re_encodes_byte_exact() -> None:
    group = ag.decode(EXAMPLE.data)
    assert ag.encode(group) == ag.encode_with_schema(group) == EXAMPLE.data
    assert ag.decode_with_schema(EXAMPLE.data) == group


@given(groups)
@settings(max_examples=200, deadline=None)
def test_round_trip_and_schema_agree(group: ActionGroup) -> None:
    raw = ag.encode(group)
    assert ag.encode_with_schema(group) == raw
    assert ag.decode(raw) == ag.decode_with_schema(raw) == group


def _outcome(fn, raw: bytes):  # type: ignore[no-untyped-def]
    try:
        return fn(raw)
    except FrameError as exc:
        return (type(exc), str(exc))


@given(st.binary(max_size=120) | groups.map(ag.encode).flatmap(
    lambda raw: st.binary(max_size=4).map(lambda junk: raw + junk)))
@settings(max_examples=200, deadline=None)
def test_any_bytes_decode_exactly_or_raise_a_frame_error(raw: bytes) -> None:
    fast = _outcome(ag.decode, raw)
    assert fast == _outcome(ag.decode_with_schema, raw)
    if isinstance(fast, ActionGroup):
        assert ag.encode(fast) == raw


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (bytes(15), "header_raw"),
        (bytes(16) + b"\x03\x00\x17\x00" + bytes(8), "steps[0].step_length"),
        (bytes(16) + b"\x03\x00\x08\x00" + bytes(8), "steps[0].step_length"),
        (bytes(16) + b"\x03\x00\x18\x00" + bytes(8) + bytes(11), "steps[0].step_length"),
        (EXAMPLE.data[:40] + EXAMPLE.data[40:42] + b"\x20\x00" + EXAMPLE.data[44:],
         "steps[1].step_length"),
    ],
)
def test_decode_errors_name_the_field(data: bytes, field: str) -> None:
    for fn in (ag.decode, ag.decode_with_schema):
        with pytest.raises(LengthError) as exc:
            fn(data)
        assert exc.value.field == field and exc.value.frame == "action group"


@pytest.mark.parametrize(
    ("group", "field"),
    [
        (ActionGroup((), bytes(15)), "header_raw"),
        (ActionGroup((), bytes(16), bytes(12)), "trailer_raw"),
        (ActionGroup((Step((), b"\x00"),)), "steps[0].prefix_raw"),
        (ActionGroup((Step((ServoEntry(1, 2, 40000),)),)), "steps[0].servos[0].angle"),
        (ActionGroup((Step((ServoEntry(256, 2, 0),)),)), "steps[0].servos[0].servo_id"),
    ],
)
def test_encode_errors_name_the_field(group: ActionGroup, field: str) -> None:
    for fn in (ag.encode, ag.encode_with_schema):
        with pytest.raises(FieldValueError) as exc:
            fn(group)
        assert exc.value.field == field


def test_only_action_group_sub_commands() -> None:
    with pytest.raises(FieldValueError, match="0x21"):
        ag.from_frame(ActionFrame(0, 6, 0x21, EXAMPLE.data))
    assert ag.from_frame(ActionFrame(0, 6, 0x31, EXAMPLE.data)) == ag.from_frame(EXAMPLE)
