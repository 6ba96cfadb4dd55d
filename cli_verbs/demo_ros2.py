"""``fwbridge demo --ros2``: the square driven through ROS 2 topics.

The same simulated mecanum base on a pty and the same base node as the plain
demo, with the node's ROS 2 face (:class:`~fwbridge.bridge.ros2.base.Ros2Base`)
in ``/robot1``; the square driver is a second ROS 2 node that reads
``/robot1/odom`` (nav_msgs/Odometry, decoded from CDR) and publishes
``/robot1/cmd_vel`` (geometry_msgs/Twist). Both nodes share one Zenoh session
(samples go through CDR and Zenoh's routing, not through the network) unless
``connect`` names a router, where any ROS 2 tool can watch.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fwbridge.bridge.node import topics
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import Sink
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.models.mecanum import MecanumBase
from fwbridge.bridge.sim.pty_link import PtyLink
from fwbridge.cli_verbs.demo_drive import Pose, SquareDriver, SquareResult, square_tolerance

__all__ = ["run_square_ros2"]


def _record(msg: Any, seq: int) -> Odometry:
    """An Odometry record back from the nav_msgs/Odometry the driver received."""
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    yaw = 2.0 * math.atan2(q.z, q.w)
    tw = msg.twist.twist
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    return Odometry(seq, stamp, 0.0, p.x, p.y, yaw, (q.x, q.y, q.z, q.w), tw.linear.x,
                    tw.linear.y, tw.angular.z)


def run_square_ros2(
    *,
    driver: SquareDriver | None = None,
    faults: FaultSpec | None = None,
    rate_hz: float = 50.0,
    timeout_s: float = 90.0,
    connect: Sequence[str] = (),
    on_tick: Callable[[SquareDriver, Odometry | None, Pose], None] | None = None,
    stop: threading.Event | None = None,
    sinks: Sequence[Sink] = (),
) -> SquareResult:
    """Simulated base on a pty, the base node and its ROS 2 face, the driver on ROS 2 topics;
    ``sinks`` (a capture, a live view) get the node's bytes and records."""
    driver = driver or SquareDriver()
    stop = stop or threading.Event()
    result = SquareResult()
    model = MecanumBase()
    endpoint = SimEndpoint(model, pacing="realtime", faults=faults)
    result.tolerance = square_tolerance(driver, model.params)
    latest: list[Odometry] = []
    lock = threading.Lock()
    count = [0]

    def on_odom(msg: Any) -> None:
        count[0] += 1
        rec = _record(msg, count[0])
        with lock:
            latest[:] = [rec]

    settings = Ros2Settings(namespace="/robot1", connect=tuple(connect))
    participant = Participant(connect=connect, mode=None if connect else "peer",
                              wait=10.0)
    twist_of = topics.typestore().types
    with PtyLink(endpoint, supervisor=False) as link:
        endpoint.start()
        config = RobotConfig(sim_url=link.path, use_sim=True, rate_hz=rate_hz, source="<demo>")
        node = BaseNode(config, sinks=sinks, on_event=result.events.append)
        node.start()
        bridge = Ros2Base(node, settings, participant=participant, say=lambda _t: None)
        bridge.start()
        ros = participant.node("square_driver", "/robot1")
        ros.subscription("odom", "nav_msgs/msg/Odometry", on_odom)
        cmd = ros.publisher("cmd_vel", "geometry_msgs/msg/Twist")

        def send(vx: float, vy: float, wz: float) -> None:
            vec = twist_of["geometry_msgs/msg/Vector3"]
            cmd.publish(twist_of["geometry_msgs/msg/Twist"](
                linear=vec(x=vx, y=vy, z=0.0), angular=vec(x=0.0, y=0.0, z=wz)))

        t0 = time.monotonic()
        period = 1.0 / rate_hz
        try:
            next_tick, last, seq = t0, t0, -1
            while not driver.done and not stop.is_set():
                now = time.monotonic()
                if now - t0 > timeout_s:
                    break
                with lock:
                    odom = latest[0] if latest else None
                if odom is not None and odom.seq != seq:  # steer on fresh odometry only
                    seq = odom.seq
                    pose = (odom.x, odom.y, odom.yaw)
                    send(*driver.update(pose, now - last, (odom.vx, odom.vy, odom.wz)))
                    last = now
                    result.odom_path.append((now - t0, *pose))
                truth = model.pose
                result.truth_path.append((now - t0, *truth))
                if on_tick is not None:
                    on_tick(driver, odom, truth)
                next_tick += period
                stop.wait(max(0.0, next_tick - time.monotonic()))
            result.completed = driver.done
            send(0.0, 0.0, 0.0)
            stop.wait(0.4)
            with lock:
                odom = latest[0] if latest else None
            if odom is not None:
                result.odom_end = (odom.x, odom.y, odom.yaw)
            result.truth_end = model.pose
            result.seconds = time.monotonic() - t0
            result.node_stats = {**node.stats(), **bridge.stats(),
                                 "odom_received_by_driver": count[0]}
        finally:
            bridge.stop()
            node.stop()
            participant.close()
            endpoint.stop()
            result.sim_status = endpoint.status()
    return result


