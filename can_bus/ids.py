"""The one table of CAN identifiers, and actuator struct <-> ``can.Message``.

PROTOCOLS.md 4.1: standard 11-bit IDs; master -> module ``k`` on ``0x100 + k``,
module ``k`` -> master on ``0x200 + k``. The module ID is the priority: the
lower it is, the earlier its frames win arbitration. Commands (0x1xx) beat
every feedback frame (0x2xx).
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import can
from can.typechecking import CanFilter, CanFilters

from fwbridge.protocols.errors import CanFrameError
from fwbridge.protocols.families import actuator
from fwbridge.protocols.families.actuator import ActuatorStruct

__all__ = [
    "COMMAND_BASE",
    "DEFAULT_BITRATE",
    "FEEDBACK_BASE",
    "HARDWARE_FILTERS",
    "MAX_MODULE",
    "ActuatorMessage",
    "Direction",
    "accept",
    "accepts",
    "classify",
    "command_filter",
    "command_id",
    "drain",
    "feedback_filter",
    "feedback_id",
    "filters_on_receive",
    "from_message",
    "to_message",
]

COMMAND_BASE = 0x100
FEEDBACK_BASE = 0x200
MAX_MODULE = 0xFF  # module_id is one byte: 0x100..0x1FF and 0x200..0x2FF
DEFAULT_BITRATE = 500_000


class Direction(Enum):
    COMMAND = "command"  # master -> module
    FEEDBACK = "feedback"  # module -> master


class ActuatorMessage(NamedTuple):
    """An actuator struct recognised on the bus."""

    direction: Direction
    module: int
    struct: ActuatorStruct
    timestamp: float


def _check_module(module: int) -> int:
    if not 0 <= module <= MAX_MODULE:
        raise CanFrameError(f"module ID {module} out of range 0..{MAX_MODULE}")
    return module


def command_id(module: int) -> int:
    """CAN ID of commands to ``module``."""
    return COMMAND_BASE + _check_module(module)


def feedback_id(module: int) -> int:
    """CAN ID of the feedback of ``module``."""
    return FEEDBACK_BASE + _check_module(module)


def classify(arbitration_id: int, is_extended_id: bool = False) -> tuple[Direction, int] | None:
    """(direction, module) of an actuator ID, or None for any other frame."""
    if is_extended_id:
        return None
    if COMMAND_BASE <= arbitration_id <= COMMAND_BASE + MAX_MODULE:
        return Direction.COMMAND, arbitration_id - COMMAND_BASE
    if FEEDBACK_BASE <= arbitration_id <= FEEDBACK_BASE + MAX_MODULE:
        return Direction.FEEDBACK, arbitration_id - FEEDBACK_BASE
    return None


def command_filter(module: int) -> list[CanFilter]:
    """python-can acceptance filter of a module: its own command ID only."""
    return [{"can_id": command_id(module), "can_mask": 0x7FF, "extended": False}]


def feedback_filter() -> list[CanFilter]:
    """python-can acceptance filter of the master: every feedback ID (0x200..0x2FF)."""
    return [{"can_id": FEEDBACK_BASE, "can_mask": 0x700, "extended": False}]


def to_message(struct: ActuatorStruct, direction: Direction, module: int | None = None,
               *, timestamp: float = 0.0) -> can.Message:
    """The CAN frame carrying ``struct``; the ID comes from ``module`` (default: its module_id)."""
    k = struct.module_id if module is None else module
    can_id = command_id(k) if direction is Direction.COMMAND else feedback_id(k)
    return can.Message(arbitration_id=can_id, is_extended_id=False, data=actuator.encode(struct),
                       timestamp=timestamp)


def from_message(msg: can.Message) -> ActuatorMessage | None:
    """The actuator struct in ``msg``, or None when it is not an actuator frame.

    An actuator ID whose data is not exactly 8 bytes raises the protocol's
    ``LengthError``: it is a malformed actuator frame, not some other frame.
    """
    if msg.is_error_frame or msg.is_remote_frame:
        return None
    kind = classify(msg.arbitration_id, msg.is_extended_id)
    if kind is None:
        return None
    return ActuatorMessage(kind[0], kind[1], actuator.decode(msg.data), msg.timestamp)


#: Frames one ``drain`` call takes at most: a flooding bus cannot stall a node's step.
DRAIN_LIMIT = 1024
#: python-can interfaces that apply a Bus's filters as frames arrive (not in software
#: behind ``recv``): a node's acceptance filter can go on such a bus too.
HARDWARE_FILTERS = ("fwbridge", "socketcan")


def filters_on_receive(bus: can.BusABC) -> bool:
    """Whether ``bus`` is of an interface in :data:`HARDWARE_FILTERS` (a subclass too),
    told by python-can's table of interfaces."""
    from can.interfaces import BACKENDS

    known = {BACKENDS[name] for name in HARDWARE_FILTERS if name in BACKENDS}
    return any((c.__module__, c.__name__) in known for c in type(bus).__mro__)


def accept(bus: can.BusABC, filters: CanFilters) -> CanFilters:
    """A node's acceptance filter for :func:`drain`; also set on ``bus`` when it applies
    filters as frames arrive (then fewer frames reach the node at all)."""
    if filters_on_receive(bus):
        bus.set_filters(filters)
    return filters


def accepts(filters: CanFilters | None, msg: can.Message) -> bool:
    """Whether ``msg`` passes python-can acceptance ``filters`` (None: every frame), with
    python-can's semantics: any filter whose mask and, if given, ``extended`` flag fit."""
    if not filters:
        return True
    for f in filters:
        if "extended" in f and f["extended"] != msg.is_extended_id:
            continue
        if (f["can_id"] ^ msg.arbitration_id) & f["can_mask"] == 0:
            return True
    return False


def drain(bus: can.BusABC, filters: CanFilters | None = None,
          limit: int = DRAIN_LIMIT) -> list[can.Message]:
    """The frames waiting on ``bus`` that pass ``filters``, without blocking.

    Reads ``bus.recv(0)`` until it has nothing and filters here. Not the bus's own
    filters: on interfaces that filter in software (python-can's ``virtual``,
    several adapters) ``recv(0)`` returns None as soon as the frame at the head
    of the queue fails them, though matching frames wait behind it, and a node
    that drains that way falls further behind every step. So a node's acceptance
    filter is given here; it may also be set on a bus that applies it in hardware
    (``fwbridge``, SocketCAN's kernel filters), where ``recv(0)`` still reads every
    frame that waits (:func:`accept` does both). Bounded by ``limit``; the rest waits
    for the next call.
    """
    out: list[can.Message] = []
    for _ in range(limit):
        msg = bus.recv(0)
        if msg is None:
            break
        if accepts(filters, msg):
            out.append(msg)
    return out
