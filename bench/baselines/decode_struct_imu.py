"""Baseline: the ten-line script a user writes to print the imu19 frames of a capture.

``python decode_struct_imu.py FILE [--json]`` for the frame of
``bench/frames/imu19.toml`` (``5A A5``, seven int16 x 0.01, a status byte,
CRC-16/MODBUS little-endian): ``find``, crcmod's C CRC, ``unpack_from``; the
lines ``fwbridge decode`` prints for each frame (the table's rows, or one
JSON object per frame), through stdout's buffer.
"""

import json
import struct
import sys

from crcmod.predefined import mkPredefinedCrcFun

with open(sys.argv[1], "rb") as fh:
    data, as_json, out = fh.read(), "--json" in sys.argv, sys.stdout.write
crc, unpack = mkPredefinedCrcFun("modbus"), struct.Struct("<7hBH").unpack_from
i = data.find(b"\x5a\xa5")
names = ("ax", "ay", "az", "gx", "gy", "gz", "temp")
while 0 <= i <= len(data) - 19:
    *raw, status, check = unpack(data, i + 2)
    if crc(data[i + 2 : i + 17]) == check:
        v = [r * 0.01 for r in raw]
        out(json.dumps({"offset": i, "protocol": "imu19", **dict(zip(names, v)), "status": status},
                       separators=(",", ":")) + "\n" if as_json else
            f"{i:>10}  " + "  ".join(f"{x:>12.6g}" for x in v) + f"  {status:>6}\n")
        i = data.find(b"\x5a\xa5", i + 19)
    else:
        i = data.find(b"\x5a\xa5", i + 1)
