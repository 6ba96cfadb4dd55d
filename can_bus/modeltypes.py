"""What the bus model is made of: node states, events, transmit buffers, nodes."""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from fwbridge.can_bus.bits import Frame
from fwbridge.protocols.errors import StateError

__all__ = ["ErrorFrame", "ErrorState", "Event", "FrameDelivered", "Node", "StateChanged",
           "TxBuffer", "TxEntry"]


class ErrorState(IntEnum):
    """Fault-confinement state of a node."""

    ACTIVE = 0
    PASSIVE = 1
    BUS_OFF = 2


class FrameDelivered(NamedTuple):
    """A frame transmitted without error; ``time`` is the end of its EOF (bit time)."""

    time: int
    start: int
    frame: Frame
    transmitters: tuple[int, ...]  # nodes whose transmission completed (several: same frame)
    receivers: tuple[int, ...]  # nodes that accepted it (transmitters excluded)


class ErrorFrame(NamedTuple):
    """An attempt ended by an error frame (or a stuck-dominant burst: ``kind == "dominant"``)."""

    time: int
    start: int
    frame: Frame | None
    kind: str  # bit, stuff, crc, form, ack, dominant
    detector: int  # node that flagged it first, -1 when nobody in particular
    transmitters: tuple[int, ...]
    local: bool = False  # seen only by the transmitter (a node cut off from the bus)
    counters: tuple[tuple[int, int, int], ...] = ()  # (node, TEC, REC) right after it


class StateChanged(NamedTuple):
    """A node's fault-confinement state changed."""

    time: int
    node: int
    old: ErrorState
    new: ErrorState
    tec: int
    rec: int


Event = FrameDelivered | ErrorFrame | StateChanged
TxEntry = tuple[Frame, int]  # frame, arbitration key


class TxBuffer:
    """A node's transmit buffer: lowest arbitration key first, in order within a key
    (or plain first in, first out). O(1) per frame: a deque per key, a heap of keys;
    ``first`` is the frame that contends next (read at every arbitration)."""

    __slots__ = ("_keys", "_n", "_queues", "fifo", "first")

    def __init__(self, fifo: bool = False) -> None:
        self.fifo = fifo
        self.first: TxEntry | None = None
        self._queues: dict[int, deque[TxEntry]] = {}
        self._keys: list[int] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def push(self, entry: TxEntry, front: bool = False) -> None:
        """Queue a frame; ``front``: a frame that failed is first in line again."""
        slot = 0 if self.fifo else entry[1]
        q = self._queues.get(slot)
        if q is None:
            q = self._queues[slot] = deque()
            heapq.heappush(self._keys, slot)
        if front:
            q.appendleft(entry)
        else:
            q.append(entry)
        self._n += 1
        self.first = self._queues[self._keys[0]][0]

    def pop(self) -> TxEntry:
        slot = self._keys[0]
        q = self._queues[slot]
        entry = q.popleft()
        if not q:
            heapq.heappop(self._keys)
            del self._queues[slot]
        self._n -= 1
        self.first = self._queues[self._keys[0]][0] if self._n else None
        return entry

    def head(self) -> TxEntry:
        first = self.first
        if first is None:
            raise StateError("empty transmit buffer")
        return first

    def clear(self) -> None:
        self._queues.clear()
        self._keys.clear()
        self._n = 0
        self.first = None


@dataclass(eq=False, slots=True)
class Node:
    """One CAN controller on the bus. Read its fields; change it through the model."""

    id: int
    name: str
    auto_recovery: bool = True
    listen_only: bool = False
    tec: int = 0
    rec: int = 0
    state: ErrorState = ErrorState.ACTIVE
    bit_error_rate: float = 0.0
    stuck_dominant: bool = False
    disconnected: bool = False
    tx_disabled: bool = False  # stuck transmitter after the dominant time-out
    rng: random.Random = field(default_factory=random.Random)
    tx: TxBuffer = field(default_factory=TxBuffer)
    ready: int = 0  # earliest SOF of the frames in ``tx``
    suspend_until: int = 0
    stalled: bool = False
    stuck_at: int = 0
    recovery_count: int = 0
    recovery_from: int | None = None
    seg_free: int = 0  # the node's own wire when cut off from the bus
    tx_ok: int = 0
    tx_errors: int = 0
    bus_offs: int = 0
