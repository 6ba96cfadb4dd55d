"""An independent ROS 2 peer for the tests: plain Zenoh + rosbags, no fwbridge code.

    python tests/ros2_peer.py ENDPOINT echo KEY TYPE [--count N]
        one JSON line per sample on KEY (a Zenoh key expression): the decoded
        message, and the attachment's fields;
    python tests/ros2_peer.py ENDPOINT pub PREFIX VX WZ SECONDS [--rate HZ] [--raw HEX]
        geometry_msgs/Twist samples (or the raw bytes HEX) on
        PREFIX/geometry_msgs::msg::dds_::Twist_/RIHS01_<hash> (PREFIX like
        0/robot1/cmd_vel), with an rmw_zenoh attachment, at HZ for SECONDS;
    python tests/ros2_peer.py ENDPOINT tokens
        the liveliness keys of domain 0, one per line;
    python tests/ros2_peer.py ENDPOINT latched KEY TYPE --count N
        as echo, for a transient_local topic joined late: an advanced subscriber
        asking the publishers' caches for their history, as rmw_zenoh's does;
    python tests/ros2_peer.py ENDPOINT call SERVICE
        calls std_srvs/srv/Trigger SERVICE (like 0/robot1/base_bridge/get_status) as
        rmw_zenoh's clients do: a query on SERVICE/std_srvs::srv::dds_::Trigger_/<hash>
        with a CDR request and an attachment; prints the reply's decoded response and
        attachment as one JSON line;
    python tests/ros2_peer.py ENDPOINT set_param SERVICE NAME VALUE [NAME VALUE ...]
        calls rcl_interfaces/srv/SetParameters SERVICE (like
        0/robot1/base_bridge/set_watchdog) with the parameters NAME, each a double
        VALUE (an integer when VALUE has no '.', a string when it starts with 'str:'),
        as rmw_zenoh's clients do; prints the results and the reply's attachment as
        one JSON line.

It connects (client of a test router or peer) to ENDPOINT only, no scouting.
Prints "ready" on stderr once subscribed.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time

import numpy as np
import zenoh
from rosbags.typesys import Stores, get_typestore

STORE = get_typestore(Stores.ROS2_JAZZY)


def session(endpoint: str) -> zenoh.Session:
    cfg = zenoh.Config()
    cfg.insert_json5("mode", '"peer"')
    cfg.insert_json5("scouting/multicast/enabled", "false")
    cfg.insert_json5("connect/endpoints", json.dumps([endpoint]))
    cfg.insert_json5("listen/endpoints", "[]")
    cfg.insert_json5("timestamping/enabled", "true")
    return zenoh.open(cfg)


def plain(msg: object) -> object:
    if hasattr(msg, "__dataclass_fields__"):
        names = [k for k in msg.__dataclass_fields__ if not k.startswith("__")]
        return {k: plain(getattr(msg, k)) for k in names}
    if hasattr(msg, "tolist"):
        return msg.tolist()
    if isinstance(msg, list):
        return [plain(v) for v in msg]
    return msg


def echo(s: zenoh.Session, key: str, msgtype: str, count: int, latched: bool = False) -> None:
    done = threading.Event()
    seen = [0]
    lock = threading.Lock()

    unique: set[bytes] = set()

    def on_sample(sample: zenoh.Sample) -> None:
        payload = sample.payload.to_bytes()
        if latched:  # a cached sample may come both from history and from recovery
            with lock:
                if payload in unique:
                    return
                unique.add(payload)
        att = sample.attachment.to_bytes() if sample.attachment is not None else b""
        out: dict[str, object] = {"key": str(sample.key_expr), "t": time.monotonic(),
                                  "attachment": att.hex()}
        if len(att) == 33:
            seq, stamp, n = struct.unpack_from("<qqB", att)
            out.update(seq=seq, source_timestamp=stamp, gid_len=n, gid=att[17:].hex())
        out["msg"] = plain(STORE.deserialize_cdr(payload, msgtype))
        with lock:
            print(json.dumps(out), flush=True)
            seen[0] += 1
            if count and seen[0] >= count:
                done.set()

    if latched:
        from zenoh.ext import HistoryConfig, declare_advanced_subscriber

        sub = declare_advanced_subscriber(s, key, on_sample, history=HistoryConfig(
            detect_late_publishers=True, max_samples=100))  # tf2 static listener: depth 100
    else:
        sub = s.declare_subscriber(key, on_sample)
    print("ready", file=sys.stderr, flush=True)
    done.wait(30)
    sub.undeclare()


def pub(s: zenoh.Session, key: str, vx: float, wz: float, seconds: float, rate: float,
        raw: bytes | None) -> None:
    t = STORE.types
    vec = t["geometry_msgs/msg/Vector3"]
    msg = t["geometry_msgs/msg/Twist"](linear=vec(x=vx, y=0.0, z=0.0),
                                       angular=vec(x=0.0, y=0.0, z=wz))
    data = raw if raw is not None else bytes(STORE.serialize_cdr(msg, "geometry_msgs/msg/Twist"))
    key = f"{key}/geometry_msgs::msg::dds_::Twist_/{STORE.hash_rihs01('geometry_msgs/msg/Twist')}"
    publisher = s.declare_publisher(key)
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < end:
        seq += 1
        att = struct.pack("<qqB16s", seq, time.time_ns(), 16, b"\x07" * 16)
        publisher.put(data, attachment=att)
        time.sleep(1.0 / rate)  # pacing: a publisher at RATE Hz


#: std_srvs/srv/Trigger's type hash, as seen on the wire of a ROS 2 (Jazzy) installation.
TRIGGER_HASH = "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f"


def call(s: zenoh.Session, service: str) -> None:
    key = f"{service}/std_srvs::srv::dds_::Trigger_/{TRIGGER_HASH}"
    gid = bytes(range(16, 32))
    att = struct.pack("<qqB16s", 41, time.time_ns(), 16, gid)
    request = bytes([0, 1, 0, 0, 0])  # CDR LE header + uint8 structure_needs_at_least_one_member
    for reply in s.get(key, payload=request, attachment=att, timeout=5.0):
        if reply.ok is None:
            continue
        data = reply.ok.payload.to_bytes()
        success = bool(data[4])
        (n,) = struct.unpack_from("<I", data, 8)  # the string after padding to 4
        message = data[12:12 + n - 1].decode()
        ratt = reply.ok.attachment.to_bytes()
        seq, _stamp, _n = struct.unpack_from("<qqB", ratt)
        print(json.dumps({"key": str(reply.ok.key_expr), "success": success,
                          "message": message, "seq": seq, "gid": ratt[17:].hex(),
                          "sent_gid": gid.hex()}), flush=True)
        return
    print(json.dumps({"error": "no reply"}), flush=True)


#: rcl_interfaces/srv/SetParameters' type hash, as rosidl generates it (the referenced
#: rcl_interfaces/msg/Parameter's hash there is Jazzy's).
SET_PARAMETERS_HASH = "RIHS01_56eed9a67e169f9cb6c1f987bc88f868c14a8fc9f743a263bc734c154015d7e0"
SET_PARAMETERS = "rcl_interfaces/srv/SetParameters"


def parameter_value(text: str) -> object:
    """A ParameterValue from VALUE's text: str:TEXT a string, else an integer or a double."""
    t = STORE.types
    string = text.startswith("str:")
    integer = not string and "." not in text and "e" not in text.lower() \
        and "n" not in text.lower()
    kind = 4 if string else 2 if integer else 3
    return t["rcl_interfaces/msg/ParameterValue"](
        type=kind, bool_value=False, integer_value=int(text) if integer else 0,
        double_value=float(text) if kind == 3 else 0.0,
        string_value=text[4:] if string else "",
        byte_array_value=np.array([], dtype=np.uint8), bool_array_value=np.array([], dtype=bool),
        integer_array_value=np.array([], dtype=np.int64),
        double_array_value=np.array([], dtype=np.float64), string_array_value=[])


def set_param(s: zenoh.Session, service: str, pairs: list[str]) -> None:
    from rosbags.typesys import get_types_from_msg

    for suffix, body in (("_Request", "rcl_interfaces/msg/Parameter[] parameters"),
                         ("_Response", "rcl_interfaces/msg/SetParametersResult[] results")):
        if SET_PARAMETERS + suffix not in STORE.types:
            parsed = get_types_from_msg(body, SET_PARAMETERS + suffix)  # keyed pkg/msg/…
            STORE.register({SET_PARAMETERS + suffix: next(iter(parsed.values()))})
    t = STORE.types
    request = t[SET_PARAMETERS + "_Request"](parameters=[
        t["rcl_interfaces/msg/Parameter"](name=name, value=parameter_value(text))
        for name, text in zip(pairs[::2], pairs[1::2])])
    data = bytes(STORE.serialize_cdr(request, SET_PARAMETERS + "_Request"))
    key = f"{service}/rcl_interfaces::srv::dds_::SetParameters_/{SET_PARAMETERS_HASH}"
    gid = bytes(range(32, 48))
    att = struct.pack("<qqB16s", 7, time.time_ns(), 16, gid)
    for reply in s.get(key, payload=data, attachment=att, timeout=5.0):
        if reply.ok is None:
            continue
        response = STORE.deserialize_cdr(reply.ok.payload.to_bytes(), SET_PARAMETERS + "_Response")
        ratt = reply.ok.attachment.to_bytes()
        seq, _stamp, _n = struct.unpack_from("<qqB", ratt)
        print(json.dumps({"key": str(reply.ok.key_expr), "results": plain(response.results),
                          "seq": seq, "gid": ratt[17:].hex(), "sent_gid": gid.hex()}),
              flush=True)
        return
    print(json.dumps({"error": "no reply"}), flush=True)


def main() -> None:
    endpoint, verb, *rest = sys.argv[1:]
    s = session(endpoint)
    try:
        if verb in ("echo", "latched"):
            count = int(rest[rest.index("--count") + 1]) if "--count" in rest else 0
            echo(s, rest[0], rest[1], count, latched=verb == "latched")
        elif verb == "pub":
            rate = float(rest[rest.index("--rate") + 1]) if "--rate" in rest else 20.0
            raw = bytes.fromhex(rest[rest.index("--raw") + 1]) if "--raw" in rest else None
            pub(s, rest[0], float(rest[1]), float(rest[2]), float(rest[3]), rate, raw)
        elif verb == "call":
            time.sleep(0.5)  # not a readiness wait: no sign when a queryable route is in
            call(s, rest[0])
        elif verb == "set_param":
            time.sleep(0.5)  # not a readiness wait: no sign when a queryable route is in
            set_param(s, rest[0], rest[1:])
        elif verb == "tokens":
            # The session connects in the background: ask again until an answer comes.
            end = time.monotonic() + 10.0
            keys: list[str] = []
            while not keys and time.monotonic() < end:
                keys = [str(r.ok.key_expr) for r in s.liveliness().get("@ros2_lv/0/**",
                                                                        timeout=2.0)
                        if r.ok is not None]
            for key in keys:
                print(key, flush=True)
    finally:
        s.close()


if __name__ == "__main__":
    main()
