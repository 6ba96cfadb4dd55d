"""The ``[arm]`` table of a robot TOML file: link lengths, limits, the task's heights.

::

    [arm]
    l1 = 0.55            # m; the seed's prose says 0.6, its code 0.55: the file decides
    l2 = 0.4             # m
    limit1 = 2.967       # rad, |theta1|
    limit2 = 2.967       # rad, |theta2|
    z_min = 0.10         # m, slide range: the seed's 150 mm stroke
    z_max = 0.25
    safe_z = 0.25        # m, XY moves only at or above this height
    home = [0.4, 0.0]    # m, where the tool waits
    joint_tolerance = 0.015  # rad / m, feedback to waypoint joints (the seed's); 0: off
    tolerance = 0.001    # m, feedback to waypoint (Cartesian), when joint_tolerance = 0
    ramp = true          # the seed's ramp speeds (0.8 / 1.0 rad/s, 0.4 m/s); false: motor tops

The values before the seed's were adopted: ``z_min = 0.0``, ``z_max = 0.4``,
``safe_z = 0.35``, ``joint_tolerance = 0``, ``ramp = false``.

Unknown keys are errors naming the key, as in the rest of the file.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from fwbridge.bridge.node.numbers import out_of_range
from fwbridge.bridge.robots.arm.kinematics import ArmConfigError, ScaraGeometry
from fwbridge.bridge.robots.arm.motion import RampSpeeds
from fwbridge.bridge.robots.arm.pick_place import PickPlaceConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


_GEOMETRY = ("l1", "l2", "limit1", "limit2", "z_min", "z_max")
_TASK = ("safe_z", "tolerance", "joint_tolerance")
#: key -> (low, high, low excluded, unit). The joint limits stop short of a half turn
#: each way (at most pi): the IK's angles are in (-pi, pi] and the joints never wrap.
_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "l1": (0.0, 10.0, True, "m"), "l2": (0.0, 10.0, True, "m"),
    "limit1": (0.0, math.pi, True, "rad"), "limit2": (0.0, math.pi, True, "rad"),
    "z_min": (-10.0, 10.0, False, "m"), "z_max": (-10.0, 10.0, False, "m"),
    "safe_z": (-10.0, 10.0, False, "m"), "tolerance": (0.0, 0.1, True, "m"),
    "joint_tolerance": (0.0, 0.5, False, "rad or m"),  # 0: the 1 mm tolerance instead
}


__all__ = ["ArmConfigError", "load_arm_config", "parse_arm"]


def parse_arm(table: dict[str, Any], source: str = "<config>"
              ) -> tuple[ScaraGeometry, PickPlaceConfig]:
    geom_kw: dict[str, float] = {}
    task_kw: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{source}: arm.{key}"
        if key == "home":
            if (not isinstance(value, list) or len(value) != 2
                    or not all(_is_number(v) for v in value)):
                raise ArmConfigError(f"{where}: must be [x, y] in m, got {value!r}")
            task_kw["home"] = (float(value[0]), float(value[1]))
            continue
        if key == "ramp":
            if not isinstance(value, bool):
                raise ArmConfigError(f"{where}: must be true or false, got {value!r}")
            task_kw["ramp"] = RampSpeeds() if value else None
            continue
        if key not in _GEOMETRY + _TASK:
            known = ", ".join(sorted((*_GEOMETRY, *_TASK, "home", "ramp")))
            raise ArmConfigError(f"{where}: unknown key (known: {known})")
        if not _is_number(value):
            raise ArmConfigError(f"{where}: must be a number, got {value!r}")
        lo, hi, lo_open, unit = _RANGES[key]
        why = out_of_range(float(value), lo, hi, lo_open=lo_open, unit=unit)
        if why is not None:
            raise ArmConfigError(f"{where}: {why}")
        (geom_kw if key in _GEOMETRY else task_kw)[key] = float(value)
    if task_kw.get("joint_tolerance") == 0.0:
        task_kw["joint_tolerance"] = None
    try:
        geom = ScaraGeometry(**geom_kw)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ArmConfigError(f"{source}: arm: {exc}") from None
    return geom, replace(PickPlaceConfig(), **task_kw)


def load_arm_config(path: Path) -> tuple[ScaraGeometry, PickPlaceConfig]:
    """The arm's geometry and task settings from a robot file (defaults without ``[arm]``)."""
    from fwbridge.protocols.config_text import TextLimitError, parse_toml, read_limited

    try:
        with path.open("rb") as fh:  # bounded bytes and nesting: one error line
            data = parse_toml(read_limited(fh.read, str(path)).decode("utf-8"), str(path))
    except TextLimitError as exc:
        raise ArmConfigError(str(exc)) from None
    except FileNotFoundError:
        raise ArmConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArmConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ArmConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("arm", {})
    if not isinstance(table, dict):
        raise ArmConfigError(f"{path}: arm must be a table")
    return parse_arm(table, str(path))


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
