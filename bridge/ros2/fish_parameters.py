"""``~/set_config`` of the fish in ROS 2: SetParameters against the fish's configuration.

The pure part of :class:`~fwbridge.bridge.ros2.fish.Ros2Fish`'s ``~/set_config``
(no network, no fish): :func:`check_parameters` checks a request's parameters
(:data:`CONFIG_FIELDS`, integers; :data:`SCENES`, a string holding the JSON list
``fwbridge fish config get`` prints), all taken or none, one reason per
parameter; :func:`apply_plan` makes the changes on the configuration read from
the fish, saying what each was before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fwbridge.protocols.config_text import TextLimitError, parse_json
from fwbridge.protocols.errors import FrameError
from fwbridge.protocols.families.fish_commands import UserConfig

__all__ = ["CONFIG_FIELDS", "MAX_NAME", "MAX_PARAMETERS", "MAX_REASON", "MAX_STRING", "SCENES",
           "ParameterPlan", "apply_plan", "check_parameters"]

#: The integer fields ``~/set_config`` sets, with their ranges (UserConfig's checks).
CONFIG_FIELDS = {"free_period_ms": (10, 0xFFFF), "avoid_mm": (0, 0xFFFF),
                 "stored_probability_pct": (0, 100)}
#: The string parameter holding the scenes, as the JSON list ``fish config get`` prints.
SCENES = "scenes"
#: Parameters one ``~/set_config`` request may hold (the configuration has four fields).
MAX_PARAMETERS = 8
#: Characters of a parameter name quoted back in a reason; of a scenes string taken.
MAX_NAME = 64
MAX_STRING = 8192
#: Characters of a reason (an error of the link quoted in it is cut there).
MAX_REASON = 300


@dataclass(frozen=True)
class ParameterPlan:
    """What a ``~/set_config`` request asks: the checked changes (field -> value), or
    None when any parameter was refused; one (successful, reason) per parameter."""

    changes: dict[str, Any] | None
    results: list[tuple[bool, str]]


def _quoted(name: str) -> str:
    return repr(name[:MAX_NAME] + ("…" if len(name) > MAX_NAME else ""))


def _check_one(name: str, value: object) -> tuple[Any, str | None]:
    """(the field's new value, None) or (None, why it is refused)."""
    if name in CONFIG_FIELDS:
        lo, hi = CONFIG_FIELDS[name]
        if not isinstance(value, int) or isinstance(value, bool):
            given = ("a double" if isinstance(value, float) else "a bool"
                     if isinstance(value, bool) else "a string" if isinstance(value, str)
                     else "not an integer")
            return None, f"{name} must be an integer (ParameterValue type 2), got {given}"
        if not lo <= value <= hi:
            return None, f"{name} must be {lo} to {hi}, got {value}: unchanged"
        return value, None
    if name == SCENES:
        return _check_scenes(value)
    known = ", ".join([*CONFIG_FIELDS, SCENES])
    return None, f"unknown parameter {_quoted(name)} (this service sets {known})"


def _check_scenes(value: object) -> tuple[Any, str | None]:
    """(the scenes the string holds, None) or (None, why it is refused)."""
    if not isinstance(value, str):
        return None, ("scenes must be a string (ParameterValue type 4) holding the JSON "
                      "list 'fwbridge fish config get' prints")
    if len(value) > MAX_STRING:
        return None, f"scenes: {len(value)} characters, at most {MAX_STRING}"
    try:
        parsed = parse_json(value, "scenes")  # nesting bounded: no RecursionError
    except TextLimitError as exc:
        return None, f"scenes: {exc.reason}"
    except json.JSONDecodeError as exc:
        return None, f"scenes: not JSON: {exc.msg} at character {exc.pos}"
    if not isinstance(parsed, list):
        return None, "scenes: must be a JSON list of scenes"
    try:
        return UserConfig.from_dict({SCENES: parsed}).scenes, None
    except FrameError as exc:
        return None, f"scenes: {exc}"


def check_parameters(params: Sequence[tuple[str, object]]) -> ParameterPlan:
    """Check every parameter of a request on its own (no fish needed): all are taken,
    or none is (each refused one with its reason, the others naming them)."""
    if len(params) > MAX_PARAMETERS:
        why = f"at most {MAX_PARAMETERS} parameters in one request, got {len(params)}"
        return ParameterPlan(None, [(False, why)] * len(params))
    changes: dict[str, Any] = {}
    refused: dict[int, str] = {}
    for k, (name, value) in enumerate(params):
        if name in changes:
            refused[k] = f"{_quoted(name)} is given twice in the request"
            continue
        new, refusal = _check_one(name, value)
        if refusal is not None:
            refused[k] = refusal[:MAX_REASON]
        else:
            changes[name] = new
    if not refused:
        return ParameterPlan(changes, [(True, "") for _ in params])
    names = ", ".join(sorted({_quoted(params[k][0]) for k in refused}))
    results = [(False, refused[k]) if k in refused else
               (False, f"not written: {names} refused in the same request")
               for k in range(len(params))]
    return ParameterPlan(None, results)


def _shown(field: str, value: Any) -> str:
    return f"{len(value)} scenes" if field == SCENES else str(value)


def apply_plan(cfg: UserConfig, params: Sequence[tuple[str, object]],
               changes: dict[str, Any]) -> tuple[UserConfig, list[tuple[bool, str]]]:
    """The configuration with ``changes`` made, and the reason of each parameter
    (``avoid_mm 800 (was 600)``)."""
    new = replace(cfg, **changes)
    new.pack()  # the range checks of writing (already met: a bug if not)
    reasons = [(True, f"{name} {_shown(name, getattr(new, name))} "
                      f"(was {_shown(name, getattr(cfg, name))})") for name, _ in params]
    return new, reasons
