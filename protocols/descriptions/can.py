"""The ``[can]`` table of a description: the CAN messages that carry it, and signal overlays.

``[[can.message]]`` gives the IDs (``id + k`` for each node ``k`` of ``nodes``);
``[[can.signal]]`` reads bytes that fields already cover as one wider signal
for a DBC, e.g. the actuator's fine position: an int16 over ``reserved_a`` and
``reserved_b`` (``replaces`` names the fields it stands for).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

from fwbridge.protocols.descriptions.model import CanMessage, CanSignal, FrameDescription

# The values are description_types.py's (a FrameDescription holds them); this module
# parses and checks them, and re-exports the two.
from fwbridge.protocols.descriptions.names import DBC_KEYWORDS

__all__ = ["CanMessage", "CanSignal", "check_can_signals", "parse_can"]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")
_NODE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}\Z")  # a DBC node name is a C identifier
#: Bounds that keep a description's DBC (and the checks of its names) small.
MAX_MESSAGES = 256
MAX_IDS = 2048
MAX_SIGNALS = 64
_INT_SIZES = {"u8": 1, "i8": 1, "u16": 2, "i16": 2, "u32": 4, "i32": 4, "u64": 8, "i64": 8}


def _checked_name(chk: Any, value: str, table: str, i: int, label: str) -> str:
    if not _NAME.match(value):
        raise chk.fail(table, i, "name", f"{value!r} is not a name: lower-case letters, digits "
                       "and _, starting with a letter", label)
    return value


def _messages(chk: Any, msgs: Any) -> tuple[CanMessage, ...]:
    if not isinstance(msgs, list) or not msgs:
        raise chk.fail("can", None, "message", "give at least one [[can.message]]")
    if len(msgs) > MAX_MESSAGES:
        raise chk.fail("can", None, "message", f"{len(msgs)} messages; at most {MAX_MESSAGES}")
    out: list[CanMessage] = []
    taken: dict[tuple[int, bool], tuple[str, str]] = {}  # (ID, extended) -> message, label
    for i, m in enumerate(msgs):
        label = f"can.message[{i + 1}]"
        if not isinstance(m, dict):
            raise chk.fail("can.message", i, None, "expected a table", label)
        chk.table(m, "can.message", {"name", "id", "nodes", "extended", "sender"}, i, label)
        name = _checked_name(chk, chk.get(m, "can.message", i, "name", str, ..., label),
                             "can.message", i, label)
        ext = chk.get(m, "can.message", i, "extended", bool, False, label)
        ident = chk.get(m, "can.message", i, "id", int, ..., label)
        nodes = chk.get(m, "can.message", i, "nodes", list, None, label)
        span = None
        if nodes is not None:
            if (len(nodes) != 2 or not all(isinstance(k, int) and not isinstance(k, bool)
                                           for k in nodes)
                    or not 0 <= nodes[0] <= nodes[1] <= 255):
                raise chk.fail("can.message", i, "nodes", "expected [first, last] in 0..255",
                               label)
            span = (nodes[0], nodes[1])
        top = ident + (span[1] if span else 0)
        if ident < 0 or top >= (1 << (29 if ext else 11)):
            raise chk.fail("can.message", i, "id", f"0x{top:x} does not fit a "
                           f"{'29' if ext else '11'}-bit identifier", label)
        sender = chk.get(m, "can.message", i, "sender", str, "", label)
        if sender and not _NODE.match(sender):
            raise chk.fail("can.message", i, "sender", f"{sender!r} is not a node name: letters, "
                           "digits and _, starting with a letter, at most 48", label)
        if sender.upper() in DBC_KEYWORDS:
            raise chk.fail("can.message", i, "sender", f"{sender!r} is a word of the DBC "
                           f"grammar ({sender.upper()}); choose another node name", label)
        out.append(CanMessage(name, ident, span, ext, sender))
        ids = sum(len(msg.ids()) for msg in out)
        if ids > MAX_IDS:
            raise chk.fail("can.message", i, "nodes", f"the messages take {ids} CAN IDs; at "
                           f"most {MAX_IDS}", label)
        for can_id, node in out[-1].ids():
            msg_name = name if node is None else f"{name}_{node}"
            if (can_id, ext) in taken:  # a DBC of both would keep one and drop the other
                other, where = taken[(can_id, ext)]
                raise chk.fail("can.message", i, "id", f"CAN ID 0x{can_id:x} (message "
                               f"{msg_name!r}) is already message {other!r} ({where}): one "
                               "ID, one message", label)
            taken[(can_id, ext)] = (msg_name, label)
    return tuple(out)


def _signals(chk: Any, sigs: Any) -> tuple[CanSignal, ...]:
    if not isinstance(sigs, list):
        raise chk.fail("can", None, "signal", "expected [[can.signal]] tables")
    if len(sigs) > MAX_SIGNALS:
        raise chk.fail("can", None, "signal", f"{len(sigs)} signals; at most {MAX_SIGNALS}")
    out = []
    for i, s in enumerate(sigs):
        label = f"can.signal[{i + 1}]"
        if not isinstance(s, dict):
            raise chk.fail("can.signal", i, None, "expected a table", label)
        chk.table(s, "can.signal", {"name", "type", "byte", "byte_order", "replaces", "scale",
                                    "offset", "unit", "doc"}, i, label)
        name = _checked_name(chk, chk.get(s, "can.signal", i, "name", str, ..., label),
                             "can.signal", i, label)
        stype = chk.get(s, "can.signal", i, "type", str, ..., label)
        if stype not in _INT_SIZES:
            raise chk.fail("can.signal", i, "type", f"{stype!r}: an integer type "
                           f"({' '.join(_INT_SIZES)})", label)
        order = chk.get(s, "can.signal", i, "byte_order", str, "", label)
        if order not in ("", "little", "big"):
            raise chk.fail("can.signal", i, "byte_order", f"{order!r}: choose little or big",
                           label)
        replaces = chk.get(s, "can.signal", i, "replaces", list, ..., label)
        if not replaces or not all(isinstance(r, str) for r in replaces):
            raise chk.fail("can.signal", i, "replaces", "the names of the fields it covers",
                           label)
        scale = chk.get(s, "can.signal", i, "scale", float, 1.0, label)
        if scale == 0.0:
            raise chk.fail("can.signal", i, "scale", "must not be 0", label)
        offset = chk.get(s, "can.signal", i, "offset", float, 0.0, label)
        for key, v in (("scale", scale), ("offset", offset)):
            if not math.isfinite(v):
                raise chk.fail("can.signal", i, key, f"{v!r}: needs a finite number", label)
        out.append(CanSignal(name, stype, chk.get(s, "can.signal", i, "byte", int, ..., label),
                             order, tuple(replaces), scale, offset,
                             chk.text(s, "can.signal", i, "unit", 64, label),
                             chk.text(s, "can.signal", i, "doc", 1000, label)))
    return tuple(out)


def parse_can(chk: Any, doc: Any) -> tuple[tuple[CanMessage, ...], tuple[CanSignal, ...]]:
    """The ``[can]`` table: messages and signal overlays (checked against the fields later)."""
    if not isinstance(doc, dict):
        raise chk.fail("can", None, None, "expected a table")
    chk.table(doc, "can", {"message", "signal"})
    return _messages(chk, doc.get("message")), _signals(chk, doc.get("signal", []))


def check_can_signals(chk: Any, desc: FrameDescription) -> None:
    """Each overlay covers exactly the bytes of the fields it replaces, inside the payload."""
    names = desc.field_names
    for i, s in enumerate(desc.can_signals):
        label = f"can.signal[{i + 1}]"
        if s.name in names:
            raise chk.fail("can.signal", i, "name", f"{s.name!r} is already a field", label)
        missing = [r for r in s.replaces if r not in names]
        if missing:
            raise chk.fail("can.signal", i, "replaces", f"no field named {missing[0]!r}", label)
        covered = sorted((desc.offset_of(r), desc.field(r).width or 0) for r in s.replaces)
        start, end = covered[0][0], covered[-1][0] + covered[-1][1]
        contiguous = all(a + w == b for (a, w), (b, _) in itertools.pairwise(covered))
        if not contiguous or start != s.byte or end - start != s.size:
            raise chk.fail("can.signal", i, "byte", f"{s.type} at byte {s.byte} does not cover "
                           f"exactly the fields {', '.join(s.replaces)} (bytes {start}..{end - 1})",
                           label)
