"""Simulated robots: firmware over a simulated body (seed-002 frames; the fish: action frames)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fwbridge.bridge.sim.models.echo import Echo
from fwbridge.bridge.sim.models.fish import FishParams, RobotFish
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.bridge.sim.models.zumo import Zumo, ZumoParams
from fwbridge.protocols.errors import ConfigError

__all__ = ["MODELS", "Echo", "FishParams", "MecanumBase", "MecanumParams", "RobotFish", "Zumo",
           "ZumoParams", "create_model"]

#: Model name -> factory (as used in ``sim://NAME`` and ``fwbridge sim NAME``).
MODELS: dict[str, Callable[[], Any]] = {
    "mecanum": MecanumBase,
    "zumo": Zumo,
    "echo": Echo,
    "fish": RobotFish,
}


def create_model(name: str) -> Any:
    """A fresh model by name; ValueError naming the known ones otherwise."""
    try:
        factory = MODELS[name.lower()]
    except KeyError:
        raise ConfigError(
            f"unknown robot model {name!r} (known: {', '.join(sorted(MODELS))})"
        ) from None
    return factory()
