"""fwbridge as a ROS 2 node, with no ROS install: rmw_zenoh's conventions on Zenoh.

Needs the ``ros2`` extra (eclipse-zenoh, rosbags, xxhash). The pieces:
:mod:`~fwbridge.bridge.ros2.keys` (rmw_zenoh's key expressions, liveliness
tokens and attachments, pure), :mod:`~fwbridge.bridge.ros2.config` (the
``[ros2]`` table), :mod:`~fwbridge.bridge.ros2.participant` (session, nodes),
:mod:`~fwbridge.bridge.ros2.topic_ends` (publishers, subscriptions),
:mod:`~fwbridge.bridge.ros2.service_ends` (servers, clients: the request path),
:mod:`~fwbridge.bridge.ros2.base` (the base node in ROS 2),
:mod:`~fwbridge.bridge.ros2.fish` (the robot fish in ROS 2: its status and
configuration as services) and :mod:`~fwbridge.bridge.ros2.fleet`
(simulated bases in one process). The message mapping itself is
:mod:`fwbridge.bridge.rosmsg`.
"""
