"""Below both kinds of ``fwbridge`` node: how a channel names its bus, the checked keywords
a node opens with, and the node API the python-can Bus (:mod:`can_bus.interface`) drives.

Two nodes implement :class:`BusNode`: this process's channel (:mod:`can_bus.local_node`)
and a shared bus's daemon (:mod:`can_bus.remote`); :mod:`can_bus.attach` picks one.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

import can
from can import BusState

from fwbridge.can_bus.simchannel import PACINGS, SimBusInitError

__all__ = ["SETTINGS", "SHARED", "BusNode", "Faults", "Settings", "as_bool", "settings",
           "split_channel"]

#: The channel prefix that attaches to a shared bus: ``channel="shared:NAME"``.
SHARED = "shared:"


def as_bool(value: Any) -> bool:
    """A flag as python-can's ``--bus-kwargs`` hand it over (``"true"``, ``"0"``) or as given."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def split_channel(channel: Any) -> tuple[str, bool]:
    """(bus name, shared): ``"shared:NAME"`` names a daemon's bus, anything else this
    process's own channel (its name the channel as text: ``0`` is ``"0"``)."""
    if isinstance(channel, str) and channel.startswith(SHARED):
        return channel[len(SHARED):], True
    return str(channel), False


@dataclass(frozen=True)
class Faults:
    """Faults a node opens with (then changed with ``inject``)."""

    bit_error_rate: float = 0.0
    seed: int | None = None
    stuck_dominant: bool = False
    disconnected: bool = False

    @property
    def any(self) -> bool:
        return bool(self.bit_error_rate or self.stuck_dominant or self.disconnected)


@dataclass(frozen=True)
class Settings:
    """A node's keywords, checked: what both kinds of node take."""

    bitrate: int | None = None
    data_bitrate: int | None = None
    fd: bool = False
    pacing: str | None = None
    receive_own_messages: bool = False
    receive_error_frames: bool = False
    listen_only: bool = False
    auto_recovery: bool = True
    tx_queue_size: int = 256
    rx_queue_size: int = 0
    fifo: bool = False  # tx_order="fifo"
    name: str | None = None
    faults: Faults = Faults()
    lockstep: bool = True  # shared afap bus: a frame handed to it holds bus time


def settings(*, bitrate: Any = None, data_bitrate: Any = None, fd: Any = False,
             timing: Any = None, pacing: Any = None, receive_own_messages: Any = False,
             receive_error_frames: Any = False, listen_only: Any = False,
             auto_recovery: Any = True, tx_queue_size: Any = 256, rx_queue_size: Any = 0,
             tx_order: Any = "priority", name: Any = None, bit_error_rate: Any = 0.0,
             fault_seed: Any = None, stuck_dominant: Any = False,
             disconnected: Any = False, lockstep: Any = True) -> Settings:
    """python-can's keywords (strings from ``--bus-kwargs`` too) as :class:`Settings`;
    one :class:`SimBusInitError` for a value out of range."""
    is_fd = as_bool(fd)
    if timing is not None and hasattr(timing, "nom_bitrate"):  # can.BitTimingFd
        is_fd = True
        bitrate = int(timing.nom_bitrate) if bitrate is None else bitrate
        data_bitrate = int(timing.data_bitrate) if data_bitrate is None else data_bitrate
    if bitrate is None and timing is not None and hasattr(timing, "bitrate"):
        bitrate = int(timing.bitrate)
    if data_bitrate is not None:
        data_bitrate = int(data_bitrate)
        if data_bitrate <= 0:
            raise SimBusInitError(f"data bit rate must be positive, got {data_bitrate}")
    if pacing is not None:
        pacing = str(pacing).lower()
        if pacing not in PACINGS:
            raise SimBusInitError(f"pacing must be one of {', '.join(PACINGS)}, not {pacing!r}")
    if bitrate is not None and int(bitrate) <= 0:
        raise SimBusInitError(f"bit rate must be positive, got {bitrate}")
    if str(tx_order) not in ("priority", "fifo"):
        raise SimBusInitError(f"tx_order must be priority or fifo, not {tx_order!r}")
    ber = float(bit_error_rate)  # --bus-kwargs hands "1e-3" over as a string
    if not 0.0 <= ber <= 1.0:
        raise SimBusInitError(f"bit_error_rate {ber} not in 0..1")
    return Settings(
        bitrate=None if bitrate is None else int(bitrate), data_bitrate=data_bitrate, fd=is_fd,
        pacing=pacing, receive_own_messages=as_bool(receive_own_messages),
        receive_error_frames=as_bool(receive_error_frames), listen_only=as_bool(listen_only),
        auto_recovery=as_bool(auto_recovery), tx_queue_size=max(1, int(tx_queue_size)),
        rx_queue_size=int(rx_queue_size), fifo=str(tx_order) == "fifo",
        name=None if name is None else str(name),
        faults=Faults(ber, None if fault_seed is None else int(fault_seed),
                      as_bool(stuck_dominant), as_bool(disconnected)),
        lockstep=as_bool(lockstep))


#: The keywords :func:`settings` takes.
SETTINGS = frozenset(inspect.signature(settings).parameters)


class BusNode(Protocol):
    """One node of a simulated bus, as the python-can Bus drives it."""

    node_id: int
    channel_name: str  # the bus's name (without ``shared:``)
    channel_info: str
    tx_queue_size: int
    shared: bool  # a daemon's bus, not this process's channel

    @property
    def closed(self) -> bool: ...

    @property
    def sim(self) -> Any: ...  # the bus: SimChannel, or what a daemon tells of its own

    def recv(self, timeout: float | None) -> can.Message | None: ...  # filtered already

    def send(self, msg: can.Message, timeout: float | None) -> None: ...

    def set_filters(self, filters: Any) -> None: ...

    def get_own(self) -> bool: ...

    def set_own(self, flag: bool) -> None: ...

    def get_error_frames(self) -> bool: ...

    def set_error_frames(self, flag: bool) -> None: ...

    def flush(self) -> None: ...

    def get_state(self) -> BusState: ...

    def set_state(self, state: BusState) -> None: ...

    def bus_time(self) -> float: ...

    def error_counters(self) -> tuple[int, int]: ...

    def advance_to(self, t: float) -> None: ...

    def inject(self, *, bit_error_rate: float | None, stuck_dominant: bool | None,
               disconnected: bool | None, seed: int | None) -> None: ...

    def recover(self) -> None: ...

    def wait_sent(self, timeout: float) -> int: ...

    def close(self) -> None: ...  # leave the bus (what it started, its node); idempotent
