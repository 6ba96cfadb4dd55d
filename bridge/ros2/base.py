"""The mobile-base node in ROS 2, as seed 002's node: ``odom``, ``/tf``, ``cmd_vel``,
and ``/diagnostics``.

:class:`Ros2Base` is a sink (:mod:`fwbridge.bridge.node.sinks`) of a running base node,
either runtime (:class:`~fwbridge.bridge.node.base_node.BaseNode`,
:class:`~fwbridge.bridge.node.aio.AsyncBaseNode`); ``start()`` joins the node's sinks:

- each odometry record -> ``nav_msgs/Odometry`` on ``odom`` and the
  ``odom -> base_link`` transform on ``/tf`` (messages from
  :mod:`fwbridge.bridge.rosmsg.topics`), both frames with the settings'
  ``frame_prefix`` (``robot1/odom -> robot1/base_link``): robots sharing
  ``/tf`` keep their own frames;
- ``geometry_msgs/Twist`` on ``cmd_vel`` -> ``node.request(vx, vy, wz)``, so the
  node's watchdog still zeroes the base when ``cmd_vel`` stops; NaN, infinite
  or huge velocities and malformed samples are counted and dropped, and so is a
  ``cmd_vel`` that waited longer than the watchdog's ``cmd_timeout`` on the way
  (``cmd_vel_stale``: what a link delivers at once after a partition is never
  replayed as motion);
- ``/tf_static`` (latched: ``transient_local``, depth 1, as tf2's static
  broadcaster) with :data:`STATIC_FRAMES` (``robot1/base_link ->
  robot1/imu_link``), published once: a subscriber that joins later gets it
  from the publisher's cache (rmw_zenoh's advanced publisher and subscriber);
- ``robot_description`` (``std_msgs/String``, latched as ``/tf_static``) with
  the text of the settings' URDF file, when they name one;
- services (rmw_zenoh's conventions): ``~/get_status`` (``std_srvs/srv/Trigger``,
  ``/robot1/base_bridge/get_status``: the counters, the link and the
  operator's state as JSON in ``message``; ``success`` while the link is
  up), ``~/stop`` (``Trigger``: zero velocity now, until the next
  ``cmd_vel``) and ``~/set_watchdog`` (``rcl_interfaces/srv/SetParameters``
  with the double parameter ``watchdog_timeout``, seconds: the watchdog's
  ``cmd_timeout``, at once, as ``~/set_parameters`` sets it; anything else is
  refused, ``successful`` false and the reason);
- the node's parameters (:mod:`fwbridge.bridge.ros2.parameters`: ``ros2 param
  list|get|set|describe``; which they are: :mod:`fwbridge.bridge.ros2.base_parameters`);
  each change is an event on ``/parameter_events``, where the start announces them all;
- ``/rosout`` (:mod:`fwbridge.bridge.ros2.rosout`): the node's warnings, its events
  at the level ``log_event`` gives them and the ROS side's own warnings
  (``fwbridge.ros2`` records naming this node's namespace; all of them in the
  root namespace), rate-limited;
- ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` once a second: the
  receiver counters, watchdog trips, reconnects and the link state, plus any
  extra statuses (the CAN modules' health) from ``extra_statuses``; the
  status is named after the node (``robot1/base_bridge: base link``) and its
  hardware id names the robot too, so an aggregator tells robots apart. A
  second status, ``robot1/base_bridge: cmd_vel``, says whether the operator is
  there: warn with ``operator lost: no cmd_vel for X s`` once ``cmd_vel`` that
  was coming has stopped for longer than ``cmd_timeout`` (the network between
  them failed, or the operator did), every second until it comes back.

The serial link never waits on the network: with no router reachable the
node says so once (and, with ``listen`` endpoints, that peers may connect
there meanwhile), keeps bridging, and the session joins the router when it
appears.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fwbridge.bridge.node.base_core import NodeEvent
from fwbridge.bridge.node.numbers import MAX_ANGULAR, MAX_LINEAR
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import NodeHandle, SinkBase
from fwbridge.bridge.ros2.base_parameters import (
    MAX_PARAMETERS,
    WATCHDOG_PARAMETER,
    base_parameters,
)
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.parameters import ParameterServer
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.ros2.rosout import ERROR, WARN, Rosout
from fwbridge.bridge.ros2.service_ends import TRIGGER, trigger_response
from fwbridge.bridge.ros2.services import SET_PARAMETERS
from fwbridge.bridge.rosmsg import cdr, diagnostics, odometry_cdr, topics
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["DIAGNOSTICS_PERIOD", "QUIET_EVENTS", "STATIC_FRAMES", "TF_STATIC_QOS", "TRIGGER",
           "Ros2Base"]

#: tf2's static broadcaster: latched (transient_local), the last message only.
TF_STATIC_QOS = Qos("reliable", "transient_local", "keep_last", 1)
#: The base's fixed frames on /tf_static: parent, child, translation (m). The IMU whose
#: yaw the firmware reports sits at the base's centre.
STATIC_FRAMES = (("base_link", "imu_link", (0.0, 0.0, 0.0)),)

log = logging.getLogger("fwbridge.ros2")

#: The node's events that are news, not warnings (log_event's INFO): not on /rosout.
QUIET_EVENTS = ("resumed", "watchdog-set", "link-restored")
#: Seconds between /diagnostics messages (diagnostic_updater's 1 Hz).
DIAGNOSTICS_PERIOD = 1.0


class Ros2Base(SinkBase):
    """The ROS 2 face of a base node, one of its sinks; ``start()`` after the node,
    ``stop()`` before it (or the node's end closes it with its other sinks)."""

    def __init__(self, node: NodeHandle, settings: Ros2Settings, *,
                 participant: Participant | None = None,
                 extra_statuses: Callable[[], list[Any]] | None = None,
                 say: Callable[[str], Any] = log.warning, timer: bool = True) -> None:
        self.node, self.settings = node, settings
        #: False: its owner calls housekeep() once a DIAGNOSTICS_PERIOD (a fleet's one
        #: timer for every robot) instead of a thread of its own per robot
        self.timer = timer
        self.participant = participant
        self._own_participant = participant is None
        self.extra_statuses = extra_statuses
        self.say = say
        self.distro = settings.distro
        self.published = 0
        self.publish_errors = 0
        self._holding = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reachable: bool | None = None
        self._stopped = False
        self._odometry: odometry_cdr.OdometryEncoder | None = None
        # cmd_vel's limits: parameters that may tighten them at run time
        self.max_linear, self.max_angular = MAX_LINEAR, MAX_ANGULAR
        self.rosout: Rosout | None = None  # made by start(), with the node's other entities

    def start(self) -> None:
        s = self.settings
        if self.participant is None:
            self.participant = Participant(domain=s.domain, distro=s.distro, connect=s.connect,
                                           listen=s.listen)
        self.ros = self.participant.node(s.node_name, s.namespace)
        # the odometry's two messages by the one encoder the recorders use too
        self._odometry = odometry_cdr.odometry_encoder(s.frame("odom"), s.frame("base_link"),
                                                       self.distro)
        spec = topics.TOPICS
        self.odom_pub = self.ros.publisher(s.topic("odom"), spec["odom"].msgtype,
                                           spec["odom"].qos)
        self.tf_pub = self.ros.publisher(s.topic("tf"), spec["tf"].msgtype, spec["tf"].qos)
        self.diag_pub = self.ros.publisher(s.topic("diagnostics"),
                                           spec["diagnostics"].msgtype, spec["diagnostics"].qos)
        self.cmd_sub = self.ros.subscription(s.topic("cmd_vel"), spec["cmd_vel"].msgtype,
                                             self._on_cmd_vel, spec["cmd_vel"].qos,
                                             max_age=self.node.config.cmd_timeout)
        self.tf_static_pub = self.ros.publisher("/tf_static", "tf2_msgs/msg/TFMessage",
                                                TF_STATIC_QOS)
        self.status_srv = self.ros.service("~/get_status", TRIGGER, self._get_status)
        self.stop_srv = self.ros.service("~/stop", TRIGGER, self._stop_now)
        self.parameters = ParameterServer(self.ros, base_parameters(self), self.distro)
        self.watchdog_srv = self.ros.service("~/set_watchdog", SET_PARAMETERS,
                                             self.parameters.setter(WATCHDOG_PARAMETER),
                                             max_items=MAX_PARAMETERS)
        self.rosout = Rosout(self.ros, self.distro)
        self.rosout.attach(log)  # the node's warnings, and this node's of the ROS side
        self.description_pub = None
        if s.robot_description is not None:
            rd = spec["robot_description"]
            self.description_pub = self.ros.publisher(s.topic("robot_description"), rd.msgtype,
                                                      rd.qos)
        self._static_sent = False
        self._description_sent = False
        self.node.sinks.add(self)
        self.parameters.announce()  # now when the session is open, else once it opens
        if self.timer:
            self._thread = threading.Thread(target=self._housekeeping, name="ros2-diagnostics",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Leave the node's sinks, undeclare the ROS 2 entities, close an owned session;
        once (the node's end may close it again)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self.node.sinks.remove(self)
        if self.rosout is not None:
            self.rosout.detach()
        if self._thread is not None:
            self._thread.join(2.0)
        if self.participant is not None:
            if self._own_participant:
                self.participant.close()
            else:
                self.ros.close()

    def __enter__(self) -> Ros2Base:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def close(self) -> None:
        self.stop()

    # -- node -> ROS ------------------------------------------------------------------
    def on_odometry(self, odom: Odometry) -> None:
        stamp = topics.wall_stamp(odom.stamp)
        s = self.settings
        try:
            if not self.odom_pub.is_declared:
                self.odom_pub.unsent += 1  # no session yet: skip building the messages
                return
            encoder = self._odometry
            assert encoder is not None  # set by start(), before the node's sinks see this
            self.odom_pub.publish_cdr(encoder.odometry(odom, stamp))
            self.tf_pub.publish_cdr(encoder.transform(odom, stamp))
            self.published += 1
        except Exception:  # the network side must never stop the serial side
            self.publish_errors += 1
            if self.publish_errors == 1:
                log.exception("%s: publishing odometry failed", s.node_name)

    def on_event(self, event: NodeEvent) -> None:
        if self.rosout is not None and event.kind not in QUIET_EVENTS:  # the rest: warnings
            self.rosout.log(ERROR if event.kind == "gave-up" else WARN, event.message,
                            function=event.kind)
        if event.kind == "watchdog":
            self._holding = True
        elif event.kind == "resumed":
            self._holding = False

    # -- ROS -> node ------------------------------------------------------------------
    def _on_cmd_vel(self, twist: Any) -> None:
        vx, vy, wz = topics.velocity_request(  # MessageError: counted as refused
            twist, max_linear=self.max_linear, max_angular=self.max_angular)
        try:
            self.node.request(vx, vy, wz)
        except ValueError as exc:
            raise cdr.MessageError(f"cmd_vel: {exc}") from None

    # -- services -----------------------------------------------------------------------
    def _trigger_response(self, success: bool, message: str) -> Any:
        return trigger_response(self.distro, success, message)

    def _get_status(self, _request: Any) -> Any:
        """``~/get_status``: the counters, the link and the operator's state, as JSON."""
        op = self.operator_status()
        status = {"node": self.settings.node_fqn, "hardware_id": self.hardware_id,
                  "link": "up" if self.node.connected else "down",
                  "watchdog_holding": self._holding, "operator": op.message,
                  "cmd_timeout_s": self.node.config.cmd_timeout,
                  **self.node.stats(), **self.stats()}
        return self._trigger_response(self.node.connected, json.dumps(status))

    def _stop_now(self, _request: Any) -> Any:
        """``~/stop``: zero velocity now, held until the next ``cmd_vel``."""
        self.node.request(0.0, 0.0, 0.0)
        self.node.send_now()
        return self._trigger_response(True, "zero velocity requested")

    # -- diagnostics and the router ------------------------------------------------------
    def stats(self) -> dict[str, int]:
        sub = self.cmd_sub.stats()
        services = (self.status_srv, self.stop_srv, self.watchdog_srv,
                    *self.parameters.services)
        return {"odometry_published": self.published, "odometry_unsent": self.odom_pub.unsent,
                "publish_errors": self.publish_errors,
                "cmd_vel_received": sub["received"], "cmd_vel_malformed": sub["malformed"],
                "cmd_vel_refused": sub["refused"], "cmd_vel_stale": sub["stale"],
                "requests_refused": sum(srv.refused for srv in services),
                "requests_failed": sum(srv.failed for srv in services),
                **self.parameters.stats(),
                **(self.rosout.stats() if self.rosout is not None else {})}

    def diagnostics(self) -> Any:
        s = self.settings
        stats = {**self.node.stats(), **self.stats()}
        statuses = [diagnostics.node_status(f"{s.node_fqn}: base link", stats,
                                       connected=self.node.connected, holding=self._holding,
                                       hardware_id=self.hardware_id, distro=self.distro)]
        statuses.append(self.operator_status())
        if self.extra_statuses is not None:
            statuses += self.extra_statuses()
        return diagnostics.diagnostics_message(statuses, stamp=topics.wall_stamp(
            self.node.clock()), distro=self.distro)

    def operator_status(self) -> Any:
        """The ``cmd_vel`` status: ok while it comes (or before any came), warn
        ``operator lost`` once it has stopped for longer than the watchdog's timeout."""
        sub, timeout = self.cmd_sub, self.node.config.cmd_timeout
        last = sub.last_accepted
        age = None if last is None else time.monotonic() - last
        latency = None if sub.freshness is None else sub.freshness.last_age_ns
        values: dict[str, object] = {
            "cmd_vel_received": sub.received, "cmd_vel_stale": sub.stale,
            "cmd_vel_age_s": "" if age is None else f"{age:.3f}",
            "cmd_vel_latency_ms": "" if latency is None else f"{latency / 1e6:.1f}",
            "cmd_timeout_s": f"{timeout:g}"}
        if age is None:
            level, message = "ok", "no cmd_vel yet"
        elif age > timeout:
            level, message = "warn", (f"operator lost: no cmd_vel for {age:.1f} s "
                                      "(watchdog holds zero velocity)")
        else:
            level, message = "ok", "cmd_vel coming"
        return diagnostics.diagnostic_status(f"{self.settings.node_fqn}: cmd_vel", level, message,
                                        values, hardware_id=self.hardware_id,
                                        distro=self.distro)

    def static_transforms(self) -> Any:
        """tf2_msgs/TFMessage of :data:`STATIC_FRAMES`, after the frame prefix."""
        t = cdr.typestore(self.distro).types
        stamp = topics.ros_time(topics.wall_stamp(self.node.clock()), self.distro)
        transforms = [t["geometry_msgs/msg/TransformStamped"](
            header=t["std_msgs/msg/Header"](stamp=stamp, frame_id=self.settings.frame(parent)),
            child_frame_id=self.settings.frame(child),
            transform=t["geometry_msgs/msg/Transform"](
                translation=t["geometry_msgs/msg/Vector3"](x=x, y=y, z=z),
                rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)))
            for parent, child, (x, y, z) in STATIC_FRAMES]
        return t["tf2_msgs/msg/TFMessage"](transforms=transforms)

    def description_message(self) -> Any:
        """std_msgs/String of the URDF's text (the settings name one)."""
        text = self.settings.robot_description or ""
        return cdr.typestore(self.distro).types["std_msgs/msg/String"](data=text)

    def _publish_latched(self) -> None:
        """Once each, as soon as the session is open: the publishers' caches serve every
        subscriber that comes later (the parameters' start event is not latched)."""
        self.parameters.announce()
        if not self._static_sent and self.tf_static_pub.is_declared:
            self._static_sent = self.tf_static_pub.publish(self.static_transforms())
        pub = self.description_pub
        if pub is not None and not self._description_sent and pub.is_declared:
            self._description_sent = pub.publish(self.description_message())

    def _housekeeping(self) -> None:
        while not self._stop.wait(DIAGNOSTICS_PERIOD):
            self.housekeep()

    def housekeep(self) -> None:
        """Once a :data:`DIAGNOSTICS_PERIOD`: the latched messages once the session is
        open, the router's reachability said when it changes, ``/diagnostics``. From
        its own thread, or its owner's timer when made with ``timer=False``; nothing
        once stopped."""
        if self._stopped:
            return
        self._publish_latched()
        self._check_reachable()
        try:
            self.diag_pub.publish(self.diagnostics())
        except Exception:
            self.publish_errors += 1
            log.exception("publishing diagnostics failed")

    @property
    def hardware_id(self) -> str:
        """The link's URL, after the robot's namespace when it has one
        (``robot1:sim://mecanum``): robots of a fleet share URLs."""
        ns = self.settings.namespace.strip("/")
        url = self.node.config.link_url
        return f"{ns}:{url}" if ns else url

    def _check_reachable(self) -> None:
        assert self.participant is not None
        routers, peers = self.participant.connections()
        ok = bool(routers or peers)
        if ok == self._reachable:
            return
        self._reachable, first = ok, self._reachable is None
        s = self.settings
        where = ", ".join(s.connect)
        hint = "start one: fwbridge ros2 router"
        if ok:
            via = f"router {where}" if routers else f"{peers} peer(s) on {', '.join(s.listen)}"
            self.say(f"Zenoh connected ({via}): ROS 2 node "
                     f"{self.ros.namespace.rstrip('/')}/{self.ros.name} is online")
        elif s.listen:  # a peer: others may connect to it, with or without a router
            router = (f"no router reachable at {where} yet ({hint}), connecting when it appears"
                      if where else "no router to connect to")
            self.say(f"Zenoh: listening on {', '.join(s.listen)} for peers, none connected "
                     f"{'yet' if first else 'any more'}; {router}")
        elif first:
            self.say(f"no Zenoh router reachable ({where or 'no endpoint'}; {hint}); bridging "
                     "the serial link meanwhile, connecting when it appears")
        else:
            self.say(f"Zenoh router lost ({where}); reconnecting")
