"""Offering ``sim://MODEL`` URLs: :func:`register`, called by the code that offers them.

The link floor (:mod:`~fwbridge.bridge.link`) opens URLs by scheme and names
nothing above it; the simulated firmware registers its own scheme, and only
when asked: importing :mod:`fwbridge.bridge.sim` registers nothing, and a
program that never calls :func:`register` never starts simulated firmware
(a ``sim://`` URL is then a clear error). The ``fwbridge`` command calls it:
its user may name ``sim://`` wherever a port goes.
"""

from __future__ import annotations

from fwbridge.bridge.link.link_urls import register_url_handler

__all__ = ["register"]

#: This package: pyserial finds ``protocol_sim`` in it.
_PACKAGE = __name__.rpartition(".")[0]


def register(*, pyserial: bool = True) -> None:
    """Serve ``sim://MODEL?options`` with the simulated firmware
    (:mod:`~fwbridge.bridge.sim.protocol_sim`): through
    :func:`~fwbridge.bridge.link.transports.open_link` and any program's
    ``serial.serial_for_url``. Idempotent.

    ``pyserial=False`` offers it to fwbridge's openers only, which hand it to pyserial
    when they open a link: pyserial is not imported now (the command's start-up)."""
    register_url_handler("sim", _PACKAGE)
    if pyserial:
        from fwbridge.bridge.link.transports import register_url_handlers

        register_url_handlers()
