"""``fwbridge can`` verbs, in process (click's runner) and as a subprocess."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import can
import pytest
from click.testing import CliRunner, Result

from fwbridge.bridge.record.can_logs import read_messages
from fwbridge.can_bus.ids import Direction, to_message
from fwbridge.cli import fwbridge
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.families.actuator import ActuatorStruct
from tests.helpers import vcan_reason

ROOT = Path(__file__).resolve().parents[1]
_names = itertools.count()


def chan() -> str:
    return f"cli{os.getpid()}-{next(_names)}"


def run(*args: str) -> Result:
    return CliRunner().invoke(fwbridge, ["can", *args], catch_exceptions=False)


def test_send_frame_is_on_the_bus(tmp_path: Path) -> None:
    cap = tmp_path / "cap.log"
    r = run("-c", chan(), "--bus-kwarg", f"capture={cap}", "send", "123#DEADBEEF",
            "--count", "3", "--interval", "0")
    assert r.exit_code == 0, r.output
    assert "sent 3 x 123#DEADBEEF" in r.stderr
    lines = cap.read_text().splitlines()
    assert len(lines) == 3 and all(line.split()[2] == "123#DEADBEEF" for line in lines)


def test_send_actuator_struct(tmp_path: Path) -> None:
    cap = tmp_path / "cap.pcapng"
    r = run("-c", chan(), "--bus-kwarg", f"capture={cap}", "send", "actuator", "--module", "3",
            "--angle", "-20", "--speed", "50", "--command", "realtime-servo-control")
    assert r.exit_code == 0, r.output
    (msg,) = read_messages(cap)
    want = to_message(ActuatorStruct(angle=-20, speed=50, module_id=3,
                                     command=SubCommand.REALTIME_SERVO_CONTROL),
                      Direction.COMMAND)
    assert (msg.arbitration_id, bytes(msg.data)) == (0x103, bytes(want.data))


def test_send_errors_are_one_line() -> None:
    r = run("-c", chan(), "send", "12#00")
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    r = run("-c", chan(), "--bus-kwarg", "pacing=afap", "send", "123#00")
    assert r.exit_code == 2
    assert "not acknowledged" in r.stderr and "--modules N" in r.stderr  # alone on the channel
    r = run("-i", "nosuchbus", "send", "123#00")
    assert r.exit_code == 2 and "cannot open CAN bus nosuchbus" in r.stderr


def test_sniff_decodes_actuator_structs() -> None:
    r = run("-c", chan(), "--modules", "2", "sniff", "--count", "6", "--json")
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 6 and {row["module"] for row in rows} == {1, 2}
    assert all(row["direction"] == "feedback" and row["id"] == 0x200 + row["module"]
               for row in rows)
    assert "frames=6 actuator=6" in r.stderr
    r = run("-c", chan(), "--modules", "1", "sniff", "--raw", "--count", "2")
    assert r.exit_code == 0, r.output
    assert all(re.fullmatch(r"\(\d+\.\d{6}\) cli\S+ 201#[0-9A-F]{16}", line)
               for line in r.stdout.splitlines())


def test_record_decode_replay(tmp_path: Path) -> None:
    rec, back = tmp_path / "rec.pcapng", tmp_path / "back.log"
    r = run("-c", chan(), "--modules", "2", "record", str(rec), "--count", "20")
    assert r.exit_code == 0, r.output
    recorded = list(read_messages(rec))
    assert len(recorded) == 20
    r = run("decode", str(rec), "--json")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 20
    assert "structs=20 malformed=0" in r.stderr
    r = run("-c", chan(), "--bus-kwarg", f"capture={back}", "replay", str(rec), "--speed", "0",
            "--loop", "2")
    assert r.exit_code == 0, r.output
    replayed = list(read_messages(back))
    assert [(m.arbitration_id, bytes(m.data)) for m in replayed] == 2 * [
        (m.arbitration_id, bytes(m.data)) for m in recorded]
    assert run("decode", str(tmp_path / "none.log")).exit_code == 2


def test_busload_per_id_in_bus_time() -> None:
    r = run("-c", chan(), "--modules", "3", "--bus-kwarg", "pacing=afap",
            "busload", "--interval", "0.5", "--count", "2", "--json")
    assert r.exit_code == 0, r.output
    reports = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(reports) == 2
    for rep in reports:
        assert [row["id"] for row in rep["ids"]] == ["201", "202", "203"]
        assert all(row["fps"] == pytest.approx(50, abs=2) for row in rep["ids"])  # 20 ms
        # 8-byte frames are 108..130 bits: 150 of them per second at 500 kbit/s
        assert 150 * 108 / 5e5 * 100 <= rep["load"] <= 150 * 130 / 5e5 * 100 + 1


def test_sim_isolates_a_stuck_module() -> None:
    r = run("-c", chan(), "sim", "3", "--duration", "0.6", "--pacing", "afap",
            "--fault", "2:stuck@0.2", "--no-auto-recovery", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    status = {m["module"]: (m["status"], m["bus_state"]) for m in report["modules"]}
    assert status == {1: ("ok", "active"), 2: ("silent", "bus_off"), 3: ("ok", "active")}
    assert any(e["module"] == 2 and e["to"] == "silent" for e in report["events"])
    assert report["stats"]["error_frames"] > 0


def test_sim_runs_unchanged_on_virtual() -> None:
    r = run("-i", "virtual", "-c", chan(), "sim", "2", "--duration", "0.4", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert [m["status"] for m in report["modules"]] == ["ok", "ok"]
    r = run("-i", "virtual", "-c", chan(), "sim", "2", "--fault", "1:stuck")
    assert r.exit_code == 2 and "simulated bus" in r.stderr


WRAPPER = "import sys; from fwbridge.cli import main; main(['can', *sys.argv[1:]])"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_as_a_subprocess(tmp_path: Path) -> None:
    p = cli("sim", "2", "--duration", "0.3", "--pacing", "afap", "--json",
            "--capture", str(tmp_path / "sim.log"))
    assert p.returncode == 0, p.stderr
    assert [m["status"] for m in json.loads(p.stdout)["modules"]] == ["ok", "ok"]
    with can.LogReader(tmp_path / "sim.log") as reader:
        ids = {m.arbitration_id for m in reader}
    assert ids == {0x101, 0x102, 0x201, 0x202}
    p = cli("send", "nonsense")
    assert p.returncode == 2 and p.stderr.startswith("error: ")


def test_cli_on_vcan(tmp_path: Path) -> None:
    reason = vcan_reason()
    if reason is not None:
        pytest.skip(f"socketcan vcan0 unavailable: {reason}")
    p = cli("-i", "socketcan", "-c", "vcan0", "sim", "2", "--duration", "0.5", "--json")
    assert p.returncode == 0, p.stderr
    assert [m["status"] for m in json.loads(p.stdout)["modules"]] == ["ok", "ok"]
