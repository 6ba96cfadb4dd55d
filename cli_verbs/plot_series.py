"""What ``fwbridge plot`` draws, read from a capture: a base's odometry, commands and
receiver counters (:class:`BaseSeries`, from MCAP) and a CAN bus's load, frames per ID
and error states in whole windows (:class:`CanSeries`, from any CAN log). Bounded: a
capture's JSON records are parsed under :data:`MAX_JSON_RECORD` and its windows are at
most :data:`MAX_WINDOWS`; the drawing is :mod:`cli_verbs.plot`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbridge.protocols.errors import CaptureError

__all__ = ["MAX_JSON_RECORD", "MAX_WINDOWS", "BaseSeries", "CanSeries", "base_series",
           "can_series", "mcap_of"]

#: Most windows (seconds) of a CAN plot.
MAX_WINDOWS = 7 * 24 * 3600
#: The longest JSON record of a capture read: a bus load lists every ID of its window (at
#: 1 Mbit/s, ~8000 distinct extended IDs a second, ~700 KB); counters are a few hundred bytes.
MAX_JSON_RECORD = 16 << 20


@dataclass
class BaseSeries:
    """What a base's capture holds, as time series (t in s from the first message)."""

    t: list[float] = field(default_factory=list)  # odometry times
    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    yaw: list[float] = field(default_factory=list)
    vx: list[float] = field(default_factory=list)
    vy: list[float] = field(default_factory=list)
    wz: list[float] = field(default_factory=list)
    cmd_t: list[float] = field(default_factory=list)
    cmd: list[tuple[float, float, float]] = field(default_factory=list)
    counters_t: list[float] = field(default_factory=list)
    counters: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    skipped: int = 0  # JSON records not as the recorder writes them (said in one warning)


@dataclass
class CanSeries:
    """A CAN capture as whole 1 s windows: load, frames per ID; error-state changes."""

    t: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)  # % of the bit rate (bits/s if unknown)
    per_id: dict[str, list[int]] = field(default_factory=dict)
    states: list[tuple[float, str, str, str]] = field(default_factory=list)  # t, node, old, new
    error_frames: list[float] = field(default_factory=list)
    bitrate: int | None = None
    totals: dict[str, int] = field(default_factory=dict)  # frames per ID, whole capture
    partial: int = 0  # windows left out of the series: not covered whole by the capture
    skipped: int = 0  # JSON records not as the recorder writes them (said in one warning)


class _JsonRecords:
    """The JSON records of a capture (counters, bus load, state changes), parsed bounded:
    one too large, too deep, not JSON or not of the recorder's shape is counted and
    skipped, and the count said once, as a warning naming the file (:meth:`say`)."""

    def __init__(self, source: Path) -> None:
        from fwbridge.protocols.config_text import parse_json_bytes

        self.source = source
        self.skipped = 0
        self._first = ""
        self._parse = parse_json_bytes  # imported once a capture, not once a record

    def body(self, data: bytes, topic: str, shape: Callable[[Any], bool]) -> dict[str, Any] | None:
        try:
            body = self._parse(data, topic, MAX_JSON_RECORD)
            why = None if shape(body) else "not the recorder's fields"
        except ValueError as exc:  # TextLimitError, not UTF-8, not JSON
            body, why = None, " ".join(str(exc).split())[:200]
        if why is None:
            return body  # type: ignore[no-any-return]
        self.skipped += 1
        if not self._first:
            self._first = why if why.startswith(f"{topic}:") else f"{topic}: {why}"
        return None

    def say(self) -> int:
        if self.skipped:
            from fwbridge.bridge.record.damage import warn_damage

            warn_damage(self.source, f"{self.skipped} JSON record(s) skipped (the first: "
                        f"{self._first})")
        return self.skipped


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _counters_shape(body: Any) -> bool:
    """``{side: {counter: number}}``, as the serial recorder writes them."""
    return isinstance(body, dict) and all(
        isinstance(v, dict) and all(_number(n) for n in v.values()) for v in body.values())


def _load_shape(body: Any) -> bool:
    rate = body.get("bitrate") if isinstance(body, dict) else 0
    return isinstance(body, dict) and (rate is None or (type(rate) is int and rate > 0))


def _state_shape(body: Any) -> bool:
    return isinstance(body, dict) and all(isinstance(body.get(k), str)
                                          for k in ("node", "old", "new"))


def mcap_of(path: Path, tmp: Path) -> Path:
    from fwbridge.cli_verbs.convert import capture_kind, to_mcap

    if capture_kind(path) == "mcap":
        return path
    out = tmp / "capture.mcap"
    to_mcap(path, out)
    return out


def base_series(mcap: Path, source: Path | None = None) -> BaseSeries:
    """The odometry, commands and counters of an MCAP capture (decoded by rosbags);
    ``source``: the file it was converted from, the one a skipped record names."""
    from fwbridge.bridge.record.mcap_reader import read_mcap
    from fwbridge.bridge.rosmsg import cdr

    s = BaseSeries()
    records = _JsonRecords(source or mcap)
    t0: float | None = None
    wanted = ("/odom", "/cmd_vel", "/fwbridge/counters", "odom", "cmd_vel")  # also relative
    for rec in read_mcap(mcap, wanted):
        t = rec.log_time_ns / 1e9
        t0 = t if t0 is None else t0
        topic = rec.topic.lstrip("/")
        if topic == "odom":
            m = cdr.deserialize(rec.data, "nav_msgs/msg/Odometry")
            q = m.pose.pose.orientation
            s.t.append(t - t0)
            s.x.append(m.pose.pose.position.x)
            s.y.append(m.pose.pose.position.y)
            s.yaw.append(math.degrees(2 * math.atan2(q.z, q.w)))
            s.vx.append(m.twist.twist.linear.x)
            s.vy.append(m.twist.twist.linear.y)
            s.wz.append(m.twist.twist.angular.z)
        elif topic == "cmd_vel":
            m = cdr.deserialize(rec.data, "geometry_msgs/msg/Twist")
            s.cmd_t.append(t - t0)
            s.cmd.append((m.linear.x, m.linear.y, m.angular.z))
        else:
            body = records.body(rec.data, rec.topic, _counters_shape)
            if body is None:
                continue
            s.counters_t.append(t - t0)
            for side, values in body.items():
                for name in ("frames", "checksum_errors", "discarded", "resyncs"):
                    if name in values:
                        s.counters[f"{side} {name}"].append(values[name])
    s.skipped = records.say()
    return s


def can_series(path: Path, bitrate: int | None = None, window: float = 1.0) -> CanSeries:
    """Bus load (exact frame bits) and frames per ID per window; error states."""
    from fwbridge.bridge.record.can_logs import read_messages
    from fwbridge.can_bus.bits import Frame, frame_length

    s = CanSeries(bitrate=bitrate)
    frames: list[Counter[str]] = []
    bits: list[int] = []
    t0: float | None = None
    last: float | None = None
    for msg in read_messages(path):
        t0 = msg.timestamp if t0 is None else t0
        last = msg.timestamp if last is None else max(last, msg.timestamp)
        k = max(0, int((msg.timestamp - t0) // window))  # a frame a little out of order
        if k >= MAX_WINDOWS:  # bounded: a bogus stamp must not allocate years of windows
            raise CaptureError(f"frame at t={msg.timestamp:.6f} is {msg.timestamp - t0:+.0f} s "
                               f"from the first frame; a plot spans at most {MAX_WINDOWS} s")
        if msg.is_error_frame:
            s.error_frames.append(msg.timestamp - t0)
            continue
        while len(bits) <= k:
            bits.append(0)
            frames.append(Counter())
        ident = f"{msg.arbitration_id:08X}" if msg.is_extended_id else f"{msg.arbitration_id:03X}"
        frames[k][ident] += 1
        bits[k] += frame_length(Frame(msg.arbitration_id, msg.is_extended_id,
                                      msg.is_remote_frame, msg.dlc,
                                      b"" if msg.is_remote_frame else bytes(msg.data)))
    if path.suffix.lower() == ".mcap":
        from fwbridge.bridge.record.mcap_reader import read_mcap

        records = _JsonRecords(path)
        for rec in read_mcap(path, ("/fwbridge/can/load", "/fwbridge/can/state")):
            load = rec.topic == "/fwbridge/can/load"
            body = records.body(rec.data, rec.topic, _load_shape if load else _state_shape)
            if body is None:
                continue
            if load:
                s.bitrate = s.bitrate or body.get("bitrate")
            elif t0 is not None:
                s.states.append((rec.log_time_ns / 1e9 - t0, body["node"], body["old"],
                                 body["new"]))
        s.skipped = records.say()
    ids = sorted({i for c in frames for i in c})
    s.totals = {i: sum(c[i] for c in frames) for i in ids}
    # Only whole windows make the series: the last one ends after the last frame and would
    # draw as a drop in load. A capture shorter than a window keeps it, over its own span.
    span = last - t0 if t0 is not None and last is not None else 0.0
    whole = min(len(bits), int(span // window))
    widths = [window] * whole
    if not whole and bits:
        whole, widths = 1, [span or window]
    s.partial = len(bits) - whole
    s.t = [(k + 0.5) * window for k in range(whole)]
    rate = s.bitrate
    s.load = [100.0 * b / (rate * w) if rate else b / w for b, w in zip(bits, widths)]
    s.per_id = {i: [c[i] for c in frames[:whole]] for i in ids}
    return s
