"""Baseline: the ten-line script a user writes to print the actuator structs of a CAN log.

``python can_decode_struct.py FILE [--json]``: python-can's reader, the
actuator IDs (0x100-0x2FF, standard, 8 data bytes) and ``struct``; one line
per struct (time since the first, direction, module and the eight fields) or
one JSON object per struct, through stdout's buffer.
"""

import json
import struct
import sys

import can

unpack, as_json, out = struct.Struct("<bBBBBBBB").unpack, "--json" in sys.argv, sys.stdout.write
t0 = None
for msg in can.LogReader(sys.argv[1]):
    i = msg.arbitration_id
    if msg.is_extended_id or msg.is_remote_frame or msg.is_error_frame or msg.dlc != 8 \
            or not 0x100 <= i <= 0x2FF:
        continue
    t0 = msg.timestamp if t0 is None else t0
    angle, speed, current, module_id, cmd, fault, ra, rb = unpack(msg.data)
    way, module, t = ("command", "feedback")[i >= 0x200], i & 0xFF, round(msg.timestamp - t0, 6)
    out(json.dumps({"t": t, "direction": way, "module": module, "angle": angle, "speed": speed,
                    "current_ma": current * 100, "module_id": module_id, "command": cmd,
                    "fault": fault, "reserved": [ra, rb]}) + "\n" if as_json else
        f"{t:17.6f} {way:8s} module {module:3d} angle={angle:4d} speed={speed:3d} "
        f"current={current * 100:5d}mA cmd=0x{cmd:02X} fault=0x{fault:02X}\n")
