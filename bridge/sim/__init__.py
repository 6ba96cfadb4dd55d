"""Simulated firmware endpoints on an emulation of Webots' serial devices.

``import bridge.sim`` registers the ``sim://MODEL?options`` URL with pyserial
(``serial.protocol_handler_packages``), so any code that opens ports with
``serial.serial_for_url`` can open a simulated robot. The pieces:

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

import serial

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
    "register",
]

HANDLER_PACKAGE = __name__  # pyserial imports f"{HANDLER_PACKAGE}.protocol_sim"


def register() -> None:
    """Make ``serial.serial_for_url`` serve ``sim://`` (idempotent; done on import)."""
    if HANDLER_PACKAGE not in serial.protocol_handler_packages:
        serial.protocol_handler_packages.append(HANDLER_PACKAGE)


register()
