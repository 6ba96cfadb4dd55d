"""The two ends of a ROS 2 topic on Zenoh, as rmw_zenoh_cpp makes them: a publisher
and a subscription of a :class:`~fwbridge.bridge.ros2.participant.RosNode`.

Each declares the liveliness token that makes it visible to ``ros2 topic list``;
every sample carries rmw_zenoh's attachment
(:class:`~fwbridge.bridge.ros2.keys.Attachment`); payloads are CDR from the rosbags
typestore. A ``transient_local`` end is Zenoh's advanced publisher or subscriber, as
rmw_zenoh's. A subscription takes untrusted samples: the undecodable and the
refused are counted and said at most once a second
(:class:`~fwbridge.bridge.ros2.services.Throttle`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from fwbridge.bridge.ros2.keys import (
    Attachment,
    Freshness,
    data_key,
    entity_gid,
    liveliness_key,
)
from fwbridge.bridge.ros2.services import Throttle, printable
from fwbridge.bridge.rosmsg import cdr
from fwbridge.bridge.rosmsg.cdr import MessageError
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["EndNode", "EndSession", "RosPublisher", "RosSubscription", "undeclare"]

log = logging.getLogger("fwbridge.ros2")


class EndSession(Protocol):
    """What an end reads of its session (a
    :class:`~fwbridge.bridge.ros2.participant.Participant`)."""

    domain: int
    distro: str
    zid: str
    session: Any

    def next_id(self) -> int: ...

    def deliver(self, declare: Callable[[Any], Any], callback: Callable[[Any], Any], *,
                requests: bool = False) -> Any: ...

    def forget(self, entity: Any) -> None: ...


class EndNode(Protocol):
    """What an end reads of its node (a :class:`~fwbridge.bridge.ros2.participant.RosNode`,
    which makes the ends: a protocol, not an import back up)."""

    @property
    def participant(self) -> EndSession: ...
    @property
    def id(self) -> int: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...


def undeclare(entity: Any) -> None:
    """Undeclare a token, publisher, subscriber or queryable of any end, whatever state
    its session is in."""
    try:
        entity.undeclare()
    except Exception:  # already undeclared, or the session is closing: nothing to release
        log.debug("undeclare failed", exc_info=True)


class RosPublisher:
    """Publishes typed messages (CDR + rmw_zenoh attachment) on one topic."""

    def __init__(self, node: EndNode, topic: str, msgtype: str, qos: Qos) -> None:
        p = node.participant
        self.node, self.qos, self.id = node, qos, p.next_id()
        self.topic, self.msgtype, self.distro = topic, msgtype, p.distro
        self.type_hash = cdr.type_hash(msgtype, p.distro)
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
        return self.publish_cdr(cdr.serialize(msg, self.msgtype, self.distro))

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
            undeclare(self._token)
        if publisher is not None:
            undeclare(publisher)


class RosSubscription:
    """Calls ``callback(message)`` for each sample; undecodable samples are counted
    (``malformed``) and dropped, and a callback that refuses one with
    :class:`MessageError` is counted too (``refused``); neither stops the stream. With
    ``max_age``, samples that waited longer on the way are counted (``stale``) and
    dropped before decoding."""

    def __init__(self, node: EndNode, topic: str, msgtype: str,
                 callback: Callable[[Any], Any], qos: Qos, any_hash: bool,
                 max_age: float | None = None) -> None:
        p = node.participant
        self.node, self.qos, self.id = node, qos, p.next_id()
        self.topic, self.msgtype, self.distro = topic, msgtype, p.distro
        self.callback = callback
        self.type_hash = cdr.type_hash(msgtype, p.distro)
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

            history = HistoryConfig(detect_late_publishers=True, max_samples=self.qos.depth)
            self._subscriber = p.deliver(lambda handler: declare_advanced_subscriber(
                p.session, self.key, handler, history=history), self._on_sample)
        else:
            self._subscriber = p.deliver(
                lambda handler: p.session.declare_subscriber(self.key, handler), self._on_sample)
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
            msg = cdr.deserialize(sample.payload.to_bytes(), self.msgtype, self.distro)
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
                        "latest: %s", self.topic, due, self._dropped.total, printable(error))

    def stats(self) -> dict[str, int]:
        return {"received": self.received, "malformed": self.malformed, "refused": self.refused,
                "stale": self.stale}

    def close(self) -> None:
        if self._subscriber is not None:
            self.node.participant.forget(self._subscriber)
        for entity in (self._token, self._subscriber):
            if entity is not None:
                undeclare(entity)
        self._token = self._subscriber = None
