"""Baseline: the ten-line script a user writes to print an odometry capture with ``struct``.

``python decode_struct.py FILE [--json]``: one line per valid frame (``find``,
sum-8, ``unpack_from``), the table as fixed-width ``%g`` columns or one JSON
object per frame, through stdout's buffer.
"""

import json
import struct
import sys

with open(sys.argv[1], "rb") as fh:
    data, as_json, out = fh.read(), "--json" in sys.argv, sys.stdout.write
unpack, i = struct.Struct("<4f").unpack_from, data.find(b"\xaa\x55")
while 0 <= i <= len(data) - 19:
    if sum(data[i + 2 : i + 18]) & 0xFF == data[i + 18]:
        vx, vy, wz, yaw = unpack(data, i + 2)
        out(json.dumps({"offset": i, "protocol": "odom", "vx": vx, "vy": vy, "wz": wz,
                        "yaw_deg": yaw}) + "\n" if as_json else
            f"{i:>10}  {vx:>12.6g}  {vy:>12.6g}  {wz:>12.6g}  {yaw:>12.6g}\n")
        i = data.find(b"\xaa\x55", i + 19)
    else:
        i = data.find(b"\xaa\x55", i + 1)
