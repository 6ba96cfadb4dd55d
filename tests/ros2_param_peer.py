"""An independent ROS 2 parameter client for the tests: plain Zenoh + rosbags, no fwbridge
(the session and message helpers of :mod:`tests.ros2_peer`).

    python tests/ros2_param_peer.py ENDPOINT

reads one JSON command a line on stdin and answers with JSON lines on stdout:

- ``{"sub": KEY, "type": "pkg/msg/T", "tag": T, "latched": false}``: subscribe to KEY
  (a Zenoh key expression); each sample is printed as ``{"tag": T, "msg": {...}}``
  (``latched``: an advanced subscriber asking the publishers' caches, as rmw_zenoh's
  transient_local subscriptions do); answers ``{"subscribed": T}``;
- ``{"call": SERVICE, "srv": "pkg/srv/S", "request": {...}, "id": N}``: a request of
  service S as rmw_zenoh's clients send it (a query on
  ``SERVICE/<pkg>::srv::dds_::S_/<hash>``, CDR payload, the attachment), asked again
  until a reply comes or 20 s pass; the reply's decoded response as ``{"id": N,
  "response": {...}, "seq": .., "gid": .., "sent_gid": ..}`` or ``{"id": N, "error":
  "no reply"}``;
- ``{"twist": PREFIX, "vx": X, "count": N}``: N geometry_msgs/Twist samples on
  ``PREFIX/geometry_msgs::msg::dds_::Twist_/<hash>`` at 20 Hz; answers ``{"sent": N}``.

The services' type hashes are rosidl's (``share/rcl_interfaces/srv/*.json`` of the
rcl_interfaces package; Trigger's as seen on a ROS 2 installation's wire). The
request and response types are written here in .msg syntax.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import zenoh
from rosbags.interfaces import Nodetype
from rosbags.typesys import get_types_from_msg

if not __package__:  # run as a script: the checkout's root, for the peer module beside
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.ros2_peer import SET_PARAMETERS_HASH, STORE, TRIGGER_HASH, plain, session

SERVICES = {
    "rcl_interfaces/srv/ListParameters": (
        "RIHS01_3e6062bfbb27bfb8730d4cef2558221f51a11646d78e7bb30a1e83afac3aad9d",
        "uint64 DEPTH_RECURSIVE=0\nstring[] prefixes\nuint64 depth",
        "rcl_interfaces/msg/ListParametersResult result"),
    "rcl_interfaces/srv/GetParameters": (
        "RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc",
        "string[] names", "rcl_interfaces/msg/ParameterValue[] values"),
    "rcl_interfaces/srv/GetParameterTypes": (
        "RIHS01_da199c878688b3e530bdfe3ca8f74cb9fa0c303101e980a9e8f260e25e1c80ca",
        "string[] names", "uint8[] types"),
    "rcl_interfaces/srv/DescribeParameters": (
        "RIHS01_845b484d71eb0673dae682f2e3ba3c4851a65a3dcfb97bddd82c5b57e91e4cff",
        "string[] names", "rcl_interfaces/msg/ParameterDescriptor[] descriptors"),
    "rcl_interfaces/srv/SetParameters": (
        SET_PARAMETERS_HASH,
        "rcl_interfaces/msg/Parameter[] parameters",
        "rcl_interfaces/msg/SetParametersResult[] results"),
    "rcl_interfaces/srv/SetParametersAtomically": (
        "RIHS01_0e192ef259c07fc3c07a13191d27002222e65e00ccec653ca05e856f79285fcd",
        "rcl_interfaces/msg/Parameter[] parameters",
        "rcl_interfaces/msg/SetParametersResult result"),
    "std_srvs/srv/Trigger": (
        TRIGGER_HASH,
        "", "bool success\nstring message"),
}
OUT = threading.Lock()


def say(obj: dict[str, Any]) -> None:
    with OUT:
        print(json.dumps(obj), flush=True)


_DTYPES = {"bool": bool, "byte": np.uint8, "uint8": np.uint8, "int8": np.int8,
           "int64": np.int64, "uint64": np.uint64, "float64": np.float64,
           "int32": np.int32, "uint32": np.uint32, "float32": np.float32}


def build(msgtype: str, data: dict[str, Any]) -> Any:
    """A message of ``msgtype`` from plain data, every missing field zero."""
    fields = STORE.fielddefs[msgtype][1]
    values: dict[str, Any] = {}
    for name, (kind, rest) in fields:
        given = data.get(name)
        if kind == Nodetype.BASE:
            base = rest[0]
            values[name] = given if given is not None else (
                "" if base == "string" else False if base == "bool" else
                0.0 if base.startswith("float") else 0)
        elif kind == Nodetype.NAME:
            values[name] = build(rest, given or {})
        else:
            (inner_kind, inner), _n = rest
            items = given or []
            if inner_kind == Nodetype.NAME:
                values[name] = [build(inner, item) for item in items]
            elif inner[0] == "string":
                values[name] = list(items)
            else:
                values[name] = np.array(items, dtype=_DTYPES[inner[0]])
    return STORE.types[msgtype](**values)


def register(srvtype: str) -> tuple[str, str, str]:
    hash_, request, response = SERVICES[srvtype]
    for suffix, body in (("_Request", request), ("_Response", response)):
        if srvtype + suffix not in STORE.types:
            parsed = get_types_from_msg(body, srvtype + suffix)
            STORE.register({srvtype + suffix: next(iter(parsed.values()))})
    return hash_, srvtype + "_Request", srvtype + "_Response"


def call(s: zenoh.Session, cmd: dict[str, Any], seq: int) -> None:
    srvtype = cmd["srv"]
    hash_, req_type, resp_type = register(srvtype)
    pkg, _srv, name = srvtype.split("/")
    key = f"{cmd['call']}/{pkg}::srv::dds_::{name}_/{hash_}"
    data = bytes(STORE.serialize_cdr(build(req_type, cmd.get("request", {})), req_type))
    gid = bytes(range(48, 64))
    end = time.monotonic() + 20.0
    while time.monotonic() < end:  # the node may still be starting: ask again
        att = struct.pack("<qqB16s", seq, time.time_ns(), 16, gid)
        for reply in s.get(key, payload=data, attachment=att, timeout=2.0):
            if reply.ok is None:
                continue
            response = STORE.deserialize_cdr(reply.ok.payload.to_bytes(), resp_type)
            ratt = reply.ok.attachment.to_bytes()
            rseq, _stamp, _n = struct.unpack_from("<qqB", ratt)
            say({"id": cmd.get("id"), "response": plain(response), "seq": rseq,
                 "gid": ratt[17:].hex(), "sent_gid": gid.hex()})
            return
        time.sleep(0.2)  # polling: between two bounded attempts
    say({"id": cmd.get("id"), "error": "no reply"})


def subscribe(s: zenoh.Session, cmd: dict[str, Any]) -> Any:
    tag, msgtype = cmd["tag"], cmd["type"]

    def on_sample(sample: zenoh.Sample) -> None:
        say({"tag": tag, "key": str(sample.key_expr),
             "msg": plain(STORE.deserialize_cdr(sample.payload.to_bytes(), msgtype))})

    if cmd.get("latched"):
        from zenoh.ext import HistoryConfig, declare_advanced_subscriber

        return declare_advanced_subscriber(s, cmd["sub"], on_sample, history=HistoryConfig(
            detect_late_publishers=True, max_samples=1000))
    return s.declare_subscriber(cmd["sub"], on_sample)


def twist(s: zenoh.Session, cmd: dict[str, Any]) -> None:
    vec = STORE.types["geometry_msgs/msg/Vector3"]
    msg = STORE.types["geometry_msgs/msg/Twist"](linear=vec(x=float(cmd["vx"]), y=0.0, z=0.0),
                                                 angular=vec(x=0.0, y=0.0, z=0.0))
    data = bytes(STORE.serialize_cdr(msg, "geometry_msgs/msg/Twist"))
    key = (f"{cmd['twist']}/geometry_msgs::msg::dds_::Twist_/"
           f"{STORE.hash_rihs01('geometry_msgs/msg/Twist')}")
    publisher = s.declare_publisher(key)
    time.sleep(0.3)  # not a readiness wait: no sign when the subscriber's route is in
    for seq in range(1, int(cmd["count"]) + 1):
        publisher.put(data, attachment=struct.pack("<qqB16s", seq, time.time_ns(), 16,
                                                   b"\x09" * 16))
        time.sleep(0.05)  # pacing: 20 Hz
    publisher.undeclare()
    say({"sent": int(cmd["count"])})


def main() -> None:
    s = session(sys.argv[1])
    subs = []
    try:
        say({"ready": True})
        for seq, line in enumerate(sys.stdin, start=1):
            cmd = json.loads(line)
            if "sub" in cmd:
                subs.append(subscribe(s, cmd))
                say({"subscribed": cmd["tag"]})
            elif "call" in cmd:
                call(s, cmd, seq)
            elif "twist" in cmd:
                twist(s, cmd)
    finally:
        for sub in subs:
            sub.undeclare()
        s.close()


if __name__ == "__main__":
    main()
