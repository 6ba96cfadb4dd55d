"""Simulated CAN firmware: the main controller and the actuator modules, on any
python-can bus. Started by the user (``fwbridge can sim``, ``start_modules``), never
by the interface."""
