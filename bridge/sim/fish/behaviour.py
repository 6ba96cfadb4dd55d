"""Free-action behaviour of the robot fish (the patent's free-action response).

Evaluated every tick while the fish is idle, in the patent's order of
priority:

1. scene modes: user-configured situations read from the sensors (water
   ingress, too deep, …); the first that matches runs its action;
2. obstacle avoidance: two forward sonars about 20° apart (left-front and
   right-front); below a threshold the fish turns away from the nearer side;
3. free mode: draw an action uniformly from the configured set, then keep it
   with that action's probability; an action runs once it has been kept as
   many times as its ``occurrences`` asks ("到達出現次數後").

Sans-I/O and deterministic: ``decide(sensors, now)`` with a seeded RNG.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fwbridge.protocols.errors import ConfigError

__all__ = [
    "DEFAULT_ACTIONS",
    "Decision",
    "FreeBehaviour",
    "RandomAction",
    "SceneMode",
    "Sensors",
    "default_scenes",
]


@dataclass(frozen=True, slots=True)
class Sensors:
    """What the behaviour reads: sonar ranges (m), depth (m), fault flags."""

    sonar_left: float = float("inf")
    sonar_right: float = float("inf")
    depth: float = 0.0
    water_ingress: bool = False
    battery: float = 1.0  # 0..1


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do this tick: an action name, the rule that chose it, and why."""

    action: str
    source: str  # "scene", "avoid", "random", "idle"
    reason: str


@dataclass(frozen=True, slots=True)
class SceneMode:
    name: str
    matches: Callable[[Sensors], bool]
    action: str


@dataclass(frozen=True, slots=True)
class RandomAction:
    name: str
    probability: float  # chance a draw of this action is kept
    occurrences: int = 1  # kept draws needed before it runs

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ConfigError(f"{self.name}: probability {self.probability} is not in [0, 1]")
        if self.occurrences < 1:
            raise ConfigError(f"{self.name}: occurrences must be >= 1")


def default_scenes(max_depth: float = 2.0, low_battery: float = 0.15) -> list[SceneMode]:
    return [
        SceneMode("water-ingress", lambda s: s.water_ingress, "surface"),
        SceneMode("too-deep", lambda s: s.depth > max_depth, "ascend"),
        SceneMode("low-battery", lambda s: s.battery < low_battery, "surface"),
    ]


DEFAULT_ACTIONS = (
    RandomAction("swim-forward", 0.6),
    RandomAction("turn-left", 0.3),
    RandomAction("turn-right", 0.3),
    RandomAction("dive", 0.1, occurrences=2),
    RandomAction("ascend", 0.1, occurrences=2),
    RandomAction("glide", 0.4),
)


@dataclass
class FreeBehaviour:
    """The three-level decision of the free mode; ``seed`` makes it reproducible."""

    seed: int = 0
    avoid_distance: float = 0.6  # m: a sonar reading below this triggers a turn
    scenes: Sequence[SceneMode] = field(default_factory=default_scenes)
    actions: Sequence[RandomAction] = DEFAULT_ACTIONS
    _rng: random.Random = field(init=False, repr=False)
    _kept: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.actions:
            raise ConfigError("free mode needs at least one action")
        self._rng = random.Random(self.seed)
        self._kept = {a.name: 0 for a in self.actions}

    def add_action(self, action: RandomAction) -> None:
        """Add (or replace, by name) a random action, e.g. an action group stored later."""
        kept = [a for a in self.actions if a.name != action.name]
        self.actions = (*kept, action)
        self._kept[action.name] = 0

    def reflex(self, sensors: Sensors) -> Decision | None:
        """Levels 1 and 2 only (scene, avoidance): no random draw, so it can be
        asked every tick while an action runs."""
        for scene in self.scenes:
            if scene.matches(sensors):
                return Decision(scene.action, "scene", scene.name)
        left, right = sensors.sonar_left, sensors.sonar_right
        nearest = min(left, right)
        if nearest < self.avoid_distance:
            # Turn away from the nearer side; a tie turns left (either is as good).
            action = "turn-right" if left < right else "turn-left"
            side = "left" if left < right else "right"
            return Decision(action, "avoid", f"{side} sonar {nearest:.2f} m < "
                                              f"{self.avoid_distance:.2f} m")
        return None

    def decide(self, sensors: Sensors) -> Decision:
        reflex = self.reflex(sensors)
        if reflex is not None:
            return reflex
        pick = self.actions[self._rng.randrange(len(self.actions))]
        if self._rng.random() < pick.probability:
            self._kept[pick.name] += 1
            if self._kept[pick.name] >= pick.occurrences:
                self._kept[pick.name] = 0
                return Decision(pick.name, "random", f"p={pick.probability}")
        return Decision("idle", "idle", "no action drawn")
