"""A ROS 2 participant on Zenoh, as rmw_zenoh_cpp is one: the session and its nodes.

One :class:`Participant` is one Zenoh session (a ROS 2 context). Its nodes declare
the liveliness tokens that make them visible to ``ros2 node list``, and make the
ends of topics (:mod:`~fwbridge.bridge.ros2.topic_ends`: publishers, subscriptions)
and of services (:mod:`~fwbridge.bridge.ros2.service_ends`: servers, clients).

The session connects to the given endpoints (a router on
``tcp/localhost:7447`` by default: ``fwbridge ros2 router``, or rmw_zenoh's).
With no ``listen`` endpoint it is a Zenoh *client* of the router, which
forwards its samples both ways, so nothing listens; with ``listen``
endpoints it is a *peer* that others may reach directly (as rmw_zenoh's own
sessions are). A client cannot open before a router answers, so the session
is opened by a background thread that retries with bounded back-off: until
then publishing drops samples (counted), and once open every node, publisher
and subscription made meanwhile is declared. A router that restarts is
rejoined by Zenoh itself. Multicast scouting is off, as in rmw_zenoh.

Zenoh hands each subscription's samples and each service's requests to a Python
thread of their own (one per subscription or service). A *polled* participant
(``polled=True``: a fleet, whose robots have a dozen each) keeps them instead in
a bounded Zenoh channel per end, the oldest dropped first when it is full, until
:meth:`Participant.poll` hands them to their callbacks on the caller's thread: no
thread per end, and the callbacks run where the rest of the program's state
lives.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fwbridge.bridge.ros2.keys import Entity, liveliness_key, parse_liveliness, resolve_name
from fwbridge.bridge.ros2.service_ends import RosClient, RosService
from fwbridge.bridge.ros2.topic_ends import RosPublisher, RosSubscription, undeclare
from fwbridge.bridge.rosmsg import cdr
from fwbridge.bridge.rosmsg.cdr import MessageError
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["DEFAULT_QOS", "Participant", "RosNode", "zenoh_config"]

log = logging.getLogger("fwbridge.ros2")

DEFAULT_QOS = Qos()  # reliable, volatile, keep_last 10: rclcpp's default

#: Bounds of Zenoh's own reconnection to the endpoints once open (ms).
RETRY = {"period_init_ms": 250, "period_max_ms": 2000, "period_increase_factor": 2}
#: Back-off of the attempts to open a client session (s): first, doubling, at most.
OPEN_RETRY = (0.25, 2.0)
#: A polled end's channel: the samples or requests it holds until a poll, the oldest
#: dropped beyond (a flood is bounded and never blocks Zenoh's threads; the channel
#: takes memory only as it fills).
INBOX = 1024
#: The most one poll hands on from one end: a flooded end does not hold up the round
#: for the others, and the rest waits for the next poll.
POLL_BATCH = 256


def zenoh_config(connect: Sequence[str], listen: Sequence[str] = (),
                 mode: str | None = None) -> Any:
    """The session's Zenoh config: ``mode`` (default: client without ``listen``,
    peer with it), these endpoints only, no multicast scouting, timestamping on."""
    import zenoh

    mode = mode or ("peer" if listen else "client")
    cfg = zenoh.Config()
    cfg.insert_json5("mode", json.dumps(mode))
    cfg.insert_json5("scouting/multicast/enabled", "false")
    cfg.insert_json5("connect/endpoints", json.dumps(list(connect)))
    cfg.insert_json5("listen/endpoints", json.dumps(list(listen)))
    # as in rmw_zenoh's session config: transient_local's advanced publishers need it
    cfg.insert_json5("timestamping/enabled", "true")
    if mode == "peer":  # opens at once and keeps trying the endpoints in the background
        cfg.insert_json5("connect/timeout_ms", "-1")
        cfg.insert_json5("connect/exit_on_failure", "false")
    if mode != "router":
        cfg.insert_json5("connect/retry", json.dumps(RETRY))
    return cfg


class Participant:
    """One Zenoh session in a ROS 2 domain; :meth:`node` makes ROS 2 nodes on it."""

    def __init__(self, *, domain: int = 0, distro: str = "jazzy",
                 connect: Sequence[str] = ("tcp/localhost:7447",),
                 listen: Sequence[str] = (), mode: str | None = None,
                 wait: float = 0.0, polled: bool = False) -> None:
        import zenoh

        if distro not in cdr.DISTROS:
            raise MessageError(f"unknown ROS 2 distro {distro!r}")
        self.domain, self.distro = domain, distro
        self.connect, self.listen = tuple(connect), tuple(listen)
        self._config = zenoh_config(connect, listen, mode)
        self._zenoh: Any = zenoh
        self.session: Any = None
        self.zid = ""
        self._ids = itertools.count()
        self._lock = threading.RLock()
        self._opened = threading.Event()
        self._closing = threading.Event()
        self.nodes: list[RosNode] = []
        self.closed = False
        self.open_attempts = 0
        self.open_error: str | None = None
        self.polled = polled
        # (an end's Zenoh entity, its try_recv, its callback, whether it takes requests):
        # replaced whole, so poll() needs no lock
        self._inboxes: tuple[tuple[Any, Callable[[], Any], Callable[[Any], Any], bool],
                             ...] = ()
        if not self._try_open():
            threading.Thread(target=self._open_loop, name="zenoh-open", daemon=True).start()
            if wait:
                self._opened.wait(wait)

    # -- the session -------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._opened.is_set()

    def wait_open(self, timeout: float | None = None) -> bool:
        return self._opened.wait(timeout)

    def _try_open(self) -> bool:
        self.open_attempts += 1
        try:
            session: Any = self._zenoh.open(self._config)
        except Exception as exc:  # no router yet (client mode), or a bad endpoint
            self.open_error = str(exc)
            return False
        with self._lock:
            if self.closed:
                session.close()
                return True
            self.session = session
            self.zid = str(session.info.zid())
            for node in self.nodes:
                node._declare()
            self._opened.set()
        return True

    def _open_loop(self) -> None:
        delay, top = OPEN_RETRY
        while not self._closing.wait(delay):
            if self._try_open():
                return
            delay = min(delay * 2, top)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, declare: Callable[[Any], Any], callback: Callable[[Any], Any], *,
                requests: bool = False) -> Any:
        """Declare a subscriber or queryable (``declare(handler)``) whose samples or
        queries go to ``callback``: from Zenoh, or when polled from :meth:`poll`
        (``requests``: a service's, which a poll may leave for a later one)."""
        if not self.polled:
            return declare(callback)
        entity = declare(self._zenoh.handlers.RingChannel(INBOX))
        with self._lock:
            self._inboxes = (*self._inboxes, (entity, entity.try_recv, callback, requests))
        return entity

    def forget(self, entity: Any) -> None:
        """An end's entity is going: poll() no longer reads it."""
        with self._lock:
            self._inboxes = tuple(box for box in self._inboxes if box[0] is not entity)

    def poll(self, requests: bool = True) -> int:
        """Hand what the polled ends hold to their callbacks, here (at most
        :data:`POLL_BATCH` from each); how many. ``requests=False`` leaves the services'
        requests for a later poll (a caller that polls often looks at them less often:
        a service's answer may wait where a ``cmd_vel`` may not). The callbacks count and
        report their own failures."""
        handed = 0
        for _entity, receive, callback, of_service in self._inboxes:
            if of_service and not requests:
                continue
            for _ in range(POLL_BATCH):
                try:
                    item = receive()
                except Exception:  # undeclared meanwhile (its end is closing)
                    break
                if item is None:
                    break
                try:
                    callback(item)
                except Exception:  # a reply to a client that left: the rest still come
                    log.debug("a polled end's callback failed", exc_info=True)
                handed += 1
        return handed

    def node(self, name: str, namespace: str = "/") -> RosNode:
        """A ROS 2 node (its ``NN`` liveliness token is declared once the session is open)."""
        with self._lock:
            node = RosNode(self, name, namespace)
            self.nodes.append(node)
            if self.session is not None:
                node._declare()
        return node

    def connections(self) -> tuple[int, int]:
        """How many routers and peers the session is connected to (0, 0 until open)."""
        if self.session is None:
            return 0, 0
        info = self.session.info
        return len(list(info.routers_zid())), len(list(info.peers_zid()))

    def reachable(self) -> bool:
        """Open and connected to at least one router or peer."""
        return any(self.connections())

    def graph(self, timeout: float = 1.0) -> list[Entity]:
        """Every node, publisher and subscription of the domain, from their tokens."""
        if self.session is None:
            return []
        out = []
        replies = self.session.liveliness().get(f"@ros2_lv/{self.domain}/**", timeout=timeout)
        for reply in replies:
            if reply.ok is None:
                continue
            entity = parse_liveliness(str(reply.ok.key_expr))
            if entity is not None:
                out.append(entity)
        return out

    def close(self) -> None:
        """Undeclare every node (their tokens vanish from the graph) and close the session."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._closing.set()
            for node in self.nodes:
                node.close()
            if self.session is not None:
                self.session.close()

    def __enter__(self) -> Participant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

class RosNode:
    """A ROS 2 node: a liveliness token, and the publishers and subscriptions made on it."""

    def __init__(self, participant: Participant, name: str, namespace: str = "/") -> None:
        self.participant = participant
        self.name = name
        self.namespace = namespace if namespace.startswith("/") else "/" + namespace
        self.id = participant.next_id()
        self.key = ""
        self._token: Any = None
        self.entities: list[RosPublisher | RosSubscription | RosService | RosClient] = []

    def _declare(self) -> None:
        """Called with the session open: the node's token, then its entities'."""
        p = self.participant
        self.key = liveliness_key(p.domain, p.zid, self.id, self.id, "NN", self.namespace,
                                  self.name)
        self._token = p.session.liveliness().declare_token(self.key)
        for entity in self.entities:
            entity._declare()

    def resolve(self, topic: str) -> str:
        return resolve_name(topic, self.namespace)

    def _add(self, entity: RosPublisher | RosSubscription | RosService | RosClient) -> None:
        with self.participant._lock:
            self.entities.append(entity)
            if self._token is not None:
                entity._declare()

    def publisher(self, topic: str, msgtype: str, qos: Qos = DEFAULT_QOS) -> RosPublisher:
        pub = RosPublisher(self, self.resolve(topic), msgtype, qos)
        self._add(pub)
        return pub

    def subscription(self, topic: str, msgtype: str, callback: Callable[[Any], Any],
                     qos: Qos = DEFAULT_QOS, *, any_hash: bool = False,
                     max_age: float | None = None) -> RosSubscription:
        """``max_age``: drop (count as ``stale``) samples that waited longer than this
        many seconds on the way (see :class:`~fwbridge.bridge.ros2.keys.Freshness`)."""
        sub = RosSubscription(self, self.resolve(topic), msgtype, callback, qos, any_hash,
                              max_age)
        self._add(sub)
        return sub

    def resolve_service(self, name: str) -> str:
        """``~/get_status`` -> ``/robot1/base_bridge/get_status`` (the node's private
        namespace); other names as topics."""
        if name.startswith("~/"):
            return f"{self.namespace.rstrip('/')}/{self.name}/{name[2:]}"
        return self.resolve(name)

    def service(self, name: str, srvtype: str, handler: Callable[[Any], Any], *,
                max_bytes: int | None = None, max_items: int | None = None) -> RosService:
        """A service server: ``handler(request)`` returns the response message. Requests
        beyond ``max_bytes`` or ``max_items`` (see :class:`RosService`) are refused
        before they are decoded."""
        srv = RosService(self, self.resolve_service(name), srvtype, handler,
                         max_bytes=max_bytes, max_items=max_items)
        self._add(srv)
        return srv

    def client(self, name: str, srvtype: str) -> RosClient:
        cli = RosClient(self, self.resolve_service(name), srvtype)
        self._add(cli)
        return cli

    def close(self) -> None:
        for entity in self.entities:
            entity.close()
        self.entities.clear()
        if self._token is not None:
            undeclare(self._token)
            self._token = None
