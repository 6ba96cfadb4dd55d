"""Simulated robots: firmware over a simulated body (seed-002 frames; the fish: action frames).

The built-in models are in :data:`MODELS`. Other packages provide models
through the ``fwbridge.sim_models`` entry-point group (name -> a factory
returning a model); code may add one with :func:`register_model`. A config
or a command line names a model (``sim://NAME``), never a module: only the
factory of an installed package's declared entry point is ever loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from fwbridge.bridge.sim.models.echo import Echo
from fwbridge.bridge.sim.models.fish import FishParams, RobotFish
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.bridge.sim.models.zumo import Zumo, ZumoParams
from fwbridge.protocols.errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "MODELS", "Echo", "FishParams", "MecanumBase", "MecanumParams",
           "RobotFish", "Zumo", "ZumoParams", "create_model", "model_factory", "model_names",
           "register_model"]

#: The entry-point group through which installed packages provide sim models.
ENTRY_POINT_GROUP = "fwbridge.sim_models"

#: Model name -> factory (as used in ``sim://NAME`` and ``fwbridge sim NAME``).
MODELS: dict[str, Callable[[], Any]] = {
    "mecanum": MecanumBase,
    "zumo": Zumo,
    "echo": Echo,
    "fish": RobotFish,
}


_REGISTERED: dict[str, Callable[[], Any]] = {}


def register_model(name: str, factory: Callable[[], Any]) -> None:
    """Provide model ``name`` from code (tests, embedding programs); built-ins win."""
    _REGISTERED[name.lower()] = factory


def _plugins() -> dict[str, Any]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def model_names() -> list[str]:
    """Every model name: built-in, registered in code, or provided by an installed package."""
    return sorted(set(MODELS) | set(_REGISTERED) | set(_plugins()))


def model_factory(name: str) -> Callable[[], Any]:
    """The factory of model ``name``; ValueError naming the known ones otherwise."""
    key = name.lower()
    factory = MODELS.get(key) or _REGISTERED.get(key)
    if factory is not None:
        return factory
    plugin = _plugins().get(key)
    if plugin is None:
        raise ConfigError(f"unknown robot model {name!r} (known: {', '.join(model_names())})")
    try:
        loaded = plugin.load()
    except Exception as exc:  # a broken plugin is named, not a traceback
        raise ConfigError(
            f"robot model {name!r} (entry point {plugin.value} in {ENTRY_POINT_GROUP}) "
            f"failed to load: {exc}") from None
    if not callable(loaded):
        raise ConfigError(f"robot model {name!r}: entry point {plugin.value} is not a factory")
    result: Callable[[], Any] = loaded
    return result


def create_model(name: str) -> Any:
    """A fresh model by name; ValueError naming the known ones otherwise."""
    return model_factory(name)()
