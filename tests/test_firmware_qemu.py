"""firmware_ref on an emulated Cortex-M3 (QEMU mps2-an385), bridged like a real board.

``fwbridge fw run`` starts the board; the host side is the real bridge
(``fwbridge bridge`` with ``use_sim = false`` on the printed pty) or the
host's receivers on the pty. Time is the firmware's: its counters are
stamped with its SysTick milliseconds, so rates and delays are measured on
the emulated board's clock, not the host's. QEMU runs without -icount, so
the emulated clock follows the host's (docs: "firmware_ref on QEMU").
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import struct
import subprocess
import threading
import time
import tty
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tests.fwref import FIRMWARE
from tests.helpers import OdometryReader, reaped, spawn_verb
from tests.qemu_fw import DEADLINE, QEMU_BUILD, fw_run, qemu_build

RATE_HZ = 50  # the firmware's odometry rate (the harness's default)
TIMEOUT_MS = 500  # FW_CMD_TIMEOUT_MS
ZERO_BITS = {"vx": 0, "vy": 0, "wz": 0}


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def test_golden_vectors_on_the_cortex_m3() -> None:
    """The C unit tests (golden vectors of tests/fixtures) on the target's ABI, semihosted."""
    qemu_build()
    proc = subprocess.run(
        ["qemu-system-arm", "-M", "mps2-an385", "-nographic", "-monitor", "none", "-serial",
         "none", "-semihosting-config", "enable=on,target=native",
         "-kernel", str(QEMU_BUILD / "fw_unit.elf")],
        cwd=FIRMWARE, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    assert m is not None, out
    assert proc.returncode == 0 and int(m.group(2)) == 0, out
    assert int(m.group(1)) >= 16 and "ok   test_golden_sum8" in out
    assert "ok   test_golden_action" in out and "ok   test_golden_actuator" in out


class PortReader(OdometryReader):
    """Reads odometry on the board's port with the host's receiver; counts frames."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        super().__init__(fd)

    def close(self) -> None:
        self.stop()
        os.close(self.fd)


def test_odometry_rate_on_the_boards_clock_and_every_frame_arrives() -> None:
    with fw_run() as run:
        reader = PortReader(run.port)
        reader.start()
        try:
            # The first counters line after the reader started, then one 10 s later (emulated).
            first = run.status(lambda st: st["ms"] > 0)
            host_first = reader.count
            last = run.status(lambda st: st["ms"] >= first["ms"] + 10_000)
            host_last = reader.count
        finally:
            reader.close()
        rc, _ = run.stop()
    assert rc == 143
    span_ms = last["ms"] - first["ms"]
    rate = (last["odom_sent"] - first["odom_sent"]) * 1000.0 / span_ms
    assert abs(rate - RATE_HZ) <= 0.02 * RATE_HZ, (rate, first, last)
    # Every frame the firmware sent in that window reached the host, intact.
    sent = last["odom_sent"] - first["odom_sent"]
    assert abs((host_last - host_first) - sent) <= 3, (host_last - host_first, sent)
    assert reader.rx.stats.checksum_errors == 0 and reader.rx.stats.discarded == 0
    assert last["tx_dropped"] == 0 and last["rx_overruns"] == 0


@contextmanager
def bridge(port: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes],
                                                        queue.Queue[dict[str, Any]]]]:
    """``fwbridge bridge`` on the board's pty (use_sim = false), commands on stdin."""
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'use_sim = false\n[link]\nurl = "{port}"\n[control]\nrate_hz = 50\n'
                   "[watchdog]\ncmd_timeout = 30.0\n")
    proc = spawn_verb("bridge", str(cfg), "--cmd-stdin", stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    odom: queue.Queue[dict[str, Any]] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def pump() -> None:
        for line in stdout:
            with suppress(ValueError):
                odom.put(json.loads(line))

    threading.Thread(target=pump, daemon=True).start()
    with reaped(proc):
        yield proc, odom


def command(proc: subprocess.Popen[bytes], vx: float, vy: float, wz: float) -> None:
    assert proc.stdin is not None
    proc.stdin.write(f"{vx} {vy} {wz}\n".encode())
    proc.stdin.flush()


def odometry_reports(odom: queue.Queue[dict[str, Any]], vx: float, vy: float,
                     wz: float) -> dict[str, Any]:
    """The first odometry the bridge publishes with this twist (from the board's frames)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        try:
            rec = odom.get(timeout=0.2)
        except queue.Empty:
            continue
        lin, ang = rec["twist"]["linear"], rec["twist"]["angular"]
        if (lin["x"], lin["y"], ang["z"]) == (f32(vx), f32(vy), f32(wz)):
            return rec
    raise AssertionError(f"no odometry reporting {(vx, vy, wz)}")


def test_bridge_drives_the_board_and_sigterm_leaves_it_stopped(tmp_path: Path) -> None:
    with fw_run() as run, bridge(run.port, tmp_path) as (proc, odom):
        command(proc, 0.3, 0.0, 0.2)
        first = odometry_reports(odom, 0.3, 0.0, 0.2)
        command(proc, -0.1, 0.05, 0.0)
        odometry_reports(odom, -0.1, 0.05, 0.0)
        command(proc, 0.0, 0.0, 0.5)
        later = odometry_reports(odom, 0.0, 0.0, 0.5)
        assert later["pose"]["yaw"] != first["pose"]["yaw"]  # the board integrates wz
        moving = run.status(lambda st: st["last_cmd_bits"]["wz"] == bits(0.5))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 143
        # The board's own record: the last command it received was zero (the bridge's
        # safe stop, not its watchdog, which leaves last_cmd_bits alone), and it stands still.
        after = run.status(lambda st: st["ms"] > moving["ms"]
                           and st["last_cmd_bits"] == ZERO_BITS)
        assert after["velocity_bits"] == ZERO_BITS
        assert after["cmd"]["checksum_errors"] == 0 and after["cmd"]["discarded"] == 0
        rc, end = run.stop(signal.SIGINT)
    assert rc == 130 and end["interrupted"] is True


def test_board_watchdog_stops_within_550_ms_of_the_host_going_silent(tmp_path: Path) -> None:
    with fw_run() as run, bridge(run.port, tmp_path) as (proc, odom):
        command(proc, 0.4, 0.0, 0.0)
        odometry_reports(odom, 0.4, 0.0, 0.0)
        before = run.status(lambda st: st["last_cmd_bits"]["vx"] == bits(0.4))
        proc.kill()  # the host goes silent: no zero command
        proc.wait(DEADLINE)
        st = run.status(lambda s: s["watchdog_trips"] > before["watchdog_trips"])
        run.stop()
    assert st["velocity_bits"] == ZERO_BITS
    assert st["last_cmd_bits"]["vx"] == bits(0.4)  # it was moving when the host went quiet
    silent_ms = st["watchdog_trip_ms"] - st["last_cmd_ms"]
    assert TIMEOUT_MS < silent_ms <= 550, st


def test_fw_run_link_symlink_and_errors(tmp_path: Path) -> None:
    link = tmp_path / "ttyFW0"
    with fw_run("--link", str(link)) as run:
        assert run.port == str(link) and os.readlink(link) == run.ready["pty"]
        rc, _ = run.stop()
    assert rc == 143 and not os.path.lexists(link)
    taken = tmp_path / "mine.txt"
    taken.write_text("keep")
    proc = spawn_verb("fw", "run", "--link", str(taken), stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 2 and err.decode().startswith("error: ")
    assert taken.read_text() == "keep"
    bad = spawn_verb("fw", "run", "--icount", "fast", stderr=subprocess.PIPE)
    _, err = bad.communicate(timeout=DEADLINE)
    assert bad.returncode == 2 and b"--icount" in err


def test_fw_demo_closes_the_square_on_the_board() -> None:
    qemu_build()
    proc = spawn_verb("fw", "demo", "--side", "0.3", "--json", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    with reaped(proc):
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    end = json.loads(out.decode().splitlines()[-1])
    assert end["event"] == "end" and end["completed"] is True
    assert end["odom_closing_m"] < 0.004  # the driver's tolerance, on the board's odometry
    assert end["bridge"]["checksum_errors"] == 0 and end["bridge"]["frames"] > 0
    fw = end["firmware"]
    assert fw["cmd"]["frames"] > 0 and fw["cmd"]["checksum_errors"] == 0
    assert fw["velocity_bits"] == ZERO_BITS  # the node's safe stop reached the board
