"""The base node's settings as ROS 2 parameters (:mod:`~fwbridge.bridge.ros2.parameters`).

``watchdog_timeout`` (the watchdog's ``cmd_timeout``, s, within
:data:`WATCHDOG_RANGE`), ``max_linear_speed`` and ``max_angular_speed`` (the
cmd_vel limits, at most :data:`~fwbridge.bridge.node.numbers.MAX_LINEAR` and
:data:`~fwbridge.bridge.node.numbers.MAX_ANGULAR`: only tightened at run time)
change the running node; the settings read at start (``rate_hz``, ``watchdog``,
``garbage_timeout``, ``link_url``, ``frame_prefix``) are read-only. ``~/set_watchdog``
sets ``watchdog_timeout`` only, through the same table
(:meth:`~fwbridge.bridge.ros2.parameters.ParameterServer.setter`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR
from fwbridge.bridge.node.sinks import NodeHandle
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.parameters import Parameter
from fwbridge.bridge.ros2.services import PARAMETER_BOOL, PARAMETER_DOUBLE, PARAMETER_STRING
from fwbridge.bridge.ros2.topic_ends import RosSubscription

__all__ = ["MAX_PARAMETERS", "WATCHDOG_PARAMETER", "WATCHDOG_RANGE", "BaseLike",
           "base_parameters"]

#: The parameter ``~/set_watchdog`` sets: the watchdog's cmd_timeout, a double in seconds.
WATCHDOG_PARAMETER = "watchdog_timeout"
#: What ``watchdog_timeout`` accepts (s): shorter trips between the commands of an
#: operator at 10 Hz on a busy network; longer lets a base run on blind for too long.
WATCHDOG_RANGE = (0.05, 5.0)
#: Parameters one ``~/set_watchdog`` request may hold; more are refused unread.
MAX_PARAMETERS = 16

_AT_START = "the robot file's, read when the node starts"


class BaseLike(Protocol):
    """What the parameters read and change of the base node in ROS 2 (a
    :class:`~fwbridge.bridge.ros2.base.Ros2Base`, which makes them)."""

    max_linear: float
    max_angular: float

    @property
    def node(self) -> NodeHandle: ...
    @property
    def settings(self) -> Ros2Settings: ...
    @property
    def cmd_sub(self) -> RosSubscription: ...


def base_parameters(base: BaseLike) -> list[Parameter]:
    """The parameters of ``base`` (started: its ``cmd_vel`` subscription made)."""
    config, s = base.node.config, base.settings

    def watchdog(value: float) -> str:
        old = base.node.config.cmd_timeout
        base.node.set_cmd_timeout(value)
        base.cmd_sub.set_max_age(value)  # a cmd_vel older than the watchdog's timeout is stale
        return f"{WATCHDOG_PARAMETER} {value:g} s (was {old:g} s)"

    def limit(attr: str, name: str, unit: str) -> Callable[[float], str]:
        def apply(value: float) -> str:
            old = getattr(base, attr)
            setattr(base, attr, value)
            return f"{name} {value:g} {unit} (was {old:g} {unit})"
        return apply

    lo, hi = WATCHDOG_RANGE
    return [
        Parameter(WATCHDOG_PARAMETER, PARAMETER_DOUBLE,
                  "the watchdog's cmd_timeout (s): zero velocity this long after the "
                  "last cmd_vel", lambda: base.node.config.cmd_timeout, watchdog,
                  lo, hi, " s"),
        Parameter("max_linear_speed", PARAMETER_DOUBLE,
                  "cmd_vel's |linear.x|, |linear.y| beyond this (m/s) are refused",
                  lambda: base.max_linear, limit("max_linear", "max_linear_speed", "m/s"),
                  0.0, MAX_LINEAR, " m/s"),
        Parameter("max_angular_speed", PARAMETER_DOUBLE,
                  "cmd_vel's |angular.z| beyond this (rad/s) is refused",
                  lambda: base.max_angular, limit("max_angular", "max_angular_speed", "rad/s"),
                  0.0, MAX_ANGULAR, " rad/s"),
        Parameter("rate_hz", PARAMETER_DOUBLE, "command frames a second on the link",
                  lambda: config.rate_hz, read_only_why=_AT_START),
        Parameter("watchdog", PARAMETER_BOOL, "the watchdog zeroes a stale command",
                  lambda: config.watchdog, read_only_why=_AT_START),
        Parameter("garbage_timeout", PARAMETER_DOUBLE,
                  "seconds of bytes without a frame before the link is reported",
                  lambda: config.garbage_timeout, read_only_why=_AT_START),
        Parameter("link_url", PARAMETER_STRING, "the serial link the node opened",
                  lambda: config.link_url, read_only_why=_AT_START),
        Parameter("frame_prefix", PARAMETER_STRING, "the prefix of the TF frames",
                  lambda: s.frame_prefix, read_only_why=_AT_START),
    ]
