"""Emulation of Webots' serial devices: Emitter/Receiver of type "serial" (PROTOCOLS.md 5).

The subset of the Webots controller API the robot models use, with the
documented semantics:

- one ``Emitter.send(data)`` is one packet, on the channel the emitter had
  when it was sent; a packet needs one basic time
  step to leave: it is readable by the receivers on its channel after the
  step in which it was sent (the :class:`Ether` delivers at each step);
- a packet never reaches a receiver of the robot that sent it;
- ``send`` returns 0, and queues nothing, when the packet would take the
  bytes queued in the emitter over ``bufferSize`` (-1: unbounded).
  **choice**: the manual calls the queue full once its bytes exceed the
  buffer size; refusing the packet that would make them exceed it keeps
  the bound a bound;
- channel -1 broadcasts (emitter) or listens to every channel (receiver);
- a receiver queues packets only while enabled; they become readable at its
  sampling period; ``getDataSize``/``getBytes``/``nextPacket`` act on the
  head packet and, as in Webots, are illegal on an empty queue;
- no baud rate by default (``baudRate`` -1: the whole queue leaves at the
  next step); with a baud rate, bytes leave at ``baudRate / byteSize`` per
  second, whole packets at a time.

:class:`WebotsSerialDrv` is the Arduino-style ``Stream`` over an
emitter/receiver pair, with ZumoHALWebots' head-packet semantics: works the
same on these devices and on the real ``controller`` module's.

**choice** (channels): the robot's ``serialComRx`` listens on 3 and its
``serialComTx`` sends on 4; the host peer the other way round. The robot's
``supervisorComRx`` listens on 1 and ``supervisorComTx`` sends on 2 (the
ZumoHALWebots supervisors send on 1 and listen on 2).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

from fwbridge.bridge.sim.faults import FaultInjector
from fwbridge.protocols.counters import Counters
from fwbridge.protocols.errors import ConfigError, StateError

__all__ = [
    "CHANNEL_BROADCAST",
    "ROBOT_LINK",
    "SUPERVISOR_LINK",
    "Emitter",
    "Ether",
    "LinkChannels",
    "Receiver",
    "WebotsSerialDrv",
    "packet_bytes",
]

CHANNEL_BROADCAST = -1


class LinkChannels(NamedTuple):
    """Device names and channels of one serial link, seen from the robot."""

    tx_name: str
    rx_name: str
    tx_channel: int
    rx_channel: int

    @property
    def peer(self) -> tuple[int, int]:
        """(tx, rx) channels of the other end."""
        return self.rx_channel, self.tx_channel


ROBOT_LINK = LinkChannels("serialComTx", "serialComRx", tx_channel=4, rx_channel=3)
SUPERVISOR_LINK = LinkChannels("supervisorComTx", "supervisorComRx", tx_channel=2, rx_channel=1)


@dataclass
class EtherStats(Counters):
    packets: int = 0
    bytes: int = 0
    delivered: int = 0  # packet copies placed in receivers
    refused_full: int = 0  # sends refused by a full emitter buffer
    dropped_disabled: int = 0  # packets reaching a disabled receiver
    dropped_overflow: int = 0  # packets a full receiver buffer could not take


class Emitter:
    """A Webots Emitter of type "serial" (``send``, ``setChannel``, ``getBufferSize``)."""

    CHANNEL_BROADCAST = CHANNEL_BROADCAST

    def __init__(
        self,
        ether: Ether,
        name: str,
        owner: object,
        *,
        channel: int = 0,
        buffer_size: int = -1,
        baud_rate: int = -1,
        byte_size: int = 8,
    ) -> None:
        self.name = name
        self.owner = owner
        self.ether = ether
        self._channel = channel
        self._buffer_size = buffer_size
        self.baud_rate = baud_rate
        self.byte_size = byte_size
        self.queue: deque[tuple[int, bytes]] = deque()  # (channel at send time, packet)
        self.queued_bytes = 0
        self.credit = 0.0  # bytes the line may still carry this step (baud-limited only)

    def getName(self) -> str:
        return self.name

    def send(self, data: bytes | bytearray | memoryview | str) -> int:
        """Queue one packet; 1 if queued, 0 if the buffer is full."""
        packet = data.encode() if isinstance(data, str) else bytes(data)
        if not packet:
            raise ConfigError("Emitter.send: a packet must have at least 1 byte")
        size = len(packet)
        limit = self._buffer_size
        if limit >= 0 and self.queued_bytes + size > limit:
            self.ether.stats.refused_full += 1
            return 0
        if not self.queue:
            self.ether.pending.append(self)
        self.queue.append((self._channel, packet))
        self.queued_bytes += size
        return 1

    def setChannel(self, channel: int) -> None:
        self._channel = channel

    def getChannel(self) -> int:
        return self._channel

    def getBufferSize(self) -> int:
        return self._buffer_size

    def free(self) -> int:
        """Bytes that can still be queued (a large number when unbounded)."""
        if self._buffer_size < 0:
            return 1 << 30
        return self._buffer_size - self.queued_bytes


class Receiver:
    """A Webots Receiver of type "serial" with a bounded packet queue."""

    def __init__(
        self,
        ether: Ether,
        name: str,
        owner: object,
        *,
        channel: int = 0,
        buffer_size: int = -1,
    ) -> None:
        self.name = name
        self.owner = owner
        self.ether = ether
        self._channel = channel
        self.buffer_size = buffer_size
        self.period = 0  # ms; 0 = disabled
        self._enabled_at = 0
        self.incoming: deque[tuple[int, bytes]] = deque()  # (arrival ms, packet), not yet sampled
        self.queue: deque[bytes] = deque()  # readable
        self.stored = 0  # bytes in incoming + queue
        ether.attach(self)

    def getName(self) -> str:
        return self.name

    def enable(self, sampling_period: int) -> None:
        self.period = int(sampling_period)
        self._enabled_at = self.ether.now_ms

    def disable(self) -> None:
        self.period = 0

    def getSamplingPeriod(self) -> int:
        return self.period

    def setChannel(self, channel: int) -> None:
        self.ether.detach(self)
        self._channel = channel
        self.ether.attach(self)

    def getChannel(self) -> int:
        return self._channel

    def getQueueLength(self) -> int:
        return len(self.queue)

    def getDataSize(self) -> int:
        return len(self._head())

    def getBytes(self) -> bytes:
        return self._head()

    def getData(self) -> bytes:
        """Deprecated Webots name of :meth:`getBytes`, kept for old controllers."""
        return self._head()

    def getString(self) -> str:
        return self._head().decode("utf-8", "replace").rstrip("\0")

    def nextPacket(self) -> None:
        packet = self._head()
        self.queue.popleft()
        self.stored -= len(packet)

    def _head(self) -> bytes:
        if not self.queue:
            raise StateError(f"{self.name}: the receiver queue is empty (illegal in Webots)")
        return self.queue[0]

    def _arrive(self, packet: bytes) -> bool:
        if self.period <= 0:
            self.ether.stats.dropped_disabled += 1
            return False
        if self.buffer_size >= 0 and self.stored + len(packet) > self.buffer_size:
            self.ether.stats.dropped_overflow += 1
            return False
        self.incoming.append((self.ether.now_ms, packet))
        self.stored += len(packet)
        return True

    def _sample(self, now_ms: int) -> None:
        """Make readable what arrived up to the last sampling instant (enable time + k periods)."""
        period = self.period
        if period <= 0:
            return
        since = now_ms - self._enabled_at
        if since < period:
            return  # the first packets are readable only after the first period
        instant = now_ms - since % period
        incoming = self.incoming
        while incoming and incoming[0][0] <= instant:
            self.queue.append(incoming.popleft()[1])


class Ether:
    """The medium: routes emitted packets to receivers once per step."""

    def __init__(self) -> None:
        self.now_ms = 0
        self.pending: list[Emitter] = []
        self.stats = EtherStats()
        self._by_channel: dict[int, list[Receiver]] = {}
        self._receivers: list[Receiver] = []
        self._faults: dict[int, FaultInjector] = {}

    def attach(self, rx: Receiver) -> None:
        self._by_channel.setdefault(rx.getChannel(), []).append(rx)
        if rx not in self._receivers:
            self._receivers.append(rx)

    def detach(self, rx: Receiver) -> None:
        group = self._by_channel.get(rx.getChannel(), [])
        if rx in group:
            group.remove(rx)

    def set_faults(self, channel: int, injector: FaultInjector | None) -> None:
        """Inject faults into every packet sent on ``channel`` (None: clear)."""
        if injector is None:
            self._faults.pop(channel, None)
        else:
            self._faults[channel] = injector

    def faults(self) -> dict[int, FaultInjector]:
        return dict(self._faults)

    def deliver(self, now_ms: int, dt_ms: int) -> None:
        """Move what emitters queued during the last step into the receivers, then sample."""
        self.now_ms = now_ms
        if self.pending:
            pending, self.pending = self.pending, []
            for em in pending:
                self._drain(em, dt_ms)
        for ch, inj in self._faults.items():
            if inj.holding:
                late = inj.release(now_ms)
                if late:
                    self._route(late, ch, None)
        for rx in self._receivers:
            if rx.incoming:
                rx._sample(now_ms)

    def _drain(self, em: Emitter, dt_ms: int) -> None:
        queue = em.queue
        if em.baud_rate > 0:
            em.credit += em.baud_rate / em.byte_size * dt_ms / 1000.0
        while queue:
            ch, packet = queue[0]
            if em.baud_rate > 0:
                if em.credit < len(packet):
                    break
                em.credit -= len(packet)
            queue.popleft()
            em.queued_bytes -= len(packet)
            self.stats.packets += 1
            self.stats.bytes += len(packet)
            inj = self._faults.get(ch)
            if inj is not None:
                packet = inj.apply(packet, self.now_ms)
                if not packet:
                    continue
            self._route(packet, ch, em.owner)
        if queue:
            self.pending.append(em)
        else:
            em.credit = 0.0  # an idle line banks no time

    def _route(self, packet: bytes, channel: int, owner: object) -> None:
        if channel == CHANNEL_BROADCAST:
            targets: list[Receiver] = list(self._receivers)
        else:
            targets = self._by_channel.get(channel, []) + self._by_channel.get(
                CHANNEL_BROADCAST, []
            )
        for rx in targets:
            if rx.owner is not owner and rx._arrive(packet):
                self.stats.delivered += 1


def packet_bytes(receiver: Any) -> bytes:
    """The head packet of any Webots receiver: ``getBytes`` (R2023b+) or ``getData``."""
    get = getattr(receiver, "getBytes", None) or receiver.getData
    data = get()
    return data.encode("latin-1") if isinstance(data, str) else bytes(data)


class WebotsSerialDrv:
    """Arduino ``Stream`` over an Emitter/Receiver pair, as ZumoHALWebots' ``WebotsSerialDrv``.

    ``available()`` counts only the bytes left in the head packet;
    ``readBytes(n)`` copies from the head packet only and moves to the next
    packet when it is used up. ``write`` sends one packet and returns the
    length, or 0 when the emitter's buffer is full.
    """

    def __init__(self, emitter: Any, receiver: Any) -> None:
        self.emitter = emitter
        self.receiver = receiver
        self._remains = 0
        self.refused = 0  # writes refused by a full emitter buffer

    def setRxChannel(self, channel: int) -> None:
        if channel >= 0:
            self.receiver.setChannel(channel)

    def setTxChannel(self, channel: int) -> None:
        if channel >= 0:
            self.emitter.setChannel(channel)

    def write(self, data: bytes | bytearray) -> int:
        result = self.emitter.send(bytes(data))
        # The real Python API may return None from send(); treat that as sent.
        if result is None or result == 1:
            return len(data)
        self.refused += 1
        return 0

    def print(self, value: object) -> int:
        text = str(value).encode()
        return self.write(text) if text else 0

    def println(self, value: object = "") -> int:
        return self.write(f"{value}\n".encode())

    def available(self) -> int:
        if self._remains:
            return self._remains
        rx = self.receiver
        if rx.getQueueLength() > 0:
            return int(rx.getDataSize())
        return 0

    def readBytes(self, length: int) -> bytes:
        rx = self.receiver
        if rx.getQueueLength() <= 0 or length <= 0:
            return b""
        message = packet_bytes(rx)
        size = len(message)
        start = size - self._remains if self._remains else 0
        chunk = message[start : start + length]
        self._remains = size - start - len(chunk)
        if self._remains == 0:
            rx.nextPacket()
        return chunk

    def read_all(self, limit: int = 1 << 16) -> bytes:
        """Every byte readable now, packet after packet (at most ``limit``)."""
        out = bytearray()
        while len(out) < limit:
            n = self.available()
            if not n:
                break
            out += self.readBytes(min(n, limit - len(out)))
        return bytes(out)
