"""Records are values: equal bytes are equal records (a NaN too), the hash agrees with
equality, and every record type pickles and copies back to an equal record."""

from __future__ import annotations

import copy
import pickle
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwbridge.protocols import action_frame, cmd_frame, odom_frame
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.engine.length_receiver import LengthReceiver
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families import actuator

#: Each built-in description's record type (the module's class) by name.
RECORD_TYPES: dict[str, type] = {"odom": odom_frame.OdomFrame, "cmd": cmd_frame.CmdFrame,
                                 "action": action_frame.ActionFrame,
                                 "actuator": actuator.ActuatorStruct}


def nan_heavy_f32() -> st.SearchStrategy[bytes]:
    """Four bytes of a float32, NaNs (any payload, either sign) and infinities often."""
    nan = st.tuples(st.booleans(), st.integers(1, (1 << 23) - 1)).map(
        lambda t: struct.pack("<I", (t[0] << 31) | (0xFF << 23) | t[1]))
    inf = st.sampled_from([struct.pack("<f", float("inf")), struct.pack("<f", float("-inf")),
                           struct.pack("<f", -0.0)])
    return nan | inf | st.binary(min_size=4, max_size=4)


@st.composite
def wires(draw: st.DrawFn, name: str) -> bytes:
    """One frame of the built-in ``name`` as on the wire, float fields NaN-heavy."""
    d = builtin(name)
    if name in ("odom", "cmd"):
        body = b"".join(draw(nan_heavy_f32()) for _ in d.fields)
        return d.header + body + bytes([sum(body) & 0xFF])
    if name == "action":
        frame = action_frame.ActionFrame(draw(st.integers(0, 255)), draw(st.integers(0, 255)),
                                         draw(st.integers(0, 255)), draw(st.binary(max_size=40)))
        return action_frame.encode(frame)
    return draw(st.binary(min_size=8, max_size=8))  # the actuator struct


def codec_of(name: str, generic: bool) -> FrameCodec[Any]:
    """The description's codec: its record type's, or the generated named tuple's."""
    return FrameCodec(builtin(name), None if generic else RECORD_TYPES[name])


def assert_value(a: Any, b: Any) -> None:
    """``a`` and ``b`` (distinct objects, the same bytes) are one value."""
    assert a == b and b == a and (a != b) is False
    assert hash(a) == hash(b)
    assert a == a and hash(a) == hash(a)  # a NaN record equals itself, stably hashed
    for back in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert back == a and a == back and hash(back) == hash(a)
    assert len({a, b}) == 1


@pytest.mark.parametrize("generic", [False, True], ids=["record type", "named tuple"])
@pytest.mark.parametrize("name", BUILTIN_NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_builtin_record_is_a_value(name: str, generic: bool, data: st.DataObject) -> None:
    wire = data.draw(wires(name))
    codec = codec_of(name, generic)
    a, b = codec.decode(wire), codec.decode(bytes(wire))
    assert a is not b
    assert_value(a, b)
    other = bytearray(wire)
    # another value: a record of other bytes is another record (when it decodes)
    k = len(builtin(name).header) if name != "actuator" else 0
    other[k] ^= 0x01
    if name in ("odom", "cmd"):
        other[-1] = sum(other[2:-1]) & 0xFF
    try:
        c = codec.decode(bytes(other))
    except FrameError:  # a changed byte that no longer decodes (the action frame's CRC)
        return
    assert c != a and a != c


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_receiver_records_are_values(data: st.DataObject) -> None:
    for name in ("odom", "cmd"):
        wire = b"\x00" + data.draw(wires(name))
        module = odom_frame if name == "odom" else cmd_frame
        for make in (lambda m=module: Sum8Receiver(m.CODEC),
                     lambda n=name: Sum8Receiver(Sum8Codec(builtin(n))),  # a named tuple's
                     lambda n=name: FixedReceiver(codec_of(n, False)),
                     lambda n=name: FixedReceiver(codec_of(n, True))):
            a, b = make().feed(wire)[0], make().feed(wire)[0]
            assert_value(a, b)
            assert a.frame == b.frame and hash(a.frame) == hash(b.frame)
    wire = b"\x00" + data.draw(wires("action"))
    for make_action in (lambda: LengthReceiver(codec_of("action", True)),
                        lambda: LengthReceiver(codec_of("action", False)), ActionReceiver):
        ra = make_action().feed(wire)
        rb = make_action().feed(wire)
        assert len(ra) == 1
        assert_value(ra[0], rb[0])


def test_a_nan_record_equals_its_copy_and_zero_signs_compare_as_numbers() -> None:
    nan = struct.unpack("<f", struct.pack("<I", 0x7FC00001))[0]
    other_nan = struct.unpack("<f", struct.pack("<I", 0x7FC00002))[0]
    a = odom_frame.OdomFrame(nan, 0.0, 1.0, 2.0)
    assert a == copy.copy(a) == pickle.loads(pickle.dumps(a))
    assert a != odom_frame.OdomFrame(other_nan, 0.0, 1.0, 2.0)  # other bits: another value
    assert a == odom_frame.OdomFrame(nan, -0.0, 1.0, 2.0)  # 0.0 == -0.0, as numbers have it
    assert len({a, odom_frame.OdomFrame(nan, 0.0, 1.0, 2.0)}) == 1
    assert a != cmd_frame.CmdFrame(nan, 0.0, 1.0)
