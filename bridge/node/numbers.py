"""One check for every number a user gives (options, config values): finite and in range.

NaN compares false with everything, so a plain ``lo <= x <= hi`` lets it
through; infinity passes a one-sided bound. Used by the config loader and by
the CLI's parameter types alike.
"""

from __future__ import annotations

import math

__all__ = ["MAX_ANGULAR", "MAX_LINEAR", "out_of_range", "velocity_error"]

#: Largest |linear| (m/s) and |angular| (rad/s) a velocity request may ask, on every way
#: in (ROS 2 cmd_vel, ``bridge --cmd-stdin``, ``send cmd``); more is refused as bad input,
#: like NaN: no mobile base this bridge drives comes near, and a float32 command frame
#: would carry a huge value on to the motors unchanged.
MAX_LINEAR = 10.0
MAX_ANGULAR = 20.0


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def out_of_range(value: float, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool = False, hi_open: bool = False, unit: str = "") -> str | None:
    """Why ``value`` is not a finite number in the range (a phrase), or None when it is."""
    if not math.isfinite(value):
        return f"must be a finite number, not {value}"
    low = lo is not None and (value < lo or (lo_open and value == lo))
    high = hi is not None and (value > hi or (hi_open and value == hi))
    if not (low or high):
        return None
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {_fmt(lo)}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {_fmt(hi)}")
    suffix = f" {unit}" if unit else ""
    return f"must be {' and '.join(parts)}{suffix}, not {_fmt(value)}"


def velocity_error(name: str, value: float, limit: float) -> str | None:
    """Why ``value`` cannot be the velocity component ``name`` (not finite, or beyond
    ±``limit``), a phrase that names both; None when it can."""
    if not math.isfinite(value):
        return f"{name} is not finite ({value!r})"
    if abs(value) > limit:
        return f"{name} = {value:g} is beyond ±{limit:g}"
    return None
