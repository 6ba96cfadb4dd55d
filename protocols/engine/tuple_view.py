"""Tuple behaviour for a receiver's record stored as its bytes.

The receivers keep each frame as one ``bytes`` object (nothing in it for the
garbage collector to walk); a record still reads as the tuple it was:
iteration, indexing, membership, hash and comparisons, against tuples and
against other records. A record class puts :class:`TupleView` before
``bytes`` and says what it reads as in ``_values``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

__all__ = ["TupleView", "value_key"]

_double = struct.Struct("<d").pack


def value_key(v: Any) -> Any:
    """What ``v`` is as a value: equal keys, equal values (the same bits on the wire).

    A NaN is not equal to itself, and hashes by identity: a record holding one would
    be unequal to its own copy and move in a set. Its key is its bits, so a NaN
    equals a NaN of the same bits; every other number is itself (``0.0 == -0.0``,
    ``1 == 1.0``, as Python has them). Tuples (named ones too) are keyed item by item;
    an object with a ``_value_key`` method (the record types) gives its own.
    """
    if isinstance(v, float):
        return v if v == v else ("NaN", _double(v))
    if isinstance(v, tuple):
        return tuple(map(value_key, v))
    key = getattr(v, "_value_key", None)
    return key() if key is not None else v


class TupleView:
    """Sequence and ordering of ``self._values`` (a tuple); no state of its own."""

    __slots__ = ()

    @property
    def _values(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _other(self, other: object) -> Any:
        """What a record compares with: another record's values, or the object itself."""
        return other._values if isinstance(other, TupleView) else other

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __getitem__(self, key: Any) -> Any:
        return self._values[key]

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __hash__(self) -> int:
        return hash(value_key(self._values))

    def __eq__(self, other: object) -> bool:
        # as values (value_key): a record holding a NaN equals its copy and itself
        return bool(value_key(self._values) == value_key(self._other(other)))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: object) -> bool:
        return bool(self._values < self._other(other))

    def __le__(self, other: object) -> bool:
        return bool(self._values <= self._other(other))

    def __gt__(self, other: object) -> bool:
        return bool(self._values > self._other(other))

    def __ge__(self, other: object) -> bool:
        return bool(self._values >= self._other(other))
