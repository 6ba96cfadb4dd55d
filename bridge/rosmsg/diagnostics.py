"""The health of the bridge's devices as ``diagnostic_msgs``: one status builder per device.

Every ``/diagnostics`` status the bridge publishes or records is made here:
the base node's (:func:`node_status`, the ROS 2 base node and the MCAP
recorder alike), the CAN modules' (:func:`module_health_statuses`) and the
robot fish's (:func:`fish_status`); :func:`diagnostics_message` gathers them
in one ``DiagnosticArray``::

    from fwbridge.bridge.rosmsg import diagnostics

    status = diagnostics.node_status("fwbridge /dev/ttyACM0", stats, connected=True)
    msg = diagnostics.diagnostics_message([status], stamp=time.time())
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fwbridge.bridge.rosmsg.cdr import message_class, typestore
from fwbridge.bridge.rosmsg.topics import header

if TYPE_CHECKING:
    from fwbridge.protocols.families.fish_commands import StatusInfo

__all__ = ["LEVELS", "diagnostic_status", "diagnostics_message", "fish_status",
           "module_health_statuses", "node_status"]

#: diagnostic_msgs/DiagnosticStatus levels.
LEVELS = {"ok": 0, "warn": 1, "error": 2, "stale": 3}


def diagnostic_status(name: str, level: str, message: str, values: Mapping[str, object],
                      *, hardware_id: str = "", distro: str = "jazzy") -> Any:
    """One diagnostic_msgs/DiagnosticStatus; ``level`` is ok, warn, error or stale."""
    t = typestore(distro).types
    kv = t["diagnostic_msgs/msg/KeyValue"]
    return t["diagnostic_msgs/msg/DiagnosticStatus"](
        level=LEVELS[level], name=name, message=message, hardware_id=hardware_id,
        values=[kv(key=str(k), value=str(v)) for k, v in values.items()])


def diagnostics_message(statuses: Iterable[Any], *, stamp: float, distro: str = "jazzy") -> Any:
    """diagnostic_msgs/DiagnosticArray of ``statuses``."""
    return message_class("diagnostic_msgs/msg/DiagnosticArray", distro)(
        header=header(stamp, "", distro), status=list(statuses))


def node_status(name: str, stats: Mapping[str, int], *, connected: bool,
                holding: bool = False, hardware_id: str = "", distro: str = "jazzy") -> Any:
    """The base node's health: ``stats`` (receiver counters, watchdog trips,
    reconnects…) as key-values; error while the link is down, warn while the
    watchdog ``holding`` the base at zero or frames fail their checksum, else ok."""
    if not connected:
        level, message = "error", "link down, reconnecting"
    elif holding:
        level, message = "warn", "no velocity request: watchdog holds zero velocity"
    elif stats.get("checksum_errors", 0):
        level, message = "warn", f"{stats['checksum_errors']} checksum errors so far"
    else:
        level, message = "ok", "link up"
    values: dict[str, object] = dict(stats)
    values["link"] = "up" if connected else "down"
    return diagnostic_status(name, level, message, values, hardware_id=hardware_id,
                             distro=distro)


def module_health_statuses(rows: Iterable[Mapping[str, Any]], *, prefix: str = "can module",
                           distro: str = "jazzy") -> list[Any]:
    """One status per CAN module from ``MainController.report()`` rows (ok, degraded ->
    warn, silent -> error, unknown -> stale)."""
    level_of = {"ok": "ok", "degraded": "warn", "silent": "error", "unknown": "stale"}
    out = []
    for row in rows:
        status = str(row.get("status", "unknown"))
        module = row.get("module")
        values = {k: ("" if v is None else v) for k, v in row.items()}
        out.append(diagnostic_status(f"{prefix} {module}", level_of.get(status, "stale"), status,
                                     values, hardware_id=f"can:{module}", distro=distro))
    return out


def fish_status(name: str, status: StatusInfo | None, *, link_up: bool | None,
                age: float | None, error: str, values: dict[str, object],
                hardware_id: str = "", distro: str = "jazzy") -> Any:
    """The fish's DiagnosticStatus: its last status's fields, the link, the age of that
    status and ``values`` (counters) as key-values, at the level :func:`_fish_level` gives."""
    fields: dict[str, object] = {}
    if status is not None:
        fields.update({k: (" ".join(map(str, v)) if isinstance(v, list) else v)
                       for k, v in status.as_dict().items()})
    fields["link"] = {True: "up", False: "down", None: "unknown"}[link_up]
    fields["status_age_s"] = "" if age is None else f"{age:.1f}"
    fields.update(values)
    level, message = _fish_level(status, link_up=link_up, age=age, error=error)
    return diagnostic_status(name, level, message, fields, hardware_id=hardware_id,
                             distro=distro)


#: What an ok fish says of its mode.
_FISH_MODES = {"idle": "idle", "free": "free swimming", "still": "standing still"}


def _fish_level(status: StatusInfo | None, *, link_up: bool | None, age: float | None,
                error: str) -> tuple[str, str]:
    """Error ``link lost`` when the last exchange went unanswered, stale before any
    answer, warn with error records or CAN flash mode, else ok with the mode."""
    # imported here: the base node and the recorders, which import this module, need
    # nothing of the fish's commands (and their crcmod)
    from fwbridge.protocols.families.fish_commands import FishMode

    if link_up is False:
        since = "" if age is None else f" for {age:.1f} s"
        return "error", f"link lost: no answer{since} ({error[:120]})"
    if status is None:
        return "stale", "no answer from the fish yet"
    if status.mode == FishMode.CAN_FLASH or status.flashing_modules:
        return "warn", "CAN flash mode: no servo commands"
    if status.errors:
        return "warn", f"{status.errors} error records (fwbridge fish errors)"
    mode = (FishMode(status.mode).name.lower() if status.mode in FishMode._value2member_map_
            else str(status.mode))
    return "ok", _FISH_MODES.get(mode, mode)
