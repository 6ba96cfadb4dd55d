"""The base node's link policy, sans-I/O: reconnect back-off and record delivery.

One :class:`LinkPolicy` serves both runtimes (:class:`~bridge.node.base_node.BaseNode`
and :class:`~bridge.node.aio.AsyncBaseNode`); they only wait and deliver as it says.

- Back-off: after a loss the first attempt is due ``min_delay`` later; each
  failure doubles the delay up to ``max_delay``; ``attempts`` failures in a
  row (0: never) give up; a success resets it. Every answer follows from the
  ``now`` passed in.
- Delivery: the records of one read go to the sinks in order while the sinks
  keep within ``budget`` seconds over them, then straight to the newest (each
  record carries the whole pose, so a slow sink builds no backlog).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.bridge.node.config import RobotConfig

__all__ = ["SUBSCRIBER_BUDGET", "LinkPolicy", "paced"]

#: Seconds the sinks may take over one read's records before the records between
#: are skipped for the newest (counted in ``odometry_dropped``).
SUBSCRIBER_BUDGET = 0.02

R = TypeVar("R")


def paced(records: Sequence[R], budget: float, clock: Callable[[], float]
          ) -> Iterator[tuple[R, int]]:
    """The records one read hands to the sinks, in order while they keep within
    ``budget`` seconds over them, then straight to the newest.

    Yields ``(record, skipped)``: how many records were passed over just before
    this one.
    """
    last = len(records) - 1
    end = clock() + budget
    i = skipped = 0
    while i <= last:
        yield records[i], skipped
        if i == last:
            return
        if clock() > end:
            skipped, i = last - i - 1, last
        else:
            i += 1


class LinkPolicy:
    """Reconnect back-off and record delivery of one node (see module)."""

    def __init__(self, min_delay: float = 0.1, max_delay: float = 2.0, attempts: int = 0,
                 budget: float = SUBSCRIBER_BUDGET) -> None:
        if not 0 < min_delay <= max_delay:
            raise ConfigError(f"back-off delays must be 0 < min <= max, got "
                              f"{min_delay!r}, {max_delay!r}")
        if attempts < 0:
            raise ConfigError(f"attempts must be >= 0 (0: forever), got {attempts!r}")
        self.min_delay, self.max_delay, self.limit = min_delay, max_delay, attempts
        self.budget = budget
        self.delay = min_delay
        self.attempts = 0  # failed or pending attempts since the loss
        self.due_at: float | None = None  # when the next attempt is due; None: linked

    # -- back-off ----------------------------------------------------------------
    def lost(self, now: float) -> float:
        """The link went away at ``now``: the delay before the first attempt."""
        self.delay, self.attempts = self.min_delay, 0
        self.due_at = now + self.delay
        return self.delay

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until the next attempt is due (0: due)."""
        return 0.0 if self.due_at is None else max(0.0, self.due_at - now)

    def failed(self, now: float) -> float | None:
        """An attempt at ``now`` failed: the delay before the next one, or None: give up."""
        self.attempts += 1
        if self.limit and self.attempts >= self.limit:
            self.due_at = None
            return None
        self.delay = min(self.delay * 2, self.max_delay)
        self.due_at = now + self.delay
        return self.delay

    def succeeded(self, now: float) -> int:
        """An attempt at ``now`` worked: how many it took; the back-off starts over."""
        took = self.attempts + 1
        self.delay, self.attempts, self.due_at = self.min_delay, 0, None
        return took

    # -- delivery ----------------------------------------------------------------
    def deliver(self, records: Sequence[R], clock: Callable[[], float]
                ) -> Iterator[tuple[R, int]]:
        """:func:`paced` with this policy's budget (``clock``: the sinks' own cost)."""
        return paced(records, self.budget, clock)

    @classmethod
    def for_config(cls, config: RobotConfig) -> LinkPolicy:
        """The policy of a robot's ``[reconnect]`` table."""
        return cls(config.reconnect_min_delay, config.reconnect_max_delay,
                   config.reconnect_attempts)
