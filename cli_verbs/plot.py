"""``fwbridge plot CAPTURE -o run.png``: a run at a glance, from any capture fwbridge reads.

A base (serial pcapng or MCAP): the XY path, commanded and measured
velocities, yaw, and the receiver counters over time. A CAN bus (candump,
asc, blf, pcapng, MCAP): the bus load and frames per ID over time, and the
error-state changes. Serial captures go through the MCAP recorder first, so
the plot shows exactly what a recording holds. matplotlib is the ``plot`` extra. The
series drawn are read by :mod:`cli_verbs.plot_series`; here they are drawn.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fwbridge.cli_verbs.common import FORCE, fail, writable
from fwbridge.cli_verbs.plot_series import (
    BaseSeries,
    CanSeries,
    base_series,
    can_series,
    mcap_of,
)

if TYPE_CHECKING:
    from fwbridge.bridge.robots.square import SquareResult

__all__ = ["draw", "draw_square", "plot_capture", "plot_cmd"]

PATH_COLOUR = "#0000ff"  # pure blue: the tests find the path by its pixels

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
        series = base_series(mcap_of(path, Path(tmp)), path)
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
