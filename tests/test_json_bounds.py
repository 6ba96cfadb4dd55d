"""Untrusted JSON is read bounded, reader by reader: JSON records inside captures, a shared
bus's description file, the fish's flash file, the lines of the simulators' supervisor and of
the QEMU board's UART1, the ROS 2 fish's scenes parameter and the shared bus's packets. Text
nested 100,000 levels deep, or larger than its bound, is each reader's house answer (a
counted, skipped record; one ``error: FILE: ...`` line and exit 2; a refusal with its
reason), never a RecursionError, a traceback or a read without end."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from types import ModuleType

import pytest

from fwbridge.protocols import bus_wire
from tests.helpers import drain, run_verb, shared_bus, wait_until, world

DEEP = "[" * 100_000  # far past the interpreter's recursion limit


# -- JSON records inside a capture: counted, skipped, said once ---------------------------------
def _json_capture(path: Path, topic: str, bodies: list[bytes], frames: int = 0) -> Path:
    """An MCAP file of JSON records on ``topic`` (as the recorders write them), one a second,
    after ``frames`` CAN frames (a CAN capture)."""
    import can

    from fwbridge.bridge.record.can_mcap import FRAME_SCHEMA, FRAME_TYPE, RX_TOPIC, encode_frame
    from fwbridge.bridge.record.mcap_writer import McapWriter

    with open(path, "wb") as fh:
        w = McapWriter(fh)
        w.add_schema(1, "fwbridge.Json", "jsonschema", b"{}")
        w.add_channel(1, 1, topic, "json")
        w.add_schema(2, FRAME_TYPE, "ros2msg", FRAME_SCHEMA.encode())
        w.add_channel(2, 2, RX_TOPIC, "cdr")
        for k in range(frames):
            t = 1.0 + k * 0.01
            w.add_message(2, round(t * 1e9), encode_frame(can.Message(
                arbitration_id=0x101, is_extended_id=False, data=b"\0" * 8, timestamp=t)), k)
        for k, body in enumerate(bodies):
            w.add_message(1, (k + 1) * 1_000_000_000, body, k)
        w.finish()
    return path


GOOD_COUNTERS = json.dumps({"rx": {"frames": 5, "checksum_errors": 0}}).encode()


def test_a_deeply_nested_counters_record_is_skipped_and_the_plot_drawn(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    pytest.importorskip("mcap")
    cap = _json_capture(tmp_path / "run.mcap", "/fwbridge/counters",
                        [GOOD_COUNTERS, DEEP.encode(), GOOD_COUNTERS])
    out = tmp_path / "run.png"
    r = run_verb("plot", str(cap), "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert out.stat().st_size > 0
    assert f"warning: {cap}: 1 JSON record(s) skipped" in err, err
    assert "nested more than 32" in err, err
    assert "Traceback" not in err and "recursion" not in err


def test_an_oversize_counters_record_is_skipped_before_it_is_parsed(tmp_path: Path) -> None:
    pytest.importorskip("mcap")
    from fwbridge.bridge.record.damage import CaptureWarning
    from fwbridge.cli_verbs.plot_series import MAX_JSON_RECORD, base_series

    huge = GOOD_COUNTERS[:-1] + b" " * MAX_JSON_RECORD + b"}"  # valid JSON, past the bound
    cap = _json_capture(tmp_path / "run.mcap", "/fwbridge/counters",
                        [GOOD_COUNTERS, huge, GOOD_COUNTERS])
    with pytest.warns(CaptureWarning, match=r"1 JSON record\(s\) skipped.*more than"):
        s = base_series(cap)
    assert s.skipped == 1 and len(s.counters_t) == 2
    assert s.counters["rx frames"] == [5, 5]


def test_bus_state_and_load_records_out_of_bounds_are_skipped(tmp_path: Path) -> None:
    pytest.importorskip("mcap")
    from fwbridge.bridge.record.damage import CaptureWarning
    from fwbridge.cli_verbs.plot_series import MAX_JSON_RECORD, can_series

    load = _json_capture(tmp_path / "load.mcap", "/fwbridge/can/load", [
        DEEP.encode(), b'{"bitrate": 250000' + b" " * MAX_JSON_RECORD + b"}",
        b'{"bitrate": 500000}'], frames=300)
    with pytest.warns(CaptureWarning, match=r"2 JSON record\(s\) skipped"):
        s = can_series(load)
    assert s.skipped == 2 and s.bitrate == 500_000  # the good record still read
    state = _json_capture(tmp_path / "state.mcap", "/fwbridge/can/state",
                          [DEEP.encode(), b'{"node": ["not", "a", "name"]}'], frames=300)
    with pytest.warns(CaptureWarning, match=r"2 JSON record\(s\) skipped"):
        assert can_series(state).skipped == 2


# -- a shared bus's description file: one error line naming it ----------------------------------
@pytest.mark.parametrize("damage", [
    DEEP.encode(),
    b'{"name": "jb", "pid": 1, "bitrate": 500000, "data_bitrate": 500000, "pacing": "afap"'
    + b" " * (1 << 20) + b"}",
], ids=["deep", "oversize"])
def test_a_damaged_bus_description_is_one_error_line(rundir: Path, damage: bytes) -> None:
    with shared_bus("jb", "--pacing", "afap"):
        info = rundir / "jb.json"
        good = info.read_bytes()
        info.write_bytes(damage)
        try:
            for verb in (("can", "bus", "list"), ("can", "bus", "up", "jb")):
                r = run_verb(*verb)
                err = r.stderr.decode()
                assert r.returncode == 2, (verb, err)
                lines = err.strip().splitlines()
                assert len(lines) == 1 and lines[0].startswith(f"error: {info}: "), (verb, err)
                assert "socket answers" in err and "recursion" not in err
        finally:
            info.write_bytes(good)  # so the bus can be taken down
    r = run_verb("can", "bus", "list")
    assert r.returncode == 0 and b"jb" not in r.stdout, r.stderr


def test_a_description_left_by_a_gone_bus_is_no_bus(rundir: Path) -> None:
    from fwbridge.can_bus.daemon_dir import daemon_info, list_daemons

    (rundir / "gone.json").write_text(DEEP)  # no socket answers: stale, not an error
    assert daemon_info("gone") is None and list_daemons() == []


# -- the fish's flash file: bounded in bytes -------------------------------------------------
def test_an_oversize_flash_file_is_one_error_line(tmp_path: Path) -> None:
    from fwbridge.bridge.sim.fish.flash import MAX_FLASH_FILE

    path = tmp_path / "flash.json"
    r = run_verb("sim", "fish", "--flash", str(path), "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc) + " " * MAX_FLASH_FILE)  # valid JSON, too large
    r = run_verb("sim", "fish", "--flash", str(path), "--duration", "0.2")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.strip().splitlines() == [
        f"error: {path}: damaged fish flash file: more than {MAX_FLASH_FILE} bytes; a file "
        "of this kind is far smaller (is it the right file?)"], err


def test_a_deeply_nested_flash_file_is_refused_before_json_recurses(tmp_path: Path) -> None:
    from fwbridge.bridge.sim.fish.flash import FishFlash, FlashError

    path = tmp_path / "deep.json"
    path.write_text('{"format": "fwbridge-fish-flash-1", "banks": ' + "[" * 40 + "]" * 40 + "}")
    with pytest.raises(FlashError, match="nested more than 32 deep"):
        FishFlash.open(path)


# -- supervisor lines of the simulated firmwares: counted and ignored ----------------------------
def test_a_base_counts_supervisor_lines_out_of_bounds_and_still_answers(
        controller: ModuleType) -> None:
    from fwbridge.bridge.sim import webots_adapter
    from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams

    sim, _host, sup = world(controller, end_ms=400)
    status = bytearray()

    def peer(now: int) -> None:
        # a line of brackets; a line too long (in two packets); then a real command
        packet = {40: DEEP[:4000].encode() + b"\n", 48: b'{"cmd": "status"' + b" " * 3000,
                  56: b" " * 3000 + b"}\n", 64: b'{"cmd": "status"}\n'}.get(now)
        if packet is not None:
            assert sup.devices["tx"].send(packet) == 1
        status.extend(drain(sup.devices["rx"]))

    sim.on_step.append(peer)
    model = webots_adapter.run_controller(MecanumBase(MecanumParams(cmd_timeout_ms=0)))
    assert model.counters.supervisor_refused == 2  # type: ignore[attr-defined]
    assert status  # the status lines still come


def test_the_fish_counts_supervisor_lines_out_of_bounds() -> None:
    from tests.helpers import Fish

    fish = Fish()
    try:
        before = fish.model.stats.status_sent
        fish.model._supervisor_input(DEEP.encode() + b"\n" + b'{"cmd": "status"}\n')
        assert fish.model.stats.supervisor_refused == 1
        assert fish.model.stats.status_sent == before + 1
    finally:
        fish.close()


# -- the QEMU board's UART1: a damaged counters line is left, the reader goes on ----------------
def test_the_board_reader_outlives_a_deeply_nested_line() -> None:
    from fwbridge.cli_verbs.fw import QemuBoard

    board = QemuBoard(Path("unused.elf"))
    r, w = os.pipe()
    board._diag_fd = r
    reader = threading.Thread(target=board._read_diag, daemon=True)
    reader.start()
    try:
        os.write(w, b'{"cmd": ' + b"[" * 60_000 + b"\n")
        os.write(w, b'{"ms": 7, "cmd": {}}\n')
        wait_until(lambda: board.latest is not None, 10.0, "the line after the deep one")
        assert board.latest == {"ms": 7, "cmd": {}}
        assert reader.is_alive()
    finally:
        board._halt.set()
        reader.join(5)
        os.close(w)
        os.close(r)


# -- the ROS 2 fish's scenes parameter: refused with its reason ---------------------------------
def test_a_deeply_nested_scenes_parameter_is_refused_with_its_reason() -> None:
    from fwbridge.bridge.ros2.fish_parameters import MAX_STRING, check_parameters

    plan = check_parameters([("scenes", DEEP[:MAX_STRING])])
    assert plan.results == [(False, "scenes: arrays or tables nested more than 32 deep")]


# -- the shared bus's packets: held to the same nesting ------------------------------------------
def test_a_bus_packet_nested_past_the_bound_is_a_wire_error() -> None:
    deep = b'{"name": ' + b"[" * 40 + b"]" * 40 + b"}"
    with pytest.raises(bus_wire.WireError, match="nested more than 32 deep"):
        bus_wire.parse_hello(deep)
    with pytest.raises(bus_wire.WireError, match="nested"):
        bus_wire.parse_call(DEEP.encode()[: bus_wire.MAX_PACKET])


# -- a YAML argument: the error line says a bounded part of it ----------------------------------
def test_a_deep_yaml_argument_is_one_short_error_line() -> None:
    pytest.importorskip("ruamel.yaml")
    r = run_verb("ros2", "pub", "/cmd_vel", "geometry_msgs/msg/Twist", DEEP)
    err = r.stderr.decode()
    assert r.returncode == 2, err[:500]
    assert len(err) < 600 and err.startswith("error: 'YAML': cannot parse '[[["), err[:500]
    assert "(100000 characters)" in err and "Traceback" not in err


def test_the_nesting_scan_is_skipped_for_shallow_text_and_kept_for_deep() -> None:
    from fwbridge.protocols.config_text import TextLimitError, parse_json_bytes

    assert parse_json_bytes(b'{"a": [1, {"b": "[[[["}]}', "x") == {"a": [1, {"b": "[[[["}]}
    with pytest.raises(TextLimitError, match="11 bytes of JSON, more than 8"):
        parse_json_bytes(b"[1, 2, 3]  ", "x", size=8)
    with pytest.raises(TextLimitError, match="nested more than 32"):
        parse_json_bytes(DEEP.encode(), "x")
