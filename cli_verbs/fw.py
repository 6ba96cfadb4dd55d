"""``fwbridge fw``: the reference firmware (``firmware_ref/``) on an emulated Cortex-M.

``fw run`` builds ``firmware_ref/build/qemu/fwref.elf`` when needed (``make
-C firmware_ref qemu``), starts QEMU's ``mps2-an385`` board (a Cortex-M3
with CMSDK UARTs) on it and prints the link's pty, the way ``fwbridge sim
mecanum`` prints its port: UART0 carries the seed-002 link and the action
frames, UART1 the firmware's counters (one JSON line a second), which this
verb reads and shows. ``fw demo`` drives the square on it through the bridge.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from fwbridge.bridge.link.pty_relay import PtyRelay
from fwbridge.bridge.sim.board_run import run_board
from fwbridge.cli_verbs.common import Group, fail, json_line, print_counters
from fwbridge.cli_verbs.params import DURATION
from fwbridge.cli_verbs.status_line import StatusLine
from fwbridge.protocols.config_text import parse_json_bytes
from fwbridge.protocols.errors import Error

#: The source tree's firmware_ref/ (a checkout; it is not in the wheel).
FIRMWARE_DIR = Path(__file__).resolve().parent.parent / "firmware_ref"
ELF = FIRMWARE_DIR / "build" / "qemu" / "fwref.elf"
MACHINE = "mps2-an385"
QEMU = "qemu-system-arm"
_PTY_LINE = re.compile(r"char device redirected to (\S+) \(label serial(\d)\)")


class BoardError(Error):
    """QEMU or the build could not give a running board; the message says why."""


def build_elf(firmware_dir: Path = FIRMWARE_DIR) -> Path:
    """``make -C firmware_ref qemu`` (make rebuilds only what changed); the ELF's path."""
    elf = firmware_dir / "build" / "qemu" / "fwref.elf"
    if not (firmware_dir / "Makefile").exists():
        raise BoardError(f"{firmware_dir} not found (a source checkout is needed): pass --elf")
    if shutil.which("make") is None:
        if elf.exists():
            return elf
        raise BoardError("make is not installed (needed to build the firmware)")
    proc = subprocess.run(["make", "-s", "-C", str(firmware_dir), "qemu"], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        tail = " ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise BoardError(f"building the firmware failed: {tail}")
    return elf


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """QEMU goes when this process goes, even killed (Linux: PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)


#: The longest counters line read from the board's UART1 (far longer than the firmware's).
DIAG_LINE = 1 << 16


def _diag_status(raw: bytes) -> dict[str, Any] | None:
    """A counters line of the board: a JSON object stamped with its ``ms``, bounded in bytes
    and nesting; anything else None (a damaged line is left, the last good one kept)."""
    try:
        st = parse_json_bytes(raw, "UART1", DIAG_LINE)
    except ValueError:  # too long, nested too deeply, not JSON
        return None
    ok = isinstance(st, dict) and type(st.get("ms")) is int
    return st if ok else None


class QemuBoard:
    """QEMU running a firmware ELF; UART0 and UART1 on ptys (``port``, ``diag_port``).

    UART0 (the link) is QEMU's socket chardev relayed to a pty of ours
    (:class:`~fwbridge.bridge.link.pty_relay.PtyRelay`): QEMU's own pty reads a
    newly opened port only at its once-a-second reconnect check, so the first
    request after an open waited up to a second. The counters the firmware
    prints on UART1 are read by a thread: ``latest`` is the last line,
    ``wait_status(pred)`` waits for one that satisfies pred.
    """

    def __init__(self, elf: Path, *, icount: str | None = None, machine: str = MACHINE,
                 link: str | None = None) -> None:
        self.elf = elf
        self.link = link  # a symlink to the port, made and removed with it
        self.icount = icount
        self.machine = machine
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = ""
        self.diag_port = ""
        self.latest: dict[str, Any] | None = None
        self.ready = False  # the firmware printed its ready line
        self._cond = threading.Condition()
        self._diag_fd = -1
        self._reader: threading.Thread | None = None
        self._halt = threading.Event()
        self._relay: PtyRelay | None = None
        self._relayer: threading.Thread | None = None

    def argv(self, link_fd: int) -> list[str]:
        """QEMU's command line, UART0 on the socket ``link_fd`` (inherited), UART1 a pty."""
        argv = [QEMU, "-M", self.machine, "-nographic", "-monitor", "none",
                "-chardev", f"socket,id=link,fd={link_fd}", "-serial", "chardev:link",
                "-serial", "pty", "-kernel", str(self.elf)]
        if self.icount is not None:
            argv += ["-icount", f"shift={self.icount}"]
        return argv

    def start(self, timeout: float = 20.0) -> None:
        if shutil.which(QEMU) is None:
            raise BoardError(f"{QEMU} is not installed (apt-get install qemu-system-arm)")
        if not self.elf.exists():
            raise BoardError(f"{self.elf}: no such file")
        relay = self._relay = PtyRelay(link=self.link)
        try:  # every way out of a failed or stopped start stops QEMU and closes the relay
            self.proc = subprocess.Popen(self.argv(relay.far_fd), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent,
                                         pass_fds=(relay.far_fd,))
            relay.handed()
            self._follow(timeout)
        except BaseException:
            self.stop()
            raise

    def _follow(self, timeout: float) -> None:
        """Wait for QEMU's ptys, then read its diagnostics port and relay the link."""
        relay = self._relay
        assert self.proc is not None and self.proc.stdout is not None and relay is not None
        out = self.proc.stdout.fileno()
        ports: dict[int, str] = {}
        said: list[str] = []
        buf = b""
        end = time.monotonic() + timeout
        while 1 not in ports:
            left = end - time.monotonic()
            if left <= 0:
                raise BoardError(f"QEMU gave no ptys within {timeout:g} s")
            ready, _, _ = select.select([out], [], [], left)
            chunk = os.read(out, 4096) if ready else b""
            if ready and not chunk:
                raise BoardError("QEMU exited: " + (" ".join(said)[-300:] or "no message"))
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").strip()
                m = _PTY_LINE.search(line)
                if m:
                    ports[int(m.group(2))] = m.group(1)
                elif line:
                    said.append(line)
        self.port, self.diag_port = relay.path, ports[1]
        self._relayer = threading.Thread(target=self._relay_loop, args=(relay,), daemon=True)
        self._relayer.start()
        # Keep reading QEMU's output (warnings) so it never blocks on a full pipe.
        threading.Thread(target=self._drain, args=(out,), daemon=True).start()
        import tty  # POSIX, as the relay above: imported here so the CLI loads on Windows

        self._diag_fd = os.open(self.diag_port, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self._diag_fd)
        self._reader = threading.Thread(target=self._read_diag, daemon=True)
        self._reader.start()

    def _relay_loop(self, relay: PtyRelay) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under it by stop()
            while not self._halt.is_set() and relay.pump(0.1):
                pass

    def _drain(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass

    def _read_diag(self) -> None:
        buf = b""
        while not self._halt.is_set():
            try:
                ready, _, _ = select.select([self._diag_fd], [], [], 0.1)
                chunk = os.read(self._diag_fd, 4096) if ready else b""
            except OSError:
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            buf = buf[-(DIAG_LINE + 1):]  # a line that never ends: bounded, and refused
            for raw in lines:
                text = raw.decode(errors="replace").strip()
                with self._cond:
                    if text.startswith("{"):
                        st = _diag_status(raw)
                        if st is not None:
                            self.latest = st
                    elif "ready" in text:
                        self.ready = True
                    self._cond.notify_all()

    def request_status(self) -> None:
        """Ask the firmware for its counters now (any byte on UART1 does)."""
        with contextlib.suppress(OSError):
            os.write(self._diag_fd, b"?")

    def wait_status(self, after_ms: int = -1, timeout: float = 10.0) -> dict[str, Any] | None:
        """The first counters line stamped later than ``after_ms`` (firmware time)."""
        end = time.monotonic() + timeout
        with self._cond:
            while self.latest is None or self.latest["ms"] <= after_ms:
                left = end - time.monotonic()
                if left <= 0 or not self.running:
                    return None
                self._cond.wait(min(left, 0.2))
            return self.latest

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Stop QEMU (SIGTERM, then SIGKILL) and close the diagnostics port."""
        self._halt.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(1.0)
        if self._relayer is not None:
            self._relayer.join(1.0)
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        if self._diag_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._diag_fd)
            self._diag_fd = -1

    def __enter__(self) -> QemuBoard:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _f32(bits: int) -> float:
    import struct

    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def velocity(st: dict[str, Any], key: str = "velocity_bits") -> tuple[float, float, float]:
    """(vx, vy, wz) of a counters line (the firmware prints floats as their bits)."""
    v = st[key]
    return _f32(v["vx"]), _f32(v["vy"]), _f32(v["wz"])


def _status_text(st: dict[str, Any]) -> str:
    vx, vy, wz = velocity(st)
    return (f"t={st['ms'] / 1000:8.2f}s  v=({vx:+.2f},{vy:+.2f},{wz:+.2f})  "
            f"odom={st['odom_sent']}  cmds={st['cmd']['frames']}  "
            f"refused={st.get('cmd_rejected', 0)}  "
            f"actions={st['action']['frames']}  watchdog={st['watchdog_trips']}  "
            f"stack={st['stack_used']}/{st['stack_size']}B")


def _board(elf: str | None, icount: str | None, link: str | None = None) -> QemuBoard:
    try:
        path = Path(elf) if elf is not None else build_elf()
    except BoardError as exc:
        fail(str(exc))
    return QemuBoard(path, icount=icount, link=link)


ICOUNT = click.option(
    "--icount", default=None, metavar="SHIFT",
    help="Run QEMU with -icount shift=SHIFT (0..10 or auto): emulated time from the "
    "instruction count (2^SHIFT ns per instruction) instead of the host's clock.")
ELF_OPT = click.option("--elf", type=click.Path(dir_okay=False, exists=True), default=None,
                       help="Run this ELF instead of building firmware_ref's.")


def _check_icount(icount: str | None) -> None:
    if icount is not None and icount != "auto" and not (icount.isdigit() and int(icount) <= 10):
        fail(f"--icount: {icount!r} is not 0..10 or auto")


@click.group("fw", cls=Group)
def fw_group() -> None:
    """The reference firmware (firmware_ref/) on an emulated Cortex-M3 (QEMU mps2-an385)."""


@fw_group.command("run")
@click.option("--link", "link_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also make PATH a symlink to the port.")
@click.option("--duration", type=DURATION, default=None, metavar="S",
              help="Stop after S seconds (default: Ctrl-C).")
@click.option("--json", "as_json", is_flag=True,
              help="JSON lines: ready, the firmware's counters each second, end.")
@ICOUNT
@ELF_OPT
def run_cmd(link_path: str | None, duration: float | None, as_json: bool, icount: str | None,
            elf: str | None) -> None:
    """Run firmware_ref on QEMU's Cortex-M3 and print the port to open.

    The port carries the seed-002 link (commands in, odometry out at 50 Hz,
    zero velocity 500 ms after the last command) and the action frames
    (answered by the responder). The firmware's own counters, stamped with
    its SysTick milliseconds, come once a second. Runs until Ctrl-C or
    --duration.
    """
    _check_icount(icount)
    board = _board(elf, icount, link_path)
    try:
        board.start()
    except BoardError as exc:
        fail(str(exc))
    except OSError as exc:  # the --link path (a LinkPathTaken names it and says why)
        fail(str(exc) if isinstance(exc, Error) else f"--link: {exc}")

    def ready() -> None:  # inside the run: from here every way out stops QEMU
        port = link_path or board.port
        if as_json:
            json_line({"event": "ready", "port": port, "pty": board.port,
                       "diag_port": board.diag_port, "machine": MACHINE, "cpu": "cortex-m3",
                       "elf": str(board.elf), "icount": icount,
                       "qemu_pid": board.proc.pid if board.proc else None})
        else:
            click.echo(f"fwref firmware on {port} (QEMU {MACHINE}, Cortex-M3; "
                       f"counters: {board.diag_port})")
            click.echo(f"open {port} with any serial program (no baud rate needed); "
                       "Ctrl-C stops", err=True)
        sys.stdout.flush()

    def status(st: dict[str, Any], line: StatusLine) -> None:
        line.update(_status_text(st))
        if as_json:
            json_line({"event": "status", "firmware": st})

    res = run_board(board, duration, on_ready=ready, on_status=status, status=StatusLine)
    if res.ended_early:
        code = board.proc.returncode if board.proc else None
        fail(f"QEMU stopped on its own (exit status {code})")
    _end(res.status, res.interrupted, as_json)


def _end(st: dict[str, Any], interrupted: bool, as_json: bool) -> None:
    if as_json:
        json_line({"event": "end", "interrupted": interrupted, "firmware": st})
    elif st:
        click.echo(_status_text(st), err=True)
        print_counters(st["cmd"], "firmware command receiver")
        print_counters(st["action"], "firmware action receiver")
        print_counters(st["responder"], "firmware responder")


def drive_square(port: str, side: float, *, timeout_s: float = 90.0,
                 on_tick: Any = None) -> dict[str, Any]:
    """The square driver on the bridge's node, the node on ``port`` (use_sim = false).

    The board's odometry is its commanded velocity integrated (no wheels, no
    truth to compare with): the square closes when the odometry says so.
    """
    from fwbridge.bridge.node.base_node import BaseNode
    from fwbridge.bridge.node.config import RobotConfig
    from fwbridge.bridge.node.odometry import Odometry
    from fwbridge.bridge.robots.square import SquareDriver

    driver = SquareDriver(side=side)
    latest: list[Odometry] = []
    lock = threading.Lock()

    def on_odometry(odom: Odometry) -> None:
        with lock:
            latest[:] = [odom]

    config = RobotConfig(url=port, use_sim=False, rate_hz=50.0, source="<fw demo>")
    node = BaseNode(config, on_odometry=on_odometry)
    node.start()
    t0 = time.monotonic()
    seq, last = -1, t0
    end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    try:
        while not driver.done and time.monotonic() - t0 < timeout_s:
            with lock:
                odom = latest[0] if latest else None
            now = time.monotonic()
            if odom is not None and odom.seq != seq:  # steer on fresh odometry only
                seq = odom.seq
                cmd = driver.update((odom.x, odom.y, odom.yaw), now - last,
                                    (odom.vx, odom.vy, odom.wz))
                last = now
                node.request(*cmd)
                if on_tick is not None:
                    on_tick(driver, odom, now - t0)
            time.sleep(0.02)
        node.request(0.0, 0.0, 0.0)
        time.sleep(0.3)  # the last frames arrive
        with lock:
            if latest:
                end = (latest[0].x, latest[0].y, latest[0].yaw)
        stats = node.stats()
    finally:
        node.stop()  # the safe stop: zero velocity
    return {"completed": driver.done, "seconds": time.monotonic() - t0,
            "odom_end": list(end), "odom_closing_m": math.hypot(end[0], end[1]),
            "bridge": stats}


def _read_by_the_board(board: QemuBoard, timeout: float = 10.0) -> None:
    """Until the board reads its link (booted and running its main loop), so the
    bridge's first writes cannot time out ('link lost'); one byte that neither
    receiver takes, counted by the firmware (rx_bytes), says it reads."""
    import serial

    first = board.wait_status(timeout=timeout) or {}
    before = first.get("rx_bytes")
    if before is None:
        return
    with serial.Serial(board.port, timeout=0.5, write_timeout=timeout) as port:
        port.write(b"\x00")
        end, st = time.monotonic() + timeout, first
        while time.monotonic() < end and st.get("rx_bytes", before) <= before:
            st = board.wait_status(st.get("ms", -1), timeout=end - time.monotonic()) or st


def _settled(board: QemuBoard, timeout: float = 3.0) -> dict[str, Any]:
    """The board's counters once it reports standing still (or the last ones)."""
    end = time.monotonic() + timeout
    after = board.latest["ms"] if board.latest else -1
    while time.monotonic() < end:
        board.request_status()
        st = board.wait_status(after, timeout=0.5)
        if st is None:
            continue
        after = st["ms"]
        if velocity(st) == (0.0, 0.0, 0.0):
            return st
    return board.latest or {}


@fw_group.command("demo")
@click.option("--side", type=click.FloatRange(0.2, 5.0), default=1.0, show_default=True,
              help="Side of the square, m.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of the live display.")
@ICOUNT
@ELF_OPT
def demo_cmd(side: float, as_json: bool, icount: str | None, elf: str | None) -> None:
    """Drive a square through the bridge on firmware_ref running on QEMU's Cortex-M3.

    What 'fwbridge demo' does with the simulated base, on the emulated
    board instead: the bridge's node opens the board's pty as a real port
    (use_sim = false) and the square driver steers on the board's odometry.
    """
    _check_icount(icount)
    board = _board(elf, icount)
    try:
        board.start()
    except BoardError as exc:
        fail(str(exc))
    if not as_json:
        click.echo(f"fwbridge fw demo: firmware_ref on QEMU {MACHINE} at {board.port}, "
                   f"bridge node on it, {side:g} m square")

    def on_tick(driver: Any, odom: Any, t: float) -> None:
        if as_json:
            json_line({"event": "odometry", "t": round(t, 3), "side": driver.leg + 1,
                       "phase": driver.phase, "x": odom.x, "y": odom.y, "yaw": odom.yaw})

    try:
        _read_by_the_board(board)
        res = drive_square(board.port, side, on_tick=on_tick)
        st = _settled(board)
    except KeyboardInterrupt:
        click.echo("\nfw demo: stopped before the square was done", err=True)
        return
    finally:
        board.stop()
    res["firmware"] = st
    if as_json:
        json_line({"event": "end", **res})
    else:
        x, y, yaw = res["odom_end"]
        click.echo(f"completed: {'yes' if res['completed'] else 'no'} in {res['seconds']:.1f} s")
        click.echo(f"end pose (board odometry): x={x:+.4f} m y={y:+.4f} m "
                   f"yaw={math.degrees(math.atan2(math.sin(yaw), math.cos(yaw))):+.2f}°")
        click.echo(f"closing error: {res['odom_closing_m'] * 1000:.2f} mm")
        print_counters(res["bridge"], "bridge")
        if st:
            click.echo(_status_text(st))
    if not res["completed"]:
        fail("the square was not completed (see the statistics above)")
