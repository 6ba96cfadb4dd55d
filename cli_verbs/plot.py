"""``fwbridge plot CAPTURE -o run.png``: a run at a glance, from any capture fwbridge reads.

A base (serial pcapng or MCAP): the XY path, commanded and measured
velocities, yaw, and the receiver counters over time. A CAN bus (candump,
asc, blf, pcapng, MCAP): the bus load and frames per ID over time, and the
error-state changes. Serial captures go through the MCAP recorder first, so
the plot shows exactly what a recording holds. matplotlib is the ``plot`` extra.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fwbridge.cli_verbs.common import FORCE, fail, writable
from fwbridge.protocols.errors import CaptureError

if TYPE_CHECKING:
    from fwbridge.bridge.robots.square import SquareResult

__all__ = ["BaseSeries", "CanSeries", "base_series", "can_series", "draw", "draw_square",
           "plot_cmd"]

#: Most windows (seconds) of a CAN plot.
MAX_WINDOWS = 7 * 24 * 3600
#: The longest JSON record of a capture read: a bus load lists every ID of its window (at
#: 1 Mbit/s, ~8000 distinct extended IDs a second, ~700 KB); counters are a few hundred bytes.
MAX_JSON_RECORD = 16 << 20
PATH_COLOUR = "#0000ff"  # pure blue: the tests find the path by its pixels


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


def _mcap_of(path: Path, tmp: Path) -> Path:
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
    from fwbridge.bridge.rosmsg import topics

    s = BaseSeries()
    records = _JsonRecords(source or mcap)
    t0: float | None = None
    wanted = ("/odom", "/cmd_vel", "/fwbridge/counters", "odom", "cmd_vel")  # also relative
    for rec in read_mcap(mcap, wanted):
        t = rec.log_time_ns / 1e9
        t0 = t if t0 is None else t0
        topic = rec.topic.lstrip("/")
        if topic == "odom":
            m = topics.deserialize(rec.data, "nav_msgs/msg/Odometry")
            q = m.pose.pose.orientation
            s.t.append(t - t0)
            s.x.append(m.pose.pose.position.x)
            s.y.append(m.pose.pose.position.y)
            s.yaw.append(math.degrees(2 * math.atan2(q.z, q.w)))
            s.vx.append(m.twist.twist.linear.x)
            s.vy.append(m.twist.twist.linear.y)
            s.wz.append(m.twist.twist.angular.z)
        elif topic == "cmd_vel":
            m = topics.deserialize(rec.data, "geometry_msgs/msg/Twist")
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


#: The counters panel: one colour per counter, the side in the line style (rx solid).
COUNTER_STYLE = {"frames": "C0", "checksum_errors": "C3", "discarded": "C1", "resyncs": "C4"}
COUNTER_LABEL = {"frames": "frames", "checksum_errors": "checksum errors",
                 "discarded": "bytes discarded", "resyncs": "resyncs"}
SIDE_LABEL = {"rx": "rx (from the device)", "tx": "tx (from the host)"}


def _legend_below(ax: Any, ncol: int = 2) -> None:
    """A legend under the panel, outside its data area (tight_layout makes room)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=ncol, fontsize="small",
                  frameon=False)


def _note(ax: Any, text: str) -> None:
    """A sentence in the middle of a panel that has nothing to draw."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.35",
            fontsize="large", gid="note")


def _counters(d: Any, series: BaseSeries) -> None:
    """Running totals: frames on the left axis; what should stay at 0 on the right."""
    t = series.counters_t
    frames = {k: v for k, v in series.counters.items() if k.endswith(" frames")}
    errors = {k: v for k, v in series.counters.items() if k not in frames}
    for name, values in sorted(frames.items()):
        side = name.split()[0]
        d.plot(t[:len(values)], values, color="C0" if side == "rx" else "C2",
               ls="-" if side == "rx" else "--", lw=2,
               label=f"frames {SIDE_LABEL.get(side, side)}")
    d.set(xlabel="t (s)", ylabel="frames decoded (total)",
          title="receiver counters: running totals")
    risen = {k: v for k, v in errors.items() if any(v)}
    if risen:
        e = d.twinx()
        n = len(risen)
        for k, (name, values) in enumerate(sorted(risen.items())):
            side, kind = name.split(" ", 1)
            # the first widest: counters that rise together (a resync per bad checksum)
            # stay visible one on another
            e.plot(t[:len(values)], values, color=COUNTER_STYLE.get(kind, "C5"),
                   ls="-" if side == "rx" else "--", lw=1.5 + 2.5 * (n - 1 - k) / n,
                   label=f"{COUNTER_LABEL.get(kind, kind)} {side} (right axis)")
        e.set_ylabel("errors, bytes discarded (total, log scale)")
        # symlog: tens of checksum errors and thousands of discarded bytes both readable
        e.set_yscale("symlog", linthresh=10)
        e.set_ylim(bottom=0)
        handles = d.get_legend_handles_labels()
        more = e.get_legend_handles_labels()
        d.legend(handles[0] + more[0], handles[1] + more[1], loc="upper center",
                 bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize="small", frameon=False)
    else:
        _legend_below(d)
        if errors:
            d.text(0.02, 0.96, "no checksum errors, discarded bytes or resyncs",
                   transform=d.transAxes, ha="left", va="top", color="0.35", gid="note")
    d.set_ylim(bottom=0)


def draw(series: BaseSeries | CanSeries, out: Path, title: str) -> dict[str, Any]:
    """Draw to ``out`` (PNG, written whole then renamed); the geometry for tests:
    ``{"bbox": (x0, y0, x1, y1) in pixels from the bottom left, "xlim", "ylim", "size"}``
    of the path (or load) axes, ``"axes"`` and ``"legends"``: every panel's and legend's
    pixel box, ``"entries"``: each legend's (label, colour, line style), ``"notes"``: the
    sentences drawn in place of empty data."""
    try:
        import matplotlib
    except ImportError:
        fail("plot needs matplotlib: pip install 'fwbridge[plot]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9), dpi=100)
    (a, b), (c, d) = axes
    if isinstance(series, BaseSeries):
        _draw_base(series, a, b, c, d)
    else:
        _draw_can(series, a, b, c, d)
    fig.suptitle(title)
    fig.tight_layout()
    fig.canvas.draw()
    geometry = _geometry(fig, a)
    _save(fig, out)
    return geometry


def _draw_base(series: BaseSeries, a: Any, b: Any, c: Any, d: Any) -> None:
    """A base's run: path, velocities, yaw, receiver counters."""
    if series.x:
        a.plot(series.x[:1], series.y[:1], "o", color="green", label="start", zorder=2)
    a.plot(series.x, series.y, color=PATH_COLOUR, lw=2, label="odometry path", zorder=3)
    a.set_aspect("equal", adjustable="datalim")
    a.set(xlabel="x (m)", ylabel="y (m)", title="path (odom)")
    _legend_below(a)
    names = ("vx (m/s)", "vy (m/s)", "wz (rad/s)")
    for i, (name, meas) in enumerate(zip(names, (series.vx, series.vy, series.wz))):
        colour = f"C{i}"
        b.plot(series.t, meas, color=colour, label=f"{name} measured")
        if series.cmd:
            b.step(series.cmd_t, [cmd[i] for cmd in series.cmd], where="post", color=colour,
                   ls="--", alpha=0.7, label=f"{name} commanded")
    b.set(xlabel="t (s)", title="velocities: commanded (dashed) and measured")
    _legend_below(b, ncol=3)
    import numpy as np

    yaw: Any = np.degrees(np.unwrap(np.radians(series.yaw))) if series.yaw else []
    c.plot(series.t, yaw, color="C3")  # unwrapped: a turn past 180° stays one line
    c.set(xlabel="t (s)", ylabel="yaw (°)", title="yaw (unwrapped)")
    if series.counters:
        _counters(d, series)
    else:
        d.set(xlabel="t (s)", title="receiver counters")
        _note(d, "no counters in this capture")


def _draw_can(series: CanSeries, a: Any, b: Any, c: Any, d: Any) -> None:
    """A CAN capture: load, frames per ID, error states, totals."""
    unit = "% of bit rate" if series.bitrate else "bit/s"
    a.plot(series.t, series.load, color=PATH_COLOUR)
    a.set(xlabel="t (s)", ylabel=f"load ({unit})", title="bus load (whole 1 s windows)")
    a.set_ylim(bottom=0, top=max([*series.load, 0.0]) * 1.15 or 1.0)  # 0 in view: no zoom
    n = len(series.per_id)
    for k, (ident, counts) in enumerate(series.per_id.items()):
        # the first lines widest: IDs sent at the same rate stay visible one on another
        b.plot(series.t, counts, label=ident, color=f"C{k % 10}",
               ls=("-", "--", ":", "-.")[k // 10 % 4], lw=1.5 + 3.0 * (n - 1 - k) / max(n, 1))
    b.set(xlabel="t (s)", ylabel="frames per window", title="frames per ID")
    b.set_ylim(bottom=0)
    _legend_below(b, ncol=6)
    level = {"ACTIVE": 0, "PASSIVE": 1, "BUS_OFF": 2}
    by_node: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for t, node, _old, new in series.states:
        by_node[node].append((t, level.get(new, 0)))
    for node, points in sorted(by_node.items()):
        c.step([p[0] for p in points], [p[1] for p in points], where="post", label=node)
    if series.error_frames:
        c.plot(series.error_frames, [0] * len(series.error_frames), "x", color="red",
               label="error frames")
    c.set(xlabel="t (s)", yticks=[0, 1, 2], yticklabels=["active", "passive", "bus-off"],
          ylim=(-0.3, 2.3), title="error-state changes")
    if series.t:
        c.set_xlim(0, series.t[-1] + 0.5)
    if by_node or series.error_frames:
        _legend_below(c, ncol=4)
    else:
        _note(c, "no errors: no error frames and no error-state changes")
    d.bar(list(series.totals), list(series.totals.values()))
    d.set(title="frames per ID (whole capture)")
    d.tick_params(axis="x", labelrotation=60)


def _geometry(fig: Any, a: Any) -> dict[str, Any]:
    """What the tests measure of a drawn figure (see :func:`draw`)."""

    def box(artist: Any) -> tuple[float, float, float, float]:
        e = artist.get_window_extent()
        return (e.x0, e.y0, e.x1, e.y1)

    return {"bbox": box(a), "xlim": a.get_xlim(), "ylim": a.get_ylim(),
            "size": fig.canvas.get_width_height(),
            "axes": [box(ax) for ax in fig.axes],
            "legends": [box(ax.get_legend()) for ax in fig.axes if ax.get_legend()],
            "entries": [[(t.get_text(), *_style(h))
                         for t, h in zip(lg.get_texts(), lg.legend_handles)]
                        for lg in (ax.get_legend() for ax in fig.axes) if lg],
            "notes": [t.get_text() for ax in fig.axes for t in ax.texts
                      if t.get_gid() == "note"]}


def _style(handle: Any) -> tuple[Any, Any]:
    """(colour, line style) of a legend entry (a marker or patch has no line style)."""
    get = getattr(handle, "get_linestyle", None)
    colour = getattr(handle, "get_color", getattr(handle, "get_facecolor", lambda: None))()
    return colour, get() if get else None


def _save(fig: Any, out: Path, dpi: float | None = None) -> None:
    """Write ``fig`` to ``out`` whole: beside it, then renamed in place (safe_output)."""
    import matplotlib.pyplot as plt

    from fwbridge.bridge.record.safe_output import write_with

    try:
        write_with(out, lambda fh: fig.savefig(fh, format="png", dpi=dpi))
    finally:
        plt.close(fig)


def draw_square(res: SquareResult, out: Path, side: float) -> dict[str, Any]:
    """``demo --plot``: the square, the true path and the odometry; :func:`draw`'s
    ``axes``/``legends`` geometry."""
    try:
        import matplotlib
    except ImportError:
        fail("--plot needs matplotlib: pip install 'fwbridge[plot]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6.6), layout="constrained")
    ax.plot([0, side, side, 0, 0], [0, 0, side, side, 0], color="0.8", lw=6, label="square")
    if res.truth_path:
        _, tx, ty, _ = zip(*res.truth_path)
        ax.plot(tx, ty, color="tab:green", lw=1.5, label="true path (simulation)")
    if res.odom_path:
        _, ox, oy, _ = zip(*res.odom_path)
        ax.plot(ox, oy, color="tab:blue", lw=1, ls="--", label="odometry (bridge)")
    ax.plot([0], [0], "ko", label="start")
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(f"closing error: odometry {res.odom_closing * 1000:.1f} mm, "
                 f"truth {res.truth_closing * 1000:.1f} mm")
    # under the axes, outside them: the constrained layout makes room for it
    legend = fig.legend(loc="outside lower center", ncol=2, fontsize="small", frameon=False)
    ax.grid(True, alpha=0.3)
    fig.canvas.draw()
    boxes = [x.get_window_extent() for x in (ax, legend)]
    geometry = {"axes": [(e.x0, e.y0, e.x1, e.y1) for e in boxes[:1]],
                "legends": [(e.x0, e.y0, e.x1, e.y1) for e in boxes[1:]],
                "size": fig.canvas.get_width_height()}
    _save(fig, out, dpi=120)
    return geometry


def plot_capture(path: Path, out: Path, bitrate: int | None = None) -> dict[str, Any]:
    """Plot any capture; returns :func:`draw`'s geometry."""
    from fwbridge.cli_verbs.convert import capture_kind

    kind = capture_kind(path)
    if kind == "mcap":
        from fwbridge.bridge.record.mcap_reader import read_mcap

        topics = {r.topic for r, _ in zip(read_mcap(path), range(2000))}
        kind = "can" if "/from_can_bus" in topics or "/to_can_bus" in topics else "serial"
    if kind == "can":
        return draw(can_series(path, bitrate), out, f"{path.name}: CAN bus")
    with tempfile.TemporaryDirectory() as tmp:
        series = base_series(_mcap_of(path, Path(tmp)), path)
    return draw(series, out, f"{path.name}: base")


@click.command("plot")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True,
              metavar="PNG", help="The picture to write (an existing one only with --force).")
@FORCE
@click.option("--bitrate", type=click.IntRange(min=1), default=None, metavar="BIT/S",
              help="CAN logs without it: the bit rate, for the load in %.")
def plot_cmd(capture: str, out: str, force: bool, bitrate: int | None) -> None:
    """Draw CAPTURE: a base's path, velocities, yaw and counters; a CAN bus's load,
    frames per ID and error states."""
    from fwbridge.bridge.record.mcap_sink import McapError
    from fwbridge.bridge.record.serial_pcapng import CaptureError

    src = Path(capture)
    if not src.is_file():
        fail(f"{src}: no such capture file")
    writable(out, "--output", force=force)
    try:
        plot_capture(src, Path(out), bitrate)
    except (McapError, CaptureError, ValueError, OSError, EOFError) as exc:
        text = str(exc)  # a damaged capture's line names the file and offset already
        fail(f"cannot plot {text}" if text.startswith(f"{src}:") else f"{src}: cannot plot: {text}")
    except click.ClickException as exc:
        fail(exc.format_message())
    except ImportError as exc:
        fail(f"plot needs the plot and mcap extras: {exc}")
    click.echo(f"plot written to {out}", err=True)
