"""Frame families above the engine: what the bytes of a frame's data mean.

The action frame's action groups (``action_group``) and its stop-and-wait
link (``arq``); the 8-byte actuator struct of the CAN frames (``actuator``);
the robot fish's payloads, commands and actions (``fish_*``). The frames
themselves are descriptions (``protocols/frames/``); ``odom_frame``,
``cmd_frame`` and ``action_frame`` at the root of ``protocols/`` offer them.
"""
