"""A pty in front of another process's byte stream: the port for an emulated board.

QEMU's own ``-serial pty`` notices a program that opens the pty only when its
reconnect timer fires, once a second; until then it does not read the pty,
so the first request after a port is opened waited up to a second for the
board (a stop-and-wait sender retransmitted, or gave up). :class:`PtyRelay`
gives QEMU one end of a socket pair instead (``-chardev socket,fd=N``: QEMU
reads it at once) and serves the other end on a pty of its own, checking
for an opener every ``check`` seconds (10 ms), as a simulated endpoint's port
answers.

It behaves like the pty it replaces: while no program has the port open, the
device's bytes are dropped (and counted), not kept for a later opener; while
one has it open and does not read, the relay stops reading the device (the
device's transmitter waits, as on QEMU's pty); bytes the program writes go
to the device only as fast as the device takes them (its UART holds the
line), with small buffers on the way (``BUFFER`` bytes each) so a stalled
device stalls the writer instead of filling memory.

Sans-thread: :meth:`pump` does one round and returns; the caller runs it in a
loop (a thread of its own).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.protocols.errors import StateError

__all__ = ["BUFFER", "PtyRelay"]

#: Bytes held on each leg (the socket's buffers, the relay's own queues).
BUFFER = 4096


class PtyRelay:
    """A pty pair whose device side is relayed to a socket end another process holds."""

    def __init__(self, *, link: str | os.PathLike[str] | None = None,
                 check: float = 0.01) -> None:
        self.check = check
        # Its slave closed: held open, the port would never look closed (see module doc).
        # ``link``: a symlink to the port as well, refused if it is not ours to replace,
        # removed on close (ours only), as a simulated port's.
        self._pair = PtyPair(link, hold=False)
        master = self.master_fd = self._pair.master_fd
        self.slave_name = self._pair.slave_name
        os.set_blocking(master, False)
        self._near, far = socket.socketpair()
        for s in (self._near, far):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
        self._near.setblocking(False)
        self._far: socket.socket | None = far
        self._to_port = bytearray()
        self._to_device = bytearray()
        self._poll = select.poll()
        self.connected = False  # a program has the port open
        self.dropped = 0  # device bytes no program had the port open for
        self.to_device = 0
        self.to_port = 0

    @property
    def path(self) -> str:
        """The port to open (``/dev/pts/N``)."""
        return self.slave_name

    @property
    def far_fd(self) -> int:
        """The socket end for the other process (pass it to the child, then :meth:`handed`)."""
        if self._far is None:
            raise StateError("the far end was already handed over")
        return self._far.fileno()

    def handed(self) -> None:
        """The child holds the far end now: close this process's copy."""
        if self._far is not None:
            self._far.close()
            self._far = None

    def close(self) -> None:
        self.handed()
        self._near.close()
        self._pair.close()
        self.master_fd = -1

    def stats(self) -> dict[str, int]:
        return {"to_device": self.to_device, "to_port": self.to_port, "dropped": self.dropped}

    # -- one round ----------------------------------------------------------------------
    def _opened(self) -> bool:
        """Whether a program has the port open (the master hangs up while none has)."""
        p = select.poll()
        p.register(self.master_fd, select.POLLOUT)
        return not any(ev & select.POLLHUP for _, ev in p.poll(0))

    def pump(self, timeout: float) -> bool:
        """Move what can move, waiting at most ``timeout`` seconds for something to; False
        once the other process closed its end (it exited)."""
        self.connected = self._opened()
        if not self.connected:
            self.dropped += len(self._to_port)
            self._to_port.clear()
        near, master = self._near.fileno(), self.master_fd
        want_near = select.POLLOUT if self._to_device else 0
        if not self.connected or len(self._to_port) < BUFFER:
            want_near |= select.POLLIN  # a full queue to a reader that waits: the device waits
        want_master = 0
        if self.connected:
            want_master = (0 if self._to_device else select.POLLIN) | (
                select.POLLOUT if self._to_port else 0)
        poll = self._poll
        with contextlib.suppress(KeyError):
            poll.unregister(near)
        with contextlib.suppress(KeyError):
            poll.unregister(master)
        poll.register(near, want_near)
        if want_master:
            poll.register(master, want_master)
        # Without an opener the master is not polled (it would report its hang-up at
        # once, every time): look again after `check`.
        wait = timeout if self.connected else min(timeout, self.check)
        for fd, ev in poll.poll(max(0, int(wait * 1000))):
            if fd == near and not self._from_device(ev):
                return False
            if fd == master:
                self._from_port(ev)
        self._flush()
        return True

    def _from_device(self, ev: int) -> bool:
        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
            try:
                data = self._near.recv(BUFFER)
            except BlockingIOError:
                data = None
            except OSError:
                return False
            if data is not None:
                if not data:
                    return False  # the other process closed its end
                if self.connected:
                    self._to_port += data
                else:
                    self.dropped += len(data)  # a UART nobody listens to
        return True

    def _from_port(self, ev: int) -> None:
        if ev & select.POLLIN:
            try:
                data = os.read(self.master_fd, BUFFER)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EIO:  # the last program closed the port just now
                    self.connected = False
                    return
                raise
            self._to_device += data

    def _flush(self) -> None:
        if self._to_device:
            try:
                n = self._near.send(self._to_device)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                n = len(self._to_device)  # the device is gone: pump() reports it next
            self.to_device += n
            del self._to_device[:n]
        if self._to_port and self.connected:
            try:
                n = os.write(self.master_fd, self._to_port)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
                n = 0
            self.to_port += n
            del self._to_port[:n]
