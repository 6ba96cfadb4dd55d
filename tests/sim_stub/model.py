"""``simstub``: a software base that answers each command frame with odometry.

Each command frame read is answered at once by an odometry frame echoing
the command's velocities, with the yaw advanced by ``wz`` over 10 ms.
"""

from __future__ import annotations

import math
from typing import Any

from fwbridge.bridge.sim.webots_serial import ROBOT_LINK, WebotsSerialDrv
from fwbridge.bridge.sim.world import Board, open_serial
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
from fwbridge.protocols.odom_frame import OdomFrame


class SimStub:
    name = "simstub"

    def __init__(self) -> None:
        self.serial: WebotsSerialDrv | None = None
        self.commands = Sum8Receiver(cmd_frame.CODEC)
        self.yaw_deg = 0.0
        self.answered = 0

    def setup(self, board: Board) -> None:
        self.clock = board.clock
        self.serial = open_serial(board, ROBOT_LINK)

    def physics(self, dt: float) -> None:
        pass

    def loop(self) -> None:
        serial = self.serial
        assert serial is not None
        while serial.available():
            for item in self.commands.feed(serial.readBytes(serial.available())):
                cmd = item.frame
                self.yaw_deg += math.degrees(cmd.wz * 0.01)
                serial.write(odom_frame.encode(OdomFrame(cmd.vx, cmd.vy, cmd.wz, self.yaw_deg)))
                self.answered += 1

    def status(self) -> dict[str, Any]:
        return {"t": self.clock.millis(), "model": self.name, "answered": self.answered}

    @property
    def pose(self) -> tuple[float, float, float]:
        return 0.0, 0.0, 0.0
