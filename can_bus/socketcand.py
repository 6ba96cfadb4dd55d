"""The shared bus's optional socketcand endpoint (raw mode), on the loopback interface only.

``fwbridge can bus up NAME --socketcand PORT`` lets socketcand clients, python-can's
``socketcand`` interface among them, attach to the bus as nodes::

    server: < hi >            client: < open NAME >      server: < ok >
    client: < rawmode >       server: < ok >
    server: < frame 123 1700000000.000250 11223344 >      (every frame on the bus)
    client: < send 123 4 11 22 33 44 >                    (a frame to send)

Only raw mode is served (no broadcast manager, no control mode); classic frames
only; error frames are not forwarded. A socketcand node never holds afap bus time.
A client that sends faster than the bus carries loses its newest frames beyond
:data:`~can_bus.daemon_nodes.TX_LIMIT` queued (counted, shown by ``bus list``). At most
``max_clients`` clients (16 unless told) are served at once, and none while the daemon's
queue budget is spent: one more is answered ``< error ... >`` and closed (counted as
``refused`` in the bus's JSON).

Any local user can reach a TCP port, loopback or not: the endpoint is opt-in
(``--socketcand``), and the Unix socket, private to its user, is the default way in.
"""

from __future__ import annotations

import re
import socket
from typing import Protocol

from fwbridge.can_bus.bits import Frame
from fwbridge.can_bus.daemon_nodes import TX_LIMIT, Client, DaemonChannel, NodeHost
from fwbridge.protocols.bus_wire import FLAG_EXT, FLAG_FD, Hello, packet_message
from fwbridge.protocols.errors import CanFrameError

__all__ = ["SocketcandHost", "TextClient", "parse_send"]

MAX_LINE = 256  # the longest raw-mode command is ~40 characters
_SEND = re.compile(r"^send ([0-9A-Fa-f]{1,8}) ([0-9A-Fa-f]) ((?:[0-9A-Fa-f]{1,2} ?)*)$")


def parse_send(text: str) -> Frame:
    """The frame of ``send ID LEN B0 B1 ...`` (IDs of 8 hex digits are extended)."""
    m = _SEND.match(text.strip())
    if m is None:
        raise CanFrameError(f"not a raw-mode send: {text!r}")
    ident, length = m[1], int(m[2], 16)
    data = bytes(int(b, 16) for b in m[3].split())
    if length != len(data):
        raise CanFrameError(f"length {length} with {len(data)} data bytes")
    return Frame.make(int(ident, 16), data, extended=len(ident) == 8)


class SocketcandHost(NodeHost, Protocol):
    """What a socketcand node needs of the daemon (:class:`~can_bus.daemon.BusDaemon`,
    which imports this module): a socketcand node attaches itself and sends."""

    @property
    def name(self) -> str: ...
    @property
    def ch(self) -> DaemonChannel: ...
    def attach(self, client: Client, req: Hello) -> int: ...
    def submit(self, client: Client, frame: Frame) -> None: ...


class TextClient(Client):
    """A socketcand node: text commands in, ``< frame ... >`` lines out."""

    daemon: SocketcandHost

    def __init__(self, sock: socket.socket, daemon: SocketcandHost) -> None:
        super().__init__(sock, daemon)
        self.stage = "open"  # open -> rawmode -> raw
        self.queue(b"< hi >")

    def deliver(self, msg: object) -> None:
        pass  # error frames and state changes have no raw-mode line

    def _put_packed(self, pkt: bytes) -> None:
        if self.stage != "raw":
            return
        m = packet_message(pkt)
        if m.flags & FLAG_FD:
            return
        ident = f"{m.can_id:08X}" if m.flags & FLAG_EXT else f"{m.can_id:03X}"
        self.queue(f"< frame {ident} {m.timestamp:.6f} {m.data.hex().upper()} >".encode(),
                   frame=True)

    def feed(self, chunk: bytes) -> bool:
        """Handle what arrived; False when the client must be dropped."""
        buf = self.inbuf
        buf += chunk
        while True:
            start, end = buf.find(b"<"), buf.find(b">")
            if end < 0:
                return len(buf) <= MAX_LINE
            if start < 0 or start > end:
                return False
            command = bytes(buf[start + 1:end]).decode("ascii", "replace").strip()
            del buf[:end + 1]
            if not self._command(command):
                return False

    def _command(self, command: str) -> bool:
        daemon = self.daemon
        if self.stage == "open":
            if command != f"open {daemon.name}":
                self.queue(b"< error unknown bus >")
                return False
            daemon.attach(self, Hello(name="socketcand"))
            self.stage = "rawmode"
            self.queue(b"< ok >")
        elif self.stage == "rawmode":
            if command != "rawmode":
                self.queue(b"< error only rawmode is served >")
                return False
            self.stage = "raw"
            self.queue(b"< ok >")
        else:
            try:
                frame = parse_send(command)
            except ValueError:
                self.queue(b"< error bad send >")
                return True
            if daemon.ch.model.outstanding(self.node_id) >= TX_LIMIT:
                self.tx_dropped += 1  # faster than the bus: the newest frame drops
                return True
            daemon.submit(self, frame)
        return True

    def error_packet(self, why: str) -> bytes:
        return f"< error {why.replace('>', ' ')} >".encode()
