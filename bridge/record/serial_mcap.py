"""Serial links in MCAP (and live views): raw bytes, ROS 2 messages, counters over time.

One recorder, :class:`SerialRecorder`, takes what a link carried (each read
``rx`` and write ``tx`` with its time) and what it decoded to (a base node's
records: it is one of the node's sinks, :mod:`fwbridge.bridge.node.sinks`; on a link
without a node, :class:`FrameDecoder` decodes for it) and writes, to every sink
of a :class:`~fwbridge.bridge.record.channel_streams.Streams`:

- ``/fwbridge/serial/rx`` and ``/fwbridge/serial/tx``: the bytes of each read
  and write, unchanged, as ``std_msgs/msg/UInt8MultiArray`` (CDR), log time =
  the moment they crossed the link: what ``replay`` plays back;
- the decoded frames as the ROS 2 bridge publishes them (one mapping,
  :mod:`fwbridge.bridge.rosmsg.topics`, names fully qualified as rosbag2 has
  them): odometry frames -> ``/odom`` (``nav_msgs/msg/Odometry``,
  integrated as seed 002) and ``/tf``; velocity commands -> ``/cmd_vel``
  (``geometry_msgs/msg/Twist``);
- the frames of the other descriptions a robot file names on the link
  (``link.frames_in``): ``/fwbridge/frames/NAME``, JSON under a schema made
  from the description (:mod:`~fwbridge.bridge.record.frame_channels`);
- every second, the receiver counters as ``/diagnostics``
  (``diagnostic_msgs/msg/DiagnosticArray``) and as plain numbers on
  ``/fwbridge/counters`` (JSON, for plots).

:class:`SerialCapture` is that recorder on an MCAP file and/or a live view,
with :class:`~fwbridge.bridge.record.serial_pcapng.CaptureWriter`'s interface (``write``,
``close``, ``packets``, ``bytes``), so every verb that records pcapng
records MCAP by the file's suffix (:func:`open_capture`). The channels themselves
(schemas, the raw bytes' codec) are :mod:`~fwbridge.bridge.record.serial_channels`'.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from fwbridge.bridge.node.config import Calibration
from fwbridge.bridge.node.odometry import Odometry, OdometryIntegrator
from fwbridge.bridge.node.sinks import NodeHandle, SinkBase
from fwbridge.bridge.record.channel_streams import ChannelSpec, Sink, Streams
from fwbridge.bridge.record.frame_channels import frame_message, frame_spec
from fwbridge.bridge.record.mcap_sink import McapError, McapSink
from fwbridge.bridge.record.serial_channels import COUNTERS, RAW, encode_raw, ros_spec, ros_topics
from fwbridge.bridge.record.serial_pcapng import RX, TX, CaptureWriter
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.engine import receiver_for
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.errors import CaptureError

if TYPE_CHECKING:
    from fwbridge.bridge.rosmsg.odometry_cdr import OdometryEncoder
    from fwbridge.protocols.descriptions.model import FrameDescription

__all__ = ["COUNTER_PERIOD", "FrameDecoder", "SerialCapture", "SerialRecorder", "open_capture",
           "watch_node"]

#: Seconds between two counter records.
COUNTER_PERIOD = 1.0


def _odometry_encoder(frame_id: str, child_frame_id: str) -> OdometryEncoder:
    from fwbridge.bridge.rosmsg.odometry_cdr import odometry_encoder

    return odometry_encoder(frame_id, child_frame_id)



def _wall_ns(monotonic_stamp: float) -> int:
    """A node record's monotonic stamp as ns since the epoch (topics.wall_stamp)."""
    stamp: float = ros_topics().wall_stamp(monotonic_stamp)
    return round(stamp * 1e9)


class SerialRecorder(SinkBase):
    """A link's reads and writes and their records in; raw, ROS 2 and counter channels
    out (see module). A node's sink: it writes what the node decoded, and decodes
    nothing itself (:class:`FrameDecoder` does, for a link without a node).

    ``rx``/``tx`` name the frames each direction carries (``"odom"``,
    ``"cmd"`` or None for bytes only): which ROS channels there are.
    ``stats`` adds the node's counters to the periodic records, ``receivers``
    its receiver's by direction
    (:meth:`~bridge.node.record_path.RecordPath.receiver_stats`). ``namespace``
    prefixes every topic but the absolute ROS ones (``/tf``, ``/diagnostics``):
    one view of a fleet; ``frame_prefix`` (``robot1/``) prefixes the TF frames
    of ``odom`` and ``/tf``, so a fleet's robots keep their own. ``raw`` False:
    no raw channels (a view of the records alone). ``wall_ns``: a node record's
    stamp (its monotonic clock) as ns since the epoch. ``descriptions``: the other
    descriptions on the link, a channel each (:meth:`on_frame`). Thread-safe: reads
    and writes come from different threads in the bridge.
    """

    records_every_frame = True  # a recording keeps every frame the node decoded

    def __init__(self, streams: Streams, *, port: str = "serial", rx: str | None = "odom",
                 tx: str | None = "cmd", stats: Callable[[], dict[str, int]] | None = None,
                 counter_period: float = COUNTER_PERIOD, namespace: str = "",
                 raw: bool = True, frame_prefix: str = "",
                 wall_ns: Callable[[float], int] | None = None,
                 receivers: Callable[[], dict[str, dict[str, int]]] | None = None,
                 descriptions: Sequence[FrameDescription] = ()) -> None:
        self.streams = streams
        self._wall_ns = wall_ns or _wall_ns
        self._frames = {"frame_id": f"{frame_prefix}odom",
                        "child_frame_id": f"{frame_prefix}base_link"}
        self.port = port
        self.stats = stats
        #: The receivers' counters by direction: the node's, or a :class:`FrameDecoder`'s.
        self.receiver_stats = receivers
        self.decoder: FrameDecoder | None = None  # set by a FrameDecoder
        ns = namespace.rstrip("/")

        def spaced(spec: ChannelSpec) -> ChannelSpec:
            return dataclasses.replace(spec, topic=ns + spec.topic) if ns else spec

        self._raw = {d: streams.channel(spaced(spec)) for d, spec in RAW.items()} if raw else {}
        self._ros: dict[str, int] = {}
        keys = ["odom", "tf"] if rx == "odom" else []
        keys += ["cmd_vel"] if "cmd" in (rx, tx) else []
        for key in [*keys, "diagnostics"]:
            self._ros[key] = streams.channel(ros_spec(key, ns or "/"))
        # the odometry's two messages by the encoder the ROS 2 node publishes them with
        self._odometry = _odometry_encoder(**self._frames) if "odom" in self._ros else None
        self._counters = streams.channel(spaced(COUNTERS))
        self._described = {d.name: (streams.channel(frame_spec(d, ns)), d) for d in descriptions}
        self._period = int(counter_period * 1e9)
        self._next: int | None = None
        self._lock = threading.Lock()
        self.packets = 0
        self.bytes = 0

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        """One read (``"rx"``) or write (``"tx"``) at ``ts_ns``: the raw channel, the counters."""
        if not data:
            return
        data = bytes(data)
        decoder = self.decoder
        with self._lock:
            if self._raw:
                self.streams.log(self._raw[direction], encode_raw(data), ts_ns)
            self.packets += 1
            self.bytes += len(data)
            if decoder is None:
                self._tick(ts_ns)
                return
        decoder.feed(direction, data, ts_ns)  # a link without a node: before the counters
        with self._lock:
            self._tick(ts_ns)

    def write(self, direction: str, data: bytes, ts_ns: int | None = None) -> None:
        """:meth:`on_bytes` with ``ts_ns`` defaulting to now (a byte capture's interface)."""
        self.on_bytes(direction, data, time.time_ns() if ts_ns is None else ts_ns)

    def _tick(self, ts: int) -> None:
        """The counters, once a period (called with the lock held)."""
        if self._next is None:
            self._next = ts + self._period
        elif ts >= self._next:
            self._next = ts + self._period
            self._emit_counters(ts)

    def on_odometry(self, odom: Odometry) -> None:
        """A node's record (stamped with its monotonic clock) as ``odom`` and ``/tf``."""
        self.odometry(odom, self._wall_ns(odom.stamp))

    def odometry(self, odom: Odometry, ts: int) -> None:
        """One odometry record as ``odom`` and ``/tf`` (stamp: ``ts``, ns since the epoch)."""
        encoder = self._odometry
        if encoder is None:
            return
        stamp = ts / 1e9
        odom_msg = encoder.odometry(odom, stamp)
        tf_msg = encoder.transform(odom, stamp)
        with self._lock:
            self.streams.log(self._ros["odom"], odom_msg, ts)
            self.streams.log(self._ros["tf"], tf_msg, ts)

    def on_command(self, frame: cmd_frame.CmdFrame, ts_ns: int) -> None:
        """A velocity command written at ``ts_ns`` as ``cmd_vel``."""
        if "cmd_vel" not in self._ros:
            return
        from fwbridge.bridge.rosmsg import cdr, plain_data

        twist = plain_data.message_from_dict("geometry_msgs/msg/Twist", {
            "linear": {"x": frame.vx, "y": frame.vy}, "angular": {"z": frame.wz}})
        msg = cdr.serialize(twist, "geometry_msgs/msg/Twist")
        with self._lock:
            self.streams.log(self._ros["cmd_vel"], msg, ts_ns)

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        """A frame of another description on the link, on its channel."""
        got = self._described.get(name)
        if got is None:
            return
        channel, desc = got
        msg = frame_message(frame, desc)
        with self._lock:
            self.streams.log(channel, msg, ts_ns)

    def counters(self) -> dict[str, dict[str, int]]:
        """The totals so far: each direction's receiver (a decoder's), the node's when given
        (a node's counters hold its receiver's)."""
        out = dict(self.receiver_stats()) if self.receiver_stats is not None else {}
        if self.stats is not None:
            out["node"] = dict(self.stats())
        return out

    def _emit_counters(self, ts: int) -> None:
        body = self.counters()
        self.streams.log(self._counters, json.dumps(body).encode(), ts)
        if "diagnostics" in self._ros:
            from fwbridge.bridge.rosmsg import cdr, diagnostics

            statuses = [diagnostics.node_status(f"fwbridge {self.port} {name}", values,
                                                connected=True, hardware_id=self.port)
                        for name, values in body.items()]
            msg = diagnostics.diagnostics_message(statuses, stamp=ts / 1e9)
            self.streams.log(self._ros["diagnostics"], cdr.serialize(
                msg, "diagnostic_msgs/msg/DiagnosticArray"), ts)

    def finish(self, ts_ns: int | None = None) -> None:
        """The last counters (the totals at the end of the run)."""
        with self._lock:
            self._emit_counters(time.time_ns() if ts_ns is None else ts_ns)

    def close(self) -> None:
        """As a node's sink: the last counters (the streams are their owner's to close)."""
        self.finish()


class FrameDecoder:
    """The decoding of a link no node decodes (``serial record``, ``convert``, a
    simulator's capture): each direction's receiver, the odometry integrator, and
    the records to a :class:`SerialRecorder`. A node's capture has none: the node
    hands the recorder its own records.
    """

    def __init__(self, recorder: SerialRecorder, *, rx: str | None = "odom",
                 tx: str | None = "cmd", calibration: Calibration | None = None) -> None:
        self.recorder = recorder
        self._receivers: dict[str, tuple[str, Sum8Receiver[Any]]] = {}
        for direction, kind in ((RX, rx), (TX, tx)):
            if kind is not None:
                codec = odom_frame.CODEC if kind == "odom" else cmd_frame.CODEC
                self._receivers[direction] = (kind, receiver_for(codec))
        self.integrator = OdometryIntegrator(calibration)
        self._lock = threading.Lock()
        recorder.receiver_stats = self.stats
        recorder.decoder = self

    def feed(self, direction: str, data: bytes, ts: int) -> None:
        """The frames ``data`` completes, as records to the recorder (stamp ``ts``)."""
        got = self._receivers.get(direction)
        if got is None:
            return
        kind, receiver = got
        with self._lock:
            for item in receiver.feed(data):
                if kind == "odom":
                    odom = self.integrator.update(item.frame, ts / 1e9)
                    if odom is not None:
                        self.recorder.odometry(odom, ts)
                else:
                    self.recorder.on_command(item.frame, ts)

    def stats(self) -> dict[str, dict[str, int]]:
        return {d: r.stats.as_dict() for d, (_, r) in self._receivers.items()}


class SerialCapture(SinkBase):
    """A :class:`SerialRecorder` on its sinks, with CaptureWriter's interface.

    ``decode`` True: a :class:`FrameDecoder` decodes the bytes (a link without
    a node); False: a node's sink, the records come from the node
    (``on_odometry``, ``on_command``). ``close()`` writes the last counters and
    finalises every sink; it is idempotent (finally blocks and signal handlers
    may both call it).
    """

    records_every_frame = True  # a recording keeps every frame the node decoded

    def __init__(self, sinks: list[Sink], *, decode: bool = True,
                 calibration: Calibration | None = None, **recorder: Any) -> None:
        self.streams = Streams(sinks)
        try:
            self.recorder = SerialRecorder(self.streams, **recorder)
        except BaseException:
            self.streams.close()
            raise
        self.decoder = (FrameDecoder(self.recorder, rx=recorder.get("rx", "odom"),
                                     tx=recorder.get("tx", "cmd"), calibration=calibration)
                        if decode else None)
        self._closed = False

    @property
    def packets(self) -> int:
        return self.recorder.packets

    @property
    def bytes(self) -> int:
        return self.recorder.bytes

    def on_bytes(self, direction: str, data: builtins.bytes, ts_ns: int) -> None:
        if self._closed or not data:
            return
        self.recorder.on_bytes(direction, data, ts_ns)

    def write(self, direction: str, data: builtins.bytes, ts_ns: int | None = None) -> None:
        self.on_bytes(direction, data, time.time_ns() if ts_ns is None else ts_ns)

    def on_odometry(self, odom: Odometry) -> None:
        if self.decoder is None and not self._closed:
            self.recorder.on_odometry(odom)

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        if not self._closed:
            self.recorder.on_frame(name, frame, ts_ns)

    def on_command(self, frame: cmd_frame.CmdFrame, ts_ns: int) -> None:
        if self.decoder is None and not self._closed:
            self.recorder.on_command(frame, ts_ns)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.recorder.finish()
        finally:
            self.streams.close()

    def __enter__(self) -> SerialCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_capture(path: str | os.PathLike[str] | None, *, port: str, description: str = "",
                 live: Sink | None = None, stream: IO[bytes] | None = None,
                 frames: str | None = None, **recorder: Any
                 ) -> CaptureWriter | SerialCapture | _Tee:
    """The capture a verb records to: pcapng, or MCAP by the ``.mcap`` suffix, and/or a
    live view (``live``, a Foxglove sink). ``path`` None: the live view alone. Each is
    a node's sink (:mod:`bridge.node.sinks`); ``decode=False`` for a node's capture (the
    node hands it the records), else the MCAP side decodes the bytes itself.
    ``stream``: write there instead of opening ``path`` (a file moved into place once
    the link works; ``path`` still picks the format). ``frames``: a pcapng capture also
    holds each frame of that family the receiver accepts, whole, on a second interface.

    Raises :class:`~fwbridge.bridge.record.serial_pcapng.CaptureError` for a file it cannot write.
    """
    sinks: list[Sink] = []
    if path is not None and not str(path).lower().endswith(".mcap"):
        try:
            pcap = CaptureWriter(stream if stream is not None else path, port=port,
                                 description=description, frames=frames)
        except OSError as exc:
            raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None
        if live is None:
            return pcap
        try:
            return _Tee(pcap, SerialCapture([live], port=port, **recorder))
        except BaseException:
            pcap.close()
            raise
    if path is not None:
        try:
            sinks.append(McapSink(path, metadata={"port": port, "description": description},
                                  stream=stream))
        except McapError as exc:
            raise CaptureError(str(exc)) from None
    if live is not None:
        sinks.append(live)
    try:
        return SerialCapture(sinks, port=port, **recorder)
    except ImportError as exc:  # the ROS messages need rosbags
        raise CaptureError(f"MCAP recording needs the mcap extra: {exc}") from None


def watch_node(streams: Streams, node: NodeHandle, namespace: str = "",
               frame_prefix: str = "") -> SerialRecorder:
    """Show a running base node on ``streams`` (a live view): its odometry records as
    ``odom`` and ``/tf`` and its counters, topics in ``namespace`` and TF frames after
    ``frame_prefix`` (a fleet's robot). The recorder joins the node's sinks."""
    rec = SerialRecorder(streams, port=namespace or "base", rx="odom", tx=None, raw=False,
                         namespace=namespace, stats=node.stats, frame_prefix=frame_prefix)
    node.sinks.add(rec)
    return rec


class _Tee(SinkBase):
    """A pcapng file and a live view of the same link."""

    def __init__(self, pcap: CaptureWriter, live: SerialCapture) -> None:
        self.pcap, self.live = pcap, live

    @property
    def packets(self) -> int:
        return self.pcap.packets

    @property
    def bytes(self) -> int:
        return self.pcap.bytes

    def write(self, direction: str, data: builtins.bytes, ts_ns: int | None = None) -> None:
        ts = time.time_ns() if ts_ns is None else ts_ns
        self.pcap.write(direction, data, ts)
        self.live.write(direction, data, ts)

    def on_bytes(self, direction: str, data: builtins.bytes, ts_ns: int) -> None:
        self.pcap.on_bytes(direction, data, ts_ns)
        self.live.on_bytes(direction, data, ts_ns)

    def on_odometry(self, odom: Odometry) -> None:
        self.live.on_odometry(odom)

    def on_command(self, frame: cmd_frame.CmdFrame, ts_ns: int) -> None:
        self.live.on_command(frame, ts_ns)

    def on_frame(self, name: str, frame: Any, ts_ns: int) -> None:
        self.live.on_frame(name, frame, ts_ns)

    def write_frame(self, direction: str, frame: builtins.bytes, ts_ns: int | None = None) -> None:
        self.pcap.write_frame(direction, frame, ts_ns)

    def close(self) -> None:
        try:
            self.pcap.close()
        finally:
            self.live.close()

    def __enter__(self) -> _Tee:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
