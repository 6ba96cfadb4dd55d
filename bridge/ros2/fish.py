"""The robot fish as a ROS 2 node: its status and configuration as services, ``/diagnostics``.

:class:`Ros2Fish` is a ROS 2 node (``fish_bridge`` by default, in the
settings' namespace: ``/fish1/fish_bridge``) over a fish client (a
:class:`~fwbridge.bridge.robots.fish_client.FishClient`, or anything with its
``status``, ``config_get``, ``config_set`` and ``stand_still``), serving, as
rmw_zenoh's services are (:mod:`~fwbridge.bridge.ros2.services`):

- ``~/get_status`` (``std_srvs/srv/Trigger``): the fish's 0x01 status
  (:class:`~fwbridge.protocols.families.fish_commands.StatusInfo`'s fields, as ``fwbridge
  fish status --json`` prints them), the link (``up``, ``down``), the age of that
  status and the counters, as JSON in ``message``; ``success`` while the fish
  answers (when it does not, the last status it gave, its age and the error);
- ``~/get_config`` (``Trigger``): the user configuration (0x36) as JSON, the shape
  ``fwbridge fish config get`` prints;
- ``~/set_config`` (``rcl_interfaces/srv/SetParameters``): named fields of the
  configuration (checked in :mod:`~fwbridge.bridge.ros2.fish_parameters`: its
  integers; ``scenes``, a string holding the JSON list ``config get`` prints),
  read-modify-write: read it, change the fields, write it (0x33), read it back to
  confirm. One result per parameter, in order; a request with any parameter refused
  (an unknown name, a wrong type, a value out of range, a name given twice, too
  many) writes nothing, and its other parameters say so;
- ``~/stand_still`` (``Trigger``): 0x02, the fish stops swimming (every servo to 0°
  and held);
- ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` once a second, one status
  named after the node (``fish1/fish_bridge: fish``,
  :func:`~fwbridge.bridge.rosmsg.diagnostics.fish_status`): ok with the fish's mode, warn
  while it holds error records or modules in CAN flash mode, error ``link lost``
  once an exchange went unanswered through every retry, stale before its first
  answer. The status is polled once a second (when no call asked for it meanwhile);
- ``/rosout`` (:mod:`~fwbridge.bridge.ros2.rosout`): a WARN when the fish stops
  answering.

Calls to the fish are serialised by one lock and bounded: a call waits at most
``lock_wait`` seconds for another to finish (then ``success: false``, busy), and
each exchange at most the link's own budget (its timeout times its attempts), so
a fish that does not answer holds a Zenoh callback no longer than that, never
for ever. The serial side never waits on the network.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.fish_parameters import (
    MAX_PARAMETERS,
    MAX_REASON,
    apply_plan,
    check_parameters,
)
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.ros2.rosout import WARN, Rosout
from fwbridge.bridge.ros2.service_ends import TRIGGER, RosService, trigger_response
from fwbridge.bridge.ros2.services import SET_PARAMETERS, typed_parameter_value
from fwbridge.bridge.rosmsg import topics
from fwbridge.bridge.rosmsg.cdr import typestore
from fwbridge.bridge.rosmsg.diagnostics import diagnostics_message, fish_status
from fwbridge.protocols.errors import Error, LinkError
from fwbridge.protocols.families.fish_commands import StatusInfo, UserConfig

__all__ = ["FishLike", "FishUnavailable", "Ros2Fish"]

log = logging.getLogger("fwbridge.ros2")

#: Seconds between /diagnostics messages, and between status polls (1 Hz, as
#: diagnostic_updater).
DIAGNOSTICS_PERIOD = 1.0

T = TypeVar("T")


class FishLike(Protocol):
    """What the node needs of a fish client (FishClient has it)."""

    def status(self) -> StatusInfo: ...

    def config_get(self) -> UserConfig: ...

    def config_set(self, cfg: UserConfig) -> None: ...

    def stand_still(self) -> None: ...


class FishUnavailable(LinkError):
    """The fish did not answer (every retry), or another call held the link too long
    (``busy``: then nothing was sent)."""

    def __init__(self, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy


# -- the node --------------------------------------------------------------------------------
class Ros2Fish:
    """The ROS 2 face of a fish; ``start()`` declares it, ``stop()`` undeclares it (and
    closes the session when it made its own)."""

    def __init__(self, fish: FishLike, settings: Ros2Settings, *,
                 node_name: str = "fish_bridge", link_url: str = "",
                 participant: Participant | None = None, lock_wait: float = 2.0,
                 say: Callable[[str], Any] = log.warning) -> None:
        self.fish, self.settings, self.node_name = fish, settings, node_name
        self.link_url = link_url
        self.participant = participant
        self._own_participant = participant is None
        self.lock_wait = lock_wait
        self.say = say
        self.distro = settings.distro
        self._lock = threading.Lock()  # one exchange with the fish at a time
        self._state = threading.Lock()  # the fields below, between callers and threads
        self.link_up: bool | None = None  # None: not asked yet
        self.last_status: StatusInfo | None = None
        self.status_at: float | None = None  # time.monotonic() of last_status
        self.last_answer: float | None = None
        self.last_error = ""
        self.counters = {"calls": 0, "exchanges": 0, "failures": 0, "busy": 0, "link_lost": 0,
                         "config_writes": 0, "config_refused": 0, "diagnostics_published": 0,
                         "publish_errors": 0}
        self.services: list[RosService] = []  # made by start()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rosout: Rosout | None = None
        self._reachable: bool | None = None
        self._stopped = False

    @property
    def fqn(self) -> str:
        """``fish1/fish_bridge`` (``fish_bridge`` in the root namespace)."""
        ns = self.settings.namespace.strip("/")
        return f"{ns}/{self.node_name}" if ns else self.node_name

    @property
    def hardware_id(self) -> str:
        ns = self.settings.namespace.strip("/")
        return f"{ns}:{self.link_url}" if ns else self.link_url

    @property
    def service_names(self) -> list[str]:
        return [f"/{self.fqn}/{s}" for s in ("get_status", "get_config", "set_config",
                                             "stand_still")]

    def start(self) -> None:
        s = self.settings
        if self.participant is None:
            self.participant = Participant(domain=s.domain, distro=s.distro, connect=s.connect,
                                           listen=s.listen)
        self.ros = self.participant.node(self.node_name, s.namespace)
        diag = topics.TOPICS["diagnostics"]
        self.diag_pub = self.ros.publisher(diag.name, diag.msgtype, diag.qos)
        self.rosout = Rosout(self.ros, self.distro)
        self.services = [self.ros.service("~/get_status", TRIGGER, self._get_status),
                         self.ros.service("~/get_config", TRIGGER, self._get_config),
                         self.ros.service("~/set_config", SET_PARAMETERS, self._set_config,
                                          max_items=MAX_PARAMETERS),
                         self.ros.service("~/stand_still", TRIGGER, self._stand_still)]
        for target, name in ((self._poll_loop, "fish-status"),
                             (self._diagnostics_loop, "ros2-diagnostics")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Once: the threads end, the node's entities go, an owned session closes."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        for thread in self._threads:
            thread.join(self.lock_wait + 5.0)  # a poll in flight ends within the link's budget
        if self.participant is not None:
            if self._own_participant:
                self.participant.close()
            else:
                self.ros.close()

    def __enter__(self) -> Ros2Fish:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> dict[str, int]:
        with self._state:
            counters = dict(self.counters)
        counters["requests_refused"] = sum(srv.refused for srv in self.services)
        counters["requests_failed"] = sum(srv.failed for srv in self.services)
        return counters

    # -- the fish, one exchange at a time ----------------------------------------------------
    def _count(self, key: str) -> None:
        with self._state:
            self.counters[key] += 1

    def _call(self, what: str, fn: Callable[[], T], wait: float | None = None) -> T:
        """``fn()`` under the link's lock, the outcome noted (link up or lost);
        :class:`FishUnavailable` when the lock is not free within ``wait`` (default
        ``lock_wait``) or the fish did not answer."""
        wait = self.lock_wait if wait is None else wait
        if not self._lock.acquire(timeout=wait):
            self._count("busy")
            raise FishUnavailable(f"{what}: another call to the fish took more than "
                                  f"{wait:g} s; try again", busy=True)
        try:
            try:
                out = fn()
            except (Error, OSError) as exc:  # the link's errors; OSError: the port went away
                self._failed(str(exc))
                raise FishUnavailable(f"{what}: the fish did not answer: {exc}") from None
            self._answered()
            return out
        finally:
            self._lock.release()

    def _answered(self) -> None:
        with self._state:
            self.counters["exchanges"] += 1
            again = self.link_up is False
            self.link_up, self.last_answer, self.last_error = True, time.monotonic(), ""
        if again:
            self.say(f"fish: answering again ({self.link_url})")

    def _failed(self, error: str) -> None:
        with self._state:
            self.counters["failures"] += 1
            lost = self.link_up is not False
            if lost:
                self.counters["link_lost"] += 1
            self.link_up, self.last_error = False, error
        if lost:
            said = f"fish: link lost ({self.link_url}): {error}"
            self.say(said)
            if self.rosout is not None:
                self.rosout.log(WARN, said, function="link_lost")

    def _read_status(self) -> StatusInfo:
        st = self.fish.status()
        with self._state:
            self.last_status, self.status_at = st, time.monotonic()
        return st

    # -- services ------------------------------------------------------------------------------
    def _trigger(self, success: bool, message: str) -> Any:
        return trigger_response(self.distro, success, message)

    def status_report(self) -> dict[str, Any]:
        """What ``~/get_status`` says: the node, the link, the fish's last status and its
        age, the error when it did not answer, the counters."""
        with self._state:
            st, at, up, error = self.last_status, self.status_at, self.link_up, self.last_error
        counters = self.stats()
        out: dict[str, Any] = {"node": self.fqn, "hardware_id": self.hardware_id,
                               "link": {True: "up", False: "down", None: "unknown"}[up]}
        if st is not None:
            out.update(st.as_dict())
        out["status_age_s"] = None if at is None else round(time.monotonic() - at, 3)
        out["error"] = error[:MAX_REASON] or None
        out.update(counters)
        return out

    def _get_status(self, _request: Any) -> Any:
        self._count("calls")
        # the link known lost: answer at once rather than queue behind a poll that waits
        wait = 0.0 if self.link_up is False else None
        try:
            self._call("status", self._read_status, wait)
        except FishUnavailable as exc:
            report = self.status_report()
            report["error"] = str(exc)[:MAX_REASON]  # this call's: busy, or no answer
            return self._trigger(False, json.dumps(report))
        return self._trigger(True, json.dumps(self.status_report()))

    def _get_config(self, _request: Any) -> Any:
        self._count("calls")
        try:
            cfg = self._call("config", self.fish.config_get)
        except FishUnavailable as exc:
            return self._trigger(False, str(exc)[:MAX_REASON])
        return self._trigger(True, json.dumps(cfg.as_dict()))

    def _stand_still(self, _request: Any) -> Any:
        self._count("calls")
        try:
            self._call("stand still", self.fish.stand_still)
        except FishUnavailable as exc:
            return self._trigger(False, str(exc)[:MAX_REASON])
        return self._trigger(True, "standing still")

    def _set_config(self, request: Any) -> Any:
        self._count("calls")
        # decoded up to one past the bound: enough for check_parameters to refuse them all
        given = list(request.parameters)
        params = [typed_parameter_value(p) for p in given[:MAX_PARAMETERS + 1]]
        params += [("", None)] * (len(given) - len(params))
        plan = check_parameters(params)
        if plan.changes is None:
            self._count("config_refused")
            return self._results(plan.results)

        def read_modify_write() -> tuple[UserConfig, UserConfig, list[tuple[bool, str]]]:
            assert plan.changes is not None
            cfg = self.fish.config_get()
            new, reasons = apply_plan(cfg, params, plan.changes)
            self.fish.config_set(new)
            return new, self.fish.config_get(), reasons

        try:
            new, back, reasons = self._call("set config", read_modify_write)
        except FishUnavailable as exc:
            # busy: nothing was sent; else the write may have landed unconfirmed
            why = (f"not written: {exc}" if exc.busy else
                   f"not written, or not confirmed: {exc}")[:MAX_REASON]
            return self._results([(False, why)] * len(params))
        if back != new:
            return self._results([(False, "the fish reads back a different configuration "
                                   "than was written")] * len(params))
        self._count("config_writes")
        return self._results(reasons)

    def _results(self, results: list[tuple[bool, str]]) -> Any:
        t = typestore(self.distro).types
        result = t["rcl_interfaces/msg/SetParametersResult"]
        return t[SET_PARAMETERS + "_Response"](
            results=[result(successful=ok, reason=why[:MAX_REASON]) for ok, why in results])

    # -- the status poll and /diagnostics --------------------------------------------------------
    def _poll_loop(self) -> None:
        while not self._stop.wait(DIAGNOSTICS_PERIOD / 2):
            with self._state:
                at = self.status_at
            if at is not None and time.monotonic() - at < DIAGNOSTICS_PERIOD:
                continue  # a call asked for it lately
            # busy: a call is on it; no answer: noted by _call (link lost, said once)
            with contextlib.suppress(FishUnavailable):
                self._call("status", self._read_status, wait=0.0)

    def diagnostics(self) -> Any:
        with self._state:
            st, at, up, error = self.last_status, self.status_at, self.link_up, self.last_error
            last = self.last_answer
            counters = dict(self.counters)
        now = time.monotonic()
        age = None if last is None else now - last
        status = fish_status(f"{self.fqn}: fish", st, link_up=up,
                             age=age if up is False else (None if at is None else now - at),
                             error=error, values=dict(counters), hardware_id=self.hardware_id,
                             distro=self.distro)
        return diagnostics_message([status], stamp=time.time(), distro=self.distro)

    def _diagnostics_loop(self) -> None:
        while not self._stop.wait(DIAGNOSTICS_PERIOD):
            self._check_reachable()
            try:
                if self.diag_pub.publish(self.diagnostics()):
                    self._count("diagnostics_published")
            except Exception:  # the network side must never stop the fish's side
                self._count("publish_errors")
                log.exception("publishing the fish's diagnostics failed")

    def _check_reachable(self) -> None:
        assert self.participant is not None
        routers, peers = self.participant.connections()
        ok = bool(routers or peers)
        if ok == self._reachable:
            return
        first, self._reachable = self._reachable is None, ok
        where = ", ".join(self.settings.connect) or "no endpoint"
        if ok:
            self.say(f"Zenoh connected: ROS 2 node /{self.fqn} is online")
        elif first:
            self.say(f"no Zenoh router reachable ({where}; start one: fwbridge ros2 router); "
                     "connecting when it appears")
        else:
            self.say(f"Zenoh router lost ({where}); reconnecting")
