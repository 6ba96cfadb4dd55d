"""Run a simulated serial robot on a pty until its duration ends or it is stopped.

:func:`run_sim` is what ``fwbridge sim MODEL`` runs: it builds the model and
its endpoint, puts the robot link on a new pty (with the supervisor port),
lets a capture tap the link, runs the clock and reports the status every
``status_period_s``; every way out (the duration, a stop asked for, a stop
signal, an error) stops the simulation and removes what it created (the
ptys, the ``--link`` symlink, the model's parts, the capture). What is
shown is the caller's: the hooks get the facts, the result the counters.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.protocols.errors import Error

__all__ = ["SimHooks", "SimRunConfig", "SimRunResult", "SimStartError", "SimTap", "run_sim"]

StatusUpdate = Callable[[dict[str, Any]], None]


class SimTap(Protocol):
    """A capture of the robot link: bytes in both directions, closed at the end."""

    def write(self, direction: str, data: bytes) -> None: ...

    def close(self) -> None: ...


class SimStartError(Error, ValueError):
    """The simulation could not start (a bad option, a pty or file that cannot be made);
    what was opened is closed again. The message is the cause's."""


@dataclass(frozen=True)
class SimRunConfig:
    """What to simulate and how: the model's name and its options."""

    model: str
    faults: FaultSpec = field(default_factory=FaultSpec)
    pacing: str = "realtime"
    speed: float = 1.0
    step_ms: int = 1
    baud: int = -1
    link_path: str | None = None
    wait_for_host: bool = False
    watchdog_ms: int | None = None
    flash_path: str | None = None  # the fish's flash file
    duration_ms: int | None = None  # simulated time; None: until stopped
    status_period_s: float = 0.1


@contextlib.contextmanager
def _no_view() -> Iterator[StatusUpdate]:
    yield lambda _st: None


@dataclass
class SimHooks:
    """The caller's side of a run: what it shows and when it wants to stop.

    ``on_ready`` gets the ready facts (the ports, the pacing, the faults) once
    the ports exist, before the clock starts; ``status_view`` is entered once
    the clock runs and gives the function that gets each status;
    ``stop_requested`` is asked each period (a closed stdout ends a run
    quietly); ``open_tap`` opens the capture once the link exists (a failed
    open closes the link and the model).
    """

    on_ready: Callable[[dict[str, Any]], None] = lambda _ready: None
    status_view: Callable[[], AbstractContextManager[StatusUpdate]] = _no_view
    stop_requested: Callable[[], bool] = lambda: False
    open_tap: Callable[[PtyLink], SimTap | None] = lambda _link: None


@dataclass
class SimRunResult:
    """How a run ended: the last status (with ``wall_s``), a stop signal, an error."""

    status: dict[str, Any]
    wall_s: float
    interrupted: bool
    error: BaseException | None


def _close_model(model: Any) -> None:
    """Shut a model's parts down (the fish's CAN nodes), not left to the collector."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


def _open(config: SimRunConfig) -> tuple[SimEndpoint, PtyLink]:
    robot: Any = config.model
    endpoint: SimEndpoint | None = None
    try:
        if config.flash_path is not None:
            from fwbridge.bridge.sim.models.fish import FishParams, RobotFish

            robot = RobotFish(FishParams(flash=config.flash_path))
        endpoint = SimEndpoint(robot, pacing=config.pacing, speed=config.speed,
                               step_ms=config.step_ms, faults=config.faults, baud=config.baud,
                               watchdog_ms=config.watchdog_ms)
        return endpoint, PtyLink(endpoint, link_path=config.link_path)
    except (ValueError, OSError) as exc:
        # A failed start shuts down what it opened (the fish's CAN nodes), quietly.
        _close_model(endpoint.model if endpoint is not None else robot)
        raise SimStartError(str(exc)) from exc


def run_sim(config: SimRunConfig, hooks: SimHooks | None = None) -> SimRunResult:
    """Run ``config``'s robot on a new pty until its duration ends, ``hooks`` asks to
    stop, or a stop signal (``KeyboardInterrupt``) comes; raises :class:`SimStartError`
    when it cannot start."""
    hooks = hooks or SimHooks()
    endpoint, link = _open(config)
    try:
        tap = hooks.open_tap(link)
    except BaseException:  # a failed start: the model's parts (the fish's CAN nodes) go too
        endpoint.stop()
        link.close()
        raise
    link.tap = tap.write if tap is not None else None
    interrupted = False
    clock0: float | None = None
    try:  # from here every stop removes what was created (the ptys, the --link)
        hooks.on_ready({
            "event": "ready", "model": config.model, "port": link.path,
            "supervisor_port": link.supervisor_path, "pacing": config.pacing,
            "step_ms": config.step_ms, "faults": str(config.faults), "seed": config.faults.seed,
        })
        if config.wait_for_host:
            link.wait_for_host(endpoint.stop_event)
        clock0 = time.monotonic()
        endpoint.start(config.duration_ms)
        with hooks.status_view() as update:
            while endpoint.running:
                time.sleep(config.status_period_s)
                if hooks.stop_requested():
                    break
                update(endpoint.status())
    except KeyboardInterrupt:
        interrupted = True
    finally:
        wall = time.monotonic() - clock0 if clock0 is not None else 0.0
        endpoint.stop()
        _close_model(endpoint.model)
        link.close()
        if tap is not None:
            tap.close()
    st = endpoint.status()
    st["wall_s"] = round(wall, 3)  # from the clock's start (the host's first byte) to the end
    error = endpoint.error
    if isinstance(error, KeyboardInterrupt):
        error = None
    return SimRunResult(status=st, wall_s=wall, interrupted=interrupted, error=error)
