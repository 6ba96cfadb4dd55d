"""The ROS 2 messages of the bridge's records: topic names, types and QoS, the messages
built from node records (odometry, TF, diagnostics, joint states) and the requests read
from them, CDR both ways. No network: the ROS 2 participant and the recorders (MCAP, the
live view) encode every message through here, so both carry the same bytes."""
