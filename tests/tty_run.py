"""The CLI with its stdout on a pty of a given width, as a person's terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import time

from tests.helpers import ROOT, cli_env, fwbridge_argv

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_pty(*args: str, columns: int, input: bytes = b"",
               timeout: float = 60) -> tuple[str, str, int]:
    """(stdout as shown, without colour codes; stderr; exit status) of ``fwbridge ARGS``
    with stdout on a ``columns``-wide pty and ``COLUMNS`` saying the same."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([*fwbridge_argv(), *args], stdin=subprocess.PIPE, stdout=slave,
                            stderr=subprocess.PIPE, env=cli_env({"COLUMNS": str(columns)}),
                            cwd=ROOT)
    os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(input)
    proc.stdin.close()
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the slave
                break
            if not chunk:
                break
            out += chunk
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return ANSI.sub("", out.decode().replace("\r\n", "\n")), err, rc
