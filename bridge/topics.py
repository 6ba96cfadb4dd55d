"""Moved to :mod:`fwbridge.bridge.node.topics`; this old name still imports it
(with a DeprecationWarning)."""

from fwbridge.lazy import moved_module

moved_module(__name__, "fwbridge.bridge.node.topics")
