"""CAN layer of fwbridge: actuator messages on any python-can bus, and a simulated bus.

- :mod:`can_bus.ids`: the identifier table and actuator struct <-> ``can.Message``.
- :mod:`can_bus.bits`: exact frame bits (CRC-15, stuffing, length, arbitration key);
  :mod:`can_bus.fd`: the same for CAN FD frames (stuff count, CRC-17/21, two bit rates).
- :mod:`can_bus.model` (with :mod:`~can_bus.modeltypes`, :mod:`~can_bus.confinement`,
  :mod:`~can_bus.faults`): the sans-I/O bus model: arbitration, timing, fault
  confinement, injected faults.
- :mod:`can_bus.interface`: the model as the python-can interface ``fwbridge``, one
  Bus class over two nodes (:mod:`~can_bus.bus_node`, chosen by :mod:`~can_bus.attach`):
  this process's channel (:mod:`~can_bus.local_node`, :mod:`~can_bus.simchannel`) or,
  with ``channel="shared:NAME"``, a shared bus's daemon (:mod:`~can_bus.remote`).
- :mod:`can_bus.daemon` (with :mod:`~can_bus.daemon_bus`, :mod:`~can_bus.daemon_nodes`,
  :mod:`~can_bus.socketcand`; :mod:`~can_bus.daemon_dir` and
  :mod:`~can_bus.daemon_client` on the nodes' side): one bus shared by many processes.
- :mod:`can_bus.sim.nodes`: main controller and actuator modules on any python-can bus,
  and :func:`~can_bus.sim.nodes.start_modules` (the floor above: not re-exported here).
- CAN captures (log files, pcapng, MCAP) are in the record room, :mod:`fwbridge.bridge.record`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.can_bus.bits import (
        Frame as Frame,
    )
    from fwbridge.can_bus.bits import (
        frame_bits as frame_bits,
    )
    from fwbridge.can_bus.bits import (
        frame_length as frame_length,
    )
    from fwbridge.can_bus.ids import (
        ActuatorMessage as ActuatorMessage,
    )
    from fwbridge.can_bus.ids import (
        Direction as Direction,
    )
    from fwbridge.can_bus.ids import (
        command_id as command_id,
    )
    from fwbridge.can_bus.ids import (
        drain as drain,
    )
    from fwbridge.can_bus.ids import (
        feedback_id as feedback_id,
    )
    from fwbridge.can_bus.ids import (
        from_message as from_message,
    )
    from fwbridge.can_bus.ids import (
        to_message as to_message,
    )
    from fwbridge.can_bus.interface import FwBridgeBus as FwBridgeBus
    from fwbridge.can_bus.model import (
        BusModel as BusModel,
    )
    from fwbridge.can_bus.model import (
        ErrorFrame as ErrorFrame,
    )
    from fwbridge.can_bus.model import (
        ErrorState as ErrorState,
    )
    from fwbridge.can_bus.model import (
        FrameDelivered as FrameDelivered,
    )
    from fwbridge.can_bus.model import (
        Node as Node,
    )
    from fwbridge.can_bus.model import (
        StateChanged as StateChanged,
    )
    from fwbridge.can_bus.simchannel import (
        SimBusError as SimBusError,
    )
    from fwbridge.can_bus.simchannel import (
        SimBusInitError as SimBusInitError,
    )


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "Frame": "fwbridge.can_bus.bits",
    "frame_bits": "fwbridge.can_bus.bits",
    "frame_length": "fwbridge.can_bus.bits",
    "ActuatorMessage": "fwbridge.can_bus.ids",
    "Direction": "fwbridge.can_bus.ids",
    "command_id": "fwbridge.can_bus.ids",
    "drain": "fwbridge.can_bus.ids",
    "feedback_id": "fwbridge.can_bus.ids",
    "from_message": "fwbridge.can_bus.ids",
    "to_message": "fwbridge.can_bus.ids",
    "FwBridgeBus": "fwbridge.can_bus.interface",
    "BusModel": "fwbridge.can_bus.model",
    "ErrorFrame": "fwbridge.can_bus.model",
    "ErrorState": "fwbridge.can_bus.model",
    "FrameDelivered": "fwbridge.can_bus.model",
    "Node": "fwbridge.can_bus.model",
    "StateChanged": "fwbridge.can_bus.model",
    "SimBusError": "fwbridge.can_bus.simchannel",
    "SimBusInitError": "fwbridge.can_bus.simchannel",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
