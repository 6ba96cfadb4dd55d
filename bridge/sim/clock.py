"""Step-driven simulated time, as ZumoHALWebots' ``SimTime``.

Time advances only when the simulation steps by ``basic_time_step_ms``.
``millis()`` is simulated time; ``delay(ms)`` steps until that much simulated
time has passed instead of sleeping. Who performs a step is the ``stepper``:
the :class:`~bridge.sim.world.World` (every robot in lock-step), or inside
real Webots the controller's ``Robot.step``. Without a stepper the clock
steps itself (a lone clock, for unit use).
"""

from __future__ import annotations

from collections.abc import Callable

from fwbridge.protocols.errors import ConfigError, SimStopped

__all__ = ["SimClock", "SimStopped"]


class SimClock:
    """Simulated milliseconds, advanced one basic time step at a time."""

    __slots__ = ("_ms", "basic_time_step_ms", "stepper")

    def __init__(
        self, basic_time_step_ms: int = 1, stepper: Callable[[], int] | None = None
    ) -> None:
        if not isinstance(basic_time_step_ms, int) or basic_time_step_ms <= 0:
            raise ConfigError(
                f"basic time step must be a positive whole number of ms, got {basic_time_step_ms!r}"
            )
        self.basic_time_step_ms = basic_time_step_ms
        self.stepper = stepper
        self._ms = 0

    def advance(self) -> int:
        """Move time on by one basic step (the stepper's job); return the new time in ms."""
        self._ms += self.basic_time_step_ms
        return self._ms

    def step(self) -> int:
        """``SimTime::step()``: run one simulation step; -1 when the simulation has ended."""
        if self.stepper is None:
            self.advance()
            return 0
        return self.stepper()

    def millis(self) -> int:
        """Simulated time in ms since the start (Arduino ``millis()``)."""
        return self._ms

    def micros(self) -> int:
        """Simulated time in µs (a multiple of the basic step)."""
        return self._ms * 1000

    @property
    def seconds(self) -> float:
        return self._ms / 1000.0

    @property
    def dt(self) -> float:
        """One basic step in seconds."""
        return self.basic_time_step_ms / 1000.0

    def delay(self, ms: int) -> None:
        """Step until ``ms`` of simulated time have passed (never sleeps)."""
        end = self._ms + ms
        while self._ms < end:
            if self.step() == -1:
                raise SimStopped("simulation ended during delay()")
