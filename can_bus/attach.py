"""Which node a channel names: ``"shared:NAME"`` a shared bus's daemon (it must be up),
anything else this process's own channel (with a warning, once per channel, when a
daemon of that name runs: the local channel is a second bus beside it)."""

from __future__ import annotations

import warnings
from typing import Any

import can

from fwbridge.can_bus.bus_node import SHARED, BusNode, Settings, split_channel
from fwbridge.can_bus.daemon_dir import attachable, runtime_dir, valid_name
from fwbridge.can_bus.local_node import LocalNode
from fwbridge.can_bus.remote import RemoteNode
from fwbridge.can_bus.simchannel import SimBusInitError

__all__ = ["SharedBusWarning", "open_node"]


class SharedBusWarning(UserWarning):
    """A local channel opened under the name of a shared bus that is up."""


def open_node(channel: Any, s: Settings, *, owner: Any = None,
              capture: str | can.Listener | None = None, seed: int = 0,
              epoch: float | None = None, dominant_timeout: float = 1e-3) -> BusNode:
    """The node ``channel`` names, opened with ``s`` (``owner`` hears its state changes;
    ``capture`` and the channel settings apply to this process's channels only)."""
    name, shared = split_channel(channel)
    if shared:
        if not valid_name(name):
            raise SimBusInitError(f"channel {channel!r}: {SHARED}NAME with a bus name of "
                                  "letters, digits, '_', '.', '-' (1..64)")
        if capture:
            raise SimBusInitError(
                f"{channel}: capture= records a channel of this process; record the shared bus "
                f"with 'fwbridge can -c {channel} record FILE'")
        if not attachable(name):
            runtime_dir()  # raises the reason there is none here (no Unix-domain sockets)
            raise SimBusInitError(f"no shared bus {name} is up: start it with "
                                  f"'fwbridge can bus up {name}'")
        return RemoteNode(channel, name, s)
    node = LocalNode(channel, s, owner=owner, capture=capture, seed=seed, epoch=epoch,
                     dominant_timeout=dominant_timeout)
    if node.first and attachable(name):
        warnings.warn(SharedBusWarning(
            f"a shared bus {name} is up, but channel {name!r} is this process's own bus; "
            f"channel '{SHARED}{name}' attaches to the shared one"), stacklevel=4)
    return node
