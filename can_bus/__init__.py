"""CAN layer of fwbridge: actuator messages on any python-can bus, and a simulated bus.

- :mod:`can_bus.ids`: the identifier table and actuator struct <-> ``can.Message``.
- :mod:`can_bus.bits`: exact frame bits (CRC-15, stuffing, length, arbitration key);
  :mod:`can_bus.fd`: the same for CAN FD frames (stuff count, CRC-17/21, two bit rates).
- :mod:`can_bus.model` (with :mod:`~can_bus.modeltypes`, :mod:`~can_bus.confinement`,
  :mod:`~can_bus.faults`): the sans-I/O bus model: arbitration, timing, fault
  confinement, injected faults.
- :mod:`can_bus.interface` (with :mod:`~can_bus.simchannel`): the model as the
  python-can interface ``fwbridge``.
- :mod:`can_bus.daemon` (with :mod:`~can_bus.daemon_client`, :mod:`~can_bus.remote`,
  :mod:`~can_bus.socketcand`): one bus shared by many processes.
- :mod:`can_bus.nodes`: main controller and actuator modules on any python-can bus.
- :mod:`can_bus.capture`, :mod:`can_bus.pcapng`: log files and Wireshark captures.
"""
