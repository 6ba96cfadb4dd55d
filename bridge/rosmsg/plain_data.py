"""Any ROS 2 message as plain data and back: dicts, lists, numbers and strings.

What ``ros2 echo`` prints (YAML, JSON) and what ``ros2 pub`` and the service
requests are built from, for any type of the typestore
(:mod:`~fwbridge.bridge.rosmsg.cdr`)::

    from fwbridge.bridge.rosmsg import plain_data

    twist = plain_data.message_from_dict("geometry_msgs/msg/Twist", {"linear": {"x": 0.2}})
    plain_data.message_to_dict(twist)   # {"linear": {"x": 0.2, "y": 0.0, ...}, ...}

Missing fields take their zero value; an unknown field, a wrong type or a
number out of its type's range is :class:`~fwbridge.bridge.rosmsg.cdr.MessageError`
naming the field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from fwbridge.bridge.rosmsg.cdr import MessageError, message_class, typestore

__all__ = ["message_from_dict", "message_to_dict"]


def message_to_dict(msg: Any) -> Any:
    """A message as plain data (dicts, lists, numbers, strings) for YAML and JSON: its
    fields only, not its constants (DiagnosticStatus's ``OK``…)."""
    if dataclasses.is_dataclass(msg) and not isinstance(msg, type):
        return {f.name: message_to_dict(getattr(msg, f.name)) for f in dataclasses.fields(msg)
                if not _is_constant(f)}
    if hasattr(msg, "tolist"):  # numpy arrays and scalars
        return msg.tolist()
    if isinstance(msg, (list, tuple)):
        return [message_to_dict(v) for v in msg]
    return msg


def _is_constant(f: dataclasses.Field[Any]) -> bool:
    """A message constant (or ``__msgtype__``): rosbags declares them ``ClassVar`` in
    string annotations, which ``dataclasses`` does not recognise, so they come out as fields."""
    return f.name.startswith("__") or (isinstance(f.type, str) and f.type.startswith(
        ("ClassVar", "typing.ClassVar")))


_INTS = {"bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32",
         "int64", "uint64"}
#: The range of each integer type of ROS 2 messages.
_INT_RANGE = {"byte": (0, 255), "char": (0, 255), "int8": (-128, 127), "uint8": (0, 255),
              "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
              "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1)}
_FLOAT32_MAX = 3.4028234663852886e38
_NUMPY = {"float32": "float32", "float64": "float64", "int8": "int8", "uint8": "uint8",
          "byte": "uint8", "char": "uint8", "int16": "int16", "uint16": "uint16",
          "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
          "bool": "bool"}


def message_from_dict(msgtype: str, data: Mapping[str, Any] | None,
                      distro: str = "jazzy") -> Any:
    """A message of ``msgtype`` from plain data (as ``ros2 topic pub`` takes YAML):
    missing fields take their zero value; unknown fields and wrong types are
    :class:`MessageError` naming the field."""
    return _build(msgtype, data or {}, msgtype, distro)


def _build(msgtype: str, data: Any, path: str, distro: str) -> Any:
    store = typestore(distro)
    cls = message_class(msgtype, distro)
    if not isinstance(data, Mapping):
        raise MessageError(f"{path}: expected a mapping of fields, got {data!r}")
    _consts, fields = store.fielddefs[msgtype]
    known = {name for name, _ in fields}
    extra = sorted(set(data) - known)
    if extra:
        names = ", ".join(sorted(known))
        raise MessageError(f"{path}: unknown field {extra[0]!r} (fields: {names})")
    kwargs = {name: _value(desc, data.get(name), f"{path}.{name}", distro)
              for name, desc in fields}
    return cls(**kwargs)


def _value(desc: tuple[Any, Any], value: Any, path: str, distro: str) -> Any:
    import numpy as np

    kind, rest = int(desc[0]), desc[1]
    if kind == 1:  # base type
        return _base(rest[0], value, path)
    if kind == 2:  # another message
        return _build(rest, {} if value is None else value, path, distro)
    (inner_kind, inner), size = rest
    items = [] if value is None else value
    if not isinstance(items, (list, tuple)):
        raise MessageError(f"{path}: expected a list, got {value!r}")
    if kind == 3 and value is None:
        items = [None] * size
    if kind == 3 and len(items) != size:
        raise MessageError(f"{path}: expected {size} items, got {len(items)}")
    if int(inner_kind) == 1 and inner[0] in _NUMPY:
        return np.array([_base(inner[0], v, path) for v in items], dtype=_NUMPY[inner[0]])
    return [_value((inner_kind, inner), v, f"{path}[{i}]", distro) for i, v in enumerate(items)]


def _base(typename: str, value: Any, path: str) -> Any:
    if typename in ("string", "wstring"):
        if value is None:
            return ""
        if not isinstance(value, str):
            raise MessageError(f"{path}: expected a string, got {value!r}")
        return value
    if value is None:
        return False if typename == "bool" else 0 if typename in _INTS else 0.0
    if typename == "bool":
        if not isinstance(value, bool):
            raise MessageError(f"{path}: expected true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MessageError(f"{path}: expected a number, got {value!r}")
    if typename in _INTS:
        if isinstance(value, float) and not value.is_integer():
            raise MessageError(f"{path}: expected an integer, got {value!r}")
        lo, hi = _INT_RANGE[typename]
        if not lo <= value <= hi:
            raise MessageError(f"{path}: {value!r} is out of range for {typename} "
                               f"({lo} to {hi})")
        return int(value)
    number = float(value)
    if typename == "float32" and math.isfinite(number) and abs(number) > _FLOAT32_MAX:
        raise MessageError(f"{path}: {value!r} is out of range for float32 "
                           f"(at most {_FLOAT32_MAX:.7g} in magnitude)")
    return number
