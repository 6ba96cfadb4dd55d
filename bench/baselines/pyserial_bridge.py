"""Baseline: the plain pyserial loop a user writes instead of ``fwbridge bridge``.

``python pyserial_bridge.py PORT SECONDS``: a velocity command every 10 ms,
odometry frames read as they come (``find`` + sum-8 + ``unpack_from``),
integrated to a pose and printed as one JSON line each, the shape of the
bridge's lines, through stdout's buffer.
"""

import json
import math
import struct
import sys
import time

import serial

port = serial.Serial(sys.argv[1], 115200, timeout=0.002)
end, due, buf = time.monotonic() + float(sys.argv[2]), time.monotonic(), b""
body = struct.pack("<3f", 0.0, 0.0, 0.0)
cmd = b"\xaa\x55" + body + bytes((sum(body) & 0xFF,))
x = y = yaw = 0.0
seq, last = 0, time.monotonic()
unpack = struct.Struct("<4f").unpack_from
while time.monotonic() < end:
    if time.monotonic() >= due:
        port.write(cmd)
        due += 0.01
    buf += port.read(port.in_waiting or 1)
    i = buf.find(b"\xaa\x55")
    while 0 <= i <= len(buf) - 19:
        if sum(buf[i + 2 : i + 18]) & 0xFF == buf[i + 18]:
            vx, vy, wz, yaw_deg = unpack(buf, i + 2)
            now = time.monotonic()
            dt, last, seq = now - last, now, seq + 1
            yaw = math.radians(yaw_deg)
            x += (vx * math.cos(yaw) - vy * math.sin(yaw)) * dt
            y += (vx * math.sin(yaw) + vy * math.cos(yaw)) * dt
            print(json.dumps({"wall": time.time(), "seq": seq, "stamp": now, "dt": dt,
                              "frame_id": "odom", "child_frame_id": "base_link",
                              "pose": {"position": {"x": x, "y": y, "z": 0.0},
                                       "orientation": {"x": 0.0, "y": 0.0,
                                                       "z": math.sin(yaw / 2),
                                                       "w": math.cos(yaw / 2)}, "yaw": yaw},
                              "twist": {"linear": {"x": vx, "y": vy, "z": 0.0},
                                        "angular": {"x": 0.0, "y": 0.0, "z": wz}}}))
            i = buf.find(b"\xaa\x55", i + 19)
        else:
            i = buf.find(b"\xaa\x55", i + 1)
    buf = buf[i:] if i >= 0 else buf[-1:]
