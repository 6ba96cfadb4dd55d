"""The SCARA arm: kinematics, motion profiles and the pick-and-place task."""
