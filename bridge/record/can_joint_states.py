"""CAN recordings with the arm's ROS 2 view: ``/joint_states`` from the actuator modules'
feedback (:class:`JointStates`, an ``extend`` of
:class:`~fwbridge.bridge.record.can_mcap.CanRecorder`), and the CAN capture the
command line records to (:func:`can_writer`).
"""

from __future__ import annotations

import math
from typing import Any

from fwbridge.bridge.record.can_logs import open_writer
from fwbridge.bridge.record.can_mcap import McapCanWriter
from fwbridge.bridge.record.channel_streams import Sink, Streams
from fwbridge.bridge.record.mcap_sink import McapError
from fwbridge.bridge.record.serial_channels import ros_spec
from fwbridge.can_bus.ids import FEEDBACK_BASE, MAX_MODULE

__all__ = ["JOINT_PERIOD", "JointStates", "can_writer"]

#: Shortest interval between two joint_states messages from CAN feedback, s.
JOINT_PERIOD = 0.02


class JointStates:
    """``/joint_states`` from the actuator modules' feedback on a CAN bus (joint
    ``module<k>``, the struct's angle in radians), at most every ``JOINT_PERIOD``;
    a :class:`~fwbridge.bridge.record.can_mcap.CanRecorder` extension."""

    def __init__(self, streams: Streams) -> None:
        from fwbridge.bridge.rosmsg import cdr, topics  # the ROS 2 mapping: when first used

        self.streams = streams
        self._channel = streams.channel(ros_spec("joint_states"))
        self._positions: dict[int, float] = {}
        self._due = 0.0
        self._topics, self._cdr = topics, cdr

    def on_message(self, msg: Any) -> None:
        can_id = msg.arbitration_id
        if (msg.is_extended_id or msg.is_remote_frame or msg.dlc != 8
                or not FEEDBACK_BASE <= can_id <= FEEDBACK_BASE + MAX_MODULE):
            return
        angle = msg.data[0] - 256 if msg.data[0] > 127 else msg.data[0]  # int8 degrees
        self._positions[can_id - FEEDBACK_BASE] = math.radians(angle)
        if msg.timestamp < self._due:
            return
        self._due = msg.timestamp + JOINT_PERIOD
        topics = self._topics
        positions = {f"module{k}": self._positions[k] for k in sorted(self._positions)}
        out = topics.joint_state_message(positions, stamp=msg.timestamp)
        self.streams.log(self._channel, self._cdr.serialize(out, "sensor_msgs/msg/JointState"),
                         round(msg.timestamp * 1e9))


def can_writer(path: str | None, *, bitrate: int | None = None, live: Sink | None = None,
               channel: str = "can0") -> Any:
    """A CAN capture for the CLI: ``open_writer``'s formats, or for ``.mcap`` (and a live
    view) the MCAP writer with ``joint_states`` added. Raises ValueError/OSError/McapError."""
    if path is not None and not path.lower().endswith(".mcap"):
        if live is not None:
            raise McapError("a live view records CAN to .mcap files only (or to none)")
        return open_writer(path)
    return McapCanWriter(path or "", bitrate=bitrate, live=live, channel=channel,
                         extend=[JointStates])
