"""The robot config file (TOML): which link, which protocol, what rates, real or simulated.

::

    use_sim = false                # true: open sim.url instead of link.url; nothing else changes
    calibration = "calib.json"     # optional, relative to this file; $VARS and ~ expand

    [link]
    url = "/dev/ttyUSB0"           # device path or an allowed URL (socket://, rfc2217://, loop://)
    baud = 115200
    protocol = "odom-cmd"          # seed-002 frames: odometry in, velocity commands out
    frames_in = ["imu.toml"]       # more descriptions the firmware sends on the same link:
                                   # built-in names or TOML files, relative to this file
    exclusive = true               # lock the device against a second program

    [sim]
    url = "sim://mecanum"          # sim://MODEL: a built-in model or one a package provides
                                   # through the fwbridge.sim_models entry-point group

    [control]
    rate_hz = 100                  # command frames per second

    [watchdog]
    enabled = true
    cmd_timeout = 0.5              # s without a velocity request -> zero velocity
    garbage_timeout = 3.0          # s of bytes with no valid frame -> "wrong baud rate?" (0: off)

    [reconnect]
    min_delay = 0.1                # s, doubled after each failed attempt ...
    max_delay = 2.0                # ... up to this
    attempts = 0                   # 0: keep trying while the node runs

Every key is optional except ``link.url`` (or ``sim.url`` with
``use_sim = true``). Unknown keys are errors, so a typo cannot silently
leave a default in place. A config names links and numbers, never a file to
write or a module to import: URL schemes are checked against the allow-list
of :mod:`~fwbridge.bridge.link.link_urls` (no ``spy://``), and every number is
finite and within the range its key documents.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from fwbridge.bridge.link.link_urls import UnsafeURLError, check_link_url
from fwbridge.bridge.node.numbers import out_of_range
from fwbridge.protocols.config_text import parse_json, parse_toml, read_limited
from fwbridge.protocols.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["PROTOCOLS", "ConfigError", "RobotConfig", "load_config", "parse_config"]

#: Link protocols a node can run: name -> what flows each way.
PROTOCOLS = {"odom-cmd": "odometry frames in, velocity-command frames out (seed 002)"}


@dataclass(frozen=True)
class RobotConfig:
    """A parsed robot config; :attr:`link_url` is what a node opens."""

    url: str | None = None
    baud: int = 115200
    protocol: str = "odom-cmd"
    exclusive: bool = True
    use_sim: bool = False
    sim_url: str | None = None
    rate_hz: float = 100.0
    watchdog: bool = True
    cmd_timeout: float = 0.5
    garbage_timeout: float = 3.0
    reconnect_min_delay: float = 0.1
    reconnect_max_delay: float = 2.0
    reconnect_attempts: int = 0
    calibration: Path | None = None
    frames_in: tuple[str, ...] = ()
    source: str = "<config>"

    @property
    def link_url(self) -> str:
        """The URL to open: ``sim_url`` when ``use_sim``, else ``url``."""
        url = self.sim_url if self.use_sim else self.url
        if url is None:  # parse_config guarantees this; a hand-built config may not
            key = "sim.url" if self.use_sim else "link.url"
            raise ConfigError(f"{self.source}: {key} is required")
        return url

    @property
    def period(self) -> float:
        return 1.0 / self.rate_hz

    def with_sim(self, use_sim: bool) -> RobotConfig:
        """The same config with ``use_sim`` switched (checked like the file)."""
        if use_sim and self.sim_url is None:
            raise ConfigError(f"{self.source}: use_sim = true needs sim.url")
        if not use_sim and self.url is None:
            raise ConfigError(f"{self.source}: link.url is required (the port to open)")
        return replace(self, use_sim=use_sim)


# -- validation -----------------------------------------------------------------
def _number(lo: float, hi: float, *, lo_open: bool = False, integer: bool = False,
            unit: str = "") -> Callable[[str, Any], Any]:
    """A finite number (or integer) in ``lo..hi`` (``lo`` excluded when ``lo_open``)."""

    def check(key: str, value: Any) -> Any:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if integer and not isinstance(value, int):
            ok = False
        if not ok:
            kind = "an integer" if integer else "a number"
            raise _Bad(key, f"must be {kind}, got {value!r}")
        why = out_of_range(value, lo, hi, lo_open=lo_open, unit=unit)
        if why is not None:
            raise _Bad(key, why)
        return int(value) if integer else float(value)

    return check


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad(key, f"must be true or false, got {value!r}")
    return value


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(key, f"must be a non-empty string, got {value!r}")
    return os.path.expanduser(os.path.expandvars(value.strip()))


def _url(key: str, value: Any) -> str:
    url = _text(key, value)
    try:
        check_link_url(url)
    except UnsafeURLError as exc:
        raise _Bad(key, str(exc)) from None
    return url


def _removed(reason: str) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        raise _Bad(key, reason)

    return check


#: Descriptions a robot file may add to its link's protocol.
MAX_FRAMES_IN = 16


def _frames(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _Bad(key, f"must be a list of description names or files, got {value!r}")
    if len(value) > MAX_FRAMES_IN:
        raise _Bad(key, f"at most {MAX_FRAMES_IN} descriptions, got {len(value)}")
    return tuple(os.path.expanduser(os.path.expandvars(v.strip())) for v in value)


def _protocol(key: str, value: Any) -> str:
    if value not in PROTOCOLS:
        raise _Bad(key, f"unknown protocol {value!r} (known: {', '.join(sorted(PROTOCOLS))})")
    return str(value)


class _Bad(ConfigError):  # a key and a reason; parse_config adds the file
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")


# (section, key) -> (RobotConfig field, checker)
_SCHEMA: dict[tuple[str, str], tuple[str, Callable[[str, Any], Any]]] = {
    ("", "use_sim"): ("use_sim", _boolean),
    ("", "calibration"): ("calibration", _text),
    ("link", "url"): ("url", _url),
    ("link", "baud"): ("baud", _number(50, 12_000_000, integer=True, unit="baud")),
    ("link", "protocol"): ("protocol", _protocol),
    ("link", "exclusive"): ("exclusive", _boolean),
    ("link", "frames_in"): ("frames_in", _frames),
    ("sim", "url"): ("sim_url", _url),
    ("sim", "handler_package"): ("", _removed(
        "no longer accepted: a config names a model (sim.url = \"sim://MODEL\"), never a module;"
        " packages provide models through the fwbridge.sim_models entry-point group")),
    ("control", "rate_hz"): ("rate_hz", _number(0, 1000, lo_open=True, unit="Hz")),
    ("watchdog", "enabled"): ("watchdog", _boolean),
    ("watchdog", "cmd_timeout"): ("cmd_timeout", _number(0, 60, lo_open=True, unit="s")),
    ("watchdog", "garbage_timeout"): ("garbage_timeout", _number(0, 3600, unit="s")),
    ("reconnect", "min_delay"): ("reconnect_min_delay", _number(0, 60, lo_open=True, unit="s")),
    ("reconnect", "max_delay"): ("reconnect_max_delay", _number(0, 3600, lo_open=True,
                                                                unit="s")),
    ("reconnect", "attempts"): ("reconnect_attempts", _number(0, 1_000_000, integer=True)),
}
_SECTIONS = sorted({s for s, _ in _SCHEMA if s})
#: Tables of the same file read by other loaders (``[arm]``: bridge.robots.arm.config;
#: ``[ros2]``: bridge.ros2.config).
_OTHER_SECTIONS = ("arm", "ros2")


def parse_config(
    data: Mapping[str, Any], *, source: str = "<config>", base: Path | None = None
) -> RobotConfig:
    """A :class:`RobotConfig` from parsed TOML; relative paths are taken from ``base``."""
    values: dict[str, Any] = {}
    try:
        for name, item in data.items():
            if isinstance(item, dict) and name in _SECTIONS:
                for key, value in item.items():
                    _take(values, name, key, value)
            elif isinstance(item, dict) and name in _OTHER_SECTIONS:
                continue
            elif isinstance(item, dict):
                known = ", ".join(sorted((*_SECTIONS, *_OTHER_SECTIONS)))
                raise _Bad(name, f"unknown section (known: {known})")
            else:
                _take(values, "", name, item)
    except _Bad as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if values.get("calibration") is not None:
        path = Path(values["calibration"])
        values["calibration"] = path if path.is_absolute() or base is None else base / path
    if values.get("frames_in"):
        values["frames_in"] = _frame_files(values["frames_in"], base, source)
    cfg = RobotConfig(**values, source=source)
    if cfg.reconnect_min_delay > cfg.reconnect_max_delay:
        raise ConfigError(f"{source}: reconnect.min_delay must not exceed reconnect.max_delay")
    return cfg.with_sim(cfg.use_sim)  # checks that the chosen URL is there


def _frame_files(names: tuple[str, ...], base: Path | None, source: str) -> tuple[str, ...]:
    """Each of ``link.frames_in``: a built-in name as it is, a file from ``base``; each read
    and checked now (one error naming the file), none twice and none the protocol's own."""
    from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES
    from fwbridge.protocols.descriptions.loader import load

    out: list[str] = []
    seen = {"odom"}  # the odom-cmd protocol's own description in
    for name in names:
        if name in BUILTIN_NAMES:
            desc_name, ref = name, name
        else:
            path = Path(name)
            path = path if path.is_absolute() or base is None else base / path
            desc_name, ref = load(path).name, str(path)
        if desc_name in seen:
            raise ConfigError(f"{source}: link.frames_in: {desc_name!r} flows in twice")
        seen.add(desc_name)
        out.append(ref)
    return tuple(out)


def _take(values: dict[str, Any], section: str, key: str, value: Any) -> None:
    full = f"{section}.{key}" if section else key
    try:
        attr, check = _SCHEMA[(section, key)]
    except KeyError:
        known = sorted(k for s, k in _SCHEMA if s == section)
        raise _Bad(full, f"unknown key (known here: {', '.join(known)})") from None
    values[attr] = check(full, value)


def load_config(path: str | os.PathLike[str], *, use_sim: bool | None = None) -> RobotConfig:
    """Read a robot config file; ``use_sim`` overrides the file's setting."""
    p = Path(path)
    try:
        with p.open("rb") as fh:  # a robot file is small: /dev/zero is not read to its end
            raw = read_limited(fh.read, str(p))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a config file") from None
    except PermissionError:
        raise ConfigError(f"{p}: permission denied") from None
    try:
        data = parse_toml(raw.decode("utf-8"), str(p))  # nesting bounded: one error line
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file (expected TOML)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from None
    cfg = parse_config(data, source=str(p), base=p.resolve().parent)
    return cfg if use_sim is None else cfg.with_sim(use_sim)


# -- calibration ------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    """Corrections for a mobile base's odometry, from a JSON calibration file.

    Scales multiply the firmware's velocities; ``yaw_offset_deg`` is added to
    its yaw (an IMU mounted turned). Keys left out keep these defaults.
    """

    vx_scale: float = 1.0
    vy_scale: float = 1.0
    wz_scale: float = 1.0
    yaw_offset_deg: float = 0.0

    @property
    def identity(self) -> bool:
        return self == Calibration()


def load_calibration(path: str | Path) -> Calibration:
    """A :class:`Calibration` from a JSON object file; errors name the file and key."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = parse_json(read_limited(fh.read, str(p)).decode("utf-8"), str(p))
    except FileNotFoundError:
        raise ConfigError(f"calibration file not found: {p} (fix the calibration path)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"calibration file {p}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"calibration file {p}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"calibration file {p}: expected a JSON object of numbers")
    known = {f.name for f in fields(Calibration)}
    values: dict[str, float] = {}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(
                f"calibration file {p}: unknown key {key!r} (known: {', '.join(sorted(known))})"
            )
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            raise ConfigError(f"calibration file {p}: {key}: must be a finite number")
        values[key] = float(value)
    return Calibration(**values)
