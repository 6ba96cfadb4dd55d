"""The SCARA arm and CAN modules in ROS 2: ``joint_states`` and the modules' health.

:class:`Ros2Arm` is a ROS 2 node (``arm_bridge`` by default) that publishes
``sensor_msgs/JointState`` from the actuator feedback (joint names from
:func:`~fwbridge.bridge.robots.arm.can_arm.arm_specs`: ``theta1``, ``theta2``,
``d3``, ``theta4``, ``gripper``; rad, m, and the gripper's closed fraction)
and, on :meth:`publish_health`, one ``DiagnosticStatus`` per CAN module in a
``/diagnostics`` array: from a :class:`~fwbridge.can_bus.sim.nodes.MainController`
report, or from which modules an :class:`~fwbridge.bridge.robots.arm.can_arm.ArmLink`
has heard lately.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.rosmsg import diagnostics, topics

__all__ = ["Ros2Arm", "arm_link_health"]


def arm_link_health(link: Any, now: float) -> list[dict[str, Any]]:
    """Health rows (as ``MainController.report``) of an ArmLink's modules at ``now``."""
    rows = []
    for module, spec in link.specs.items():
        seen = link.last_seen.get(module)
        age = None if seen is None else round(now - seen, 6)
        status = ("unknown" if seen is None else
                  "silent" if now - seen > link.silence_timeout else "ok")
        rows.append({"module": module, "joint": spec.name, "status": status, "age": age,
                     "position": link.values.get(module)})
    return rows


class Ros2Arm:
    """joint_states and CAN module health of an arm, on a participant."""

    def __init__(self, participant: Participant, *, namespace: str = "/",
                 node_name: str = "arm_bridge") -> None:
        self.participant = participant
        self.distro = participant.distro
        self.ros = participant.node(node_name, namespace)
        spec = topics.TOPICS
        self.joint_pub = self.ros.publisher(spec["joint_states"].name,
                                            spec["joint_states"].msgtype,
                                            spec["joint_states"].qos)
        self.diag_pub = self.ros.publisher(spec["diagnostics"].name,
                                           spec["diagnostics"].msgtype, spec["diagnostics"].qos)

    def publish_joints(self, positions: Mapping[str, float], *,
                       velocities: Mapping[str, float] | None = None,
                       stamp: float | None = None) -> bool:
        """One JointState of ``positions`` (joint name -> rad or m)."""
        return self.joint_pub.publish(topics.joint_state_message(
            positions, velocities=velocities, stamp=time.time() if stamp is None else stamp,
            distro=self.distro))

    def publish_health(self, rows: Iterable[Mapping[str, Any]], *,
                       stamp: float | None = None) -> bool:
        """One DiagnosticArray with a status per module row (ok, degraded, silent, unknown)."""
        statuses = diagnostics.module_health_statuses(rows, distro=self.distro)
        return self.diag_pub.publish(diagnostics.diagnostics_message(
            statuses, stamp=time.time() if stamp is None else stamp, distro=self.distro))

    def close(self) -> None:
        self.ros.close()
