"""Echo a ROS 2 topic: find its type and QoS in the graph, subscribe, hand each message on.

:func:`run_echo` is what ``fwbridge ros2 echo`` runs. As ``ros2 topic echo``
does, it takes the type and the QoS from the topic's publishers (their
liveliness tokens): transient_local when every publisher is (so a latched
topic published before it started is echoed too), best effort when any is.
Each message goes to the caller as a dict; the run ends after ``count``
messages, when the caller's ``show`` says stop (its reader went away), or on
a stop signal (``KeyboardInterrupt``, said in the result), and always closes
the participant; no message is shown after it returns.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwbridge.bridge.ros2.keys import parse_qos
from fwbridge.bridge.ros2.participant import Participant
from fwbridge.bridge.rosmsg import cdr, plain_data, topics
from fwbridge.bridge.rosmsg.topics import Qos

__all__ = ["MAX_HISTORY", "EchoConfig", "EchoResult", "echo_qos", "publishers_of", "run_echo"]

#: Most samples a transient_local echo asks each publisher's cache for.
MAX_HISTORY = 1000


@dataclass(frozen=True)
class EchoConfig:
    """What to echo: an absolute topic name, its type (None: the publishers'), the QoS
    (``auto``: the publishers'), and how many messages (None: until stopped)."""

    topic: str
    msgtype: str | None = None
    durability: str = "auto"
    reliability: str = "auto"
    count: int | None = None


@dataclass
class EchoResult:
    """The topic's full name and the messages shown."""

    topic: str
    seen: int = 0
    interrupted: bool = False  # a stop signal ended it


def publishers_of(p: Participant, topic: str, wait: float, msgtype: str | None) -> list[Any]:
    """The publishers of ``topic`` in the graph (their tokens), asked until one shows or
    ``wait`` s have passed; none without ``msgtype`` is an error (the type comes from
    them)."""
    end = time.monotonic() + wait
    while True:
        found = [e for e in p.graph(timeout=0.5)
                 if e.topic == topic and e.kind == "MP" and e.msgtype]
        if found:
            return found
        if time.monotonic() > end:
            if msgtype is None:
                raise cdr.MessageError(
                    f"{topic}: no publisher in the graph to take the type from (give --type)")
            return []
        time.sleep(0.2)


def echo_qos(publishers: list[Any], durability: str, reliability: str) -> tuple[Qos, str]:
    """The QoS echo subscribes with, and why: ``auto`` takes the publishers' (from their
    tokens, as ``ros2 topic echo`` does: transient_local when every publisher is, best
    effort when any is), the history depth their largest (10 at least)."""
    theirs = [q for q in (parse_qos(e.qos or "") for e in publishers) if q is not None]
    how = []
    if durability == "auto":
        latched = bool(theirs) and all(q.durability == "transient_local" for q in theirs)
        durability = "transient_local" if latched else "volatile"
        how.append("durability of the publishers" if theirs else "no publisher yet")
    if reliability == "auto":
        best = any(q.reliability == "best_effort" for q in theirs)
        reliability = "best_effort" if best else "reliable"
        if theirs and "durability of the publishers" not in how:
            how.append("reliability of the publishers")
    depth = max([10] + [min(q.depth, MAX_HISTORY) for q in theirs])
    why = f" ({', '.join(how)})" if how else ""
    return Qos(reliability, durability, "keep_last", depth), f"{reliability}, {durability}{why}"


def run_echo(
    participant: Participant, config: EchoConfig, show: Callable[[dict[str, Any]], bool], *,
    on_subscribed: Callable[[str, str, str], None] = lambda _topic, _type, _how: None,
    result: EchoResult | None = None,
) -> EchoResult:
    """Echo ``config.topic`` on ``participant`` (closed on every way out) until done.

    ``show`` gets each message as a dict and returns False to end the run (the
    message is not counted); ``on_subscribed(topic, type, qos)`` is told what was
    subscribed to. A bad topic name or type raises :class:`cdr.MessageError`. The
    count goes into ``result`` (made when not given) as messages come, so a caller whose
    run a late stop signal cut short still has it.
    """
    done = threading.Event()
    lock = threading.Lock()
    if result is None:
        result = EchoResult(config.topic)
    shown = result

    def on_message(msg: Any) -> None:
        data = plain_data.message_to_dict(msg)
        with lock:
            if done.is_set():
                return
            if not show(data):
                done.set()
                return
            shown.seen += 1
            if config.count is not None and shown.seen >= config.count:
                done.set()

    try:
        result.topic = topic = topics.full_topic_name(config.topic)
        auto = "auto" in (config.durability, config.reliability)
        wait = 3.0 if config.msgtype is None else 1.0
        found = (publishers_of(participant, topic, wait, config.msgtype)
                 if auto or config.msgtype is None else [])
        mt = config.msgtype or str(found[0].msgtype)
        qos, how = echo_qos(found, config.durability, config.reliability)
        on_subscribed(topic, mt, how)
        node = participant.node(f"fwbridge_echo_{os.getpid()}")
        node.subscription(topic, mt, on_message, qos, any_hash=True)
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        with lock:
            done.set()  # a message still arriving shows nothing after the run
        participant.close()
    return result
