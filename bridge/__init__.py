"""I/O and runtime: serial transports, the hardware lifecycle, bridge nodes, captures.

Imports point down only: ``bridge`` uses ``protocols`` (and pyserial,
pyserial-asyncio); nothing here imports the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.action_link import (
        ActionLink as ActionLink,
    )
    from fwbridge.bridge.action_link import (
        Exchange as Exchange,
    )
    from fwbridge.bridge.action_link import (
        LinkFailed as LinkFailed,
    )
    from fwbridge.bridge.aio import AsyncBaseNode as AsyncBaseNode
    from fwbridge.bridge.backoff import LinkPolicy as LinkPolicy
    from fwbridge.bridge.base_core import (
        BaseNodeCore as BaseNodeCore,
    )
    from fwbridge.bridge.base_core import (
        NodeEvent as NodeEvent,
    )
    from fwbridge.bridge.base_node import BaseNode as BaseNode
    from fwbridge.bridge.capture import (
        CaptureWriter as CaptureWriter,
    )
    from fwbridge.bridge.capture import (
        Packet as Packet,
    )
    from fwbridge.bridge.capture import (
        read_capture as read_capture,
    )
    from fwbridge.bridge.capture import (
        read_payloads as read_payloads,
    )
    from fwbridge.bridge.config import (
        Calibration as Calibration,
    )
    from fwbridge.bridge.config import (
        RobotConfig as RobotConfig,
    )
    from fwbridge.bridge.config import (
        load_calibration as load_calibration,
    )
    from fwbridge.bridge.config import (
        load_config as load_config,
    )
    from fwbridge.bridge.config import (
        parse_config as parse_config,
    )
    from fwbridge.bridge.hardware import (
        HardwareInterface as HardwareInterface,
    )
    from fwbridge.bridge.hardware import (
        LifecycleState as LifecycleState,
    )
    from fwbridge.bridge.hardware import (
        LinkHardware as LinkHardware,
    )
    from fwbridge.bridge.health import GarbageWatch as GarbageWatch
    from fwbridge.bridge.odometry import (
        Odometry as Odometry,
    )
    from fwbridge.bridge.odometry import (
        OdometryIntegrator as OdometryIntegrator,
    )
    from fwbridge.bridge.sinks import CallbackSink as CallbackSink
    from fwbridge.bridge.sinks import JsonLinesSink as JsonLinesSink
    from fwbridge.bridge.sinks import Sink as Sink
    from fwbridge.bridge.sinks import SinkBase as SinkBase
    from fwbridge.bridge.sinks import Sinks as Sinks
    from fwbridge.bridge.transports import (
        LinkBusy as LinkBusy,
    )
    from fwbridge.bridge.transports import (
        LinkLost as LinkLost,
    )
    from fwbridge.bridge.transports import (
        LinkNotFound as LinkNotFound,
    )
    from fwbridge.bridge.transports import (
        LinkPermissionDenied as LinkPermissionDenied,
    )
    from fwbridge.bridge.transports import (
        LinkURLError as LinkURLError,
    )
    from fwbridge.bridge.transports import (
        PortError as PortError,
    )
    from fwbridge.bridge.transports import (
        PtyPair as PtyPair,
    )
    from fwbridge.bridge.transports import (
        available_ports as available_ports,
    )
    from fwbridge.bridge.transports import (
        open_async_streams as open_async_streams,
    )
    from fwbridge.bridge.transports import (
        open_link as open_link,
    )
    from fwbridge.bridge.transports import (
        register_url_handler as register_url_handler,
    )
    from fwbridge.bridge.transports import (
        register_url_handlers as register_url_handlers,
    )

__all__ = [
    "ActionLink",
    "AsyncBaseNode",
    "BaseNode",
    "BaseNodeCore",
    "Calibration",
    "CallbackSink",
    "CaptureWriter",
    "Exchange",
    "GarbageWatch",
    "HardwareInterface",
    "JsonLinesSink",
    "LifecycleState",
    "LinkBusy",
    "LinkFailed",
    "LinkHardware",
    "LinkLost",
    "LinkNotFound",
    "LinkPermissionDenied",
    "LinkPolicy",
    "LinkURLError",
    "NodeEvent",
    "Odometry",
    "OdometryIntegrator",
    "Packet",
    "PortError",
    "PtyPair",
    "RobotConfig",
    "Sink",
    "SinkBase",
    "Sinks",
    "available_ports",
    "load_calibration",
    "load_config",
    "open_async_streams",
    "open_link",
    "parse_config",
    "read_capture",
    "read_payloads",
    "register_url_handler",
    "register_url_handlers",
]

#: Public name -> the module that defines it (loaded on first use).
_EXPORTS = {
    "BaseNode": "fwbridge.bridge.base_node",
    "BaseNodeCore": "fwbridge.bridge.base_core",
    "NodeEvent": "fwbridge.bridge.base_core",
    "AsyncBaseNode": "fwbridge.bridge.aio",
    "LinkPolicy": "fwbridge.bridge.backoff",
    "Sink": "fwbridge.bridge.sinks",
    "SinkBase": "fwbridge.bridge.sinks",
    "Sinks": "fwbridge.bridge.sinks",
    "CallbackSink": "fwbridge.bridge.sinks",
    "JsonLinesSink": "fwbridge.bridge.sinks",
    "Calibration": "fwbridge.bridge.config",
    "RobotConfig": "fwbridge.bridge.config",
    "load_calibration": "fwbridge.bridge.config",
    "load_config": "fwbridge.bridge.config",
    "parse_config": "fwbridge.bridge.config",
    "HardwareInterface": "fwbridge.bridge.hardware",
    "LifecycleState": "fwbridge.bridge.hardware",
    "LinkHardware": "fwbridge.bridge.hardware",
    "Odometry": "fwbridge.bridge.odometry",
    "OdometryIntegrator": "fwbridge.bridge.odometry",
    "GarbageWatch": "fwbridge.bridge.health",
    "LinkBusy": "fwbridge.bridge.transports",
    "LinkLost": "fwbridge.bridge.transports",
    "LinkNotFound": "fwbridge.bridge.transports",
    "LinkPermissionDenied": "fwbridge.bridge.transports",
    "LinkURLError": "fwbridge.bridge.transports",
    "PortError": "fwbridge.bridge.transports",
    "PtyPair": "fwbridge.bridge.transports",
    "available_ports": "fwbridge.bridge.transports",
    "open_async_streams": "fwbridge.bridge.transports",
    "open_link": "fwbridge.bridge.transports",
    "register_url_handler": "fwbridge.bridge.transports",
    "register_url_handlers": "fwbridge.bridge.transports",
    "CaptureWriter": "fwbridge.bridge.capture",
    "Packet": "fwbridge.bridge.capture",
    "read_capture": "fwbridge.bridge.capture",
    "read_payloads": "fwbridge.bridge.capture",
    "ActionLink": "fwbridge.bridge.action_link",
    "Exchange": "fwbridge.bridge.action_link",
    "LinkFailed": "fwbridge.bridge.action_link",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
