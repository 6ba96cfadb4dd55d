"""A ROS 2 participant on Zenoh, as rmw_zenoh_cpp is one: nodes, publishers, subscriptions.

One :class:`Participant` is one Zenoh session (a ROS 2 context). Its nodes,
publishers and subscriptions declare the liveliness tokens that make them
visible to ``ros2 node list`` / ``ros2 topic list``; every sample carries
rmw_zenoh's attachment; payloads are CDR from the rosbags typestore.

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
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fwbridge.bridge.ros2.keys import (
    Attachment,
    Entity,
    Freshness,
    data_key,
    entity_gid,
    liveliness_key,
    parse_liveliness,
    resolve_name,
)
from fwbridge.bridge.ros2.services import MAX_ITEMS, MAX_REQUEST, Throttle, request_refusal
from fwbridge.bridge.rosmsg import topics
from fwbridge.bridge.rosmsg.topics import MessageError, Qos

__all__ = ["Participant", "RosClient", "RosNode", "RosPublisher", "RosService",
           "RosSubscription", "zenoh_config"]

log = logging.getLogger("fwbridge.ros2")

DEFAULT_QOS = Qos()  # reliable, volatile, keep_last 10: rclcpp's default

#: Bounds of Zenoh's own reconnection to the endpoints once open (ms).
RETRY = {"period_init_ms": 250, "period_max_ms": 2000, "period_increase_factor": 2}
#: Back-off of the attempts to open a client session (s): first, doubling, at most.
OPEN_RETRY = (0.25, 2.0)


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
                 wait: float = 0.0) -> None:
        import zenoh

        if distro not in topics.DISTROS:
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
            _undeclare(self._token)
            self._token = None


def _undeclare(entity: Any) -> None:
    try:
        entity.undeclare()
    except Exception:  # already undeclared, or the session is closing: nothing to release
        log.debug("undeclare failed", exc_info=True)


class RosPublisher:
    """Publishes typed messages (CDR + rmw_zenoh attachment) on one topic."""

    def __init__(self, node: RosNode, topic: str, msgtype: str, qos: Qos) -> None:
        p = node.participant
        self.node, self.qos, self.id = node, qos, p.next_id()
        self.topic, self.msgtype, self.distro = topic, msgtype, p.distro
        self.type_hash = topics.type_hash(msgtype, p.distro)
        self.key = data_key(p.domain, topic, msgtype, self.type_hash)
        self.token_key = ""
        self.gid = bytes(16)
        self.sequence = 0
        self.unsent = 0  # samples published before the session was open
        self._lock = threading.Lock()
        self._publisher: Any = None
        self._token: Any = None

    def _declare(self) -> None:
        p, node = self.node.participant, self.node
        self.token_key = liveliness_key(p.domain, p.zid, node.id, self.id, "MP", node.namespace,
                                        node.name, topic=self.topic, msgtype=self.msgtype,
                                        type_hash=self.type_hash, qos=self.qos)
        self.gid = entity_gid(self.token_key)
        if self.qos.durability == "transient_local":
            # rmw_zenoh's transient_local: an advanced publisher that keeps the last
            # `depth` samples for late joiners and lets them detect it
            from zenoh.ext import CacheConfig, declare_advanced_publisher

            self._publisher = declare_advanced_publisher(
                p.session, self.key, cache=CacheConfig(max_samples=self.qos.depth),
                publisher_detection=True)
        else:
            self._publisher = p.session.declare_publisher(self.key)
        self._token = p.session.liveliness().declare_token(self.token_key)

    @property
    def is_declared(self) -> bool:
        return self._publisher is not None

    def publish(self, msg: Any) -> bool:
        """Publish ``msg``; False (counted in ``unsent``) while the session is not open."""
        if self._publisher is None:
            self.unsent += 1
            return False
        return self.publish_cdr(topics.serialize(msg, self.msgtype, self.distro))

    def publish_cdr(self, data: bytes) -> bool:
        """Publish an already serialised message (with a fresh attachment)."""
        with self._lock:
            publisher = self._publisher
            if publisher is None:
                self.unsent += 1
                return False
            self.sequence += 1
            att = Attachment(self.sequence, time.time_ns(), self.gid).encode()
            publisher.put(data, attachment=att)
        return True

    def close(self) -> None:
        with self._lock:
            publisher, self._publisher = self._publisher, None
        if self._token is not None:
            _undeclare(self._token)
        if publisher is not None:
            _undeclare(publisher)


class RosSubscription:
    """Calls ``callback(message)`` for each sample; undecodable samples are counted
    (``malformed``) and dropped, and a callback that refuses one with
    :class:`MessageError` is counted too (``refused``); neither stops the stream. With
    ``max_age``, samples that waited longer on the way are counted (``stale``) and
    dropped before decoding."""

    def __init__(self, node: RosNode, topic: str, msgtype: str,
                 callback: Callable[[Any], Any], qos: Qos, any_hash: bool,
                 max_age: float | None = None) -> None:
        p = node.participant
        self.node, self.qos, self.id = node, qos, p.next_id()
        self.topic, self.msgtype, self.distro = topic, msgtype, p.distro
        self.callback = callback
        self.type_hash = topics.type_hash(msgtype, p.distro)
        key = data_key(p.domain, topic, msgtype, self.type_hash)
        self.key = key.rsplit("/", 1)[0] + "/*" if any_hash else key
        self.token_key = ""
        self.received = self.malformed = self.refused = self.stale = 0
        self.freshness = None if max_age is None else Freshness(max_age)
        self.last_accepted: float | None = None  # time.monotonic() of the latest taken
        self.last_error: str | None = None
        self._dropped = Throttle()
        self._subscriber: Any = None
        self._token: Any = None

    def _declare(self) -> None:
        p, node = self.node.participant, self.node
        self.token_key = liveliness_key(p.domain, p.zid, node.id, self.id, "MS", node.namespace,
                                        node.name, topic=self.topic, msgtype=self.msgtype,
                                        type_hash=self.type_hash, qos=self.qos)
        if self.qos.durability == "transient_local":
            # rmw_zenoh's transient_local: an advanced subscriber that asks every
            # publisher's cache, those that appear later too, for their history
            from zenoh.ext import HistoryConfig, declare_advanced_subscriber

            self._subscriber = declare_advanced_subscriber(
                p.session, self.key, self._on_sample,
                history=HistoryConfig(detect_late_publishers=True, max_samples=self.qos.depth))
        else:
            self._subscriber = p.session.declare_subscriber(self.key, self._on_sample)
        self._token = p.session.liveliness().declare_token(self.token_key)

    def _on_sample(self, sample: Any) -> None:
        self.received += 1
        if self.freshness is not None and sample.attachment is not None:
            try:
                att = Attachment.decode(sample.attachment.to_bytes())
            except MessageError:
                att = None  # not rmw_zenoh's: no source timestamp to judge by
            if att is not None and not self.freshness.fresh(att, time.time_ns()):
                self.stale += 1
                return
        try:
            msg = topics.deserialize(sample.payload.to_bytes(), self.msgtype, self.distro)
        except MessageError as exc:
            self.malformed += 1
            self._note(str(exc))
            return
        try:
            self.callback(msg)
            self.last_accepted = time.monotonic()
        except MessageError as exc:
            self.refused += 1
            self._note(str(exc))
        except Exception:  # a callback's bug must not kill Zenoh's delivery thread
            self.refused += 1
            log.exception("%s: subscription callback failed", self.topic)

    def set_max_age(self, seconds: float) -> None:
        """A new ``max_age`` (only for a subscription made with one)."""
        if self.freshness is not None:
            self.freshness.max_age_ns = int(seconds * 1e9)

    def _note(self, error: str) -> None:
        self.last_error = error
        due = self._dropped.hit(time.monotonic())
        if due:  # at most one line a second, whatever comes
            log.warning("%s: %d sample(s) dropped since the last report (%d in all); the "
                        "latest: %s", self.topic, due, self._dropped.total, _printable(error))

    def stats(self) -> dict[str, int]:
        return {"received": self.received, "malformed": self.malformed, "refused": self.refused,
                "stale": self.stale}

    def close(self) -> None:
        for entity in (self._token, self._subscriber):
            if entity is not None:
                _undeclare(entity)
        self._token = self._subscriber = None


class _ServiceEnd:
    """What a service server and a client share: the key, the type hash, the token."""

    kind = ""

    def __init__(self, node: RosNode, name: str, srvtype: str) -> None:
        from fwbridge.bridge.ros2.services import register, service_type_hash

        p = node.participant
        self.node, self.id, self.name, self.srvtype = node, p.next_id(), name, srvtype
        self.distro = p.distro
        self.request_type, self.response_type = register(srvtype, p.distro)
        self.type_hash = service_type_hash(srvtype, p.distro)
        self.key = data_key(p.domain, name, srvtype, self.type_hash)
        self.token_key = ""
        self.gid = bytes(16)
        self._token: Any = None

    def _declare_token(self) -> None:
        from fwbridge.bridge.ros2.services import SERVICE_QOS

        p, node = self.node.participant, self.node
        self.token_key = liveliness_key(p.domain, p.zid, node.id, self.id, self.kind,
                                        node.namespace, node.name, topic=self.name,
                                        msgtype=self.srvtype, type_hash=self.type_hash,
                                        qos=SERVICE_QOS)
        self.gid = entity_gid(self.token_key)
        self._token = p.session.liveliness().declare_token(self.token_key)

    def close(self) -> None:
        if self._token is not None:
            _undeclare(self._token)
            self._token = None


class RosService(_ServiceEnd):
    """A service server: a complete queryable; each request (CDR + attachment) is answered
    with ``handler(request)`` and the request's sequence number and client GID, in the
    attachment layout the request came in.

    Requests are untrusted: one larger than ``max_bytes`` or whose leading sequence
    holds more than ``max_items`` is refused before it is decoded, and so is one without
    rmw_zenoh's attachment; those and the undecodable are counted (``refused``), a
    handler that fails too (``failed``). Either gets an error reply naming the reason
    (rmw_zenoh's clients log it; the call then times out, as with a request rmw_zenoh's
    services cannot take), and the log gets at most one line a second, with the count
    since the last (:class:`~fwbridge.bridge.ros2.services.Throttle`)."""

    kind = "SS"

    def __init__(self, node: RosNode, name: str, srvtype: str,
                 handler: Callable[[Any], Any], *, max_bytes: int | None = None,
                 max_items: int | None = None) -> None:
        super().__init__(node, name, srvtype)
        self.handler = handler
        self.max_bytes = MAX_REQUEST if max_bytes is None else max_bytes
        self.max_items = MAX_ITEMS if max_items is None else max_items
        self.calls = 0
        self._refused, self._failed = Throttle(), Throttle()
        self._log_lock = threading.Lock()
        self._queryable: Any = None

    @property
    def refused(self) -> int:
        return self._refused.total

    @property
    def failed(self) -> int:
        return self._failed.total

    @property
    def errors(self) -> int:
        """Requests that got no answer: refused or failed."""
        return self.refused + self.failed

    def stats(self) -> dict[str, int]:
        return {"calls": self.calls, "refused": self.refused, "failed": self.failed}

    def _declare(self) -> None:
        session = self.node.participant.session
        self._queryable = session.declare_queryable(self.key, self._on_query, complete=True)
        self._declare_token()

    def _take(self, query: Any) -> tuple[Any, Attachment]:
        """The request and its attachment; :class:`MessageError` saying why not."""
        if query.payload is None:
            raise MessageError("a request without payload")
        if query.attachment is None:
            raise MessageError("a request without rmw_zenoh's attachment")
        data = query.payload.to_bytes()
        why = request_refusal(self.srvtype, data, max_bytes=self.max_bytes,
                              max_items=self.max_items)
        if why is not None:
            raise MessageError(why)
        att = Attachment.decode(query.attachment.to_bytes())
        return topics.deserialize(data, self.request_type, self.distro), att

    def _on_query(self, query: Any) -> None:
        try:
            request, att = self._take(query)
        except MessageError as exc:
            self._refuse(query, self._refused, "refused", str(exc))
            return
        try:
            response = self.handler(request)
            data = topics.serialize(response, self.response_type, self.distro)
        except Exception as exc:  # a handler's bug: an error reply, the node goes on
            self._refuse(query, self._failed, "failed", f"{type(exc).__name__}: {exc}",
                         traceback=True)
            return
        self.calls += 1
        reply = Attachment(att.sequence_number, time.time_ns(), att.source_gid,
                           keyed=att.keyed).encode()
        query.reply(self.key, data, attachment=reply)

    def _refuse(self, query: Any, throttle: Any, what: str, reason: str,
                traceback: bool = False) -> None:
        reason = _printable(reason)
        with self._log_lock:
            due = throttle.hit(time.monotonic())
        if due:
            self._say(due, throttle.total, what, reason, traceback)
        try:
            query.reply_err(f"{self.name}: request {what}: {reason}")
        except Exception:  # the client went away, or the query timed out meanwhile
            log.debug("error reply failed", exc_info=True)

    def _say(self, count: int, total: int, what: str, reason: str, traceback: bool) -> None:
        log.warning("%s: %d request(s) %s since the last report (%d in all); the latest: %s",
                    self.name, count, what, total, reason, exc_info=traceback)

    def close(self) -> None:
        super().close()
        if self._queryable is not None:
            _undeclare(self._queryable)
            self._queryable = None
        for throttle, what in ((self._refused, "refused"), (self._failed, "failed")):
            left = throttle.flush()
            if left:
                log.warning("%s: %d request(s) %s since the last report (%d in all)",
                            self.name, left, what, throttle.total)


#: Characters of a reason quoted in a log line or an error reply.
MAX_REASON = 200


def _printable(text: str) -> str:
    """``text`` clipped to :data:`MAX_REASON` characters, control characters escaped:
    a reason may quote bytes a peer sent."""
    text = text[:MAX_REASON] + ("…" if len(text) > MAX_REASON else "")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class RosClient(_ServiceEnd):
    """A service client: :meth:`call` sends one request as a query and waits for its reply."""

    kind = "SC"

    def __init__(self, node: RosNode, name: str, srvtype: str) -> None:
        super().__init__(node, name, srvtype)
        self.sequence = 0

    def _declare(self) -> None:
        self._declare_token()

    def call(self, request: Any, timeout: float = 5.0) -> Any:
        """The response to ``request``; :class:`MessageError` when none came in ``timeout``."""
        session = self.node.participant.session
        if session is None:
            raise MessageError(f"{self.name}: not connected")
        self.sequence += 1
        att = Attachment(self.sequence, time.time_ns(), self.gid).encode()
        data = topics.serialize(request, self.request_type, self.distro)
        refused = None
        for reply in session.get(self.key, payload=data, attachment=att, timeout=timeout):
            if reply.ok is None:
                if reply.err is not None and refused is None:  # the service's reason
                    refused = _printable(reply.err.payload.to_bytes().decode("utf-8",
                                                                             "replace"))
                continue
            return topics.deserialize(reply.ok.payload.to_bytes(), self.response_type,
                                      self.distro)
        if refused is not None and not refused.startswith("Timeout"):
            raise MessageError(f"{self.name}: the service answered with an error: {refused}")
        raise MessageError(f"{self.name}: no reply within {timeout:g} s (is the service "
                           "there? fwbridge ros2 topics lists services)")
