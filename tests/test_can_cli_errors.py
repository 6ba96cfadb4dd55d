"""``fwbridge can`` at the edges: a reader that goes away, a machine without SocketCAN."""

from __future__ import annotations

import errno
import select
import subprocess
from pathlib import Path

import pytest

from fwbridge.cli_verbs.can_common import open_error
from tests.helpers import reaped, run_verb, spawn_verb, vcan_reason


def test_can_decode_piped_to_head_ends_quietly(tmp_path: Path) -> None:
    log = tmp_path / "bus.log"  # more than a pipe holds: the verb is still writing at the close
    log.write_text("".join(f"({1796161315 + i / 1000:.6f}) sim0 101#00000000640000{i % 256:02X}\n"
                           for i in range(20_000)))
    for mode in ((), ("--json",)):
        proc = spawn_verb("can", "decode", str(log), *mode, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        with reaped(proc):
            assert select.select([proc.stdout], [], [], 30)[0], "no output"
            assert proc.stdout.readline()
            proc.stdout.close()  # `| head -1`
            rc = proc.wait(timeout=30)
            err = proc.stderr.read()
        assert rc == 0 and b"error" not in err and b"Broken pipe" not in err, err


NO_SOCKETCAN = vcan_reason() is not None


@pytest.mark.skipif(not NO_SOCKETCAN, reason="this machine has SocketCAN (vcan0 works)")
@pytest.mark.parametrize("verb", [("sniff", "--duration", "0.2"), ("send", "123#00"),
                                  ("record", "{out}")])
def test_no_socketcan_says_how_to_get_vcan(tmp_path: Path, verb: tuple[str, ...]) -> None:
    import socket

    try:
        socket.socket(socket.AF_CAN, socket.SOCK_RAW, socket.CAN_RAW).close()
        pytest.skip("the kernel has CAN sockets here (only vcan0 is missing)")
    except OSError:
        pass
    args = [a.format(out=tmp_path / "x.log") for a in verb]
    res = run_verb("can", "-i", "socketcan", "-c", "vcan0", *args)
    lines = res.stderr.decode().strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, lines
    assert "no SocketCAN" in lines[0] and "Errno" not in lines[0]
    assert "modprobe vcan; ip link add dev vcan0 type vcan; ip link set up vcan0" in lines[0]


def test_socketcan_errors_name_the_fix() -> None:
    no_family = OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
    assert "no SocketCAN" in open_error("socketcan", "can0", no_family)
    assert "ip link add dev vcan0 type vcan" in open_error("socketcan", "can0", no_family)
    no_device = OSError(errno.ENODEV, "No such device")
    text = open_error("socketcan", "vcan3", no_device)
    assert "no CAN interface vcan3" in text and "ip link add dev vcan3 type vcan" in text
    assert "ip link set up can1" in open_error("socketcan", "can1",
                                               OSError(errno.ENETDOWN, "Network is down"))
    assert open_error("virtual", "x", no_device) == str(no_device)  # other buses: as they say
