"""The demo's square driven through ROS 2 topics.

The same simulated mecanum base on a pty and the same base node as the plain
square, with the node's ROS 2 face (:class:`~fwbridge.bridge.ros2.base.Ros2Base`)
in ``/robot1``; the square driver is a second ROS 2 node that reads
``/robot1/odom`` (nav_msgs/Odometry, decoded from CDR) and publishes
``/robot1/cmd_vel`` (geometry_msgs/Twist). Both nodes share one Zenoh session
(samples go through CDR and Zenoh's routing, not through the network) unless
``connect`` names a router, where any ROS 2 tool can watch.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import Sink
from fwbridge.bridge.robots.square import (
    OdomSlot,
    SquareDriver,
    SquareResult,
    Tick,
    square_base,
    steer_square,
)
from fwbridge.bridge.ros2.base import Ros2Base
from fwbridge.bridge.ros2.config import Ros2Settings
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.rosmsg import cdr
from fwbridge.bridge.sim.faults import FaultSpec

__all__ = ["odometry_record", "run_square_ros2"]


def odometry_record(msg: Any, seq: int) -> Odometry:
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
    on_tick: Tick | None = None,
    stop: threading.Event | None = None,
    sinks: Sequence[Sink] = (),
) -> SquareResult:
    """Simulated base on a pty, the base node and its ROS 2 face, the driver on ROS 2 topics;
    ``sinks`` (a capture, a live view) get the node's bytes and records."""
    driver = driver or SquareDriver()
    result = SquareResult()
    latest = OdomSlot()

    def on_odom(msg: Any) -> None:
        latest.put_made(lambda n: odometry_record(msg, n))

    settings = Ros2Settings(namespace="/robot1", connect=tuple(connect))
    participant = Participant(connect=connect, mode=None if connect else "peer",
                              wait=10.0)
    twist_of = cdr.typestore().types
    try:
        with square_base(driver, result, faults=faults, rate_hz=rate_hz, sinks=sinks
                         ) as (model, node):
            bridge = Ros2Base(node, settings, participant=participant, say=lambda _t: None)
            bridge.start()
            ros = participant.node("square_driver", "/robot1")
            ros.subscription("odom", "nav_msgs/msg/Odometry", on_odom)
            cmd = ros.publisher("cmd_vel", "geometry_msgs/msg/Twist")

            def send(vx: float, vy: float, wz: float) -> None:
                vec = twist_of["geometry_msgs/msg/Vector3"]
                cmd.publish(twist_of["geometry_msgs/msg/Twist"](
                    linear=vec(x=vx, y=vy, z=0.0), angular=vec(x=0.0, y=0.0, z=wz)))

            try:
                steer_square(driver, lambda: model.pose, latest, send, result,
                             rate_hz=rate_hz, timeout_s=timeout_s, on_tick=on_tick, stop=stop)
                result.node_stats = {**node.stats(), **bridge.stats(),
                                     "odom_received_by_driver": latest.count}
            finally:
                bridge.stop()
    finally:
        participant.close()
    return result
