"""``fwbridge ros2 router|topics|echo|pub|call`` and ``fwbridge fleet N``: ROS 2 tools without ROS.

They speak rmw_zenoh's conventions over Zenoh (the ``ros2`` extra), so they
see and talk to real ROS 2 nodes on a router, and to fwbridge's own;
``ros2 router`` is that router (rmw_zenohd's part, on loopback by default).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

import click

from fwbridge.cli_verbs.common import (
    Group,
    Renamed,
    fail,
    json_line,
    print_counters,
    warn_listening,
)
from fwbridge.cli_verbs.live import FOXGLOVE
from fwbridge.cli_verbs.params import DURATION, RATE, Finite
from fwbridge.cli_verbs.stopping import silence_stdout, stoppable

CONNECT = click.option("--connect", "connect", multiple=True, metavar="ENDPOINT",
                       help="Zenoh endpoint to connect to (repeatable; default: the robot "
                       "file's, else tcp/localhost:7447, where 'fwbridge ros2 router' and "
                       "rmw_zenohd listen).")
LISTEN = click.option("--listen", "listen", multiple=True, metavar="ENDPOINT",
                      help="Also listen on this Zenoh endpoint, where peers may connect "
                      "directly, router or not (repeatable; default: none).")
DOMAIN = click.option("--domain", type=click.IntRange(0, 232), default=None,
                      help="ROS domain (default: the robot file's, else $ROS_DOMAIN_ID, else 0).")
DISTRO = click.option("--distro", type=click.Choice(["jazzy", "humble"]), default=None,
                      help="Type hashes of Jazzy and later (RIHS01) or Humble (none).")
CONFIG = click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
                      metavar="ROBOT.toml", help="Take the [ros2] table of this robot file.")


def _settings(config: str | None, connect: tuple[str, ...], listen: tuple[str, ...],
              domain: int | None, distro: str | None) -> Any:
    try:
        import rosbags  # noqa: F401
        import zenoh  # noqa: F401
    except ImportError:
        fail("ROS 2 tools need the ros2 extra: pip install 'fwbridge[ros2]'")
    from fwbridge.bridge.node.config import ConfigError
    from fwbridge.bridge.ros2.config import Ros2Settings, load_ros2, parse_ros2

    try:
        s = load_ros2(config) if config else Ros2Settings()
        override: dict[str, Any] = {}
        if connect:
            override["connect"] = list(connect)
        if listen:
            override["listen"] = list(listen)
        if domain is not None:
            override["domain_id"] = domain
        if distro is not None:
            override["distro"] = distro
        checked = parse_ros2(override, source="command line")
        s = replace(s, **{k: getattr(checked, k) for k in override})
        s.domain  # noqa: B018 - checks ROS_DOMAIN_ID now, not mid-run
    except ConfigError as exc:
        fail(str(exc))
    return s


def ros2_settings(config: str | None, connect: tuple[str, ...], listen: tuple[str, ...],
                  domain: int | None, distro: str | None) -> Any:
    """The Ros2Settings of the options CONNECT, LISTEN, DOMAIN, DISTRO and CONFIG, for
    the verbs of other families that run a ROS 2 node (``fish serve``); ``error: …`` and
    exit 2 when they are wrong or the ros2 extra is missing."""
    return _settings(config, connect, listen, domain, distro)


def _participant(s: Any, wait: float = 3.0) -> Any:
    from fwbridge.bridge.ros2.participant import Participant

    warn_listening("ros2", s.listen)
    p = Participant(domain=s.domain, distro=s.distro, connect=s.connect, listen=s.listen)
    if not p.wait_open(wait):
        p.close()
        fail(f"no Zenoh router reachable at {', '.join(s.connect)} "
             f"(start one: fwbridge ros2 router)")
    return p


@click.group("ros2", cls=Group)
def ros2_group() -> None:
    """ROS 2 over Zenoh without a ROS install: a router, the graph, echo, publish."""


@ros2_group.command("router")
@click.option("--listen", "listen", multiple=True, metavar="ENDPOINT",
              help="Listen on this Zenoh endpoint (repeatable; default: tcp/127.0.0.1:7447, "
              "rmw_zenohd's port on loopback only). Any other address lets other machines "
              "connect: a warning says so.")
@click.option("--connect", "connect", multiple=True, metavar="ENDPOINT",
              help="Also connect to the router at this endpoint, on another machine "
              "(repeatable; default: none), retrying until it answers and after it restarts.")
def router_cmd(listen: tuple[str, ...], connect: tuple[str, ...]) -> None:
    """A Zenoh router for ROS 2 nodes, as 'ros2 run rmw_zenoh_cpp rmw_zenohd' runs, without
    ROS: fwbridge's nodes and tools and rmw_zenoh's find each other through it. Runs
    until Ctrl-C or SIGTERM."""
    try:
        import zenoh  # noqa: F401
    except ImportError:
        fail("the router needs the ros2 extra: pip install 'fwbridge[ros2]'")
    from fwbridge.bridge.node.config import ConfigError
    from fwbridge.bridge.ros2.config import parse_endpoints
    from fwbridge.bridge.ros2.router import DEFAULT_LISTEN, open_router

    try:
        endpoints = parse_endpoints("--listen", listen) or DEFAULT_LISTEN
        routers = parse_endpoints("--connect", connect)
    except ConfigError as exc:
        fail(str(exc))
    warn_listening("router", endpoints)
    try:
        session = open_router(endpoints, routers)
    except ConfigError as exc:
        fail(str(exc))
    try:
        with stoppable():
            also = f", connecting to {', '.join(routers)}" if routers else ""
            click.echo(f"router: listening on {', '.join(endpoints)}{also}", err=True)
            while True:
                time.sleep(1.0)
    finally:
        session.close()


@ros2_group.command("topics")
@CONNECT
@DOMAIN
@DISTRO
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entity.")
@click.option("--wait", type=Finite(0, 30, unit="s"), default=1.0, show_default=True,
              help="Seconds to gather the graph.")
def topics_cmd(connect: tuple[str, ...], domain: int | None, distro: str | None,
               config: str | None, as_json: bool, wait: float) -> None:
    """The ROS 2 graph: topics, their types, publishers and subscribers, nodes.

    Read from the liveliness tokens, like 'ros2 topic list -t'.
    """
    s = _settings(config, connect, (), domain, distro)
    p = _participant(s)
    try:
        time.sleep(min(wait, 0.3))
        graph = p.graph(timeout=max(wait, 0.2))
    finally:
        p.close()
    if as_json:
        for e in sorted(graph, key=lambda e: (e.topic or "", e.kind, e.node)):
            json_line({"kind": e.kind, "node": e.node, "topic": e.topic, "type": e.msgtype,
                       "type_hash": e.type_hash, "qos": e.qos, "zid": e.zid})
        return
    by_topic: dict[tuple[str, str], dict[str, list[str]]] = {}
    services: dict[tuple[str, str], dict[str, list[str]]] = {}
    nodes = set()
    for e in graph:
        nodes.add(e.node)
        if e.topic is not None and e.kind in ("SS", "SC"):
            srv = services.setdefault((e.topic, e.msgtype or "?"), {"SS": [], "SC": []})
            srv[e.kind].append(e.node)
        if e.topic is not None and e.kind in ("MP", "MS"):
            row = by_topic.setdefault((e.topic, e.msgtype or "?"), {"MP": [], "MS": []})
            row[e.kind].append(e.node)
    for (topic, msgtype), row in sorted(by_topic.items()):
        click.echo(f"{topic} [{msgtype}]  publishers: {len(row['MP'])} "
                   f"({', '.join(sorted(set(row['MP']))) or '-'})  subscribers: {len(row['MS'])} "
                   f"({', '.join(sorted(set(row['MS']))) or '-'})")
    for (name, srvtype), srv in sorted(services.items()):
        click.echo(f"{name} [{srvtype}]  servers: {len(srv['SS'])} "
                   f"({', '.join(sorted(set(srv['SS']))) or '-'})  clients: {len(srv['SC'])}")
    click.echo(f"nodes: {', '.join(sorted(nodes)) or 'none'}", err=True)


@ros2_group.command("echo")
@click.argument("topic")
@click.option("--type", "msgtype", default=None, metavar="pkg/msg/Type",
              help="The message type (default: from the topic's publishers).")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after N messages.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of YAML documents.")
@click.option("--qos-durability", "durability", default="auto", show_default=True,
              type=click.Choice(["auto", "volatile", "transient_local"]),
              help="transient_local also gets what latched publishers sent before "
              "(robot_description, /tf_static); auto: the publishers'.")
@click.option("--qos-reliability", "reliability", default="auto", show_default=True,
              type=click.Choice(["auto", "reliable", "best_effort"]),
              help="auto: best_effort when a publisher is, else reliable.")
@CONNECT
@DOMAIN
@DISTRO
@CONFIG
def echo_cmd(topic: str, msgtype: str | None, count: int | None, as_json: bool,
             durability: str, reliability: str, connect: tuple[str, ...], domain: int | None,
             distro: str | None, config: str | None) -> None:
    """Print the messages on TOPIC, decoded.

    TOPIC is an absolute name, such as /robot1/odom. Like 'ros2 topic echo', it
    takes the QoS of the topic's publishers from the graph: a latched topic
    (transient_local) started before echo is printed too.
    """
    from fwbridge.bridge.ros2.echo import EchoConfig, EchoResult, run_echo
    from fwbridge.bridge.rosmsg import cdr, topics

    s = _settings(config, connect, (), domain, distro)
    try:
        topic = topics.full_topic_name(topic)
    except cdr.MessageError as exc:
        fail(str(exc))
    p = _participant(s)

    def show(data: dict[str, Any]) -> bool:
        try:
            if as_json:
                json_line(data)
            else:
                click.echo(_yaml(data) + "---")
        except BrokenPipeError:  # stdout's reader went away (| head): a normal end
            silence_stdout()
            return False
        return True

    def on_subscribed(name: str, mt: str, how: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"ros2 echo: {name} [{mt}], {how}", err=True)

    echo = EchoConfig(topic, msgtype, durability, reliability, count)
    res = EchoResult(topic)  # counted as messages come: a late stop still has the count
    with stoppable():
        try:
            run_echo(p, echo, show, on_subscribed=on_subscribed, result=res)
        except cdr.MessageError as exc:
            fail(str(exc))
    click.echo(f"ros2 echo: {res.seen} messages on {res.topic}", err=True)


@ros2_group.command("pub")
@click.argument("topic")
@click.argument("msgtype", metavar="TYPE")
@click.argument("values", default="{}", metavar="'YAML'")
@click.option("--rate", type=RATE, default=None,
              help="Publish at this rate until Ctrl-C (default: once).")
@click.option("--count", "--times", "times", cls=Renamed, type=click.IntRange(min=1), default=None,
              help="Publish this many times (at --rate, default 1 Hz).")
@CONNECT
@DOMAIN
@DISTRO
@CONFIG
def pub_cmd(topic: str, msgtype: str, values: str, rate: float | None, times: int | None,
            connect: tuple[str, ...], domain: int | None, distro: str | None,
            config: str | None) -> None:
    """Publish a TYPE message built from 'YAML' on TOPIC, like 'ros2 topic pub'.

    On a terminal it says what it publishes and counts the messages as they go;
    piped, it says only how many it published, at the end.

    \b
    fwbridge ros2 pub /robot1/cmd_vel geometry_msgs/msg/Twist \\
        '{linear: {x: 0.2}}' --rate 20
    """
    from fwbridge.bridge.rosmsg import cdr, plain_data, topics

    s = _settings(config, connect, (), domain, distro)
    try:
        msg = plain_data.message_from_dict(msgtype, _parse_yaml(values), s.distro)
        if msgtype == "geometry_msgs/msg/Twist":
            topics.velocity_request(msg)  # refuse NaN/huge here, not only at the robot
        topic = topics.full_topic_name(topic)
    except cdr.MessageError as exc:
        fail(str(exc))
    from fwbridge.cli_verbs.status_line import StatusLine

    p = _participant(s)
    sent = 0
    period = 1.0 / (rate or 1.0)
    total = times if times is not None else (None if rate else 1)
    try:
        with stoppable(), StatusLine() as line:
            if line.enabled:
                how = ("once" if total == 1 else f"{total} times at {1 / period:g} Hz"
                       if total is not None else f"at {1 / period:g} Hz until Ctrl-C")
                click.echo(f"ros2 pub: {msgtype} on {topic}, {how}", err=True)
            pub = p.node(f"fwbridge_pub_{_pid()}").publisher(topic, msgtype)
            time.sleep(0.3)  # let the subscribers' routes reach us before the first sample
            next_at = time.monotonic()
            try:
                while total is None or sent < total:
                    pub.publish(msg)
                    sent += 1
                    line.update(f"published {sent}" + (f"/{total}" if total else "")
                                + f" on {topic}", force=sent == total)
                    if total is not None and sent >= total:
                        break
                    next_at += period
                    time.sleep(max(0.0, next_at - time.monotonic()))
            except KeyboardInterrupt:
                pass
            time.sleep(0.1)  # the last sample leaves before the session closes
    finally:
        p.close()
    click.echo(f"published {sent} message{'' if sent == 1 else 's'} on {topic}", err=True)


@ros2_group.command("call")
@click.argument("service")
@click.argument("srvtype", metavar="TYPE")
@click.argument("values", default="{}", metavar="'YAML'")
@click.option("--timeout", type=Finite(0.1, 60, unit="s"), default=5.0, show_default=True,
              help="Seconds to wait for the reply.")
@click.option("--json", "as_json", is_flag=True, help="The response as one JSON line.")
@CONNECT
@DOMAIN
@DISTRO
@CONFIG
def call_cmd(service: str, srvtype: str, values: str, timeout: float, as_json: bool,
             connect: tuple[str, ...], domain: int | None, distro: str | None,
             config: str | None) -> None:
    """Call SERVICE of TYPE with a request built from 'YAML'.

    Like 'ros2 service call':

    \b
    fwbridge ros2 call /robot1/base_bridge/get_status std_srvs/srv/Trigger
    fwbridge ros2 call /robot1/base_bridge/set_watchdog \\
        rcl_interfaces/srv/SetParameters \\
        '{parameters: [{name: watchdog_timeout,
                        value: {type: 3, double_value: 0.2}}]}'
    """
    from fwbridge.bridge.ros2.services import register
    from fwbridge.bridge.rosmsg import cdr, plain_data

    s = _settings(config, connect, (), domain, distro)
    try:
        request_type, _ = register(srvtype, s.distro)
        request = plain_data.message_from_dict(request_type, _parse_yaml(values), s.distro)
    except cdr.MessageError as exc:
        fail(str(exc))
    service = service if service.startswith("/") else "/" + service
    p = _participant(s)
    try:
        with stoppable():
            client = p.node(f"fwbridge_call_{_pid()}").client(service, srvtype)
            try:
                response = client.call(request, timeout)
            except cdr.MessageError as exc:
                fail(str(exc))
    finally:
        p.close()
    data = plain_data.message_to_dict(response)
    if as_json:
        json_line(data)
    else:
        click.echo(_yaml(data) + "---")


def _pid() -> int:
    import os

    return os.getpid()


def _parse_yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    shown = repr(text) if len(text) <= 80 else f"{text[:80]!r}… ({len(text)} characters)"
    try:  # as long as an argument can be (the kernel bounds it); too deep: RecursionError
        data = YAML(typ="safe").load(text)
    except Exception as exc:  # ruamel's parser and scanner errors share no public root
        fail(f"'YAML': cannot parse {shown}: {' '.join(str(exc).split())[:300]}")
    if data is not None and not isinstance(data, dict):
        fail(f"'YAML': expected a mapping of fields like '{{linear: {{x: 0.2}}}}', got {shown}")
    return data


def _yaml(data: Any) -> str:
    from ruamel.yaml import YAML

    out = _Buffer()
    y = YAML(typ="safe")
    y.default_flow_style = False
    y.dump(data, out)
    return "".join(out.parts)


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str | bytes) -> None:
        self.parts.append(text.decode() if isinstance(text, bytes) else text)


# -- fleet ---------------------------------------------------------------------------------
@click.command("fleet")
@click.argument("count", type=click.IntRange(1, 64))
@click.option("--rate", "rate_hz", type=Finite(1, 500, unit="Hz"), default=50.0,
              show_default=True, help="Command rate of each base node, Hz.")
@click.option("--duration", type=DURATION, default=None,
              metavar="S", help="Stop after S seconds (default: Ctrl-C or SIGTERM).")
@click.option("--first", type=click.IntRange(min=0), default=1, show_default=True,
              help="Number of the first robot (/robotFIRST …), to split a fleet over machines.")
@CONNECT
@LISTEN
@DOMAIN
@DISTRO
@CONFIG
@FOXGLOVE
def fleet_cmd(count: int, rate_hz: float, duration: float | None, first: int,
              connect: tuple[str, ...], listen: tuple[str, ...], domain: int | None,
              distro: str | None, config: str | None, foxglove: bool, foxglove_host: str,
              foxglove_port: int) -> None:
    """COUNT simulated mecanum bases, each its own bridge node in /robotK, on one
    Zenoh network: drive any of them with cmd_vel, read odom, /tf (frames
    robotK/odom -> robotK/base_link), /diagnostics."""
    from fwbridge.bridge.ros2.fleet import Fleet

    s = _settings(config, connect, listen, domain, distro)
    warn_listening("fleet", s.listen)
    fleet = Fleet(count, s, rate_hz=rate_hz, first=first,
                  on_event=lambda ns, e: click.echo(f"fleet {ns}: {e.message}", err=True),
                  say=lambda text: click.echo(f"fleet: {text}", err=True))
    view = None
    try:
        with stoppable():
            try:
                fleet.start()
                view = _fleet_view(fleet, foxglove, foxglove_host, foxglove_port)
                listening = f", listening on {', '.join(s.listen)}" if s.listen else ""
                click.echo(f"fleet: {count} simulated bases as ROS 2 nodes "
                           f"{fleet.namespaces[0]} … {fleet.namespaces[-1]} (domain {s.domain},"
                           f" {s.distro}), connecting to {', '.join(s.connect)}{listening}",
                           err=True)
                end = None if duration is None else time.monotonic() + duration
                while end is None or time.monotonic() < end:
                    time.sleep(0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
            except KeyboardInterrupt:
                click.echo("", err=True)
    finally:
        stats = fleet.stats()
        fleet.stop()
        if view is not None:
            view.close()
    for ns, st in stats.items():
        print_counters(st, f"fleet {ns}")
    sys.stdout.flush()


def _fleet_view(fleet: Any, enabled: bool, host: str, port: int) -> Any:
    """The live view of every robot of the fleet (topics in /robotK), or None."""
    from fwbridge.cli_verbs.live import live_sink

    sink = live_sink(enabled, host, port)
    if sink is None:
        return None
    from fwbridge.bridge.record.channel_streams import Streams
    from fwbridge.bridge.record.serial_mcap import watch_node

    streams = Streams([sink])
    for ns, frames, node in zip(fleet.namespaces, fleet.frame_prefixes, fleet.nodes):
        watch_node(streams, node, ns, frames)
    return streams


__all__ = ["CONFIG", "CONNECT", "DISTRO", "DOMAIN", "LISTEN", "fleet_cmd", "ros2_group",
           "ros2_settings"]
