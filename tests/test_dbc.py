"""The generated DBC: shipped as generated, and cantools decodes captures with it like fwbridge."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import can
import pytest

from fwbridge.can_bus.ids import Direction, to_message
from fwbridge.codegen.dbc import generate
from fwbridge.protocols.descriptions.builtin import builtin
from fwbridge.protocols.descriptions.loader import load
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.families.actuator import (
    ActuatorStruct,
    Fault,
    fine_position,
    with_fine_position,
)
from tests.conftest import FIXTURES
from tests.helpers import ROOT, run_cli

cantools = pytest.importorskip("cantools", reason="cantools is in the test extra")

SHIPPED = ROOT / "can_bus" / "fwbridge_actuators.dbc"


def test_the_shipped_dbc_is_what_the_generator_writes() -> None:
    assert SHIPPED.read_text() == generate([builtin("actuator")]), (
        "can_bus/fwbridge_actuators.dbc differs from the description: run "
        "`fwbridge gen dbc actuator -o can_bus/fwbridge_actuators.dbc`")


def _capture(path: Path) -> list[ActuatorStruct]:
    rnd = random.Random(3)
    structs = []
    with can.Logger(str(path)) as log:
        for k in range(60):
            s = ActuatorStruct(rnd.randrange(-128, 128), rnd.randrange(256), rnd.randrange(256),
                               1 + k % 7, rnd.choice((0x21, 0x38, 0x12, 0x99)),
                               Fault(rnd.randrange(256)))
            s = with_fine_position(s, rnd.randrange(-32768, 32768))
            direction = Direction.COMMAND if k % 2 else Direction.FEEDBACK
            log.on_message_received(to_message(s, direction, timestamp=1000.0 + k / 100))
            structs.append(s)
    return structs


def test_cantools_decodes_a_capture_like_fwbridge_decode(tmp_path: Path) -> None:
    capture = tmp_path / "arm.log"
    structs = _capture(capture)
    db = cantools.database.load_file(str(SHIPPED))  # strict: no overlapping signals
    proc = run_cli("decode", "-p", "actuator", "--json", str(capture))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    msgs = list(can.LogReader(str(capture)))
    assert len(rows) == len(msgs) == len(structs) == 60
    for row, msg, s in zip(rows, msgs, structs):
        got: dict[str, Any] = db.decode_message(msg.arbitration_id, msg.data)
        name = db.get_message_by_frame_id(msg.arbitration_id).name
        assert name == f"actuator_{row['direction']}_{row['module']}"
        assert got["angle"] == row["angle"] and got["speed"] == row["speed"]
        assert got["current"] * 100 == row["current_ma"] and got["module_id"] == row["module_id"]
        command = got["command"]
        text = (str(command).lower().replace("_", "-") if isinstance(command, str)
                or hasattr(command, "name") else f"0x{int(command):02X}")
        assert text == row["command"]
        faults = sorted(k.removeprefix("fault_").upper() for k, v in got.items()
                        if k.startswith("fault_") and v)
        assert faults == sorted(row["faults"])
        assert got["fine_position"] == fine_position(s)
        raw = row["reserved"][0] | row["reserved"][1] << 8
        assert got["fine_position"] == (raw - 0x10000 if raw & 0x8000 else raw)


def test_a_user_can_payload_big_endian_and_scaled(tmp_path: Path) -> None:
    desc = load(FIXTURES / "frames" / "wheel.toml")
    out = tmp_path / "wheel.dbc"
    proc = run_cli("gen", "dbc", str(FIXTURES / "frames" / "wheel.toml"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    db = cantools.database.load_file(str(out))
    assert [m.frame_id for m in db.messages] == [0x301, 0x302, 0x303, 0x304]
    codec: FrameCodec[Any] = FrameCodec(desc)
    rnd = random.Random(1)
    for _ in range(50):
        frame = codec.make(rnd.randrange(-32768, 32768), rnd.randrange(65536), rnd.randrange(3),
                           rnd.randrange(-128, 128), rnd.randrange(65536))
        data = codec.encode(frame)
        got = db.decode_message(0x302, data)
        assert got["speed"] == pytest.approx(frame.speed)
        assert got["current"] == pytest.approx(frame.current)
        assert str(got["state"]) == frame.state.name
        assert (got["temp"], got["ticks"]) == (frame.temp, frame.ticks)
        assert db.encode_message(0x302, got) == data


def test_gen_dbc_refuses_a_serial_frame(tmp_path: Path) -> None:
    proc = run_cli("gen", "dbc", "odom", "-o", str(tmp_path / "x.dbc"))
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("error: no CAN payload among the descriptions")
    assert not (tmp_path / "x.dbc").exists()
