"""One run of the mobile-base node, as ``fwbridge bridge`` makes it: the capture, the
sinks, stdin requests, the optional ROS 2 node, the loop and the safe stop.

The caller (the verb, or any program) says what to print through the callables
of :class:`BaseRunHooks`; this module prints nothing itself. Every way out of
:func:`run_base` (the end of ``duration``, a stop signal, the reader of the
lines gone, an exception) passes through the node's safe stop: zero velocity,
then the sinks closed last first.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from fwbridge.bridge.node.base_node import BaseNode, NodeEvent
from fwbridge.bridge.node.config import ConfigError, RobotConfig
from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR
from fwbridge.bridge.node.sinks import CallbackSink, JsonLinesSink, LineWriter, Sink

__all__ = ["BaseRunConfig", "BaseRunHooks", "BaseRunResult", "RunFailed", "run_base"]


class RunFailed(ConfigError):
    """The run could not start or ended on an error the user can act on; the message
    says which (the node is stopped and the capture left as it was, or closed whole)."""


class BlockWriter(LineWriter, Protocol):
    """Lines written in blocks (``cli_verbs.common.JsonBlocks``): ``flush`` at least every
    ``period`` seconds; it raises ``BrokenPipeError`` when the reader is gone."""

    period: float

    def flush(self) -> None: ...


class Status(Protocol):
    def update(self, text: str) -> None: ...


@dataclass(frozen=True)
class BaseRunConfig:
    """What one run is: the node's config and the run's options."""

    node: RobotConfig
    config_path: str = ""  # named in a link.baud hint
    duration: float | None = None
    record: str | None = None  # capture file (pcapng, or MCAP by its name)
    lines: bool = True  # odometry as JSON lines (else the live status line's record)
    every: int = 1
    cmd_stdin: bool = False
    max_linear: float = MAX_LINEAR
    max_angular: float = MAX_ANGULAR
    max_line: int = 1024  # the longest request line, its end included


@dataclass
class BaseRunHooks:
    """What the run says and where: each a callable of the caller's."""

    say: Callable[[str], None]  # one line for a person (stderr)
    out: BlockWriter | None = None  # the JSON lines (with ``lines``)
    on_gone: Callable[[], None] = lambda: None  # the reader of ``out`` went away
    live: Any = None  # a Foxglove sink, opened by the caller, closed by the run
    # a context around the loop: a status line (its ``update`` takes the summary), or None
    status: Callable[[], contextlib.AbstractContextManager[Status | None]] = (
        contextlib.nullcontext)
    summary: Callable[[BaseNode, Any], str] | None = None  # the status line's text
    # a context inside which a stop signal interrupts the loop (and only there)
    interruptible: Callable[[], contextlib.AbstractContextManager[Any]] = (
        contextlib.nullcontext)
    start_ros2: Callable[[BaseNode], Any] | None = None  # returns a thing with stop(), stats()
    stdin: IO[str] | None = None  # the request lines (with ``cmd_stdin``)
    parse_request: Callable[[str, float, float], tuple[float, float, float] | None] | None = (
        None)


@dataclass
class BaseRunResult:
    """How the run went: the node's counters, the ROS 2 node's, the first fatal error."""

    stats: dict[str, int] = field(default_factory=dict)
    ros2_stats: dict[str, int] | None = None
    error: str | None = None


def _lines(stream: IO[str], limit: int) -> Iterator[str]:
    """``stream``'s lines, a longer one than ``limit`` cut to ``limit + 1`` characters
    (which the parser refuses): its rest is read and dropped, so a line without an end
    cannot fill the memory."""
    while line := stream.readline(limit + 1):
        if len(line) > limit and not line.endswith("\n"):
            while (rest := stream.readline(limit)) and not rest.endswith("\n"):
                pass
        yield line


def read_requests(node: BaseNode, stream: IO[str], refused: list[int],
                  parse: Callable[[str, float, float], tuple[float, float, float] | None],
                  max_linear: float, max_angular: float, say: Callable[[str], None],
                  limit: int = 1024) -> None:
    """Feed velocity requests from ``stream``'s lines until its end. A line that cannot be
    followed stops the base (a zero request: what it meant is not known, and the request
    before it is not what the sender wants now) until the next good line; it is counted
    and named in one error line."""
    for lineno, line in enumerate(_lines(stream, limit), 1):
        try:
            req = parse(line, max_linear, max_angular)
            if req is not None:
                node.request(*req)
        except (ValueError, TypeError) as exc:
            refused[0] += 1
            node.request(0.0, 0.0, 0.0)
            say(f"error: stdin line {lineno} ignored, the base stops: {exc}")


class _Out:
    """The JSON lines' writer, quiet once its reader is gone."""

    def __init__(self, out: BlockWriter | None, on_gone: Callable[[], None]) -> None:
        self.out, self.on_gone = out, on_gone
        self.gone = threading.Event()  # stdout's reader went away (| head): stop the base

    def mark_gone(self) -> None:
        self.on_gone()
        self.gone.set()

    def flush(self) -> None:
        if self.gone.is_set() or self.out is None:
            return
        try:
            self.out.flush()
        except BrokenPipeError:
            self.mark_gone()


def _open_capture(cfg: BaseRunConfig, hooks: BaseRunHooks, node: list[BaseNode]) -> Any:
    """The capture sink and its pending file (the capture goes beside ``record`` until the
    link works: a failed start leaves it as it was). The record room loads only here: a
    plain run starts faster."""
    from fwbridge.bridge.node.base_core import frame_codecs
    from fwbridge.bridge.record.safe_output import OutputError, PendingFile
    from fwbridge.bridge.record.serial_mcap import open_capture
    from fwbridge.protocols.errors import CaptureError

    live, pending = hooks.live, None
    try:
        pending = PendingFile(cfg.record) if cfg.record else None
        sink = open_capture(
            cfg.record, port=cfg.node.link_url, description=f"{cfg.node.baud} baud", live=live,
            stream=pending.stream if pending else None, decode=False,
            stats=lambda: node[0].stats() if node else {},
            receivers=lambda: node[0].receiver_stats() if node else {},
            descriptions=[c.desc for c in frame_codecs(cfg.node.frames_in)])
    except (CaptureError, OutputError) as exc:
        if live is not None:
            live.close()
        if pending is not None:
            pending.discard()
        raise RunFailed(f"--record {exc}" if isinstance(exc, OutputError) else str(exc)
                        ) from None
    return sink, pending


def _start(node: BaseNode, pending: Any) -> None:
    from fwbridge.bridge.link.transports import LinkError
    from fwbridge.bridge.node.hardware import LifecycleError

    try:
        node.start()
    except BaseException as exc:  # a stop signal while the link starts too: the safe stop
        node.stop()  # closes the sinks
        if pending is not None:
            pending.discard()
        if isinstance(exc, (LinkError, ConfigError, LifecycleError)):
            raise RunFailed(str(exc)) from None
        raise


def run_base(cfg: BaseRunConfig, hooks: BaseRunHooks) -> BaseRunResult:
    """Run the base node until ``duration``, a stop, the lines' reader gone or a fatal
    event; the safe stop on every way out. Raises :class:`RunFailed` when it cannot start
    (nothing is left behind: the capture file as it was)."""
    fatal: list[str] = []

    def on_event(event: NodeEvent) -> None:
        hooks.say(f"bridge: {event.message}")
        if event.kind == "garbage":
            fatal.append(event.message.replace("link.baud", f"link.baud in {cfg.config_path}"))

    out = _Out(hooks.out, hooks.on_gone)
    # The run picks the sinks; the node hands each the same bytes, records and events,
    # and closes them (last first) after the safe stop, whatever ends the run.
    sinks: list[Sink] = []
    pending = None
    made: list[BaseNode] = []
    if cfg.record or hooks.live is not None:
        sink, pending = _open_capture(cfg, hooks, made)
        sinks.append(sink)
    latest: list[Any] = [None]  # the newest odometry record, for the live line
    if cfg.lines and hooks.out is not None:
        sinks.append(JsonLinesSink(hooks.out, cfg.every, on_gone=out.mark_gone))

    def keep(odom: Any) -> None:
        latest[0] = odom

    sinks.append(CallbackSink(on_event=on_event, on_odometry=None if cfg.lines else keep))
    node = BaseNode(cfg.node, sinks=sinks, on_event=None, say=hooks.say)
    made.append(node)
    _start(node, pending)
    ros: Any = None
    refused = [0]  # stdin lines refused (bad syntax or values)
    try:
        with hooks.status() as status, hooks.interruptible():
            # any stop from here on reaches the safe stop below
            if pending is not None:
                pending.publish()
            ros = _announce(cfg, hooks, node, refused)
            _loop(cfg, hooks, node, out, status, latest, fatal)
    finally:
        if ros is not None:
            ros.stop()
        node.stop()  # the safe stop: zero velocity, whatever ended the run; sinks closed
        out.flush()  # the last block of odometry lines
        if pending is not None:
            pending.close()
    stats = node.stats()
    if cfg.cmd_stdin:
        stats["stdin_refused"] = refused[0]
    error = fatal[0] if fatal else (str(node.error) if node.error is not None else None)
    return BaseRunResult(stats, ros.stats() if ros is not None else None, error)


def _announce(cfg: BaseRunConfig, hooks: BaseRunHooks, node: BaseNode,
              refused: list[int]) -> Any:
    """Say the link is up, start the ROS 2 node and the stdin reader; the ROS 2 node."""
    source = "simulated endpoint" if cfg.node.use_sim else "port"
    hooks.say(f"bridge: {source} {cfg.node.link_url} active, {cfg.node.rate_hz:g} Hz commands")
    if cfg.record:
        hooks.say(f"bridge: recording the link to {cfg.record}")
    ros = hooks.start_ros2(node) if hooks.start_ros2 is not None else None
    if cfg.cmd_stdin and hooks.stdin is not None and hooks.parse_request is not None:
        threading.Thread(target=read_requests,
                         args=(node, hooks.stdin, refused, hooks.parse_request,
                               cfg.max_linear, cfg.max_angular, hooks.say, cfg.max_line),
                         daemon=True).start()
    return ros


def _loop(cfg: BaseRunConfig, hooks: BaseRunHooks, node: BaseNode, out: _Out,
          status: Status | None, latest: list[Any], fatal: list[str]) -> None:
    import time

    end = None if cfg.duration is None else time.monotonic() + cfg.duration
    period = hooks.out.period if hooks.out is not None else 0.05
    while node.running and not fatal and (end is None or time.monotonic() < end):
        left = period if end is None else max(0.0, min(period, end - time.monotonic()))
        if out.gone.wait(left):
            break
        out.flush()
        if status is not None and hooks.summary is not None:
            status.update(hooks.summary(node, latest[0]))
