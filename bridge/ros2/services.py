"""ROS 2 services on Zenoh, as rmw_zenoh_cpp makes them (``rmw_service_data.cpp``,
``rmw_client_data.cpp``): pure parts, no Zenoh import.

- a service is a Zenoh *queryable* (complete) on the same kind of key as a
  topic, ``<domain>/<service name>/<pkg>::srv::dds_::<Name>_/<type hash>``, and a
  liveliness token of kind ``SS`` (a client's: ``SC``) with the service's type
  (``std_srvs::srv::dds_::Trigger_``), hash and QoS (services' default:
  reliable, volatile, keep last 10);
- a request is a Zenoh query: CDR payload, and the attachment of a sample
  (the client's sequence number, source timestamp and GID); the reply carries
  the request's sequence number and the client's GID back, with the server's
  timestamp;
- the type hash is RIHS01 of the service's type description: fields
  ``request_message``, ``response_message`` and ``event_message`` (the
  ``_Event`` type: ``info`` a ``service_msgs/msg/ServiceEventInfo``, ``request``
  and ``response`` bounded sequences of one). In that description a ``.msg``
  file's ``char`` is ``uint8`` (rosidl's mapping), so ``ServiceEventInfo``'s
  ``client_gid`` is ``uint8[16]``; rosbags' stores keep ``char``, which gives
  another hash, so the types are described here on their own store. The hash of
  ``std_srvs/srv/Trigger`` it gives is the one seen on the wire of a ROS 2
  installation (a fixture of the tests), and that of
  ``rcl_interfaces/srv/SetParameters`` (whose request and response hold messages of
  the store: those are described as the store has them) is the one rosidl
  generates.

:func:`double_parameter_request`, :func:`parameters_request` and
:func:`typed_parameter_value` build and read ``SetParameters``' parameters: the
standard way ROS 2 tools change a node's setting.

Requests are untrusted: :func:`request_refusal` bounds one before it is decoded (its
bytes, :data:`MAX_REQUEST`; the items of a leading sequence such as
``SetParameters``' parameters), and :class:`Throttle` keeps what a flood of bad
requests prints to one line a second, each reason quoted by :func:`printable`.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from typing import Any

from fwbridge.bridge.rosmsg import cdr, plain_data
from fwbridge.bridge.rosmsg.cdr import MessageError
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["MAX_ITEMS", "MAX_REASON", "MAX_REQUEST", "PARAMETER_BOOL", "PARAMETER_DOUBLE",
           "PARAMETER_INTEGER", "PARAMETER_STRING", "SERVICES", "SERVICE_QOS", "SET_PARAMETERS",
           "Throttle", "double_parameter_request", "leading_sequence", "parameters_request",
           "printable", "register", "request_refusal", "service_type_hash",
           "typed_parameter_value"]

#: rmw_qos_profile_services_default.
SERVICE_QOS = Qos("reliable", "volatile", "keep_last", 10)

#: The services fwbridge serves or calls: ``pkg/srv/Name`` -> (request, response) fields,
#: in .msg syntax.
SERVICES = {
    "std_srvs/srv/Trigger": ("", "bool success\nstring message"),
    "std_srvs/srv/SetBool": ("bool data", "bool success\nstring message"),
    "rcl_interfaces/srv/SetParameters": ("rcl_interfaces/msg/Parameter[] parameters",
                                         "rcl_interfaces/msg/SetParametersResult[] results"),
    # the rest of a node's parameter services (rcl_interfaces), served by parameters.py
    "rcl_interfaces/srv/SetParametersAtomically": (
        "rcl_interfaces/msg/Parameter[] parameters",
        "rcl_interfaces/msg/SetParametersResult result"),
    "rcl_interfaces/srv/GetParameters": ("string[] names",
                                         "rcl_interfaces/msg/ParameterValue[] values"),
    "rcl_interfaces/srv/GetParameterTypes": ("string[] names", "uint8[] types"),
    "rcl_interfaces/srv/DescribeParameters": (
        "string[] names", "rcl_interfaces/msg/ParameterDescriptor[] descriptors"),
    "rcl_interfaces/srv/ListParameters": ("string[] prefixes\nuint64 depth",
                                          "rcl_interfaces/msg/ListParametersResult result"),
}
SET_PARAMETERS = "rcl_interfaces/srv/SetParameters"
#: rcl_interfaces/msg/ParameterType's values of ParameterValue.type.
PARAMETER_BOOL, PARAMETER_INTEGER, PARAMETER_DOUBLE, PARAMETER_STRING = 1, 2, 3, 4
#: Bytes of CDR a request may hold (by default): the fish's ``scenes`` string (8192
#: characters) with room to spare; a request is held whole in memory before it is read.
MAX_REQUEST = 64 * 1024
#: Items of a request's leading sequence (by default): decoding makes an object of each.
MAX_ITEMS = 64


def leading_sequence(srvtype: str) -> bool:
    """Whether the request of ``srvtype`` starts with an unbounded sequence
    (``SetParameters``' ``parameters``), whose length is then the uint32 after the CDR
    header."""
    if srvtype not in SERVICES:
        return False
    first = SERVICES[srvtype][0].strip().split("\n", 1)[0].split()
    return bool(first) and first[0].endswith("[]")


def request_refusal(srvtype: str, data: bytes, *, max_bytes: int = MAX_REQUEST,
                    max_items: int = MAX_ITEMS) -> str | None:
    """Why a request of ``srvtype`` is refused before it is decoded (too many bytes,
    too many items), or None: what the CDR says it holds is read from its header and
    length fields only."""
    if len(data) > max_bytes:
        return f"request of {len(data)} bytes, at most {max_bytes}"
    if leading_sequence(srvtype) and len(data) >= 8 and data[0] == 0 and data[1] in (0, 1):
        (count,) = struct.unpack_from("<I" if data[1] else ">I", data, 4)
        if count > max_items:
            return f"request of {count} items, at most {max_items}"
    return None


class Throttle:
    """Says how often something happened in at most one line per ``period`` seconds:
    :meth:`hit` counts one and returns how many to report now (0: not yet, they are
    reported with a later line or :meth:`flush`). Sans-I/O: ``now`` is given
    (monotonic seconds)."""

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self.total = 0
        self._pending = 0
        self._last: float | None = None

    def hit(self, now: float) -> int:
        self.total += 1
        self._pending += 1
        if self._last is not None and now - self._last < self.period:
            return 0
        count, self._pending, self._last = self._pending, 0, now
        return count

    def flush(self) -> int:
        """What was counted and not reported yet (then nothing is)."""
        count, self._pending = self._pending, 0
        return count


#: Characters of a reason quoted in a log line or an error reply.
MAX_REASON = 200


def printable(text: str) -> str:
    """``text`` clipped to :data:`MAX_REASON` characters, control characters escaped:
    a reason may quote bytes a peer sent."""
    text = text[:MAX_REASON] + ("…" if len(text) > MAX_REASON else "")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _defs(srvtype: str) -> dict[str, Any]:
    from rosbags.typesys import get_types_from_msg

    if srvtype not in SERVICES:
        raise MessageError(f"unknown service type {srvtype!r} (known: {', '.join(SERVICES)})")
    request, response = SERVICES[srvtype]
    defs: dict[str, Any] = {}
    for suffix, text in (("_Request", request), ("_Response", response)):
        name = srvtype + suffix
        parsed = get_types_from_msg(text, name)
        defs[name] = next(iter(parsed.values()))
    return defs


@functools.lru_cache(maxsize=32)
def register(srvtype: str, distro: str = "jazzy") -> tuple[str, str]:
    """The request and response message types of ``srvtype``, registered in the distro's
    typestore (so :func:`cdr.serialize` takes them)."""
    # typestore() is cached per call signature: typestore() and typestore("jazzy") are
    # two stores, and each caller may use either
    stores = [cdr.typestore(distro)] + ([cdr.typestore()] if distro == "jazzy" else [])
    for store in stores:
        defs = {k: v for k, v in _defs(srvtype).items() if k not in store.fielddefs}
        if defs:
            store.register(defs)
    return srvtype + "_Request", srvtype + "_Response"


@functools.lru_cache(maxsize=32)
def service_type_hash(srvtype: str, distro: str = "jazzy") -> str:
    """RIHS01 of the service's type description (see the module); Humble has none."""
    if distro == "humble":
        _defs(srvtype)
        return "TypeHashNotSupported"
    from rosbags.interfaces import Nodetype
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.EMPTY)
    base = cdr.typestore(distro)
    req, resp = srvtype + "_Request", srvtype + "_Response"
    defs = dict(_defs(srvtype))
    defs["builtin_interfaces/msg/Time"] = base.fielddefs["builtin_interfaces/msg/Time"]
    defs["service_msgs/msg/ServiceEventInfo"] = ([], [
        ("event_type", (Nodetype.BASE, ("uint8", 0))),
        ("stamp", (Nodetype.NAME, "builtin_interfaces/msg/Time")),
        ("client_gid", (Nodetype.ARRAY, ((Nodetype.BASE, ("uint8", 0)), 16))),
        ("sequence_number", (Nodetype.BASE, ("int64", 0)))])
    defs[srvtype + "_Event"] = ([], [
        ("info", (Nodetype.NAME, "service_msgs/msg/ServiceEventInfo")),
        ("request", (Nodetype.SEQUENCE, ((Nodetype.NAME, req), 1))),
        ("response", (Nodetype.SEQUENCE, ((Nodetype.NAME, resp), 1)))])
    defs[srvtype] = ([], [("request_message", (Nodetype.NAME, req)),
                          ("response_message", (Nodetype.NAME, resp)),
                          ("event_message", (Nodetype.NAME, srvtype + "_Event"))])
    _referenced(defs, base)
    store.register(defs)
    return str(store.hash_rihs01(srvtype))


def _referenced(defs: dict[str, Any], base: Any) -> None:
    """Add to ``defs`` every message type its fields name that it lacks, as ``base``
    (the distro's store) describes them, and theirs in turn."""
    from rosbags.interfaces import Nodetype

    def names(desc: Any) -> list[str]:
        kind, rest = desc
        if kind == Nodetype.NAME:
            return [rest]
        if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            return names(rest[0])
        return []

    todo = [n for _consts, fields in defs.values() for _name, desc in fields for n in names(desc)]
    while todo:
        name = todo.pop()
        if name in defs:
            continue
        if name not in base.fielddefs:
            raise MessageError(f"unknown message type {name!r} in a service type")
        defs[name] = base.fielddefs[name]
        todo += [n for _name, desc in defs[name][1] for n in names(desc)]


def double_parameter_request(name: str, value: float, distro: str = "jazzy") -> Any:
    """A ``SetParameters`` request that sets the double parameter ``name``."""
    request_type, _ = register(SET_PARAMETERS, distro)
    return plain_data.message_from_dict(request_type, {"parameters": [
        {"name": name, "value": {"type": PARAMETER_DOUBLE, "double_value": value}}]}, distro)


def parameters_request(values: Mapping[str, bool | int | float | str],
                       distro: str = "jazzy") -> Any:
    """A ``SetParameters`` request with one parameter per item, typed by its value: a
    bool, an integer, a double or a string."""
    request_type, _ = register(SET_PARAMETERS, distro)
    params = []
    for name, value in values.items():
        if isinstance(value, bool):
            v: dict[str, object] = {"type": PARAMETER_BOOL, "bool_value": value}
        elif isinstance(value, int):
            v = {"type": PARAMETER_INTEGER, "integer_value": value}
        elif isinstance(value, float):
            v = {"type": PARAMETER_DOUBLE, "double_value": value}
        else:
            v = {"type": PARAMETER_STRING, "string_value": str(value)}
        params.append({"name": name, "value": v})
    return plain_data.message_from_dict(request_type, {"parameters": params}, distro)


def typed_parameter_value(param: Any) -> tuple[str, bool | int | float | str | None]:
    """(name, value) of an ``rcl_interfaces/msg/Parameter``: a bool, int, float or str by
    its type; None for the array types and PARAMETER_NOT_SET."""
    value = param.value
    kind = value.type
    if kind == PARAMETER_BOOL:
        return str(param.name), bool(value.bool_value)
    if kind == PARAMETER_STRING:
        return str(param.name), str(value.string_value)
    if kind == PARAMETER_DOUBLE:
        return str(param.name), float(value.double_value)
    if kind == PARAMETER_INTEGER:
        return str(param.name), int(value.integer_value)
    return str(param.name), None
