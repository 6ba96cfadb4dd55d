"""A slow, lossy link for the multi-host tests, where the kernel has no ``tc netem``.

    python tests/lossy_relay.py LISTEN_HOST:PORT TARGET_HOST:PORT DELAY LOSS SECONDS [SEED]

Accepts TCP connections on LISTEN and relays each to TARGET, both ways, every
chunk ``DELAY`` seconds late; a fraction ``LOSS`` of the chunks is "lost" and
comes another 0.2 s later (Linux's minimum retransmission timeout), holding up
those behind it, as a lost segment does on TCP: the bytes of a stream are never
dropped, since the peers speak TCP. Seeded, so a run is repeatable. Prints
"ready" on stderr once listening, ends by itself after SECONDS.
"""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import threading
import time
from collections import deque

RETRANSMIT = 0.2  # s: TCP_RTO_MIN


def pipe(src: socket.socket, dst: socket.socket, delay: float, loss: float,
         rng: random.Random, end: float) -> None:
    queue: deque[tuple[float, bytes]] = deque()
    cond = threading.Condition()
    closed = threading.Event()

    def writer() -> None:
        while True:
            with cond:
                while not queue and not closed.is_set():
                    cond.wait(0.5)
                if not queue:
                    break
                due, data = queue[0]
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # pacing: the relay holds each chunk until it is due
            with cond:
                queue.popleft()
            try:
                dst.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    threading.Thread(target=writer, daemon=True).start()
    last = 0.0
    src.settimeout(0.5)
    while time.monotonic() < end:
        try:
            data = src.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not data:
            break
        due = time.monotonic() + delay + (RETRANSMIT if rng.random() < loss else 0.0)
        last = max(last, due)  # in order: a late chunk holds up those behind it
        with cond:
            queue.append((last, data))
            cond.notify()
    closed.set()


def main() -> None:
    listen, target = sys.argv[1].rsplit(":", 1), sys.argv[2].rsplit(":", 1)
    delay, loss, seconds = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    end = time.monotonic() + seconds
    server = socket.create_server((listen[0], int(listen[1])))
    server.settimeout(0.5)
    print("ready", file=sys.stderr, flush=True)
    while time.monotonic() < end:
        try:
            client, _ = server.accept()
        except TimeoutError:
            continue
        try:
            upstream = socket.create_connection((target[0], int(target[1])), timeout=5)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            b.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pipe, args=(a, b, delay, loss, random.Random(rng.random()),
                                                end), daemon=True).start()
    server.close()


if __name__ == "__main__":
    main()
