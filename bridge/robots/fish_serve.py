"""The fish as a ROS 2 node, as ``fwbridge fish serve`` runs it: the acknowledged action
link on an open port, the node started, served until a deadline or a stop signal, then
its counters; the node stopped and the port closed on every way out."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwbridge.bridge.link.action_link import ActionLink
from fwbridge.bridge.link.transports import IO_ERRORS
from fwbridge.bridge.robots.fish_client import FishClient

__all__ = ["FishServeConfig", "FishServeResult", "serve_fish"]


@dataclass(frozen=True)
class FishServeConfig:
    settings: Any  # the ROS 2 settings (bridge.ros2.config.Ros2Settings)
    port: str  # named in the node's status (the link's URL)
    machine: int = 0
    timeout: float = 0.5  # seconds per answer
    retries: int = 5
    node_name: str = "fish_bridge"
    duration: float | None = None  # None: until a stop signal


@dataclass
class FishServeResult:
    stats: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False


def serve_fish(cfg: FishServeConfig, serial_port: Any, *,
               say: Callable[[str], None] = lambda text: None,
               on_ready: Callable[[Any], None] = lambda ros: None,
               on_interrupt: Callable[[], None] = lambda: None,
               interruptible: Callable[[], contextlib.AbstractContextManager[Any]] = (
                   contextlib.nullcontext)) -> FishServeResult:
    """Serve the fish on ``serial_port`` (open; closed here whatever happens) as a ROS 2
    node until ``duration`` or a stop signal (inside ``interruptible``: a normal end).
    ``on_ready`` gets the started node (its ``fqn`` and ``service_names``); ``on_interrupt``
    runs when a stop signal ends the run, before the node stops."""
    from fwbridge.bridge.ros2.fish import Ros2Fish

    fish = FishClient(ActionLink(serial_port, timeout=cfg.timeout, retries=cfg.retries),
                      cfg.machine)
    # a call waits for another at most one exchange's budget with a fish that is silent
    ros = Ros2Fish(fish, cfg.settings, node_name=cfg.node_name, link_url=cfg.port,
                   lock_wait=cfg.timeout * (cfg.retries + 1), say=say)
    interrupted = False
    try:
        with interruptible():
            try:
                ros.start()
                on_ready(ros)
                end = None if cfg.duration is None else time.monotonic() + cfg.duration
                while end is None or time.monotonic() < end:
                    time.sleep(0.1 if end is None
                               else max(0.0, min(0.1, end - time.monotonic())))
            except KeyboardInterrupt:
                interrupted = True
                on_interrupt()
    finally:
        stats = {**ros.stats(), "attempts": fish.attempts}
        ros.stop()
        with contextlib.suppress(*IO_ERRORS):
            serial_port.close()
    return FishServeResult(stats, interrupted)
