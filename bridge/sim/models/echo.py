"""A loopback firmware: every packet it reads goes straight back.

Not a robot: it measures the link itself (the round trip host -> pty ->
simulated firmware -> host, with no model time in between) and checks
that bytes survive the emulation unchanged.
"""

from __future__ import annotations

from typing import Any

from fwbridge.bridge.sim.webots_serial import ROBOT_LINK, WebotsSerialDrv
from fwbridge.bridge.sim.world import Board, open_serial

__all__ = ["Echo"]


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.serial: WebotsSerialDrv | None = None
        self.echoed = 0
        self.refused = 0

    def setup(self, board: Board) -> None:
        self.clock = board.clock
        self.serial = open_serial(board, ROBOT_LINK)

    def physics(self, dt: float) -> None:
        pass

    def loop(self) -> None:
        serial = self.serial
        assert serial is not None
        while serial.available():
            data = serial.readBytes(serial.available())
            if serial.write(data):
                self.echoed += len(data)
            else:
                self.refused += len(data)

    def status(self) -> dict[str, Any]:
        return {
            "t": self.clock.millis(),
            "model": self.name,
            "echoed": self.echoed,
            "refused": self.refused,
        }

    @property
    def pose(self) -> tuple[float, float, float]:
        return 0.0, 0.0, 0.0
