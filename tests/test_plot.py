"""Plots people read: whole windows only, "no errors" said, legends off the data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from fwbridge.bridge.robots.square import SquareResult
from fwbridge.cli_verbs.plot import draw, draw_square
from fwbridge.cli_verbs.plot_series import BaseSeries, can_series


def _log(path: Path, seconds: float, error_at: float | None = None) -> Path:
    """Three modules' feedback at 50 Hz each for ``seconds``, as candump lines."""
    lines = []
    for k in range(round(seconds * 50)):
        for m in (1, 2, 3):
            t = 1000.0 + k * 0.02 + m * 0.001
            lines.append((t, f"({t:.6f}) can0 20{m}#0000010{m}00000000"))
    if error_at is not None:
        t = 1000.0 + error_at
        lines.append((t, f"({t:.6f}) can0 20000080#0000000000000000"))
    path.write_text("".join(line + "\n" for _, line in sorted(lines)))
    return path


def _overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _legends_clear(geo: dict[str, Any]) -> None:
    """No legend covers any panel's data area, and each lies inside the picture."""
    width, height = geo["size"]
    assert geo["legends"]
    for legend in geo["legends"]:
        assert not any(_overlaps(legend, ax) for ax in geo["axes"]), (legend, geo["axes"])
        assert legend[0] >= 0 and legend[1] >= 0 and legend[2] <= width and legend[3] <= height


def test_the_load_series_leaves_out_the_partial_last_window(tmp_path: Path) -> None:
    s = can_series(_log(tmp_path / "bus.log", 2.5), bitrate=500_000)
    assert len(s.t) == len(s.load) == 2 and s.partial == 1  # 2.5 s: two whole windows
    assert s.load[0] == pytest.approx(s.load[1], rel=0.02) and s.load[1] > 1.0
    assert all(len(v) == 2 and v[0] == v[1] == 50 for v in s.per_id.values())
    assert sum(s.totals.values()) == 375  # the whole capture still counted


def test_a_capture_shorter_than_a_window_shows_its_load_over_its_span(tmp_path: Path) -> None:
    short = can_series(_log(tmp_path / "short.log", 0.5), bitrate=500_000)
    whole = can_series(_log(tmp_path / "long.log", 3.0), bitrate=500_000)
    assert len(short.load) == 1
    assert short.load[0] == pytest.approx(whole.load[0], rel=0.05)  # not half of it


def test_an_empty_error_panel_says_no_errors_and_legends_sit_off_the_data(
        tmp_path: Path) -> None:
    geo = draw(can_series(_log(tmp_path / "bus.log", 3.5), 500_000), tmp_path / "bus.png",
               "bus")
    assert any(note.startswith("no errors") for note in geo["notes"])
    _legends_clear(geo)
    errs = draw(can_series(_log(tmp_path / "err.log", 3.5, error_at=1.2), 500_000),
                tmp_path / "err.png", "bus")
    assert not any(note.startswith("no errors") for note in errs["notes"])
    assert any(label == "error frames" for entries in errs["entries"] for label, *_ in entries)
    _legends_clear(errs)


def _base(errors: bool) -> BaseSeries:
    s = BaseSeries()
    for k in range(200):
        t = k * 0.05
        s.t.append(t)
        s.x.append(min(t, 5.0) * 0.2)
        s.y.append(max(t - 5.0, 0.0) * 0.2)
        s.yaw.append(90.0 if t > 5 else 0.0)
        s.vx.append(0.2)
        s.vy.append(0.0)
        s.wz.append(0.0)
    s.cmd_t, s.cmd = [0.0, 5.0], [(0.2, 0.0, 0.0), (0.2, 0.0, 0.5)]
    for k in range(10):
        s.counters_t.append(float(k))
        for side in ("rx", "tx"):
            s.counters[f"{side} frames"].append(50 * k)
            for name in ("checksum_errors", "discarded", "resyncs"):
                rises = errors and side == "rx"
                s.counters[f"{side} {name}"].append(k * (19 if name == "discarded" else 1)
                                                    if rises else 0)
    return s


def test_the_counters_panel_says_what_rises_in_colours_apart(tmp_path: Path) -> None:
    geo = draw(_base(errors=True), tmp_path / "base.png", "base")
    _legends_clear(geo)
    counters = next(e for e in geo["entries"] if any("frames rx" in lb for lb, *_ in e))
    labels = [label for label, *_ in counters]
    assert "frames rx (from the device)" in labels and "frames tx (from the host)" in labels
    assert {"checksum errors rx (right axis)", "bytes discarded rx (right axis)",
            "resyncs rx (right axis)"} <= set(labels)
    assert not any("tx (right axis)" in lb for lb in labels)  # counters still at 0: not drawn
    styles = [(colour, style) for _, colour, style in counters]
    assert len(set(styles)) == len(styles)  # no two lines drawn alike
    clean = draw(_base(errors=False), tmp_path / "clean.png", "base")
    assert "no checksum errors, discarded bytes or resyncs" in clean["notes"]
    _legends_clear(clean)


def test_the_demo_square_keeps_its_legend_off_the_path(tmp_path: Path) -> None:
    path = [(k * 0.1, x, y, 0.0) for k, (x, y) in enumerate(
        [(0, 0), (0.5, 0), (1, 0), (1, 0.5), (1, 1), (0.5, 1), (0, 1), (0, 0.5), (0, 0)])]
    res = SquareResult(odom_path=path, truth_path=path)
    geo = draw_square(res, tmp_path / "square.png", 1.0)
    _legends_clear(geo)
    assert (tmp_path / "square.png").stat().st_size > 10_000
