"""Opening links by URL, pty pairs, the errors users meet, and the asyncio path."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import serial

from fwbridge.bridge.link.transports import (
    LinkBusy,
    LinkError,
    LinkNotFound,
    LinkPermissionDenied,
    LinkURLError,
    PtyPair,
    classify_open_error,
    open_async_streams,
    open_link,
    read_some,
    register_url_handler,
)

ALL_BYTES = bytes(range(256)) * 4


def read_exactly(link: serial.SerialBase, n: int) -> bytes:
    out = b""
    for _ in range(100):
        out += read_some(link)
        if len(out) >= n:
            break
    return out


def master_read(pair: PtyPair, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = pair.read(timeout=2.0)
        if not chunk:
            break
        out += chunk
    return out


def test_pty_pair_moves_every_byte_value_untouched_both_ways() -> None:
    with PtyPair() as pair, open_link(pair.path) as link:
        pair.write(ALL_BYTES)  # \n, \r, XON/XOFF, Ctrl-C: no translation, no echo
        assert read_exactly(link, len(ALL_BYTES)) == ALL_BYTES
        link.write(ALL_BYTES)
        assert master_read(pair, len(ALL_BYTES)) == ALL_BYTES
        assert pair.read(timeout=0.05) == b""  # nothing echoed back


def test_unplugged_pty_vanishes_and_replug_brings_the_same_path_back(tmp_path: Path) -> None:
    port = tmp_path / "ttyBASE"
    with PtyPair(port) as pair:
        link = open_link(pair.path)
        pair.unplug()
        assert not port.exists()
        with pytest.raises((serial.SerialException, OSError)):
            for _ in range(10):  # a hung-up tty reads as "ready, no data"
                read_some(link)
        link.close()
        with pytest.raises(LinkNotFound, match=f"no such device {port}"):
            open_link(str(port))
        pair.plug()
        with open_link(str(port)) as again:
            pair.write(b"back")
            assert read_exactly(again, 4) == b"back"


def test_second_opener_is_told_the_port_is_busy() -> None:
    with PtyPair() as pair, open_link(pair.path):
        with pytest.raises(LinkBusy) as info:
            open_link(pair.path)
        assert "busy" in str(info.value) and f"fuser {pair.path}" in str(info.value)


def test_missing_device_lists_what_exists(tmp_path: Path) -> None:
    with pytest.raises(LinkNotFound) as info:
        open_link(str(tmp_path / "ttyUSB9"))
    msg = str(info.value)
    assert msg.startswith(f"no such device {tmp_path / 'ttyUSB9'}; ")
    assert "serial ports here:" in msg or "no serial ports found" in msg


def test_permission_denied_names_the_dialout_fix() -> None:
    # What pyserial raises for EACCES; root cannot provoke a real one.
    exc = serial.SerialException(errno.EACCES, "could not open port /dev/ttyACM0: [Errno 13]")
    err = classify_open_error("/dev/ttyACM0", exc)
    assert isinstance(err, LinkPermissionDenied)
    assert "sudo usermod -aG dialout $USER" in str(err)


def test_permission_denied_on_a_real_device() -> None:
    with PtyPair() as pair:
        os.chmod(pair.slave_name, 0)
        if os.geteuid() != 0:
            with pytest.raises(LinkPermissionDenied, match="dialout"):
                open_link(pair.path)
            return
        # root opens anything: try as an unprivileged user instead
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv is not installed")
        code = (
            "from fwbridge.bridge.link.transports import open_link, LinkError\n"
            f"try:\n    open_link({pair.path!r})\n"
            "except LinkError as e:\n    print(type(e).__name__, e)\n"
        )
        out = subprocess.run(
            [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
             code], capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=30,
            check=False,
        )
        assert out.stdout.startswith("LinkPermissionDenied permission denied"), out.stderr
        assert "sudo usermod -aG dialout $USER" in out.stdout


def test_a_regular_file_is_not_a_serial_device(tmp_path: Path) -> None:
    path = tmp_path / "notatty"
    path.write_bytes(b"")
    with pytest.raises(LinkError, match="is not a serial device"):
        open_link(str(path))


def test_pyserial_urls_open() -> None:
    with open_link("loop://") as link:
        link.write(b"\xaa\x55hello")
        assert read_exactly(link, 7) == b"\xaa\x55hello"


def test_unknown_and_unavailable_schemes_are_clear_errors() -> None:
    with pytest.raises(LinkURLError, match=r"unknown URL scheme 'nope://'; .* one of: .*loop://"):
        open_link("nope://x")
    register_url_handler("absent", "no_such_package_here")
    with pytest.raises(LinkURLError, match=r"served by no_such_package_here\.protocol_absent"):
        open_link("absent://x")


def test_a_registered_sim_model_serves_sim_urls() -> None:
    from fwbridge.protocols import cmd_frame, odom_frame
    from tests import sim_stub

    sim_stub.register()
    with open_link("sim://simstub?pacing=afap") as link:
        link.write(cmd_frame.encode(cmd_frame.CmdFrame(0.5, 0.0, 0.0)))
        reply = read_exactly(link, odom_frame.SIZE)
        assert odom_frame.decode(reply).vx == 0.5


def test_asyncio_streams_read_what_the_blocking_path_reads() -> None:
    payload = bytes(range(256)) * 8

    async def via_asyncio(pair: PtyPair) -> tuple[bytes, bytes]:
        reader, writer = await open_async_streams(pair.path)
        pair.write(payload)
        got = await asyncio.wait_for(reader.readexactly(len(payload)), 5)
        writer.write(b"\x00\x11\x13\xff")
        await writer.drain()
        back = await asyncio.get_running_loop().run_in_executor(None, master_read, pair, 4)
        writer.close()
        return got, back

    with PtyPair() as pair:
        got, back = asyncio.run(via_asyncio(pair))
    with PtyPair() as pair, open_link(pair.path) as link:
        pair.write(payload)
        blocking = read_exactly(link, len(payload))
    assert got == blocking == payload
    assert back == b"\x00\x11\x13\xff"


def test_asyncio_path_refuses_links_without_a_descriptor() -> None:
    async def go() -> None:
        await open_async_streams("loop://")

    with pytest.raises(LinkError, match="needs a file descriptor"):
        asyncio.run(go())
