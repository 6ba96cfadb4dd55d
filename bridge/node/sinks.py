"""Where a base node's record goes: the :class:`Sink` protocol and the fan-out to many.

A node decodes its link once and hands every sink the same things:

- ``on_bytes(direction, data, ts_ns)``: each read (``"rx"``) and write
  (``"tx"``) on the link, ``ts_ns`` nanoseconds since the epoch (captures'
  time base);
- ``on_odometry(odom)``: each integrated odometry record (the decoded frame's
  velocities and yaw, and the pose), stamped with the node's clock;
- ``on_command(frame, ts_ns)``: each velocity command the node wrote (the
  record of the ``tx`` bytes, nothing decoded again);
- ``on_frame(name, frame, ts_ns)``: each frame of the other descriptions the
  robot file names on the link (``link.frames_in``), by description name;
- ``on_event(event)``: the node's events (watchdog, link lost, ...);
- ``close()``: once, when the node ends; sinks close in reverse order.

:class:`SinkBase` does nothing for each, so a sink writes only what it needs
(and :class:`Sinks` skips calls a sink does not override). :class:`Sinks` is
the list a node emits to: a sink that raises does not stop the others; its
failures are counted and the first is said once as an ``error:`` line.

The sinks: pcapng (:class:`~bridge.record.serial_pcapng.CaptureWriter`), MCAP and
Foxglove (:class:`~bridge.record.serial_mcap.SerialCapture`,
:class:`~bridge.record.serial_mcap.SerialRecorder`), ROS 2
(:class:`~bridge.ros2.base.Ros2Base`), JSON lines (:class:`JsonLinesSink`),
and callbacks (:class:`CallbackSink`, the nodes' ``on_odometry=`` and
``on_event=``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fwbridge.bridge.node.backoff import LinkPolicy
    from fwbridge.bridge.node.base_core import NodeEvent
    from fwbridge.bridge.node.config import RobotConfig
    from fwbridge.bridge.node.odometry import Odometry
    from fwbridge.protocols.cmd_frame import CmdFrame

__all__ = ["METHODS", "RX", "TX", "ByteSink", "CallbackSink", "JsonLinesSink", "LineWriter",
           "NodeHandle", "Sink", "SinkBase", "Sinks", "borrowed", "frame_fields"]

#: A link's two directions: what the host read, what it wrote.
RX, TX = "rx", "tx"


class ByteSink(Protocol):
    """Where a link's bytes are recorded: a pcapng or MCAP capture, a live view."""

    def write(self, direction: str, data: bytes, ts_ns: int | None = None) -> None: ...

    def close(self) -> None: ...


#: The calls a sink takes, in the order of the protocol.
METHODS = ("on_bytes", "on_odometry", "on_command", "on_frame", "on_event", "close")


class Sink(Protocol):
    """What a node emits to (see module)."""

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None: ...

    def on_odometry(self, odom: Odometry) -> None: ...

    def on_command(self, frame: CmdFrame, ts_ns: int) -> None: ...

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None: ...

    def on_event(self, event: NodeEvent) -> None: ...

    def close(self) -> None: ...


class SinkBase:
    """A sink that ignores everything: subclass it and override what you record.

    ``records_every_frame``: a recorder sets it, and gets every odometry record of a
    read; live consumers (ROS 2, JSON lines, callbacks) get them paced, the newest
    first when a read brings more than they keep up with.
    """

    records_every_frame = False

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        return None

    def on_odometry(self, odom: Odometry) -> None:
        return None

    def on_command(self, frame: CmdFrame, ts_ns: int) -> None:
        return None

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        return None

    def on_event(self, event: NodeEvent) -> None:
        return None

    def close(self) -> None:
        return None


class NodeHandle(Protocol):
    """What a sink that also steers (ROS 2's ``cmd_vel``) needs of either runtime."""

    config: RobotConfig
    clock: Callable[[], float]
    sinks: Sinks

    @property
    def connected(self) -> bool: ...

    def request(self, vx: float, vy: float, wz: float) -> None: ...

    def send_now(self) -> None: ...

    def set_cmd_timeout(self, seconds: float) -> None: ...

    def stats(self) -> dict[str, int]: ...


def _log_error(line: str) -> None:
    """The default ``say``: the ``fwbridge.bridge`` logger."""
    import logging  # here, not at the top: logging starts threading, this module has none

    logging.getLogger("fwbridge.bridge").error("%s", line)


def _overrides(sink: object, name: str) -> bool:
    """False when ``sink`` keeps SinkBase's do-nothing ``name``: the call is skipped."""
    return getattr(getattr(sink, name), "__func__", None) is not getattr(SinkBase, name)


class Sinks:
    """The sinks of one node, in order; each call goes to every sink that takes it.

    A sink that raises is counted (:attr:`errors`, per sink in
    :attr:`failures`), said once through ``say`` as an ``error:`` line, and
    the others still get the call. :meth:`close` closes every sink in reverse
    order, once. ``add``/``remove`` swap whole tuples, so a call in progress
    on another thread sees either list, never half of one.
    """

    def __init__(self, sinks: Iterable[Sink] = (),
                 say: Callable[[str], Any] | None = None) -> None:
        self.say = say or _log_error
        self.errors = 0
        self.failures: dict[int, int] = {}  # id(sink) -> failed calls
        self.closed = False
        self._all: tuple[Sink, ...] = ()
        self._bytes: tuple[Callable[[str, bytes, int], None], ...] = ()
        self._odometry: tuple[Callable[[Odometry], None], ...] = ()
        self._recorders: tuple[Callable[[Odometry], None], ...] = ()  # every record
        self._live: tuple[Callable[[Odometry], None], ...] = ()  # paced
        self._command: tuple[Callable[[CmdFrame, int], None], ...] = ()
        self._frame: tuple[Callable[[str, Any, int], None], ...] = ()
        self._event: tuple[Callable[[NodeEvent], None], ...] = ()
        for sink in sinks:
            self.add(sink)

    def _rebuild(self, sinks: tuple[Sink, ...]) -> None:
        self._all = sinks
        self._bytes = tuple(s.on_bytes for s in sinks if _overrides(s, "on_bytes"))
        self._odometry = tuple(s.on_odometry for s in sinks if _overrides(s, "on_odometry"))
        self._recorders = tuple(s.on_odometry for s in sinks if _overrides(s, "on_odometry")
                                and getattr(s, "records_every_frame", False))
        self._live = tuple(c for c in self._odometry if c not in self._recorders)
        self._command = tuple(s.on_command for s in sinks if _overrides(s, "on_command"))
        self._frame = tuple(s.on_frame for s in sinks if _overrides(s, "on_frame"))
        self._event = tuple(s.on_event for s in sinks if _overrides(s, "on_event"))

    def add(self, sink: Sink) -> None:
        if not self.closed and sink not in self._all:
            self._rebuild((*self._all, sink))

    def remove(self, sink: Sink) -> None:
        if sink in self._all:
            self._rebuild(tuple(s for s in self._all if s is not sink))

    def __iter__(self) -> Any:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, sink: object) -> bool:
        return sink in self._all

    @property
    def takes_odometry(self) -> bool:
        return bool(self._odometry)

    @property
    def takes_bytes(self) -> bool:
        return bool(self._bytes)

    @property
    def takes_writes(self) -> bool:
        """Some sink takes the bytes or the commands of a write."""
        return bool(self._bytes or self._command)

    # -- the calls ------------------------------------------------------------------
    def _failed(self, call: Callable[..., Any], exc: BaseException) -> None:
        owner = getattr(call, "__self__", call)
        key = id(owner)
        self.errors += 1
        self.failures[key] = self.failures.get(key, 0) + 1
        if self.failures[key] == 1:  # once per sink: a sink failing per frame must not flood
            name = getattr(call, "__qualname__", type(owner).__name__)
            self.say(f"error: sink {name} failed ({type(exc).__name__}: {exc}); "
                     "the other sinks go on, its failures are counted in sink_errors")

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        for call in self._bytes:
            try:
                call(direction, data, ts_ns)
            except Exception as exc:  # one broken sink must not stop the link or the others
                self._failed(call, exc)

    def on_odometry(self, odom: Odometry) -> None:
        for call in self._odometry:
            try:
                call(odom)
            except Exception as exc:
                self._failed(call, exc)

    def records(self, records: Sequence[Odometry], policy: LinkPolicy,
                clock: Callable[[], float], between: Callable[[], Any] | None = None) -> int:
        """One read's records, paced by ``policy``; ``between`` runs before each but the
        first (a command due meanwhile goes out). Returns the records skipped."""
        if not self._odometry or not records:
            return 0
        if len(records) == 1:  # the usual read: one frame, nothing to pace
            self.on_odometry(records[0])
            return 0
        for record in records:  # a recorder keeps every frame
            self._call(self._recorders, record)
        if not self._live:
            return 0
        dropped = 0
        for n, (record, skipped) in enumerate(policy.deliver(records, clock)):
            if n and between is not None:
                between()
            dropped += skipped
            self._call(self._live, record)
        return dropped

    def _call(self, calls: tuple[Callable[[Odometry], None], ...], odom: Odometry) -> None:
        for call in calls:
            try:
                call(odom)
            except Exception as exc:
                self._failed(call, exc)

    def on_command(self, frame: CmdFrame, ts_ns: int) -> None:
        for call in self._command:
            try:
                call(frame, ts_ns)
            except Exception as exc:
                self._failed(call, exc)

    def frames(self, frames: Iterable[tuple[str, Any]], ts_ns: int) -> None:
        """One read's frames of the other descriptions, each to every sink that takes them."""
        for call in self._frame:
            for name, frame in frames:
                try:
                    call(name, frame, ts_ns)
                except Exception as exc:
                    self._failed(call, exc)

    @property
    def takes_frames(self) -> bool:
        return bool(self._frame)

    def on_event(self, event: NodeEvent) -> None:
        for call in self._event:
            try:
                call(event)
            except Exception as exc:
                self._failed(call, exc)

    def events(self, events: Iterable[NodeEvent]) -> None:
        for event in events:
            self.on_event(event)

    def close(self) -> None:
        """Close every sink, last first, each whatever the others did; once."""
        if self.closed:
            return
        self.closed = True
        sinks = self._all
        self._rebuild(())  # nothing reaches a sink once it may be closed
        for sink in reversed(sinks):
            try:
                sink.close()
            except Exception as exc:
                self._failed(sink.close, exc)


class CallbackSink(SinkBase):
    """Plain callbacks as a sink: the nodes' ``on_odometry=`` and ``on_event=``."""

    def __init__(self, on_odometry: Callable[[Odometry], Any] | None = None,
                 on_event: Callable[[NodeEvent], Any] | None = None) -> None:
        # An instance attribute each: Sinks calls the callback itself, and skips a None's.
        if on_odometry is not None:
            self.on_odometry = on_odometry  # type: ignore[method-assign,assignment]
        if on_event is not None:
            self.on_event = on_event  # type: ignore[method-assign,assignment]


class _Borrowed(SinkBase):
    """A byte capture the caller closes (the older ``capture=`` keyword)."""

    def __init__(self, capture: ByteSink) -> None:
        self.write = capture.write

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        self.write(direction, data, ts_ns)


def borrowed(capture: ByteSink) -> Sink:
    """``capture``'s ``write`` as a sink that leaves closing it to its owner."""
    return _Borrowed(capture)


def frame_fields(frame: Any) -> dict[str, Any]:
    """A decoded frame's fields by name (a record type's or the generic codec's tuple),
    enum members as their names, bytes as hex: plain JSON values."""
    import dataclasses
    import enum

    if dataclasses.is_dataclass(frame) and not isinstance(frame, type):
        items = {f.name: getattr(frame, f.name) for f in dataclasses.fields(frame)}
    else:
        items = dict(frame._asdict())
    out: dict[str, Any] = {}
    for key, value in items.items():
        if isinstance(value, enum.Enum):
            value = value.name
        elif isinstance(value, (bytes, bytearray)):
            value = value.hex(" ")
        out[key] = value
    return out


class LineWriter(Protocol):
    """JSON lines out (:class:`~fwbridge.cli_verbs.common.JsonBlocks`)."""

    def add(self, obj: dict[str, Any], now: float) -> None: ...

    def add_line(self, line: str, now: float) -> None: ...


def _odometry_template() -> str:
    """``%``-template of :meth:`Odometry.as_dict` with ``wall`` first, as the JSON encoder
    writes it (compact separators): floats ``%r`` (``float.__repr__``, the encoder's)."""
    import json  # here, once: the template is built on the first sink

    from fwbridge.bridge.node.odometry import Odometry

    f = "%r"
    shape = {"wall": f, "seq": "%d", "stamp": f, "dt": f,
             "frame_id": Odometry.frame_id, "child_frame_id": Odometry.child_frame_id,
             "pose": {"position": {"x": f, "y": f, "z": 0.0},
                      "orientation": {"x": f, "y": f, "z": f, "w": f}, "yaw": f},
             "twist": {"linear": {"x": f, "y": f, "z": 0.0},
                       "angular": {"x": 0.0, "y": 0.0, "z": f}}}
    text = json.dumps(shape, separators=(",", ":"))
    return text.replace('"%r"', "%r").replace('"%d"', "%d")


class JsonLinesSink(SinkBase):
    """Every ``every``-th odometry record as a JSON line (``wall``: the epoch time it
    was written); ``on_gone`` runs once when the reader went away (a broken pipe).

    A line is one ``%`` on a template made once (the encoder's exact text: the
    tests hold the two together); a record with a NaN or infinity anywhere (or a
    number other than a plain float) goes through the writer's encoder instead
    (``add``), which writes NaN and infinity as strings.
    """

    def __init__(self, out: LineWriter, every: int = 1,
                 on_gone: Callable[[], Any] | None = None) -> None:
        self.out, self.every, self.on_gone = out, every, on_gone
        self.gone = False
        self._template = _odometry_template()
        self._isfinite = math.isfinite

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        """A frame of another description: ``{"wall", "frame": NAME, field: value, ...}``."""
        if self.gone:
            return
        try:
            self.out.add({"wall": ts_ns / 1e9, "frame": name, **frame_fields(frame)},
                         time.monotonic())
        except BrokenPipeError:
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()

    def on_odometry(self, odom: Odometry) -> None:
        if self.gone or odom.seq % self.every:
            return
        wall = time.time()
        qx, qy, qz, qw = odom.orientation
        x, y, yaw, vx, vy, wz = odom.x, odom.y, odom.yaw, odom.vx, odom.vy, odom.wz
        # one test for all: a NaN or infinity anywhere makes the sum one, and a number
        # that is not a plain float (numpy's, whose repr is not JSON) makes it another type
        total = wall + odom.stamp + odom.dt + x + y + qx + qy + qz + qw + yaw + vx + vy + wz
        try:
            if type(total) is float and self._isfinite(total):
                self.out.add_line(self._template % (
                    wall, odom.seq, odom.stamp, odom.dt, x, y, qx, qy, qz, qw, yaw, vx, vy, wz),
                    time.monotonic())
            else:
                self.out.add({"wall": wall, **odom.as_dict()}, time.monotonic())
        except BrokenPipeError:
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()
