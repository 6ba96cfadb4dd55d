"""The Foxglove live view: :class:`FoxgloveSink`, a sink of
:class:`~fwbridge.bridge.record.channel_streams.Streams` served over WebSocket.

``foxglove-sdk`` (the ``foxglove`` extra) and the handshake front
(:mod:`~fwbridge.bridge.record.live_front`) are imported only when a live view starts.
"""

from __future__ import annotations

import errno
import threading
from typing import Any

from fwbridge.bridge.link.link_urls import is_loopback_host
from fwbridge.bridge.record.channel_streams import ChannelSpec
from fwbridge.bridge.record.mcap_sink import McapError

__all__ = ["LIVE_HOST", "LIVE_PORT", "FoxgloveSink"]

#: Where the live view listens unless told otherwise: loopback only.
LIVE_HOST, LIVE_PORT = "127.0.0.1", 8765


class FoxgloveSink:
    """A Foxglove WebSocket server (foxglove-sdk) serving the channels live.

    Listens on ``host:port`` (loopback by default; port 0 picks a free one,
    see :attr:`port`) through :class:`~fwbridge.bridge.record.live_front.SubprotocolFront`,
    which serves both names of the protocol (``foxglove.sdk.v1``, and
    ``foxglove.websocket.v1`` of older apps and ``@foxglove/ws-protocol``). Channels
    keep their schemas and encodings (``ros2msg`` + ``cdr``, ``jsonschema`` +
    ``json``), so the live view and an MCAP file
    of the same run show the same. Its own context: two views in one process
    stay apart.
    """

    def __init__(self, host: str = LIVE_HOST, port: int = LIVE_PORT,
                 name: str = "fwbridge") -> None:
        try:
            import foxglove
        except ImportError:
            raise McapError("the live view needs foxglove-sdk: "
                            "pip install 'fwbridge[foxglove]'") from None
        from fwbridge.bridge.record.live_front import SubprotocolFront

        self._fox = foxglove
        self._context = foxglove.Context()
        try:  # the SDK's server, reached only through the front (loopback, any free port)
            self.server: Any = foxglove.start_server(name=name, host="127.0.0.1", port=0,
                                                     context=self._context)
        except Exception as exc:  # the SDK raises its FoxgloveError
            why = str(exc).removeprefix(f"{type(exc).__name__}: ").strip()
            raise McapError(f"cannot serve the live view: {why}") from None
        try:
            self.front = SubprotocolFront(host, port, int(self.server.port))
        except OSError as exc:
            self.server.stop()
            why = exc.strerror or str(exc)
            if exc.errno == errno.EADDRINUSE:
                why = "the port is in use (--foxglove-port 0 picks a free one)"
            raise McapError(f"cannot serve the live view on {host}:{port}: {why}") from None
        self.host = host
        self._lock = threading.Lock()
        self._closed = False

    @property
    def port(self) -> int:
        return self.front.port

    @property
    def loopback(self) -> bool:
        """Only this machine can connect: a loopback address (or a name of loopbacks only)."""
        return is_loopback_host(self.host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    def add_channel(self, spec: ChannelSpec) -> Any:
        schema = self._fox.Schema(name=spec.schema_name, encoding=spec.schema_encoding,
                                  data=spec.schema.encode())
        return self._fox.Channel(spec.topic, schema=schema, message_encoding=spec.message_encoding,
                                 context=self._context)

    def log(self, handle: Any, data: bytes, log_time_ns: int) -> None:
        if not self._closed:
            handle.log(data, log_time=log_time_ns)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.front.close()
        self.server.stop()
