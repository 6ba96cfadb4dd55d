"""An operator of a whole fleet for the multi-host tests: plain Zenoh + rosbags, no fwbridge code.

    python tests/fleet_operator.py ENDPOINT FIRST LAST SECONDS

steers robots FIRST..LAST (``/robotK``; none when LAST < FIRST: an observer) with
geometry_msgs/Twist on ``0/robotK/cmd_vel/...`` at 20 Hz, each its own speed
``vx = scale * 0.02 * K`` (so a command that reached the wrong robot shows in its odometry), and
subscribes to every ``0/*/odom/**``. Commands on stdin, one per line:
``scale S`` (default 0: standing still), ``quit``. Every 0.2 s one JSON line on
stdout: ``{"t": monotonic, "n": {K: odometry messages so far}, "vx": {K: the
latest odometry vx}, "age_ms": {K: the latest odometry's age, from its
attachment's source timestamp}, "diag": {K: [level, message, {key: value}] of the
robot's latest ``cmd_vel`` diagnostic status}, "sent": cmd_vel samples published,
"scale": S}``.
It connects to ENDPOINT only (a peer, as rmw_zenoh's sessions are, retrying
after the router restarts), prints "ready" on stderr once subscribed, and ends
by itself after SECONDS.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time

import zenoh
from rosbags.typesys import Stores, get_typestore

STORE = get_typestore(Stores.ROS2_JAZZY)
TWIST = "geometry_msgs/msg/Twist"
ODOM = "nav_msgs/msg/Odometry"
RATE = 20.0


def session(endpoint: str) -> zenoh.Session:
    cfg = zenoh.Config()
    for key, value in (("mode", "peer"), ("scouting/multicast/enabled", False),
                       ("connect/endpoints", [endpoint]), ("listen/endpoints", []),
                       ("connect/timeout_ms", -1), ("connect/exit_on_failure", False),
                       ("connect/retry", {"period_init_ms": 250, "period_max_ms": 1000,
                                          "period_increase_factor": 2})):
        cfg.insert_json5(key, json.dumps(value))
    return zenoh.open(cfg)


def main() -> None:
    endpoint, first, last, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4])
    robots = range(first, last + 1)
    s = session(endpoint)
    lock = threading.Lock()
    n: dict[int, int] = {}
    vx: dict[int, float] = {}
    age: dict[int, float] = {}
    diag: dict[int, list[object]] = {}
    state = {"scale": 0.0, "sent": 0}
    done = threading.Event()

    def on_odom(sample: zenoh.Sample) -> None:
        robot = str(sample.key_expr).split("/")[1]
        if not robot.startswith("robot"):
            return
        k = int(robot[5:])
        msg = STORE.deserialize_cdr(sample.payload.to_bytes(), ODOM)
        att = sample.attachment.to_bytes() if sample.attachment is not None else b""
        with lock:
            n[k] = n.get(k, 0) + 1
            vx[k] = float(msg.twist.twist.linear.x)
            if len(att) == 33:
                age[k] = (time.time_ns() - struct.unpack_from("<q", att, 8)[0]) / 1e6

    def on_diag(sample: zenoh.Sample) -> None:
        msg = STORE.deserialize_cdr(sample.payload.to_bytes(),
                                    "diagnostic_msgs/msg/DiagnosticArray")
        for st in msg.status:
            if st.name.startswith("robot") and st.name.endswith(": cmd_vel"):
                k = int(st.name.split("/")[0][5:])
                with lock:
                    diag[k] = [int(st.level), st.message, {kv.key: kv.value for kv in st.values}]

    def on_stdin() -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["scale"]:
                state["scale"] = float(words[1])
            elif words[:1] == ["quit"]:
                done.set()  # the end of stdin is not one: an observer may have none

    subs = [s.declare_subscriber("0/*/odom/**", on_odom),
            s.declare_subscriber("0/diagnostics/**", on_diag)]
    vec = STORE.types["geometry_msgs/msg/Vector3"]
    twist = STORE.types[TWIST]
    suffix = f"geometry_msgs::msg::dds_::Twist_/{STORE.hash_rihs01(TWIST)}"
    pubs = {k: s.declare_publisher(f"0/robot{k}/cmd_vel/{suffix}") for k in robots}
    gid = {k: struct.pack("<QQ", 0xF1EE7, k) for k in robots}
    threading.Thread(target=on_stdin, daemon=True).start()
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    next_at = next_report = time.monotonic()
    seq = 0
    while not done.is_set() and time.monotonic() < end:
        seq += 1
        scale = state["scale"]
        for k, pub in pubs.items():
            msg = twist(linear=vec(x=scale * 0.02 * k, y=0.0, z=0.0),
                        angular=vec(x=0.0, y=0.0, z=0.0))
            att = struct.pack("<qqB16s", seq, time.time_ns(), 16, gid[k])
            pub.put(bytes(STORE.serialize_cdr(msg, TWIST)), attachment=att)
        state["sent"] += len(pubs)
        now = time.monotonic()
        if now >= next_report:
            next_report = now + 0.2
            with lock:  # printed outside: a slow reader must not hold up the callbacks
                line = json.dumps({"t": now, "n": n, "vx": vx, "age_ms": age, "diag": diag,
                                   "sent": state["sent"], "scale": scale})
            print(line, flush=True)
        next_at += 1.0 / RATE
        done.wait(max(0.0, next_at - time.monotonic()))
    for sub in subs:
        sub.undeclare()
    s.close()


if __name__ == "__main__":
    main()
