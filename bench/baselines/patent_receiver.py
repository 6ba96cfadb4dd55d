"""Python port of the patent's action-frame receiver (seed 004, "指令接收").

The patent's steps, kept in this order:

1. wait for the first byte ``FE``; then the second must be ``EF``
   (header check; otherwise keep waiting);
2. save every following byte and count them;
3. a ``FD`` followed by ``DF`` ends the packet (trailer check);
4. compare the packet's length field with the number of bytes recorded;
   unequal means bytes were lost: drop the packet;
5. compute the CRC and compare it with the packet's; unequal: drop it;
   otherwise the packet is good.

Where the patent says nothing, the port takes the kinder reading: an ``FE``
while waiting for ``EF`` is taken as a new first header byte, and a packet
longer than the largest frame is dropped (an MCU's receive buffer is
finite). Its faults are kept on purpose, since they are the patent's: a frame
whose data or CRC holds ``FD DF`` is cut there and dropped, and a false
``FE EF`` in noise swallows the frame behind it, because the byte-wise
machine never goes back. The length and CRC conventions are fwbridge's
(PROTOCOLS.md 3), so the two receivers decode the same frames.

The state machine runs inline in :meth:`PatentReceiver.feed` (no call per
byte): the fastest plain-Python form of a byte-wise receiver.
"""

from __future__ import annotations

from fwbridge.protocols.action_frame import (
    OVERHEAD,
    ActionFrame,
    as_instruction_type,
    as_sub_command,
)
from fwbridge.protocols.crc import DEFAULT_CRC, crc_function
from fwbridge.protocols.engine.kernels.action_receiver import DEFAULT_MAX_LENGTH

WAIT_HEADER_1, WAIT_HEADER_2, RECEIVING = 0, 1, 2


class PatentReceiver:
    """Byte-wise receiver ending each packet at the first ``FD DF``."""

    def __init__(self, crc: str = DEFAULT_CRC, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        self.crc = crc_function(crc)
        # machine, type, length (2), sub, data, CRC (2) and the FD DF trailer
        self.max_packet = max_length + OVERHEAD - 2
        self.state = WAIT_HEADER_1
        self.packet = bytearray()
        self.length_errors = 0
        self.crc_errors = 0
        self.overflows = 0

    def feed(self, chunk: bytes) -> list[ActionFrame]:
        """Feed received bytes in order; return the packets that checked out."""
        out: list[ActionFrame] = []
        state = self.state
        packet = self.packet
        max_packet = self.max_packet
        for b in chunk:
            if state == RECEIVING:
                packet.append(b)
                if b == 0xDF and len(packet) >= 2 and packet[-2] == 0xFD:
                    frame = self._check(packet)
                    if frame is not None:
                        out.append(frame)
                    state = WAIT_HEADER_1
                elif len(packet) > max_packet:
                    self.overflows += 1
                    state = WAIT_HEADER_1
            elif state == WAIT_HEADER_1:
                if b == 0xFE:
                    state = WAIT_HEADER_2
            elif b == 0xEF:
                state = RECEIVING
                packet.clear()
            elif b != 0xFE:
                state = WAIT_HEADER_1
        self.state = state
        return out

    def _check(self, packet: bytearray) -> ActionFrame | None:
        """Steps 4 and 5 on ``machine .. CRC FD DF``."""
        body = bytes(packet[:-2])  # without the trailer
        if len(body) < OVERHEAD - 4:
            self.length_errors += 1
            return None
        recorded = len(body) - (OVERHEAD - 4)  # data bytes actually received
        if body[2] | body[3] << 8 != recorded:
            self.length_errors += 1
            return None
        if self.crc(body[:-2]) != body[-2] | body[-1] << 8:
            self.crc_errors += 1
            return None
        return ActionFrame(
            body[0], as_instruction_type(body[1]), as_sub_command(body[4]), body[5:-2]
        )
