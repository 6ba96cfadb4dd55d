"""The live view against clients nobody here wrote: ``@foxglove/ws-protocol``'s
FoxgloveClient (from npm, under node) and python ``websockets``, under both names of the
protocol; and every JSON channel schema against the rules of Foxglove's JSON-schema parser."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.record.can_mcap import LOAD, STATE, CanRecorder
from fwbridge.bridge.record.channel_streams import ChannelSpec, Streams
from fwbridge.bridge.record.frame_channels import frame_spec
from fwbridge.bridge.record.live_front import client_response, upstream_request
from fwbridge.bridge.record.serial_channels import COUNTERS
from fwbridge.protocols.descriptions.loader import load
from tests.conftest import FIXTURES

OLD, NEW = "foxglove.websocket.v1", "foxglove.sdk.v1"
#: Every JSON channel the project emits.
#: A description's frames (bridge.record.frame_channels), for the fixture IMU frame.
JSON_CHANNELS = [COUNTERS, LOAD, STATE, frame_spec(load(FIXTURES / "frames" / "imu.toml"))]
#: The npm packages of the client test, pinned (a cache that is filled once).
NPM_PACKAGES = ["@foxglove/ws-protocol@0.8.0", "ws@8.18.0"]
NPM_CACHE = Path(os.environ.get("FWBRIDGE_NPM_CACHE",
                                Path.home() / ".cache" / "fwbridge-tests" / "npm"))


# -- the handshake rewrite (sans-I/O) ----------------------------------------------------------
REQUEST = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s")
RESPONSE = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: %s")


def _protocols(head: bytes) -> list[str]:
    return [line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-protocol:")]


@pytest.mark.parametrize(("offered", "upstream", "chosen", "answered"), [
    (OLD, NEW, NEW, OLD),
    (NEW, NEW, NEW, NEW),
    (f"{OLD}, {NEW}", NEW, NEW, NEW),
    (f"{NEW}, {OLD}", NEW, NEW, NEW),
    (f"x.v2, {OLD}", f"x.v2, {NEW}", NEW, OLD),
])
def test_the_handshake_is_renamed_both_ways(offered: str, upstream: str, chosen: str,
                                            answered: str) -> None:
    head, got = upstream_request(REQUEST % offered.encode())
    assert _protocols(head) == [upstream]
    assert [t.strip() for t in offered.split(",")] == got
    assert head.replace(b"\r\n", b"\n").count(b"Sec-WebSocket-Key: dGhl") == 1  # the rest kept
    response = client_response(RESPONSE % chosen.encode(), got)
    assert _protocols(response) == [answered]
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in response


# -- a live view with a channel of each kind ---------------------------------------------------
@pytest.fixture
def live() -> Iterator[tuple[str, threading.Event]]:
    """A live view on a free loopback port, logging a load and a counters message every
    20 ms until the test ends; its URL."""
    pytest.importorskip("foxglove")
    from fwbridge.bridge.record.live_view import FoxgloveSink

    sink = FoxgloveSink("127.0.0.1", 0)
    streams = Streams([sink])
    load, counters = streams.channel(LOAD), streams.channel(COUNTERS)
    stop = threading.Event()

    def feed() -> None:
        n = 0
        while not stop.wait(0.02):  # a source of messages at a pace, not a wait for a process
            n += 1
            streams.log(load, json.dumps({"window_s": 1.0, "frames": n, "bits": 100 * n,
                                          "ids": [{"id": "201", "frames": n, "fps": 1.0,
                                                   "bits": 100 * n}]}).encode(), n * 1000)
            streams.log(counters, json.dumps({"rx": {"frames": n}}).encode(), n * 1000)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    try:
        yield sink.url, stop
    finally:
        stop.set()
        t.join(5)
        streams.close()


async def _session(url: str, subprotocols: list[str]
                   ) -> tuple[str | None, list[str], dict[str, Any]]:
    """Connect asking for ``subprotocols``; the one answered, the topics advertised, and the
    first load message received after subscribing to it."""
    import websockets

    async with websockets.connect(url, subprotocols=subprotocols,  # type: ignore[arg-type]
                                  open_timeout=20) as ws:
        topics: dict[str, int] = {}
        while True:
            m = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(m, str):
                j = json.loads(m)
                if j["op"] == "advertise":
                    topics.update({c["topic"]: c["id"] for c in j["channels"]})
                    if LOAD.topic in topics:
                        await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                            {"id": 7, "channelId": topics[LOAD.topic]}]}))
            elif m[0] == 1:  # message data: opcode, subscription id, log time, payload
                sub = struct.unpack_from("<I", m, 1)[0]
                assert sub == 7
                return ws.subprotocol, sorted(topics), json.loads(m[13:])


@pytest.mark.parametrize("asked", [[OLD], [NEW], [OLD, NEW]])
def test_websockets_client_under_each_name(live: tuple[str, threading.Event],
                                           asked: list[str]) -> None:
    pytest.importorskip("websockets")
    url, _ = live
    answered, topics, load = asyncio.run(_session(url, asked))
    assert answered == asked[0] if len(asked) == 1 else answered in asked
    assert topics == sorted([COUNTERS.topic, LOAD.topic])
    assert load["frames"] >= 1 and load["ids"][0]["id"] == "201"


def test_a_client_with_no_foxglove_subprotocol_is_refused(
        live: tuple[str, threading.Event]) -> None:
    websockets = pytest.importorskip("websockets")
    url, _ = live
    with pytest.raises(websockets.InvalidStatus) as err:
        asyncio.run(_session(url, ["not.foxglove"]))
    assert err.value.response.status_code == 400


# -- @foxglove/ws-protocol from npm ------------------------------------------------------------
NODE_CLIENT = r"""
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");
const [url, topic] = process.argv.slice(1);  // node -e: no script path
const ws = new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });
const out = { asked: FoxgloveClient.SUPPORTED_SUBPROTOCOL, topics: [] };
const fail = (why) => { console.error(String(why)); process.exit(1); };
setTimeout(() => fail("timed out"), 20000);
client.on("error", fail);
client.on("close", (ev) => fail(`closed: ${ev.code} ${ev.reason}`));
client.on("open", () => { out.answered = ws.protocol; });
client.on("serverInfo", (info) => { out.server = info.name; });
client.on("advertise", (channels) => {
  for (const c of channels) {
    out.topics.push(c.topic);
    if (c.topic === topic) { out.schema = JSON.parse(c.schema); client.subscribe(c.id); }
  }
});
client.on("message", ({ data }) => {
  out.message = JSON.parse(new TextDecoder().decode(data));
  console.log(JSON.stringify(out));
  process.exit(0);
});
"""


def npm_modules() -> Path:
    """``node_modules`` with the client's packages, installed once into a stable cache
    (a lock keeps two runs apart); skips with the reason when npm or its registry is not
    there."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm and node are needed for the @foxglove/ws-protocol client")
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    modules = NPM_CACHE / "node_modules"
    stamp = NPM_CACHE / ("installed-" + "+".join(NPM_PACKAGES).replace("/", "_"))
    with open(NPM_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            try:
                r = subprocess.run([npm, "install", "--prefix", str(NPM_CACHE), "--no-audit",
                                    "--no-fund", "--ignore-scripts", "--no-save",
                                    "--cache", str(NPM_CACHE / ".npm"), *NPM_PACKAGES],
                                   capture_output=True, text=True, timeout=300, check=False)
            except subprocess.TimeoutExpired:
                pytest.skip("npm install timed out: is the registry reachable?")
            if r.returncode != 0:
                pytest.skip(f"npm install failed (registry unreachable?): {r.stderr[-400:]}")
            stamp.touch()
    return modules


def test_foxglove_ws_protocol_client_from_npm(live: tuple[str, threading.Event]) -> None:
    modules = npm_modules()
    url, _ = live
    r = subprocess.run(["node", "-e", NODE_CLIENT, url, LOAD.topic], capture_output=True,
                       text=True, timeout=60, check=False,
                       env={**os.environ, "NODE_PATH": str(modules)})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["asked"] == OLD and got["answered"] == OLD  # asked the old name, got it
    assert got["server"] == "fwbridge"
    assert sorted(got["topics"]) == sorted([COUNTERS.topic, LOAD.topic])
    assert got["schema"] == json.loads(LOAD.schema)
    assert got["message"]["ids"][0]["id"] == "201"


# -- the channel schemas against Foxglove's JSON-schema parser ---------------------------------
# The app's parser (``parseJsonSchema`` of the Foxglove app's and Lichtblick's private
# ``mcap-support`` package) is published in no npm package of its own, so its rules are
# restated here: the root and every nested object (a field, or an array's items) must be
# ``"type": "object"`` with ``properties``; a field's ``type`` is one of boolean, string (no
# contentEncoding but base64), number, integer, object, array; an array's items one of
# boolean, string, number, integer, object; anything else ("null", a list of types, none)
# is an error that stops the channel from parsing.
SCALARS = {"boolean": "bool", "string": "string", "number": "float64", "integer": "float64"}


def foxglove_datatypes(schema: Any, name: str) -> dict[str, list[tuple[str, str, bool]]]:
    """The datatypes Foxglove's parser makes of ``schema``; ValueError where it throws."""
    types: dict[str, list[tuple[str, str, bool]]] = {}

    def walk(node: Any, type_name: str) -> None:
        if not isinstance(node, dict) or node.get("type") != "object":
            raise ValueError(f'{type_name}: expected "type": "object", got {node!r}')
        props = node.get("properties")
        if not isinstance(props, dict):  # Object.entries(undefined) throws
            raise ValueError(f"{type_name}: an object without properties")
        fields = []
        for field, sub in props.items():
            kind = sub.get("type") if isinstance(sub, dict) else None
            if kind == "string" and sub.get("contentEncoding") not in (None, "base64"):
                raise ValueError(f"{type_name}.{field}: contentEncoding")
            is_array = kind == "array"
            if is_array:  # the same rules for its items, less arrays of arrays
                sub = sub.get("items") or {}
                kind = sub.get("type")
                if kind == "string" and sub.get("contentEncoding") is not None:
                    raise ValueError(f"{type_name}.{field}: contentEncoding in an array")
            if isinstance(kind, str) and kind in SCALARS:
                fields.append((field, SCALARS[kind], is_array))
            elif kind == "object":
                walk(sub, f"{type_name}.{field}")
                fields.append((field, f"{type_name}.{field}", is_array))
            elif is_array:
                raise ValueError(f"{type_name}.{field}: array item type {kind!r}")
            else:
                raise ValueError(f"{type_name}.{field}: unsupported field type {kind!r}")
        types[type_name] = fields

    walk(schema, name)
    return types


def test_the_parser_rules_refuse_what_the_app_refused() -> None:
    """The shapes a relay showed the app failing on: the check can fail."""
    with pytest.raises(ValueError, match="without properties"):
        foxglove_datatypes({"type": "object", "properties": {"rx": {"type": "object"}}}, "c")
    with pytest.raises(ValueError, match="unsupported field type"):
        foxglove_datatypes({"type": "object",
                            "properties": {"bitrate": {"type": ["integer", "null"]}}}, "l")


@pytest.mark.parametrize("spec", JSON_CHANNELS, ids=lambda s: s.topic)
def test_every_json_channel_parses_in_foxglove(spec: ChannelSpec) -> None:
    assert (spec.schema_encoding, spec.message_encoding) == ("jsonschema", "json")
    types = foxglove_datatypes(json.loads(spec.schema), spec.schema_name)
    assert types[spec.schema_name]


def test_every_json_channel_of_the_code_is_checked() -> None:
    """A new JSON channel joins the list above (grep the modules that declare channels)."""
    from tests.layout import package_modules

    declared = 0
    for path in package_modules().values():  # the package's own files, not a build/ copy
        declared += path.read_text(errors="replace").count('"jsonschema", json.dumps(')
    assert declared == len(JSON_CHANNELS)


def _conforms(value: Any, schema: dict[str, Any], where: str) -> None:
    """``value`` has the type its schema field says (null is no type of any field)."""
    kind = schema["type"]
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
        "number": (int, float)}
    ok = types[kind]
    assert isinstance(value, ok) and not (kind in ("integer", "number")
                                          and isinstance(value, bool)), (where, value)
    if kind == "object":
        for key, sub in schema["properties"].items():
            if key in value:
                _conforms(value[key], sub, f"{where}.{key}")
    elif kind == "array":
        for i, item in enumerate(value):
            _conforms(item, schema["items"], f"{where}[{i}]")


@pytest.mark.parametrize("bitrate", [500_000, None])
def test_load_messages_keep_their_schema(bitrate: int | None) -> None:
    """The load window as recorded, with and without a known bit rate: no nulls."""
    import can

    class Keep:
        def __init__(self) -> None:
            self.got: dict[str, list[bytes]] = {}
            self.topics: list[str] = []

        def add_channel(self, spec: ChannelSpec) -> str:
            self.topics.append(spec.topic)
            return spec.topic

        def log(self, handle: Any, data: bytes, log_time_ns: int) -> None:
            self.got.setdefault(handle, []).append(data)

        def close(self) -> None:
            pass

    keep = Keep()
    rec = CanRecorder(Streams([keep]), channel="can0", bitrate=bitrate)
    for k in range(30):
        rec.on_message(can.Message(timestamp=k * 0.1, arbitration_id=0x201 + k % 2,
                                   data=b"\x01\x02", is_extended_id=False))
        rec.on_message(can.Message(timestamp=k * 0.1, arbitration_id=0x1ABCDE,
                                   data=b"", is_extended_id=True))
    rec.finish()
    loads = [json.loads(m) for m in keep.got[LOAD.topic]]
    assert len(loads) >= 3
    schema = json.loads(LOAD.schema)
    for body in loads:
        _conforms(body, schema, LOAD.topic)
        assert ("load" in body) == (bitrate is not None)
    assert [row["id"] for row in loads[0]["ids"]] == ["201", "202", "001ABCDE"]


def test_the_front_bounds_connections_and_heads() -> None:
    """One connection past the front's limit is answered 503; a head that does not end
    within the limit, 400; the connections served stay served."""
    websockets = pytest.importorskip("websockets")
    pytest.importorskip("foxglove")
    import socket

    from fwbridge.bridge.record.live_front import HEAD_LIMIT
    from fwbridge.bridge.record.live_view import FoxgloveSink

    sink = FoxgloveSink("127.0.0.1", 0)
    sink.front.max_connections = 1

    async def two() -> int:
        async with websockets.connect(sink.url, subprotocols=[OLD]) as ws:
            assert json.loads(await asyncio.wait_for(ws.recv(), 20))["op"] == "serverInfo"
            with pytest.raises(websockets.InvalidStatus) as err:
                async with websockets.connect(sink.url, subprotocols=[OLD], open_timeout=20):
                    pass
            await ws.ping()  # the first is still served
            return int(err.value.response.status_code)

    try:
        assert asyncio.run(two()) == 503 and sink.front.refused == 1
        # the first connection's slot frees once the front sees it close: room for the next
        # check at once, so it tests the head's bound and not that race
        sink.front.max_connections = 8
        with socket.create_connection(("127.0.0.1", sink.port), timeout=20) as s:
            s.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * (HEAD_LIMIT + 10))
            got = b""
            while chunk := s.recv(4096):
                got += chunk
        assert got.startswith(b"HTTP/1.1 400 ")
    finally:
        sink.close()
