"""``--bus-kwarg KEY=VALUE``: only keywords the bus knows, with values in range.

python-can hands unknown keywords to the bus, which mostly ignores them: a
typo silently left a default in place. For the ``fwbridge`` interface every
keyword has a type and a range here; for other interfaces a keyword must be
a named parameter of the bus class (or one python-can itself takes), and
numbers must be finite.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any

from fwbridge.protocols.errors import ConfigError

__all__ = ["BusKwargError", "check_bus_kwargs"]

#: Keywords python-can's Bus() handles itself, whatever the interface.
_COMMON = frozenset({"bitrate", "data_bitrate", "fd", "can_filters", "receive_own_messages",
                     "timing", "state"})
_INT_LIMIT = 2**31


class BusKwargError(ConfigError):
    """A ``--bus-kwarg`` the chosen bus does not take, or a value out of range."""


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "yes", "on"):
        return True
    if text in ("0", "no", "off"):
        return False
    raise BusKwargError(f"{key} must be true or false, not {value!r}")


def _int(lo: int, hi: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        try:
            number = value if isinstance(value, int) and not isinstance(value, bool) \
                else int(str(value), 0)
        except ValueError:
            raise BusKwargError(f"{key} must be a whole number, not {value!r}") from None
        if not lo <= number <= hi:
            raise BusKwargError(f"{key} must be in {lo}..{hi}, not {number}")
        return number

    return check


def _float(lo: float, hi: float) -> Callable[[str, Any], float]:
    def check(key: str, value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise BusKwargError(f"{key} must be a number, not {value!r}") from None
        if not math.isfinite(number) or not lo <= number <= hi:
            raise BusKwargError(f"{key} must be a finite number in {lo:g}..{hi:g}, not {value}")
        return number

    return check


def _choice(*names: str) -> Callable[[str, Any], str]:
    def check(key: str, value: Any) -> str:
        text = str(value).lower()
        if text not in names:
            raise BusKwargError(f"{key} must be one of {', '.join(names)}, not {value!r}")
        return text

    return check


def _text(key: str, value: Any) -> str:
    return str(value)


def _output(key: str, value: Any) -> str:
    """A capture file the bus writes: a new path only (no --force here; a link, even a
    dangling one, counts as there: it is never written through)."""
    import os

    from fwbridge.bridge.record.safe_output import OutputError, check_writable

    if os.path.lexists(str(value)):
        what = "a symbolic link" if os.path.islink(str(value)) else "a file"
        raise BusKwargError(f"{key}={value}: exists already ({what}); the bus's capture is "
                            "always a new file: give a new name")
    try:
        check_writable(str(value), replace=False)
    except OutputError as exc:
        raise BusKwargError(f"{key}={exc}") from None
    return str(value)


#: The fwbridge simulator's keywords (see can_bus.interface.FwBridgeBus).
FWBRIDGE: dict[str, Callable[[str, Any], Any]] = {
    "pacing": _choice("realtime", "afap"),
    "receive_own_messages": _bool, "receive_error_frames": _bool, "listen_only": _bool,
    "auto_recovery": _bool, "stuck_dominant": _bool, "disconnected": _bool, "fd": _bool,
    "tx_queue_size": _int(1, 65_536),
    "rx_queue_size": _int(0, 1_000_000),
    "tx_order": _choice("priority", "fifo"),
    "bit_error_rate": _float(0.0, 1.0),
    "fault_seed": _int(0, 2**63 - 1), "seed": _int(0, 2**63 - 1),
    "epoch": _float(0.0, 1e12),
    "dominant_timeout": _float(1e-6, 10.0),
    "capture": _output, "name": _text,
}

#: Keywords that are gone, and what replaces them.
GONE = {"modules": "the bus starts no simulated modules: use --modules N or 'fwbridge can sim N'",
        "local": "a channel is this process's own bus unless it is shared:NAME"}


def _named_parameters(interface: str) -> set[str] | None:
    """The named parameters of ``interface``'s bus class; None when it cannot be loaded."""
    try:
        from can.interfaces import BACKENDS

        module, cls_name = BACKENDS[interface]
        cls = getattr(importlib.import_module(module), cls_name)
        params = inspect.signature(cls.__init__).parameters.values()
    except Exception:  # unknown or not installed: can.Bus() reports that itself
        return None
    kinds = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    return {p.name for p in params if p.kind not in kinds} - {"self", "channel"}


def _generic(key: str, value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise BusKwargError(f"{key} must be finite, not {value}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_LIMIT:
        raise BusKwargError(f"{key} = {value} is out of range")
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "+inf",
                                                            "infinity", "-infinity"):
        raise BusKwargError(f"{key} must be finite, not {value}")
    return value


def check_bus_kwargs(interface: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` checked for ``interface`` (converted to their types for fwbridge)."""
    if interface == "fwbridge":
        known: dict[str, Callable[[str, Any], Any]] = FWBRIDGE
    else:
        names = _named_parameters(interface)
        if names is None:
            return {k: _generic(k, v) for k, v in kwargs.items()}
        known = dict.fromkeys(names | _COMMON, _generic)
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if interface == "fwbridge" and key in GONE:
            raise BusKwargError(f"--bus-kwarg {key}: {GONE[key]}")
        check = known.get(key)
        if check is None:
            raise BusKwargError(
                f"--bus-kwarg {key}: the {interface} bus has no such keyword "
                f"(known: {', '.join(sorted(known))})")
        try:
            out[key] = check(key, value)
        except BusKwargError as exc:
            raise BusKwargError(f"--bus-kwarg {exc}") from None
    return out
