"""A node's parameters in ROS 2, as rclcpp serves them: ``ros2 param list|get|set|describe``.

:class:`ParameterTable` is the sans-I/O part: the node's settings as typed
parameters (:class:`Parameter`: a name, a type, a description, how to read it and,
when it may change at run time, how to check and apply a new value), and the
rules rclcpp's parameter services follow. :class:`ParameterServer` puts it on a
:class:`~fwbridge.bridge.ros2.participant.RosNode`, with rmw_zenoh's conventions
(the services' queryables, ``SS`` tokens and RIHS01 hashes of
:mod:`fwbridge.bridge.ros2.services`):

- ``~/list_parameters``, ``~/get_parameters``, ``~/get_parameter_types``,
  ``~/describe_parameters`` (``rcl_interfaces/srv/…``): a request naming a
  parameter the node does not have gets an empty answer, as rclcpp's does;
- ``~/set_parameters``: each parameter on its own, in order, one
  ``SetParametersResult`` each; ``~/set_parameters_atomically``: all or none, one
  result. A value of another type, out of range, not finite, or for a read-only
  parameter (a setting read when the node starts) is refused with
  ``successful: false`` and the reason, and changes nothing;
- ``/parameter_events`` (``rcl_interfaces/msg/ParameterEvent``, reliable, volatile,
  keep last 1000 as ``rmw_qos_profile_parameter_events``): the node's parameters
  as ``new_parameters`` once at start (:meth:`ParameterServer.announce`), then one
  event per accepted change with the new values as ``changed_parameters``;
- a ``SetParameters`` service of the node's own for some of its parameters (the base's
  ``~/set_watchdog``): :meth:`ParameterServer.setter`, the same checks, events and
  counts.

Requests are untrusted: at most :data:`MAX_NAMES` names or parameters in one
(more are refused whole), names quoted back cut to 64 characters.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.ros2.services import (
    PARAMETER_BOOL,
    PARAMETER_DOUBLE,
    PARAMETER_INTEGER,
    PARAMETER_STRING,
    register,
    typed_parameter_value,
)
from fwbridge.bridge.rosmsg import cdr, plain_data, topics
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["DESCRIBE_PARAMETERS", "GET_PARAMETERS", "GET_PARAMETER_TYPES", "LIST_PARAMETERS",
           "MAX_NAMES", "PARAMETER_EVENTS", "PARAMETER_EVENTS_QOS", "SET_PARAMETERS_ATOMICALLY",
           "Parameter", "ParameterServer", "ParameterTable", "Value"]

log = logging.getLogger("fwbridge.ros2")

LIST_PARAMETERS = "rcl_interfaces/srv/ListParameters"
GET_PARAMETERS = "rcl_interfaces/srv/GetParameters"
GET_PARAMETER_TYPES = "rcl_interfaces/srv/GetParameterTypes"
DESCRIBE_PARAMETERS = "rcl_interfaces/srv/DescribeParameters"
SET_PARAMETERS = "rcl_interfaces/srv/SetParameters"
SET_PARAMETERS_ATOMICALLY = "rcl_interfaces/srv/SetParametersAtomically"
PARAMETER_EVENTS = "rcl_interfaces/msg/ParameterEvent"
#: rmw_qos_profile_parameter_events.
PARAMETER_EVENTS_QOS = Qos("reliable", "volatile", "keep_last", 1000)
#: Names (or parameters) one request may hold; more are refused whole.
MAX_NAMES = 64
#: Characters of a name quoted back in a reason.
_QUOTE = 64

Value = bool | int | float | str
#: rcl_interfaces/msg/ParameterType's names, for reasons.
TYPE_NAMES = {0: "not set", PARAMETER_BOOL: "bool", PARAMETER_INTEGER: "integer",
              PARAMETER_DOUBLE: "double", PARAMETER_STRING: "string", 5: "byte array",
              6: "bool array", 7: "integer array", 8: "double array", 9: "string array"}
_PYTHON = {PARAMETER_BOOL: bool, PARAMETER_INTEGER: int, PARAMETER_DOUBLE: float,
           PARAMETER_STRING: str}


@dataclass(frozen=True)
class Parameter:
    """One setting of a node as a parameter. ``apply`` (None: read-only) takes a value
    already checked against the type and ``lo`` .. ``hi`` and returns what changed, for
    people (``watchdog_timeout 0.2 s (was 0.5 s)``)."""

    name: str
    type: int  # PARAMETER_BOOL, _INTEGER, _DOUBLE or _STRING
    description: str
    read: Callable[[], Value]
    apply: Callable[[Any], str] | None = None
    lo: float | None = None
    hi: float | None = None
    unit: str = ""
    read_only_why: str = "read when the node starts"

    @property
    def read_only(self) -> bool:
        return self.apply is None

    def refusal(self, kind: int, value: Value | None) -> str | None:
        """Why ``value`` (of ParameterValue type ``kind``) cannot be set, or None."""
        if self.apply is None:
            return f"{self.name} is read-only ({self.read_only_why})"
        if kind != self.type or value is None:
            hint = " (write 1.0, not 1)" if (kind, self.type) == (PARAMETER_INTEGER,
                                                                  PARAMETER_DOUBLE) else ""
            return (f"{self.name} is a {TYPE_NAMES[self.type]} (ParameterValue type "
                    f"{self.type}), got {TYPE_NAMES.get(kind, f'type {kind}')}{hint}: unchanged")
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.name} must be finite, got {value!r}: unchanged"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lo = -math.inf if self.lo is None else self.lo
            hi = math.inf if self.hi is None else self.hi
            if not lo <= value <= hi:
                return (f"{self.name} must be {lo:g} to {hi:g}{self.unit}, got {value:g}: "
                        "unchanged")
        return None


class ParameterTable:
    """The node's parameters by name and rclcpp's rules for them; sans-I/O."""

    def __init__(self, parameters: Iterable[Parameter]) -> None:
        self.parameters = {p.name: p for p in parameters}
        self.accepted = self.refused = 0

    def values(self, names: Sequence[str] | None = None) -> list[tuple[Parameter, Value]] | None:
        """(parameter, value) of each name (every parameter without names); None when
        one is unknown (rclcpp answers those requests with nothing)."""
        chosen = list(self.parameters) if names is None else list(names)
        if len(chosen) > MAX_NAMES or any(n not in self.parameters for n in chosen):
            return None
        return [(self.parameters[n], self.parameters[n].read()) for n in chosen]

    def listed(self, prefixes: Sequence[str], depth: int) -> tuple[list[str], list[str]]:
        """(names, prefixes) as rclcpp's ``list_parameters``: names under one of the
        ``prefixes`` (all without) at most ``depth`` levels down (0: any), and the
        dotted prefixes of the names given."""
        names = []
        for name in self.parameters:
            if prefixes:
                under = [p for p in prefixes if name == p or name.startswith(p + ".")]
                if not under:
                    continue
                levels = min(name[len(p):].count(".") for p in under)
            else:
                levels = name.count(".")
            if depth == 0 or levels < depth:
                names.append(name)
        found = sorted({n.rsplit(".", 1)[0] for n in names if "." in n})
        return names, found

    def refusal(self, name: str, kind: int, value: Value | None,
                only: Collection[str] | None = None) -> str | None:
        if only is not None and name not in only:
            return (f"unknown parameter {name[:_QUOTE]!r} (this service sets "
                    f"{', '.join(only)}; ~/set_parameters the node's others)")
        param = self.parameters.get(name)
        if param is None:
            return f"unknown parameter {name[:_QUOTE]!r} (ros2 param list names this node's)"
        return param.refusal(kind, value)

    def set(self, items: Sequence[tuple[str, int, Value | None]],
            only: Collection[str] | None = None) -> tuple[list[tuple[bool, str]], list[str]]:
        """Each (name, type, value) on its own, in order: the results, and the names
        changed; with ``only``, the names there only (a service of one setting)."""
        if len(items) > MAX_NAMES:
            too_many = f"at most {MAX_NAMES} parameters in one request, got {len(items)}"
            self.refused += len(items)
            return [(False, too_many)] * len(items), []
        results: list[tuple[bool, str]] = []
        changed: list[str] = []
        for name, kind, value in items:
            why = self.refusal(name, kind, value, only)
            if why is not None:
                self.refused += 1
                results.append((False, why))
                continue
            results.append((True, self._apply(name, value)))
            changed.append(name)
        return results, changed

    def set_atomically(self, items: Sequence[tuple[str, int, Value | None]]
                       ) -> tuple[tuple[bool, str], list[str]]:
        """All or none: the one result, and the names changed."""
        if len(items) > MAX_NAMES:
            self.refused += 1
            return (False, f"at most {MAX_NAMES} parameters in one request, "
                    f"got {len(items)}: nothing set"), []
        for name, kind, value in items:
            why = self.refusal(name, kind, value)
            if why is not None:
                self.refused += 1
                return (False, f"{why}; nothing set"), []
        notes = [self._apply(name, value) for name, _kind, value in items]
        return (True, "; ".join(notes)), [name for name, _k, _v in items]

    def _apply(self, name: str, value: Value | None) -> str:
        param = self.parameters[name]
        assert param.apply is not None and value is not None
        self.accepted += 1
        return param.apply(_PYTHON[param.type](value))


class ParameterServer:
    """The parameter services and ``/parameter_events`` of one ROS 2 node."""

    def __init__(self, ros: Any, parameters: Iterable[Parameter], distro: str = "jazzy",
                 *, clock: Callable[[], float] = time.time) -> None:
        self.ros, self.distro, self.clock = ros, distro, clock
        self.table = ParameterTable(parameters)
        self.announced = False
        self._lock = threading.Lock()
        for srvtype in (LIST_PARAMETERS, GET_PARAMETERS, GET_PARAMETER_TYPES,
                        DESCRIBE_PARAMETERS, SET_PARAMETERS, SET_PARAMETERS_ATOMICALLY):
            register(srvtype, distro)
        self.events = ros.publisher("/parameter_events", PARAMETER_EVENTS,
                                    PARAMETER_EVENTS_QOS)
        self.services = [
            ros.service("~/list_parameters", LIST_PARAMETERS, self._list),
            ros.service("~/get_parameters", GET_PARAMETERS, self._get),
            ros.service("~/get_parameter_types", GET_PARAMETER_TYPES, self._types),
            ros.service("~/describe_parameters", DESCRIBE_PARAMETERS, self._describe),
            ros.service("~/set_parameters", SET_PARAMETERS, self._set),
            ros.service("~/set_parameters_atomically", SET_PARAMETERS_ATOMICALLY,
                        self._set_atomically),
        ]

    @property
    def node_fqn(self) -> str:
        return f"{self.ros.namespace.rstrip('/')}/{self.ros.name}"

    # -- messages ------------------------------------------------------------------------
    def _types_of(self) -> Any:
        return cdr.typestore(self.distro).types

    def value_message(self, kind: int, value: Value) -> Any:
        field = {PARAMETER_BOOL: "bool_value", PARAMETER_INTEGER: "integer_value",
                 PARAMETER_DOUBLE: "double_value", PARAMETER_STRING: "string_value"}[kind]
        return plain_data.message_from_dict("rcl_interfaces/msg/ParameterValue",
                                        {"type": kind, field: value}, self.distro)

    def parameter_message(self, param: Parameter, value: Value) -> Any:
        return self._types_of()["rcl_interfaces/msg/Parameter"](
            name=param.name, value=self.value_message(param.type, value))

    def descriptor(self, param: Parameter) -> Any:
        t = self._types_of()
        fp, ints = [], []
        if param.lo is not None or param.hi is not None:
            lo = -math.inf if param.lo is None else param.lo
            hi = math.inf if param.hi is None else param.hi
            if param.type == PARAMETER_DOUBLE:
                fp = [t["rcl_interfaces/msg/FloatingPointRange"](
                    from_value=float(lo), to_value=float(hi), step=0.0)]
            elif param.type == PARAMETER_INTEGER:
                ints = [t["rcl_interfaces/msg/IntegerRange"](
                    from_value=int(lo), to_value=int(hi), step=0)]
        constraints = param.read_only_why if param.read_only else ""
        return t["rcl_interfaces/msg/ParameterDescriptor"](
            name=param.name, type=param.type, description=param.description,
            additional_constraints=constraints, read_only=param.read_only,
            dynamic_typing=False, floating_point_range=fp, integer_range=ints)

    def _event(self, new: Sequence[str] = (), changed: Sequence[str] = ()) -> Any:
        t = self._types_of()
        new_values = self.table.values(new) or []
        changed_values = self.table.values(changed) or []
        return t[PARAMETER_EVENTS](
            stamp=topics.ros_time(self.clock(), self.distro), node=self.node_fqn,
            new_parameters=[self.parameter_message(p, v) for p, v in new_values],
            changed_parameters=[self.parameter_message(p, v) for p, v in changed_values],
            deleted_parameters=[])

    # -- /parameter_events -----------------------------------------------------------------
    def announce(self) -> bool:
        """The start event (every parameter as new), once the publisher is declared;
        True once it went out (then again never)."""
        with self._lock:
            if not self.announced and self.events.is_declared:
                self.announced = bool(self.events.publish(self._event(
                    new=list(self.table.parameters))))
            return self.announced

    def changed(self, names: Sequence[str]) -> None:
        """Publish that ``names`` changed (also for a change made another way, such as
        ``~/set_watchdog``)."""
        if not names:
            return
        try:
            self.events.publish(self._event(changed=list(dict.fromkeys(names))))
        except Exception:  # the event is news; the change itself is made
            log.exception("%s: publishing a parameter event failed", self.node_fqn)

    # -- services ------------------------------------------------------------------------
    def _list(self, request: Any) -> Any:
        t = self._types_of()
        prefixes = [str(p) for p in request.prefixes][:MAX_NAMES]
        names, found = self.table.listed(prefixes, int(request.depth))
        result = t["rcl_interfaces/msg/ListParametersResult"](names=names, prefixes=found)
        return t[LIST_PARAMETERS + "_Response"](result=result)

    def _get(self, request: Any) -> Any:
        got = self.table.values([str(n) for n in request.names]) or []
        return self._types_of()[GET_PARAMETERS + "_Response"](
            values=[self.value_message(p.type, v) for p, v in got])

    def _types(self, request: Any) -> Any:
        got = self.table.values([str(n) for n in request.names]) or []
        return plain_data.message_from_dict(GET_PARAMETER_TYPES + "_Response",
                                        {"types": [p.type for p, _v in got]}, self.distro)

    def _describe(self, request: Any) -> Any:
        got = self.table.values([str(n) for n in request.names]) or []
        return self._types_of()[DESCRIBE_PARAMETERS + "_Response"](
            descriptors=[self.descriptor(p) for p, _v in got])

    @staticmethod
    def _items(request: Any) -> list[tuple[str, int, Value | None]]:
        items = []
        for param in request.parameters:
            name, value = typed_parameter_value(param)
            items.append((name, int(param.value.type), value))
        return items

    def _result(self, ok: bool, reason: str) -> Any:
        return self._types_of()["rcl_interfaces/msg/SetParametersResult"](
            successful=ok, reason=reason[:300])

    def _set(self, request: Any, only: Collection[str] | None = None) -> Any:
        with self._lock:
            results, changed = self.table.set(self._items(request), only)
        self.changed(changed)
        return self._types_of()[SET_PARAMETERS + "_Response"](
            results=[self._result(ok, why) for ok, why in results])

    def setter(self, *names: str) -> Callable[[Any], Any]:
        """A ``SetParameters`` handler for ``names`` only (a service of the node's own
        for one setting): each set as ``~/set_parameters`` sets it, events and all."""
        return lambda request: self._set(request, names)

    def _set_atomically(self, request: Any) -> Any:
        with self._lock:
            (ok, why), changed = self.table.set_atomically(self._items(request))
        self.changed(changed)
        return self._types_of()[SET_PARAMETERS_ATOMICALLY + "_Response"](
            result=self._result(ok, why))

    def stats(self) -> dict[str, int]:
        return {"parameters_set": self.table.accepted,
                "parameters_refused": self.table.refused}
