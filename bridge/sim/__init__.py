"""Simulated firmware endpoints on an emulation of Webots' serial devices.

``sim://MODEL?options`` opens a simulated robot as a serial port, through
:func:`fwbridge.bridge.link.transports.open_link` or ``serial.serial_for_url``,
once :func:`register` has offered the scheme (:mod:`.scheme`; importing this
package registers nothing, and the link floor below names nothing of it). The
pieces:

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

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.sim.clock import (
        SimClock as SimClock,
    )
    from fwbridge.bridge.sim.clock import (
        SimStopped as SimStopped,
    )
    from fwbridge.bridge.sim.endpoint import (
        HostPort as HostPort,
    )
    from fwbridge.bridge.sim.endpoint import (
        Pacer as Pacer,
    )
    from fwbridge.bridge.sim.endpoint import (
        SimEndpoint as SimEndpoint,
    )
    from fwbridge.bridge.sim.faults import (
        FaultInjector as FaultInjector,
    )
    from fwbridge.bridge.sim.faults import (
        FaultSpec as FaultSpec,
    )
    from fwbridge.bridge.sim.models import (
        MODELS as MODELS,
    )
    from fwbridge.bridge.sim.models import (
        create_model as create_model,
    )
    from fwbridge.bridge.sim.pty_link import PtyLink as PtyLink
    from fwbridge.bridge.sim.scheme import register as register
    from fwbridge.bridge.sim.webots_serial import (
        ROBOT_LINK as ROBOT_LINK,
    )
    from fwbridge.bridge.sim.webots_serial import (
        SUPERVISOR_LINK as SUPERVISOR_LINK,
    )
    from fwbridge.bridge.sim.webots_serial import (
        Emitter as Emitter,
    )
    from fwbridge.bridge.sim.webots_serial import (
        Ether as Ether,
    )
    from fwbridge.bridge.sim.webots_serial import (
        Receiver as Receiver,
    )
    from fwbridge.bridge.sim.webots_serial import (
        WebotsSerialDrv as WebotsSerialDrv,
    )
    from fwbridge.bridge.sim.world import (
        SimRobot as SimRobot,
    )
    from fwbridge.bridge.sim.world import (
        World as World,
    )


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "SimClock": "fwbridge.bridge.sim.clock",
    "SimStopped": "fwbridge.bridge.sim.clock",
    "HostPort": "fwbridge.bridge.sim.endpoint",
    "Pacer": "fwbridge.bridge.sim.endpoint",
    "SimEndpoint": "fwbridge.bridge.sim.endpoint",
    "FaultInjector": "fwbridge.bridge.sim.faults",
    "FaultSpec": "fwbridge.bridge.sim.faults",
    "MODELS": "fwbridge.bridge.sim.models",
    "create_model": "fwbridge.bridge.sim.models",
    "PtyLink": "fwbridge.bridge.sim.pty_link",
    "register": "fwbridge.bridge.sim.scheme",
    "Emitter": "fwbridge.bridge.sim.webots_serial",
    "Ether": "fwbridge.bridge.sim.webots_serial",
    "ROBOT_LINK": "fwbridge.bridge.sim.webots_serial",
    "Receiver": "fwbridge.bridge.sim.webots_serial",
    "SUPERVISOR_LINK": "fwbridge.bridge.sim.webots_serial",
    "WebotsSerialDrv": "fwbridge.bridge.sim.webots_serial",
    "SimRobot": "fwbridge.bridge.sim.world",
    "World": "fwbridge.bridge.sim.world",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
