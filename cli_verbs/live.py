"""What the recording verbs share: ``--foxglove`` (a live view) and MCAP by suffix."""

from __future__ import annotations

from typing import Any

import click

from fwbridge.cli_verbs.common import fail, warn_listening

__all__ = ["FOXGLOVE", "live_sink"]


def FOXGLOVE(fn: Any) -> Any:
    """``--foxglove`` with ``--foxglove-host`` and ``--foxglove-port``."""
    fn = click.option("--foxglove-port", type=click.IntRange(0, 65535), default=8765,
                      show_default=True, metavar="PORT",
                      help="Port of the live view (0: any free port).")(fn)
    fn = click.option("--foxglove-host", default="127.0.0.1", show_default=True, metavar="ADDR",
                      help="Address the live view listens on (another than loopback "
                           "opens it to the network).")(fn)
    fn = click.option("--foxglove", is_flag=True,
                      help="Serve the run live to Foxglove (WebSocket, loopback by default): "
                           "the same channels as an .mcap recording.")(fn)
    return fn


def live_sink(enabled: bool, host: str, port: int) -> Any:
    """The Foxglove sink the options ask for (None without ``--foxglove``); says where."""
    if not enabled:
        return None
    from fwbridge.bridge.record.live_view import FoxgloveSink
    from fwbridge.bridge.record.mcap_sink import McapError

    try:
        sink = FoxgloveSink(host, port)
    except McapError as exc:
        fail(str(exc))
    click.echo(f"foxglove: live view on {sink.url} (Foxglove: Open connection -> "
               f"Foxglove WebSocket -> {sink.url})", err=True)
    if not sink.loopback:
        warn_listening("foxglove", [host])
    return sink
