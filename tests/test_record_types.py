"""The action frame's and the actuator struct's record types come from their descriptions."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pickle
import subprocess
import sys
from enum import IntEnum, IntFlag
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwbridge.protocols import action_frame, engine
from fwbridge.protocols.action_frame import ActionFrame, InstructionType, SubCommand
from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin_text
from fwbridge.protocols.descriptions.loader import loads
from fwbridge.protocols.engine import records
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.families import actuator
from fwbridge.protocols.families.actuator import ActuatorStruct, Fault

MODULES = {action_frame: ("ActionFrame", {"type": InstructionType, "sub": SubCommand}),
           actuator: ("ActuatorStruct", {"command": SubCommand, "fault": Fault})}


def _declaration(mod: ModuleType, name: str) -> list[tuple[str, str, str | None]]:
    """(field, annotation, default) of the module's typing-only declaration of ``name``."""
    tree = ast.parse(inspect.getsource(mod))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [(s.target.id, ast.unparse(s.annotation),
                     None if s.value is None else ast.unparse(s.value))
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise AssertionError(f"no typing declaration of {name}")


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.DESCRIPTION.name)
def test_record_fields_are_the_descriptions(mod: ModuleType) -> None:
    name, labels = MODULES[mod]
    cls = getattr(mod, name)
    desc = mod.DESCRIPTION
    stored = tuple(n for n in desc.field_names if not desc.length or n != desc.length.field)
    names = tuple(f.name for f in dataclasses.fields(cls))
    assert names == stored == mod.FIELDS
    assert cls.__slots__ == names and cls.__module__ == mod.__name__
    assert cls.__qualname__ == name
    for f, label in labels.items():  # the enum classes name exactly the tables' values
        spec = desc.field(f)
        table = spec.flags or spec.enum
        assert table and {m.value: m.name for m in label if m.value} == dict(table)
        records.check_labels(desc, f, label)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.DESCRIPTION.name)
def test_typing_declaration_matches_the_record(mod: ModuleType) -> None:
    """The type checker's view (names, order, defaults, enum types) cannot drift."""
    name, labels = MODULES[mod]
    cls = getattr(mod, name)
    declared = _declaration(mod, name)
    fields = dataclasses.fields(cls)
    assert [d[0] for d in declared] == [f.name for f in fields]
    for (fname, annotation, default), f in zip(declared, fields):
        if default is None:
            assert f.default is dataclasses.MISSING, fname
        else:
            assert eval(default, vars(mod)) == f.default, fname  # our own source text
        if fname in labels:
            assert labels[fname].__name__ in annotation, fname
        else:
            assert annotation in ("int", "bytes"), fname


def test_the_factory_offers_the_same_record_type() -> None:
    assert engine.record_type is records.record_type
    assert engine.check_labels is records.check_labels


# -- the behaviour the hand-written classes had --------------------------------------------
def test_action_frame_behaves_as_before() -> None:
    frame = ActionFrame(7, 0x06, 0x32, bytearray(b"ab"))
    assert frame == ActionFrame(machine=7, type=InstructionType.WRITE_PC,
                                sub=SubCommand.TEST_ACTION_GROUP, data=b"ab")
    assert type(frame.data) is bytes and frame.type is InstructionType.WRITE_PC
    assert hash(frame) == hash(ActionFrame(7, InstructionType.WRITE_PC, 0x32, memoryview(b"ab")))
    assert repr(frame) == ("ActionFrame(machine=7, type=<InstructionType.WRITE_PC: 6>, "
                           "sub=<SubCommand.TEST_ACTION_GROUP: 50>, data=b'ab')")
    assert frame.length == 2 and ActionFrame(0, 1, 1).data == b""
    assert pickle.loads(pickle.dumps(frame)) == frame and not hasattr(frame, "__dict__")
    unknown = ActionFrame(0, 0x99, 0x77)
    assert type(unknown.type) is int and type(unknown.sub) is int
    assert ActionFrame(0, True, 300).type is True  # left for encode() to refuse
    assert ActionFrame(0, 1, 0x41).sub is SubCommand.DEVICE_CAN_FLASH is SubCommand.ROBOT_ERROR_CODE
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.machine = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        ActionFrame(1, 2)  # type: ignore[call-arg]


def test_actuator_struct_behaves_as_before() -> None:
    zero = ActuatorStruct()
    assert repr(zero) == ("ActuatorStruct(angle=0, speed=0, current=0, module_id=0, command=0, "
                          "fault=<Fault.NONE: 0>, reserved_a=0, reserved_b=0)")
    value = ActuatorStruct(1, 2, 3, 4, 0x21, 0x03, 5, 6)  # type: ignore[arg-type]
    assert value.command is SubCommand.REALTIME_SERVO_CONTROL
    assert value.fault is Fault.OVER_CURRENT | Fault.OVER_TEMPERATURE
    assert value == ActuatorStruct(angle=1, speed=2, current=3, module_id=4,
                                   command=SubCommand.REALTIME_SERVO_CONTROL,
                                   fault=Fault(3), reserved_a=5, reserved_b=6)
    assert value.current_ma == 300
    assert pickle.loads(pickle.dumps(value)) == value and not hasattr(value, "__dict__")
    assert type(ActuatorStruct(fault=300).fault) is int  # type: ignore[arg-type]
    assert type(ActuatorStruct(fault=True).fault) is bool  # type: ignore[arg-type]


@given(st.binary(min_size=8, max_size=8))
def test_decoders_build_what_the_constructor_builds(raw: bytes) -> None:
    fast = actuator.decode(raw)
    slow = ActuatorStruct(**{f: int(getattr(fast, f)) for f in actuator.FIELDS})
    assert fast == slow and repr(fast) == repr(slow)
    assert [type(getattr(fast, f)) for f in actuator.FIELDS] == \
        [type(getattr(slow, f)) for f in actuator.FIELDS]


# -- record_type's labels, on a description of its own --------------------------------------
WIDE = """
[frame]
name = "wide"
header = "AB"
byte_order = "big"

[[field]]
name = "mode"
type = "u16"
enum = { 0x0100 = "RUN", 0x0200 = "STOP" }

[[field]]
name = "alarms"
type = "u16"
flags = { 0x0001 = "LOW", 0x8000 = "HIGH" }

[checksum]
algorithm = "xor8"
span = "payload"
"""


class Mode(IntEnum):
    RUN = 0x0100
    STOP = 0x0200
    HALT = 0x0200  # an alias is allowed


class Alarm(IntFlag):
    NONE = 0  # so is a flag class's zero
    LOW = 0x0001
    HIGH = 0x8000


def test_record_type_normalises_wide_labelled_fields() -> None:
    desc = loads(WIDE)
    cls: Any = records.record_type(desc, "Wide", enums={"mode": Mode, "alarms": Alarm})
    w = cls(0x0200, 0x8001)
    assert w.mode is Mode.STOP and w.alarms == Alarm.LOW | Alarm.HIGH
    assert type(w.alarms) is Alarm and type(cls(0x0300, 0).mode) is int
    assert type(cls(0x10000, 0x10000).alarms) is int  # out of range: as given


@pytest.mark.parametrize(("labels", "words"), [
    ({"mode": IntEnum("Mode", [("RUN", 0x0100)])}, "0x200 STOP"),
    ({"mode": IntEnum("Mode", [("RUN", 0x0100), ("STOP", 0x0200), ("X", 3)])}, "0x03 X"),
    ({"mode": IntEnum("Mode", [("RUN", 0x0100), ("HALT", 0x0200)])}, "HALT"),
    ({"mode": Alarm}, "needs an IntEnum"),
    ({"alarms": Mode}, "needs an IntFlag"),
])
def test_labels_that_drift_from_the_table_are_refused(labels: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        records.record_type(loads(WIDE), "Wide", enums=labels)


# -- a changed description changes the records ----------------------------------------------
def _probe(tmp_path: Path, changes: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter whose built-in descriptions are ``changes``."""
    for name in BUILTIN_NAMES:
        (tmp_path / f"{name}.toml").write_text(changes.get(name, builtin_text(name)))
    head = ("import dataclasses, fwbridge.protocols.descriptions.builtin as b, pathlib\n"
            f"b.FRAMES_DIR = pathlib.Path({str(tmp_path)!r})\n")
    return subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_records_follow_their_toml(tmp_path: Path) -> None:
    """A renamed field and a changed type (copies, read in a fresh interpreter)."""
    act = builtin_text("actuator").replace('name = "angle"\ntype = "i8"',
                                           'name = "angle"\ntype = "u8"')
    act = act.replace('name = "speed"', 'name = "velocity"')
    action = builtin_text("action").replace('name = "machine"', 'name = "device"')
    assert act != builtin_text("actuator") and action != builtin_text("action")
    code = (
        "from fwbridge.protocols import action_frame as af\n"
        "from fwbridge.protocols.families import actuator as a\n"
        "from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver\n"
        "s = a.ActuatorStruct(200, velocity=3, command=0x21)\n"
        "assert a.decode(a.encode(s)) == s == a.decode_with_schema(a.encode_with_schema(s))\n"
        "f = af.ActionFrame(device=7, type=6, sub=0x32, data=b'xy')\n"
        "w = af.encode(f)\n"
        "assert af.decode(w) == f == af.decode_with_schema(w)\n"
        "assert [r.frame for r in ActionReceiver().feed(w)] == [f]\n"
        "print([x.name for x in dataclasses.fields(a.ActuatorStruct)][:2], "
        "a.decode(bytes([0xEC]) + bytes(7)).angle)\n"
        "print([x.name for x in dataclasses.fields(af.ActionFrame)])\n")
    out = _probe(tmp_path, {"actuator": act, "action": action}, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['angle', 'velocity'] 236",
                                       "['device', 'type', 'sub', 'data']"]


def test_an_enum_table_the_code_lacks_is_an_error_at_import(tmp_path: Path) -> None:
    act = builtin_text("actuator").replace('0x42 = "MAIN_CAN_FLASH"',
                                           '0x42 = "MAIN_CAN_FLASH", 0x43 = "NEW_THING"')
    assert act != builtin_text("actuator")
    out = _probe(tmp_path, {"actuator": act}, "from fwbridge.protocols.families import actuator\n")
    assert out.returncode != 0
    assert "SubCommand differs from the description's 'command' table in: 0x43 NEW_THING" \
        in out.stderr


@pytest.mark.parametrize("name", ["vx = 1; import os", "class", "_hidden", "a-b"])
def test_a_description_built_in_code_cannot_put_text_into_generated_code(name: str) -> None:
    # The TOML loader admits only lowercase identifiers; a description made in code
    # skips it, and its field names would reach the generated __post_init__/nonfinite.
    import dataclasses

    from fwbridge.protocols.descriptions.builtin import builtin
    from fwbridge.protocols.engine.records import FloatFields, record_type
    from fwbridge.protocols.errors import ConfigError

    desc = builtin("odom")
    bad = dataclasses.replace(
        desc, fields=(dataclasses.replace(desc.fields[0], name=name), *desc.fields[1:]))
    with pytest.raises(ConfigError, match="not a Python identifier"):
        record_type(bad, "Bad", base=FloatFields)
