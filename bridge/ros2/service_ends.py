"""The two ends of a ROS 2 service on Zenoh, as rmw_zenoh_cpp makes them
(``rmw_service_data.cpp``, ``rmw_client_data.cpp``): a server and a client of a
:class:`~fwbridge.bridge.ros2.participant.RosNode`.

Every request of every service takes one path, :meth:`RosService._on_query`: bounded
before it is decoded (:func:`~fwbridge.bridge.ros2.services.request_refusal`), its
attachment read in either of rmw_zenoh's layouts and the reply written in the one it
came in (:class:`~fwbridge.bridge.ros2.keys.Attachment`), a refusal or a failed
handler answered with an error reply and said at most once a second
(:class:`~fwbridge.bridge.ros2.services.Throttle`). The types, hashes and bounds are
the pure parts of :mod:`~fwbridge.bridge.ros2.services`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fwbridge.bridge.ros2.keys import Attachment, data_key, entity_gid, liveliness_key
from fwbridge.bridge.ros2.services import (
    MAX_ITEMS,
    MAX_REQUEST,
    SERVICE_QOS,
    Throttle,
    printable,
    register,
    request_refusal,
    service_type_hash,
)
from fwbridge.bridge.ros2.topic_ends import EndNode, undeclare
from fwbridge.bridge.rosmsg import cdr
from fwbridge.bridge.rosmsg.cdr import MessageError

__all__ = ["TRIGGER", "RosClient", "RosService", "trigger_response"]

#: The service type of every node's no-argument request (``~/get_status``, ``~/stop``).
TRIGGER = "std_srvs/srv/Trigger"


def trigger_response(distro: str, success: bool, message: str) -> Any:
    """A ``std_srvs/srv/Trigger`` response of ``distro``'s typestore."""
    return cdr.typestore(distro).types[TRIGGER + "_Response"](success=success, message=message)

log = logging.getLogger("fwbridge.ros2")


class _ServiceEnd:
    """What a service server and a client share: the key, the type hash, the token."""

    kind = ""

    def __init__(self, node: EndNode, name: str, srvtype: str) -> None:
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
        p, node = self.node.participant, self.node
        self.token_key = liveliness_key(p.domain, p.zid, node.id, self.id, self.kind,
                                        node.namespace, node.name, topic=self.name,
                                        msgtype=self.srvtype, type_hash=self.type_hash,
                                        qos=SERVICE_QOS)
        self.gid = entity_gid(self.token_key)
        self._token = p.session.liveliness().declare_token(self.token_key)

    def close(self) -> None:
        if self._token is not None:
            undeclare(self._token)
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

    def __init__(self, node: EndNode, name: str, srvtype: str,
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

    def stats(self) -> dict[str, int]:
        return {"calls": self.calls, "refused": self.refused, "failed": self.failed}

    def _declare(self) -> None:
        p = self.node.participant
        self._queryable = p.deliver(
            lambda handler: p.session.declare_queryable(self.key, handler, complete=True),
            self._on_query, requests=True)
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
        return cdr.deserialize(data, self.request_type, self.distro), att

    def _on_query(self, query: Any) -> None:
        try:
            request, att = self._take(query)
        except MessageError as exc:
            self._refuse(query, self._refused, "refused", str(exc))
            return
        try:
            response = self.handler(request)
            data = cdr.serialize(response, self.response_type, self.distro)
        except Exception as exc:  # a handler's bug: an error reply, the node goes on
            self._refuse(query, self._failed, "failed", f"{type(exc).__name__}: {exc}",
                         traceback=True)
            return
        self.calls += 1
        reply = Attachment(att.sequence_number, time.time_ns(), att.source_gid,
                           keyed=att.keyed).encode()
        query.reply(self.key, data, attachment=reply)

    def _refuse(self, query: Any, throttle: Throttle, what: str, reason: str,
                traceback: bool = False) -> None:
        reason = printable(reason)
        with self._log_lock:
            due = throttle.hit(time.monotonic())
        if due:
            self._report(due, throttle, what, f"; the latest: {reason}", traceback)
        try:
            query.reply_err(f"{self.name}: request {what}: {reason}")
        except Exception:  # the client went away, or the query timed out meanwhile
            log.debug("error reply failed", exc_info=True)

    def _report(self, count: int, throttle: Throttle, what: str, latest: str = "",
                traceback: bool = False) -> None:
        log.warning("%s: %d request(s) %s since the last report (%d in all)%s", self.name,
                    count, what, throttle.total, latest, exc_info=traceback)

    def close(self) -> None:
        super().close()
        if self._queryable is not None:
            self.node.participant.forget(self._queryable)
            undeclare(self._queryable)
            self._queryable = None
        for throttle, what in ((self._refused, "refused"), (self._failed, "failed")):
            left = throttle.flush()
            if left:  # what the last second's lines did not say yet
                self._report(left, throttle, what)


class RosClient(_ServiceEnd):
    """A service client: :meth:`call` sends one request as a query and waits for its reply."""

    kind = "SC"

    def __init__(self, node: EndNode, name: str, srvtype: str) -> None:
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
        data = cdr.serialize(request, self.request_type, self.distro)
        refused = None
        for reply in session.get(self.key, payload=data, attachment=att, timeout=timeout):
            if reply.ok is None:
                if reply.err is not None and refused is None:  # the service's reason
                    refused = printable(reply.err.payload.to_bytes().decode("utf-8",
                                                                             "replace"))
                continue
            return cdr.deserialize(reply.ok.payload.to_bytes(), self.response_type,
                                      self.distro)
        if refused is not None and not refused.startswith("Timeout"):
            raise MessageError(f"{self.name}: the service answered with an error: {refused}")
        raise MessageError(f"{self.name}: no reply within {timeout:g} s (is the service "
                           "there? fwbridge ros2 topics lists services)")
