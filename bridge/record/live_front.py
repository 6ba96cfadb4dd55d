"""The live view's front door: the Foxglove WebSocket server under both of its names.

foxglove-sdk's server accepts only the subprotocol ``foxglove.sdk.v1`` (and
``foxglove.sdk.v1.1``) and answers HTTP 400 to ``foxglove.websocket.v1``, the
name of the same protocol that the Foxglove app 1.x, Lichtblick up to 1.21
and every client built on ``@foxglove/ws-protocol`` ask for; it has no option
to accept it. So the live view listens here, and each connection is passed
to the SDK's server (on a loopback port of its own) byte for byte, except
for the handshake's ``Sec-WebSocket-Protocol`` header: a client that asks for
``foxglove.websocket.v1`` is offered to the server as ``foxglove.sdk.v1`` and
answered with the name it asked for. The accept key does not cover the
subprotocol, so nothing else changes; after the handshake the front only
copies bytes (a slow client slows its own connection, whose messages the
SDK then drops as it does for any slow client).

The handshake rewrite is sans-I/O (:func:`upstream_request`,
:func:`client_response`); :class:`SubprotocolFront` is the thin adapter,
bounded in connections (:data:`MAX_CONNECTIONS`), header size
(:data:`HEAD_LIMIT`) and handshake time (:data:`HANDSHAKE_TIMEOUT`).
"""

from __future__ import annotations

import contextlib
import socket
import threading

from fwbridge.protocols.errors import LinkError

__all__ = ["ALIASES", "HEAD_LIMIT", "HandshakeError", "SubprotocolFront", "client_response",
           "upstream_request"]

#: Old name -> the name the server knows (the same protocol, renamed).
ALIASES = {"foxglove.websocket.v1": "foxglove.sdk.v1"}
#: The longest handshake head either way (a browser's is under 2 KiB).
HEAD_LIMIT = 16 * 1024
#: Seconds a client and the server each have to finish their side of the handshake.
HANDSHAKE_TIMEOUT = 10.0
#: Connections served at once; beyond, a client is answered 503 and closed.
MAX_CONNECTIONS = 32
_PROTOCOL = b"sec-websocket-protocol"


class HandshakeError(LinkError, ValueError):
    """A handshake head the front does not pass on (too long, not HTTP)."""


def _split(head: bytes) -> tuple[list[bytes], list[str]]:
    """The head's lines less its subprotocol headers, and the subprotocols they name."""
    lines = head.split(b"\r\n")
    kept, offered = [], []
    for line in lines:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == _PROTOCOL:
            offered += [t.strip() for t in value.decode("latin-1").split(",") if t.strip()]
        else:
            kept.append(line)
    return kept, offered


def upstream_request(head: bytes) -> tuple[bytes, list[str]]:
    """The client's request head (up to and without its blank line) as the server gets it:
    each old subprotocol name replaced by the server's (once). Returns it and the
    subprotocols the client offered."""
    if len(head) > HEAD_LIMIT:
        raise HandshakeError(f"a request head of {len(head)} bytes (at most {HEAD_LIMIT})")
    if not head.startswith(b"GET "):
        raise HandshakeError(f"not a WebSocket request: {head[:40]!r}")
    kept, offered = _split(head)
    if not offered:
        return head, offered  # the server answers for itself (400)
    wanted: list[str] = []
    for name in offered:
        name = ALIASES.get(name, name)
        if name not in wanted:
            wanted.append(name)
    line = b"Sec-WebSocket-Protocol: " + ", ".join(wanted).encode("latin-1")
    return b"\r\n".join([kept[0], line, *kept[1:]]), offered


def client_response(head: bytes, offered: list[str]) -> bytes:
    """The server's response head as the client gets it: the subprotocol the server chose
    under the name the client offered, when it offered only the old one."""
    kept, chosen = _split(head)
    if len(chosen) != 1 or chosen[0] in offered:
        return head
    for old, new in ALIASES.items():
        if new == chosen[0] and old in offered:
            line = b"Sec-WebSocket-Protocol: " + old.encode("latin-1")
            return b"\r\n".join([kept[0], line, *kept[1:]])
    return head


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """A head up to its blank line, and the bytes read after it."""
    buf = bytearray()
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(buf[:end]), bytes(buf[end + 4:])
        if len(buf) > HEAD_LIMIT:
            raise HandshakeError(f"no end of head within {HEAD_LIMIT} bytes")
        chunk = sock.recv(4096)
        if not chunk:
            raise HandshakeError("closed during the handshake")
        buf += chunk


class SubprotocolFront:
    """Listens on ``host:port`` and passes each connection to ``127.0.0.1:upstream``
    (see the module). :attr:`port` is where it listens (``port`` 0: any free port);
    :meth:`close` stops it and ends every connection."""

    def __init__(self, host: str, port: int, upstream: int,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.upstream = upstream
        self.max_connections = max_connections
        self.refused = 0  # connections answered 503: too many at once
        self._srv = socket.create_server((host, port), family=(
            socket.AF_INET6 if ":" in host else socket.AF_INET))
        self.port = int(self._srv.getsockname()[1])
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._clients = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name="fwbridge-live-front",
                                        daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                sock, _ = self._srv.accept()
            except OSError:
                return  # closed
            with self._lock:
                busy = self._clients >= self.max_connections
                if not (self._closed or busy):
                    self._open.add(sock)
                    self._clients += 1
            if self._closed or busy:
                self.refused += busy
                with contextlib.suppress(OSError):
                    sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                sock.close()
                continue
            threading.Thread(target=self._serve, args=(sock,), daemon=True,
                             name="fwbridge-live-conn").start()

    def _serve(self, client: socket.socket) -> None:
        server: socket.socket | None = None
        try:
            server = self._handshake(client)
        except HandshakeError:
            with contextlib.suppress(OSError):
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n")
        except OSError:
            pass
        if server is None:
            self._forget(client)
            return
        back = threading.Thread(target=self._pipe, args=(server, client), daemon=True,
                                name="fwbridge-live-conn")
        back.start()
        self._pipe(client, server)
        back.join()
        self._forget(client, server)

    def _handshake(self, client: socket.socket) -> socket.socket | None:
        """Pass the handshake on, rewritten; the server's socket (None: closed meanwhile)."""
        client.settimeout(HANDSHAKE_TIMEOUT)
        head, rest = _read_head(client)
        request, offered = upstream_request(head)
        server = socket.create_connection(("127.0.0.1", self.upstream),
                                          timeout=HANDSHAKE_TIMEOUT)
        with self._lock:
            if self._closed:
                server.close()
                return None
            self._open.add(server)
        try:
            server.sendall(request + b"\r\n\r\n" + rest)
            head, rest = _read_head(server)
            client.sendall(client_response(head, offered) + b"\r\n\r\n" + rest)
        except (OSError, HandshakeError):
            self._forget(client, server)
            raise
        client.settimeout(None)
        server.settimeout(None)
        return server

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        """Copy ``src`` to ``dst`` until either ends; then end both ways."""
        try:
            while True:
                chunk = src.recv(1 << 16)
                if not chunk:
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def _forget(self, client: socket.socket, server: socket.socket | None = None) -> None:
        """A connection ended: its sockets closed, its slot free (once)."""
        with self._lock:
            if client in self._open:
                self._clients -= 1
            for s in (client, server):
                if s is not None:
                    self._open.discard(s)
                    with contextlib.suppress(OSError):
                        s.close()

    def close(self) -> None:
        """Stop listening and end every connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            socks = list(self._open)
        with contextlib.suppress(OSError):
            self._srv.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._srv.close()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)
