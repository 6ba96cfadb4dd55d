"""The node: the sans-I/O core (pacing, back-off, delivery to sinks), the threaded and
asyncio runtimes on top of it, odometry, link health and the robot config."""
