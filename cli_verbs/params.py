"""Numbers from the command line, checked before anything runs.

click's ``float`` and ``FloatRange`` let NaN and infinity through (every
comparison with NaN is false), so ``--rate nan`` flooded a link and
``--duration nan`` never ended. Every numeric option of every verb uses one
of these types: finite, within a range that names its unit. Arguments that
may be negative (``arm ik -0.5 0.2 0.1``) need their command to carry
:data:`NEGATIVE_ARGS` so click does not take ``-0.5`` for an option.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR, out_of_range, velocity_error

if TYPE_CHECKING:
    _FloatType = click.ParamType[float]
    _IntType = click.ParamType[int]
else:  # click before 8.2 has no subscriptable ParamType at run time
    _FloatType = _IntType = click.ParamType

__all__ = [
    "BAUD",
    "BITRATE",
    "DURATION",
    "FLOAT32",
    "INTERVAL",
    "NEGATIVE_ARGS",
    "RATE",
    "SPEED",
    "TIMEOUT_MAX",
    "WIRE_FLOAT",
    "Baud",
    "Finite",
    "finite_in",
    "velocity_limit_options",
    "velocity_refused",
]

#: The longest wait a thread or a timer accepts (threading.TIMEOUT_MAX is about 9.2e9 s).
TIMEOUT_MAX = 1e9

#: ``context_settings`` for a command whose arguments may be negative numbers.
NEGATIVE_ARGS: dict[str, Any] = {"ignore_unknown_options": True}


def finite_in(value: float, lo: float | None = None, hi: float | None = None, *,
              lo_open: bool = False, hi_open: bool = False, unit: str = "") -> str | None:
    """Why ``value`` is not a finite number in the range, or None when it is."""
    return out_of_range(value, lo, hi, lo_open=lo_open, hi_open=hi_open, unit=unit)


class Finite(_FloatType):
    """A finite float, optionally within ``[lo, hi]`` (open ends with ``lo_open``/``hi_open``)."""

    name = "number"

    def __init__(self, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool = False, hi_open: bool = False, unit: str = "",
                 nonfinite_ok: bool = False) -> None:
        self.lo, self.hi, self.lo_open, self.hi_open, self.unit = lo, hi, lo_open, hi_open, unit
        self.nonfinite_ok = nonfinite_ok  # NaN/inf pass (the verb decides, e.g. --allow-nonfinite)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float) and math.isfinite(value):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if self.nonfinite_ok and not math.isfinite(number):
            return number
        why = finite_in(number, self.lo, self.hi, lo_open=self.lo_open, hi_open=self.hi_open,
                        unit=self.unit)
        if why is not None:
            self.fail(why, param, ctx)
        return number

    def __repr__(self) -> str:
        return f"Finite({self.lo}, {self.hi})"


class Baud(_IntType):
    """A UART baud rate: an integer from 50 (the lowest POSIX rate) to 12 Mbaud.

    ``none`` (when given) is an extra value meaning "no line rate", e.g. -1
    for the simulation's unlimited link.
    """

    name = "baud"
    LO, HI = 50, 12_000_000

    def __init__(self, none: int | None = None) -> None:
        self.none = none

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if number == self.none:
            return number
        if not self.LO <= number <= self.HI:
            extra = f" (or {self.none} for none)" if self.none is not None else ""
            self.fail(f"{number} is not a baud rate: use {self.LO}..{self.HI}{extra}", param, ctx)
        return number


BAUD = Baud()
#: Frames per second a verb may send: at most 1 kHz (a 15-byte frame at 1 kHz is ~150 kbaud).
RATE = Finite(0, 1000, lo_open=True, unit="Hz")
#: Seconds a verb runs.
DURATION = Finite(0, TIMEOUT_MAX, lo_open=True, unit="s")
#: Seconds between repeats.
INTERVAL = Finite(0, 3600, unit="s")
#: A playback or simulation speed factor.
SPEED = Finite(0, 1000, lo_open=True)
#: A CAN bit rate in bit/s (classic CAN: up to 1 Mbit/s).
BITRATE = click.IntRange(1000, 1_000_000)
#: A value carried as an IEEE float32 on the wire (frames): finite and representable.
FLOAT32 = Finite(-3.4028234663852886e38, 3.4028234663852886e38)
#: As FLOAT32, but NaN and infinity pass to the verb (``encode --allow-nonfinite``).
WIRE_FLOAT = Finite(-3.4028234663852886e38, 3.4028234663852886e38, nonfinite_ok=True)


def velocity_limit_options(fn: Any) -> Any:
    """``--max-linear`` and ``--max-angular``: the limits of the ROS 2 cmd_vel path by
    default (:data:`fwbridge.bridge.node.numbers.MAX_LINEAR`), on every verb that
    commands a base."""
    fn = click.option("--max-angular", type=Finite(0, 1000, lo_open=True, unit="rad/s"),
                      default=MAX_ANGULAR, show_default=True, metavar="RAD_S",
                      help="Refuse a wz beyond this many rad/s either way.")(fn)
    return click.option("--max-linear", type=Finite(0, 1000, lo_open=True, unit="m/s"),
                        default=MAX_LINEAR, show_default=True, metavar="M_S",
                        help="Refuse a vx or vy beyond this many m/s either way.")(fn)


def velocity_refused(vx: float, vy: float, wz: float, max_linear: float,
                     max_angular: float, *, prefix: str = "") -> str | None:
    """Why the request (vx, vy, wz) is refused: the first field (``prefix`` + its name)
    that is not finite or beyond its limit, with the option that sets the limit; None
    when it may go. The rule is cmd_vel's (:func:`~fwbridge.bridge.node.numbers.velocity_error`)."""
    for name, value, limit, unit, option in (
            ("vx", vx, max_linear, "m/s", "--max-linear"),
            ("vy", vy, max_linear, "m/s", "--max-linear"),
            ("wz", wz, max_angular, "rad/s", "--max-angular")):
        why = velocity_error(prefix + name, value, limit)
        if why is not None:
            return why if not math.isfinite(value) else f"{why} {unit} ({option})"
    return None
