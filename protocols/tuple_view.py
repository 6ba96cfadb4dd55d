"""Tuple behaviour for a receiver's record stored as its bytes.

The receivers keep each frame as one ``bytes`` object (nothing in it for the
garbage collector to walk); a record still reads as the tuple it was:
iteration, indexing, membership, hash and comparisons, against tuples and
against other records. A record class puts :class:`TupleView` before
``bytes`` and says what it reads as in ``_values``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["TupleView"]


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
        return hash(self._values)

    def __eq__(self, other: object) -> bool:
        return bool(self._values == self._other(other))

    def __ne__(self, other: object) -> bool:
        return bool(self._values != self._other(other))

    def __lt__(self, other: object) -> bool:
        return bool(self._values < self._other(other))

    def __le__(self, other: object) -> bool:
        return bool(self._values <= self._other(other))

    def __gt__(self, other: object) -> bool:
        return bool(self._values > self._other(other))

    def __ge__(self, other: object) -> bool:
        return bool(self._values >= self._other(other))
