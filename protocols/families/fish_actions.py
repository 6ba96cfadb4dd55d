"""The fish's free-mode actions by name and code (PROTOCOLS.md 6, "fish").

A query result (:class:`~fwbridge.protocols.families.fish_payloads.RobotInfo`) and a scene
of the user configuration (:mod:`fwbridge.protocols.families.fish_commands`) both name
an action by a one-byte code: the index of a built-in action, or
``STORED_ACTION_BASE + N`` for stored action group N.
"""

from __future__ import annotations

__all__ = ["FREE_ACTIONS", "STORED_ACTION_BASE", "action_code", "action_name"]

#: The built-in free-mode actions (index = code).
FREE_ACTIONS = ("idle", "swim-forward", "turn-left", "turn-right", "dive", "ascend", "glide",
                "surface")
#: Stored action group N runs in free mode as ``group-N``, code 0x80 + N.
STORED_ACTION_BASE = 0x80


def action_code(name: str) -> int:
    """The code of a free-mode action name (0xFF: none of the known ones)."""
    if name in FREE_ACTIONS:
        return FREE_ACTIONS.index(name)
    if name.startswith("group-") and name[6:].isdigit() and int(name[6:]) < 0x7F:
        return STORED_ACTION_BASE + int(name[6:])
    return 0xFF


def action_name(code: int) -> str:
    """Inverse of :func:`action_code`."""
    if code < len(FREE_ACTIONS):
        return FREE_ACTIONS[code]
    if STORED_ACTION_BASE <= code < 0xFF:
        return f"group-{code - STORED_ACTION_BASE}"
    return f"0x{code:02x}"
