"""A node's warnings on ``/rosout``, as rcl's logging publishes them.

:class:`Rosout` publishes ``rcl_interfaces/msg/Log`` on ``/rosout`` with rcl's QoS
(reliable, transient_local, keep last 1000: a ``ros2 topic echo /rosout`` or
``rqt_console`` started later still gets the recent ones from the publisher's
cache), the node's logger name (``robot1.base_bridge``: rcl's, the namespace and
the node's name joined by dots) and the levels of ``Log`` (WARN 30, ERROR 40,
FATAL 50: Python's WARNING, ERROR and CRITICAL have the same numbers). A burst
of warnings is rate-limited (:class:`RateLimit`, :data:`RATE` a second after a
burst of :data:`BURST`): those over the limit are counted (``rosout_suppressed``)
and the next one that goes out says how many were left out. :meth:`Rosout.handler`
is a :class:`logging.Handler` that passes on the WARNING-and-above records of a
logger, those a filter says are the node's; :meth:`Rosout.attach` puts one on a logger
that several nodes share (when the node starts, not at import), taking the records
that name the node's namespace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fwbridge.bridge.rosmsg import cdr, topics
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["BURST", "ERROR", "FATAL", "LOG", "MAX_TEXT", "RATE", "ROSOUT_QOS", "WARN",
           "RateLimit", "Rosout"]

LOG = "rcl_interfaces/msg/Log"
#: rcl's rosout QoS (rcl_qos_profile_rosout_default, less its 10 s lifespan).
ROSOUT_QOS = Qos("reliable", "transient_local", "keep_last", 1000)
WARN, ERROR, FATAL = 30, 40, 50
#: Messages a second on /rosout after a burst, and the burst.
RATE, BURST = 2.0, 10
#: Characters of one message's text (a longer one is cut, and says so).
MAX_TEXT = 2000


class RateLimit:
    """A token bucket: ``burst`` at once, then ``rate`` a second. Sans-I/O: ``now`` is
    given (monotonic seconds)."""

    def __init__(self, rate: float = RATE, burst: int = BURST) -> None:
        self.rate, self.burst = rate, burst
        self._tokens = float(burst)
        self._at: float | None = None

    def allow(self, now: float) -> bool:
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class Rosout:
    """The ``/rosout`` publisher of one ROS 2 node."""

    def __init__(self, ros: Any, distro: str = "jazzy", *, limit: RateLimit | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ros, self.distro, self.clock = ros, distro, clock
        self.limit = limit or RateLimit()
        self.name = ".".join(part for part in ros.namespace.split("/") if part)
        self.name = f"{self.name}.{ros.name}" if self.name else ros.name
        self.publisher = ros.publisher("/rosout", LOG, ROSOUT_QOS)
        self.published = self.suppressed = self.unsent = 0
        self._left_out = 0
        self._lock = threading.Lock()
        self._busy = threading.local()  # a failure to publish logs: not back to /rosout
        self._attached: tuple[logging.Logger, logging.Handler] | None = None

    def log(self, level: int, text: str, *, file: str = "", function: str = "",
            line: int = 0) -> bool:
        """Publish one Log; False when the rate limit or a closed session left it out."""
        if getattr(self._busy, "on", False):
            return False
        self._busy.on = True
        try:
            with self._lock:
                if not self.limit.allow(self.clock()):
                    self.suppressed += 1
                    self._left_out += 1
                    return False
                left_out, self._left_out = self._left_out, 0
            if len(text) > MAX_TEXT:
                text = text[:MAX_TEXT] + f"… ({len(text)} characters)"
            if left_out:
                text += f" ({left_out} earlier messages left out: rate limit)"
            msg = cdr.typestore(self.distro).types[LOG](
                stamp=topics.ros_time(time.time(), self.distro), level=level, name=self.name,
                msg=text, file=file, function=function, line=max(0, min(line, 2**32 - 1)))
            try:
                sent = bool(self.publisher.publish(msg))
            except Exception:  # /rosout is news; the node goes on without it
                logging.getLogger("fwbridge.ros2").debug("rosout failed", exc_info=True)
                sent = False
            if sent:
                self.published += 1
            else:
                self.unsent += 1
            return sent
        finally:
            self._busy.on = False

    def handler(self, accept: Callable[[logging.LogRecord], bool] | None = None
                ) -> logging.Handler:
        """A handler that publishes a logger's WARNING-and-above records (those
        ``accept`` takes) here; add it to the loggers that speak for the node."""
        return _Handler(self, accept)

    def speaks_for_node(self, record: logging.LogRecord) -> bool:
        """A record of a logger shared by nodes is this node's when it names the node's
        namespace (its topics, its services); in the root namespace, every one is."""
        ns = self.ros.namespace.rstrip("/")
        return not ns or f"{ns}/" in record.getMessage()

    def attach(self, logger: logging.Logger) -> None:
        """Publish ``logger``'s warnings that are this node's (:meth:`speaks_for_node`)
        until :meth:`detach`: a handler, so nothing is done for records not logged."""
        self.detach()
        self._attached = (logger, self.handler(self.speaks_for_node))
        logger.addHandler(self._attached[1])

    def detach(self) -> None:
        if self._attached is not None:
            logger, handler = self._attached
            logger.removeHandler(handler)
            self._attached = None

    def stats(self) -> dict[str, int]:
        return {"rosout_published": self.published, "rosout_suppressed": self.suppressed}


class _Handler(logging.Handler):
    def __init__(self, rosout: Rosout,
                 accept: Callable[[logging.LogRecord], bool] | None) -> None:
        super().__init__(logging.WARNING)
        self.rosout, self.accept = rosout, accept

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.accept is not None and not self.accept(record):
                return
            level = FATAL if record.levelno >= logging.CRITICAL else (
                ERROR if record.levelno >= logging.ERROR else WARN)
            self.rosout.log(level, record.getMessage(), file=record.pathname,
                            function=record.funcName or "", line=record.lineno or 0)
        except Exception:
            self.handleError(record)
