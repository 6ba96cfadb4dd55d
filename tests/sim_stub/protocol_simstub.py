"""``simstub://``: a software base that answers each command frame with odometry.

Built on pyserial's ``loop://`` handler (its queue gives thread-safe reads
with timeouts); a write is parsed as command frames, and each one is
answered by an odometry frame echoing the command's velocities, with the
yaw advanced by ``wz`` over 10 ms.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from serial.serialutil import SerialException
from serial.urlhandler.protocol_loop import Serial as LoopSerial

from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.odom_frame import OdomFrame
from fwbridge.protocols.sum8_receiver import Sum8Receiver


class Serial(LoopSerial):  # type: ignore[misc]
    def from_url(self, url: str) -> None:
        if urlsplit(url).scheme != "simstub":
            raise SerialException(f"expected simstub://, got {url!r}")
        self.commands = Sum8Receiver(cmd_frame.CODEC)
        self.yaw_deg = 0.0

    def write(self, data: bytes) -> int:
        if not self.is_open:
            raise SerialException("port not open")
        for item in self.commands.feed(bytes(data)):
            cmd = item.frame
            self.yaw_deg += math.degrees(cmd.wz * 0.01)
            reply = odom_frame.encode(OdomFrame(cmd.vx, cmd.vy, cmd.wz, self.yaw_deg))
            for i in range(len(reply)):
                self.queue.put(reply[i : i + 1])
        return len(data)
