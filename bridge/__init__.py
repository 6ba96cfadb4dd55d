"""I/O and runtime: serial transports, the hardware lifecycle, bridge nodes, captures.

Imports point down only: ``bridge`` uses ``protocols`` (and pyserial,
pyserial-asyncio); nothing here imports the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.link.action_link import (
        ActionLink as ActionLink,
    )
    from fwbridge.bridge.link.action_link import (
        Exchange as Exchange,
    )
    from fwbridge.bridge.link.action_link import (
        LinkFailed as LinkFailed,
    )
    from fwbridge.bridge.link.transports import (
        LinkBusy as LinkBusy,
    )
    from fwbridge.bridge.link.transports import (
        LinkLost as LinkLost,
    )
    from fwbridge.bridge.link.transports import (
        LinkNotFound as LinkNotFound,
    )
    from fwbridge.bridge.link.transports import (
        LinkPermissionDenied as LinkPermissionDenied,
    )
    from fwbridge.bridge.link.transports import (
        LinkURLError as LinkURLError,
    )
    from fwbridge.bridge.link.transports import (
        PortError as PortError,
    )
    from fwbridge.bridge.link.transports import (
        PtyPair as PtyPair,
    )
    from fwbridge.bridge.link.transports import (
        available_ports as available_ports,
    )
    from fwbridge.bridge.link.transports import (
        open_async_streams as open_async_streams,
    )
    from fwbridge.bridge.link.transports import (
        open_link as open_link,
    )
    from fwbridge.bridge.link.transports import (
        register_url_handler as register_url_handler,
    )
    from fwbridge.bridge.link.transports import (
        register_url_handlers as register_url_handlers,
    )
    from fwbridge.bridge.node.aio import AsyncBaseNode as AsyncBaseNode
    from fwbridge.bridge.node.backoff import LinkPolicy as LinkPolicy
    from fwbridge.bridge.node.base_core import (
        BaseNodeCore as BaseNodeCore,
    )
    from fwbridge.bridge.node.base_node import BaseNode as BaseNode
    from fwbridge.bridge.node.config import (
        Calibration as Calibration,
    )
    from fwbridge.bridge.node.config import (
        RobotConfig as RobotConfig,
    )
    from fwbridge.bridge.node.config import (
        load_calibration as load_calibration,
    )
    from fwbridge.bridge.node.config import (
        load_config as load_config,
    )
    from fwbridge.bridge.node.config import (
        parse_config as parse_config,
    )
    from fwbridge.bridge.node.hardware import (
        HardwareInterface as HardwareInterface,
    )
    from fwbridge.bridge.node.hardware import (
        LifecycleState as LifecycleState,
    )
    from fwbridge.bridge.node.hardware import (
        LinkHardware as LinkHardware,
    )
    from fwbridge.bridge.node.health import GarbageWatch as GarbageWatch
    from fwbridge.bridge.node.link_core import LinkCore as LinkCore
    from fwbridge.bridge.node.link_core import NodeEvent as NodeEvent
    from fwbridge.bridge.node.link_core import Outbound as Outbound
    from fwbridge.bridge.node.odometry import (
        Odometry as Odometry,
    )
    from fwbridge.bridge.node.odometry import (
        OdometryIntegrator as OdometryIntegrator,
    )
    from fwbridge.bridge.node.sinks import CallbackSink as CallbackSink
    from fwbridge.bridge.node.sinks import JsonLinesSink as JsonLinesSink
    from fwbridge.bridge.node.sinks import Sink as Sink
    from fwbridge.bridge.node.sinks import SinkBase as SinkBase
    from fwbridge.bridge.node.sinks import Sinks as Sinks
    from fwbridge.bridge.record.serial_captures import (
        read_capture as read_capture,
    )
    from fwbridge.bridge.record.serial_captures import (
        read_payloads as read_payloads,
    )
    from fwbridge.bridge.record.serial_pcapng import (
        CaptureWriter as CaptureWriter,
    )
    from fwbridge.bridge.record.serial_pcapng import (
        Packet as Packet,
    )


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "ActionLink": "fwbridge.bridge.link.action_link",
    "Exchange": "fwbridge.bridge.link.action_link",
    "LinkFailed": "fwbridge.bridge.link.action_link",
    "LinkBusy": "fwbridge.bridge.link.transports",
    "LinkLost": "fwbridge.bridge.link.transports",
    "LinkNotFound": "fwbridge.bridge.link.transports",
    "LinkPermissionDenied": "fwbridge.bridge.link.transports",
    "LinkURLError": "fwbridge.bridge.link.transports",
    "PortError": "fwbridge.bridge.link.transports",
    "PtyPair": "fwbridge.bridge.link.transports",
    "available_ports": "fwbridge.bridge.link.transports",
    "open_async_streams": "fwbridge.bridge.link.transports",
    "open_link": "fwbridge.bridge.link.transports",
    "register_url_handler": "fwbridge.bridge.link.transports",
    "register_url_handlers": "fwbridge.bridge.link.transports",
    "AsyncBaseNode": "fwbridge.bridge.node.aio",
    "LinkPolicy": "fwbridge.bridge.node.backoff",
    "BaseNodeCore": "fwbridge.bridge.node.base_core",
    "NodeEvent": "fwbridge.bridge.node.link_core",
    "LinkCore": "fwbridge.bridge.node.link_core",
    "Outbound": "fwbridge.bridge.node.link_core",
    "BaseNode": "fwbridge.bridge.node.base_node",
    "Calibration": "fwbridge.bridge.node.config",
    "RobotConfig": "fwbridge.bridge.node.config",
    "load_calibration": "fwbridge.bridge.node.config",
    "load_config": "fwbridge.bridge.node.config",
    "parse_config": "fwbridge.bridge.node.config",
    "HardwareInterface": "fwbridge.bridge.node.hardware",
    "LifecycleState": "fwbridge.bridge.node.hardware",
    "LinkHardware": "fwbridge.bridge.node.hardware",
    "GarbageWatch": "fwbridge.bridge.node.health",
    "Odometry": "fwbridge.bridge.node.odometry",
    "OdometryIntegrator": "fwbridge.bridge.node.odometry",
    "CallbackSink": "fwbridge.bridge.node.sinks",
    "JsonLinesSink": "fwbridge.bridge.node.sinks",
    "Sink": "fwbridge.bridge.node.sinks",
    "SinkBase": "fwbridge.bridge.node.sinks",
    "Sinks": "fwbridge.bridge.node.sinks",
    "read_capture": "fwbridge.bridge.record.serial_captures",
    "read_payloads": "fwbridge.bridge.record.serial_captures",
    "CaptureWriter": "fwbridge.bridge.record.serial_pcapng",
    "Packet": "fwbridge.bridge.record.serial_pcapng",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
