"""Simulated firmware endpoints on an emulation of Webots' serial devices.

``sim://MODEL?options`` opens a simulated robot as a serial port: through
:func:`fwbridge.bridge.transports.open_link`, or with
``serial.serial_for_url`` once
:func:`fwbridge.bridge.transports.register_url_handlers` has run (importing
this package registers nothing). The pieces:

- :mod:`.clock`: step-driven simulated time (``SimTime``);
- :mod:`.webots_serial`: Emitter/Receiver emulation, ``WebotsSerialDrv``;
- :mod:`.world`: robots stepped in lock-step;
- :mod:`.faults`: byte-level fault injection;
- :mod:`.models`: mecanum base, Zumo (on ZumoHALWebots' HAL), echo;
- :mod:`.endpoint`, :mod:`.pty_link`, :mod:`.protocol_sim`: the host side
  (pacing, ptys, ``sim://``);
- :mod:`.webots_adapter`: the same models as a real Webots controller.
"""

from __future__ import annotations

from fwbridge.bridge.sim.clock import SimClock, SimStopped
from fwbridge.bridge.sim.endpoint import HostPort, Pacer, SimEndpoint
from fwbridge.bridge.sim.faults import FaultInjector, FaultSpec
from fwbridge.bridge.sim.models import MODELS, create_model
from fwbridge.bridge.sim.webots_serial import (
    ROBOT_LINK,
    SUPERVISOR_LINK,
    Emitter,
    Ether,
    Receiver,
    WebotsSerialDrv,
)
from fwbridge.bridge.sim.world import SimRobot, World

__all__ = [
    "MODELS",
    "ROBOT_LINK",
    "SUPERVISOR_LINK",
    "Emitter",
    "Ether",
    "FaultInjector",
    "FaultSpec",
    "HostPort",
    "Pacer",
    "Receiver",
    "SimClock",
    "SimEndpoint",
    "SimRobot",
    "SimStopped",
    "WebotsSerialDrv",
    "World",
    "create_model",
]
