"""A Zenoh router for ROS 2 without ROS: what ``ros2 run rmw_zenoh_cpp rmw_zenohd`` runs.

rmw_zenoh's nodes find each other through a router (multicast scouting is
off in ROS); fwbridge's own sessions are its clients. :func:`router_config`
takes from rmw_zenohd's default config
(``rmw_zenoh_cpp/config/DEFAULT_RMW_ZENOH_ROUTER_CONFIG.json5``) what those
who connect depend on:

- mode ``router``, on rmw_zenohd's port 7447;
- multicast scouting off (gossip, Zenoh's default, stays on: that is how
  rmw_zenoh's peers learn of each other through the router);
- timestamping on: rmw_zenoh's ``transient_local`` publication caches need it;
- peers' failover brokering off, as in rmw_zenohd (every peer connects to the
  others; recent Zenoh releases accept the setting and ignore it);
- the admin space readable, not writable.

One difference, on purpose: rmw_zenohd listens on ``tcp/[::]:7447``, every
interface; this router listens on ``tcp/127.0.0.1:7447`` unless given other
endpoints, since nothing should be reachable from other machines unless asked
(:func:`~fwbridge.bridge.link.link_urls.is_loopback_address` tells which endpoints
are).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from fwbridge.protocols.errors import ConfigError

__all__ = ["DEFAULT_LISTEN", "open_router", "router_config", "zenoh_error"]

#: Where the router listens by default: rmw_zenohd's port, on loopback only.
DEFAULT_LISTEN = ("tcp/127.0.0.1:7447",)

#: Back-off of the attempts to reach the routers of ``connect`` (ms), as the participants'.
RETRY = {"period_init_ms": 250, "period_max_ms": 2000, "period_increase_factor": 2}


def router_config(listen: Sequence[str] = DEFAULT_LISTEN, connect: Sequence[str] = ()) -> Any:
    """The Zenoh config of a router on ``listen`` (see the module) that connects to the
    routers at ``connect`` (none by default), retrying until they answer, as one on
    another machine may start later or restart."""
    import zenoh

    cfg = zenoh.Config()
    for key, value in (("mode", "router"),
                       ("listen/endpoints", list(listen)),
                       ("connect/endpoints", list(connect)),
                       ("scouting/multicast/enabled", False),
                       ("timestamping/enabled", True),
                       ("routing/router/peers_failover_brokering", False),
                       ("adminspace/enabled", True),
                       ("adminspace/permissions/read", True),
                       ("adminspace/permissions/write", False)):
        cfg.insert_json5(key, json.dumps(value))
    if connect:  # never give up on another router, and find it soon once it is back
        cfg.insert_json5("connect/timeout_ms", "-1")
        cfg.insert_json5("connect/exit_on_failure", "false")
        cfg.insert_json5("connect/retry", json.dumps(RETRY))
    return cfg


def zenoh_error(exc: BaseException) -> str:
    """Zenoh's error text without its Rust source locations; the OS's reason when it
    gave one (``Address already in use``)."""
    text = re.sub(r"\s+at \S+\.rs:\d+\.?", "", " ".join(str(exc).split()))
    reason = re.search(r"\[[^\[\]]*?:\s*([^\[\]:]+?)\s*\(os error \d+\)\]", text)
    return reason.group(1) if reason else text.strip().rstrip(".")


def open_router(listen: Sequence[str] = DEFAULT_LISTEN, connect: Sequence[str] = ()) -> Any:
    """A router session listening on ``listen`` (and connecting to ``connect``);
    :class:`ConfigError` (naming the endpoints) when Zenoh cannot listen there."""
    import zenoh

    try:
        return zenoh.open(router_config(listen, connect))
    except zenoh.ZError as exc:
        raise ConfigError(f"router: cannot listen on {', '.join(listen)}: "
                          f"{zenoh_error(exc)}") from None
