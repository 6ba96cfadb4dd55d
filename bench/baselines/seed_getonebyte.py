"""Python port of seed 002's byte-wise receiver (``GetOneByte`` and its ROS twin).

Structure kept as in the seed: a per-byte call with static state; state 0
waits for ``AA``, state 1 for ``55``, state 2 collects ``size - 2`` bytes,
then checks sum-8 and decodes (``DataDecoder``), and any unexpected byte in
states 0/1 resets to 0. Its two known faults are kept on purpose:
``AA AA 55`` loses the frame, and a checksum failure throws away all the
bytes collected, including a real frame's header that started inside them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any


class SeedGetOneByte:
    """``GetOneByte(uint8_t data)`` for a frame of ``size`` bytes (19 odom, 15 cmd)."""

    def __init__(self, size: int, make: Callable[..., Any]) -> None:
        self.state = 0
        self.cnt = 0
        self.need = size - 2  # payload + checksum byte after the header
        self.data_receive = [0] * self.need
        self.unpack = struct.Struct("<" + "f" * ((size - 3) // 4)).unpack
        self.make = make
        self.frames: list[Any] = []

    def get_one_byte(self, data: int) -> None:
        if (self.state == 0 and data == 0xAA) or (self.state == 1 and data == 0x55):
            self.state += 1
        elif self.state == 2:
            self.data_receive[self.cnt] = data
            self.cnt += 1
            if self.cnt >= self.need:
                checkout = 0
                for i in range(self.cnt - 1):
                    checkout += self.data_receive[i]
                if checkout & 0xFF == self.data_receive[self.cnt - 1]:
                    self.data_decoder(self.data_receive)
                self.state = 0
                self.cnt = 0
        else:
            self.state = 0

    def data_decoder(self, data: list[int]) -> None:
        self.frames.append(self.make(*self.unpack(bytes(data[: self.need - 1]))))

    def feed(self, chunk: bytes) -> list[Any]:
        """Feed a chunk byte by byte, as the UART interrupt does; return new frames."""
        for b in chunk:
            self.get_one_byte(b)
        out, self.frames = self.frames, []
        return out
