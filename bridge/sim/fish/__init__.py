"""The robot fish's firmware side: main controller, body and free-swimming behaviour.

The host side of the fish's action link is :mod:`fwbridge.bridge.link.action_link`;
the answer payloads are :mod:`fwbridge.protocols.families.fish_payloads`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.sim.fish.behaviour import FreeBehaviour as FreeBehaviour
    from fwbridge.bridge.sim.fish.body import (
        FishBody as FishBody,
    )
    from fwbridge.bridge.sim.fish.body import (
        FishBodyParams as FishBodyParams,
    )
    from fwbridge.bridge.sim.fish.body import (
        Obstacle as Obstacle,
    )
    from fwbridge.bridge.sim.fish.controller import FishController as FishController


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "FreeBehaviour": "fwbridge.bridge.sim.fish.behaviour",
    "FishBody": "fwbridge.bridge.sim.fish.body",
    "FishBodyParams": "fwbridge.bridge.sim.fish.body",
    "Obstacle": "fwbridge.bridge.sim.fish.body",
    "FishController": "fwbridge.bridge.sim.fish.controller",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
