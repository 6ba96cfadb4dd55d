"""Record types from frame descriptions: one frozen, slotted dataclass per description.

:func:`record_type` makes ``OdomFrame``, ``CmdFrame``, ``ActionFrame`` and
``ActuatorStruct`` from their descriptions' fields (the factory,
:mod:`fwbridge.protocols.engine`, offers it too). A field with an enum or
flags table is typed by the module's ``IntEnum``/``IntFlag``, which
:func:`check_labels` holds to that table: the classes stay written out
(their aliases, docstrings and members are what the type checker sees), the
values are the description's.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Mapping
from dataclasses import field, make_dataclass
from enum import IntEnum, IntFlag
from typing import Any, TypeAlias

from fwbridge.protocols.descriptions.loader import FrameDescription
from fwbridge.protocols.engine.tuple_view import value_key
from fwbridge.protocols.errors import ConfigError

__all__ = ["FloatFields", "LabelType", "check_labels", "record_type"]


class FloatFields:
    """Mixin of a record with float fields: which of them are NaN or infinite."""

    __slots__ = ()
    __match_args__: tuple[str, ...]

    @property
    def nonfinite(self) -> tuple[str, ...]:
        """Names of the fields that are NaN or infinite (empty when all finite).

        :func:`record_type` replaces this with one compiled for the record's fields.
        """
        names = self.__match_args__
        return tuple(n for n in names if not math.isfinite(getattr(self, n)))


def _nonfinite_property(names: tuple[str, ...]) -> property:
    """``nonfinite`` for these fields: one ``isfinite`` per field, no tuple when all are
    finite (the hot case: code asks per frame)."""
    fields = ", ".join(f"self.{n}" for n in names)
    test = " and ".join(f"_f(self.{n})" for n in names)
    src = (f"def nonfinite(self):\n    if {test}:\n        return ()\n"
           f"    return tuple(n for n, v in zip(_names, ({fields},)) if not _f(v))")
    env: dict[str, Any] = {"_f": math.isfinite, "_names": names}
    exec(src, env)  # as dataclasses generate __init__; names are identifiers (the loader checks)
    return property(env["nonfinite"], doc=FloatFields.nonfinite.__doc__)


_PY_TYPES: dict[str, type] = {"bytes": bytes, "f32": float, "f64": float}

#: The Python type of an enum field (unknown values stay ints) or of a flags field.
LabelType: TypeAlias = type[IntEnum] | type[IntFlag]


def check_labels(desc: FrameDescription, name: str, cls: LabelType) -> None:
    """:class:`ConfigError` unless ``cls`` names exactly the description's table of ``name``.

    An enum class may add aliases (another name of a listed value), a flag
    class its zero member (``NONE``); every other value and name is the
    table's, so the record type cannot drift from its description.
    """
    f = desc.field(name)
    table, kind = (f.flags, IntFlag) if f.flags else (f.enum, IntEnum)
    if not table:
        raise ConfigError(f"{desc.name}: field {name!r} has no enum or flags table")
    if not (isinstance(cls, type) and issubclass(cls, kind)):
        raise ConfigError(f"{desc.name}: field {name!r} needs an {kind.__name__}, "
                          f"got {cls!r}")
    have = {m.value: m.name for m in cls.__members__.values() if m.value or kind is IntEnum}
    want = dict(table)
    if have != want:
        diff = sorted(set(have.items()) ^ set(want.items()))
        raise ConfigError(f"{desc.name}: {cls.__name__} differs from the description's "
                          f"{name!r} table in: "
                          + ", ".join(f"0x{v:02x} {lb}" for v, lb in diff))


def _post_init(desc: FrameDescription, names: tuple[str, ...],
               enums: Mapping[str, LabelType]) -> Any:
    """``__post_init__`` that stores what users pass in the decoded forms, so equal
    records compare and hash equal: enum members for known values (other ints stay
    ints), flags for in-range ints, ``bytes`` for a bytearray or memoryview. ``None``
    when there is nothing to normalise. Decoders build records without it."""
    env: dict[str, Any] = {"_set": object.__setattr__, "_bool": bool, "_int": int,
                           "_views": (bytearray, memoryview), "_bytes": bytes}
    body: list[str] = []
    for i, n in enumerate(names):
        f = desc.field(n)
        if n in enums:
            cls = enums[n]
            lo, hi = f.info.lo, f.info.hi
            small = hi - lo < 1 << 16  # a lookup table; wider fields call the class
            if f.flags:
                env[f"_c{i}"] = tuple(cls(v) for v in range(lo, hi + 1)) if small else cls
                get = f"_c{i}[v - {lo}]" if small else f"_c{i}(v)"
                body += [f"    v = self.{n}",
                         f"    if v.__class__ is _int and {lo} <= v <= {hi}:",
                         f"        _set(self, {n!r}, {get})"]
            else:
                known = cls._value2member_map_
                if small:
                    env[f"_c{i}"] = tuple(known.get(v, v) for v in range(lo, hi + 1))
                    get = f"_c{i}[v - {lo}]"
                else:
                    env[f"_c{i}"] = known
                    get = f"_c{i}.get(v, v)"
                body += [f"    v = self.{n}",
                         f"    if isinstance(v, _int) and not isinstance(v, _bool)"
                         f" and {lo} <= v <= {hi}:",
                         f"        _set(self, {n!r}, {get})"]
        elif f.type == "bytes":
            body += [f"    v = self.{n}",
                     "    if isinstance(v, _views):",
                     f"        _set(self, {n!r}, _bytes(v))"]
    if not body:
        return None
    exec("def __post_init__(self):\n" + "\n".join(body), env)  # names: identifiers
    return env["__post_init__"]


def _value_methods(names: tuple[str, ...]) -> dict[str, Any]:
    """``__eq__``, ``__hash__`` and ``_value_key`` of a record as a value: its fields
    compared as :func:`~fwbridge.protocols.engine.tuple_view.value_key` has them, so a record
    holding a NaN equals its copy (a pickled one, a decoded one of the same bytes) and
    hashes alike; records of another class are not equal."""

    def _value_key(self: Any) -> tuple[Any, ...]:
        return (self.__class__, tuple([value_key(getattr(self, n)) for n in names]))

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(_value_key(self) == _value_key(other))

    def __hash__(self: Any) -> int:
        return hash(_value_key(self))

    return {"_value_key": _value_key, "__eq__": __eq__, "__hash__": __hash__}


def _length_property(desc: FrameDescription) -> property:
    """The length field's value, derived from the data it counts."""
    assert desc.length is not None
    data, bias = desc.length.data, desc.data_bias

    def length(self: Any) -> int:
        return len(getattr(self, data)) + bias

    return property(length, doc=f"The {desc.length.field} field: the number of "
                    f"{desc.length.counts} bytes.")


def record_type(desc: FrameDescription, name: str, *, base: type | tuple[type, ...] = (),
                defaults: Mapping[str, Any] | None = None,
                enums: Mapping[str, LabelType] | None = None, module: str | None = None,
                doc: str | None = None) -> type:
    """A frozen, slotted dataclass with one field per stored field of ``desc``, in wire order.

    ``base``: mixins for extra properties (give them ``__slots__ = ()``);
    ``defaults``: field -> default value; ``enums``: field -> the
    ``IntEnum``/``IntFlag`` of its enum or flags table (held to the table by
    :func:`check_labels`; the record stores known values as members);
    ``module``: where the class is importable from (pickling finds it
    there). The length field is not a field: it is a property derived from
    the data it counts.
    """
    lname = desc.length.field if desc.length else None
    defaults = dict(defaults or {})
    enums = dict(enums or {})
    for n, cls in enums.items():
        check_labels(desc, n, cls)
    specs: list[Any] = []
    for f in desc.fields:
        if f.name == lname:
            continue
        kind: Any = float if f.scaled else _PY_TYPES.get(f.type, int)
        if f.name in enums:
            kind = enums[f.name] if f.flags else enums[f.name] | int
        if f.name in defaults:
            specs.append((f.name, kind, field(default=defaults.pop(f.name))))
        else:
            specs.append((f.name, kind))
    if defaults:
        raise ConfigError(f"{desc.name}: defaults for no such field: {', '.join(defaults)}")
    bases = base if isinstance(base, tuple) else (base,)
    namespace: dict[str, Any] = {"__doc__": doc or desc.doc or f"A {desc.name} frame."}
    names = tuple(s[0] for s in specs)
    # The names go into generated code below. The TOML loader admits only lowercase
    # identifiers; a description built in code has not passed it, so check here.
    for n in names:
        if not n.isidentifier() or keyword.iskeyword(n) or n.startswith("_"):
            raise ConfigError(f"{desc.name}: field name {n!r} is not a Python identifier")
    if any(issubclass(b, FloatFields) for b in bases):
        namespace["nonfinite"] = _nonfinite_property(names)
    namespace.update(_value_methods(names))
    post = _post_init(desc, names, enums)
    if post is not None:
        namespace["__post_init__"] = post
    if lname is not None and not any(hasattr(b, lname) for b in bases):
        namespace[lname] = _length_property(desc)
    cls = make_dataclass(name, specs, bases=bases, frozen=True, slots=True, namespace=namespace)
    cls.__module__ = module or __name__
    cls.__qualname__ = name
    return cls
