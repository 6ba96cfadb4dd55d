"""Moved to :mod:`fwbridge.bridge.ros2.topics`; this old name still imports it
(with a DeprecationWarning)."""

from fwbridge.lazy import moved_module

moved_module(__name__, "fwbridge.bridge.ros2.topics")
