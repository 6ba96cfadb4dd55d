"""The base of every counter record: plain int fields and ``as_dict()``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Counters"]


@dataclass(slots=True)
class Counters:
    """Subclass with ``@dataclass(slots=True)`` and int fields; ``as_dict()`` gives
    them for tables, JSON lines and logs."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
