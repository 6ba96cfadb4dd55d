"""One record path: the sinks of a base node, how they are fed, closed and kept apart,
and the MCAP recorder as one of them (the same messages as before, decoded once)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from fwbridge.bridge.link.transports import PtyPair
from fwbridge.bridge.node.aio import AsyncBaseNode
from fwbridge.bridge.node.base_core import ZERO_FRAME
from fwbridge.bridge.node.base_node import BaseNode
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import CallbackSink, JsonLinesSink, SinkBase, Sinks
from fwbridge.bridge.record.serial_captures import read_capture
from fwbridge.bridge.record.serial_pcapng import CaptureWriter
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.cmd_frame import CmdFrame
from fwbridge.protocols.odom_frame import OdomFrame
from tests.helpers import FirmwarePeer, Recorder, config


class Log(SinkBase):
    """A sink writing down every call it gets, in one list shared with others."""

    def __init__(self, name: str, calls: list[tuple[str, str]], fail: str = "") -> None:
        self.name, self.calls, self.fail = name, calls, fail

    def _note(self, what: str) -> None:
        self.calls.append((self.name, what))
        if what == self.fail:
            raise RuntimeError(f"{self.name} cannot {what}")

    def on_bytes(self, direction: str, data: bytes, ts_ns: int) -> None:
        self._note("bytes")

    def on_odometry(self, odom: Odometry) -> None:
        self._note("odometry")

    def on_command(self, frame: CmdFrame, ts_ns: int) -> None:
        self._note("command")

    def close(self) -> None:
        self._note("close")


def odometry(seq: int = 0) -> Odometry:
    return Odometry(seq, 1.0, 0.0, 0.0, 0.0, 0.0, (0.0, 0.0, 0.0, 1.0), 0.1, 0.0, 0.0)


def test_a_failing_sink_is_counted_said_once_and_stops_no_other() -> None:
    calls: list[tuple[str, str]] = []
    said: list[str] = []
    sinks = Sinks([Log("a", calls), Log("b", calls, fail="odometry"), Log("c", calls,
                                                                             fail="close")],
                  say=said.append)
    for k in range(3):
        sinks.on_odometry(odometry(k))
    sinks.on_bytes("rx", b"x", 0)
    assert calls[:3] == [("a", "odometry"), ("b", "odometry"), ("c", "odometry")]
    assert sinks.errors == 3 and len(said) == 1  # counted each time, said once
    assert said[0].startswith("error: sink Log.on_odometry failed (RuntimeError: b cannot")
    sinks.close()
    assert [c for c in calls if c[1] == "close"] == [("c", "close"), ("b", "close"),
                                                     ("a", "close")]  # last first, all
    assert sinks.errors == 4 and len(said) == 2  # c's first failure: said too
    n = len(calls)
    sinks.close()  # once
    sinks.on_odometry(odometry())  # nothing reaches a closed sink
    assert len(calls) == n


def test_a_sink_gets_only_the_calls_it_takes() -> None:
    got: list[Any] = []
    only_events = CallbackSink(on_event=got.append)
    sinks = Sinks([only_events])
    assert not sinks.takes_odometry  # the node skips the pacing of records nobody takes
    sinks.on_odometry(odometry())
    sinks.on_bytes("rx", b"x", 0)
    assert got == [] and sinks.errors == 0


def test_json_lines_sink_writes_every_nth_and_stops_at_a_broken_pipe() -> None:
    class Out:
        def __init__(self) -> None:
            self.lines: list[dict[str, Any]] = []

        def add(self, obj: dict[str, Any], now: float) -> None:
            if len(self.lines) == 2:
                raise BrokenPipeError
            self.lines.append(obj)

        def add_line(self, line: str, now: float) -> None:
            self.add(json.loads(line), now)

    out, gone = Out(), []
    sink = JsonLinesSink(out, every=2, on_gone=lambda: gone.append(True))
    for k in range(10):
        sink.on_odometry(odometry(k))
    assert [line["seq"] for line in out.lines] == [0, 2]
    assert gone == [True] and sink.gone


def test_json_lines_from_the_template_are_the_encoders_text_and_nonfinite_goes_through_it(
) -> None:
    from fwbridge.cli_verbs.common import JsonBlocks

    class Out(JsonBlocks):
        def __init__(self) -> None:
            super().__init__(1e9)
            self.lines: list[str] = []
            self.objs = 0

        def add(self, obj: dict[str, Any], now: float) -> None:
            self.objs += 1
            super().add(obj, now)

        def add_line(self, line: str, now: float) -> None:
            self.lines.append(line)

    out = Out()
    sink = JsonLinesSink(out)
    records = [Odometry(7, 12.5, 0.005, -1.25e-7, 3.0, -0.0, (0.0, 0.0, -0.1, 0.99), 1e300,
                        -2.5, 1 / 3),
               Odometry(8, 1.0, 0.0, float("nan"), 0.0, 0.0, (0.0, 0.0, 0.0, 1.0), 0.0, 0.0,
                        float("inf"))]
    for record in records:
        sink.on_odometry(record)
    assert out.objs == 1  # the NaN/inf record through the encoder
    fast, slow = out.lines
    obj = json.loads(fast)
    # byte for byte what the encoder writes for the same record and wall time
    assert fast == json.dumps({"wall": obj["wall"], **records[0].as_dict()},
                              separators=(",", ":"))
    assert json.loads(slow)["pose"]["position"]["x"] == "nan"
    assert json.loads(slow)["twist"]["angular"]["z"] == "inf"


def test_the_node_closes_its_sinks_after_the_safe_stop_on_every_exit(tmp_path: Path) -> None:
    # A failed start (no such port): the sinks are closed all the same, last first.
    calls: list[tuple[str, str]] = []
    node = BaseNode(config(str(tmp_path / "no-such-port")), sinks=[Log("a", calls),
                                                                  Log("b", calls)],
                    on_event=None)
    with pytest.raises(Exception, match="no-such-port"):
        node.start()
    node.stop()
    assert calls == [("b", "close"), ("a", "close")]
    calls.clear()  # the asyncio runtime: the end of run(), however it ends
    anode = AsyncBaseNode(config(str(tmp_path / "no-such-port")),
                          sinks=[Log("a", calls), Log("b", calls)], on_event=None)
    with pytest.raises(Exception, match="no-such-port"):
        asyncio.run(anode.run(1.0))
    assert calls == [("b", "close"), ("a", "close")]
    # A run: the pcapng capture ends with the safe stop's zero, and is whole.
    path = tmp_path / "run.pcapng"
    with PtyPair() as pair:
        peer = FirmwarePeer(pair)
        peer.start()
        try:
            got = Recorder()
            node = BaseNode(config(pair.path, watchdog={"cmd_timeout": 30.0}),
                            sinks=[CaptureWriter(path)], on_odometry=got.odometry,
                            on_event=None)
            with node:
                node.request(0.2, 0.0, 0.0)
                assert peer.wait_for(lambda a: len(a) >= 4)
                peer.send(odom_frame.encode(OdomFrame(0.2, 0.0, 0.0, 0.0)))
                assert got.wait(lambda c: len(c.records) == 1)
            assert peer.wait_for(lambda a: a[-1].raw == ZERO_FRAME)
        finally:
            peer.stop()
    packets = list(read_capture(path))  # a capture cut short would raise here
    tx = [p.data for p in packets if p.direction == "tx"]
    assert tx[0] == ZERO_FRAME and tx[-1] == ZERO_FRAME
    assert cmd_frame.encode(CmdFrame(0.2, 0.0, 0.0)) in tx
    assert any(p.direction == "rx" for p in packets)
    assert node.stats()["sink_errors"] == 0


# -- the MCAP recorder as the node's sink: what it wrote before, decoded once -----------------
def _maker() -> Any:
    path = Path(__file__).parent / "fixtures" / "make_recorder_golden.py"
    spec = importlib.util.spec_from_file_location("make_recorder_golden", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()
GOLDEN = json.loads(MAKER.GOLDEN.read_text())
#: Counters differ by design when the node feeds the recorder: the node's receiver
#: (``rx``) only, no second one decoding ``tx`` again.
COUNTED = {"/fwbridge/counters", "/diagnostics"}


def _through_the_node(path: Path) -> list[list[Any]]:
    """The steps through a BaseNode's record path (its tap and its reads), unstarted."""
    from fwbridge.bridge.record.mcap_sink import McapSink
    from fwbridge.bridge.record.serial_mcap import SerialCapture

    now = [MAKER.T0 / 1e9]
    ns = [MAKER.T0]
    node: BaseNode | None = None
    cap = SerialCapture([McapSink(path)], port="link", decode=False,
                        counter_period=MAKER.COUNTER_PERIOD,
                        wall_ns=lambda stamp: round(stamp * 1e9),
                        receivers=lambda: node.receiver_stats() if node else {})
    node = BaseNode(RobotConfig(url="/dev/null", rate_hz=MAKER.RATE_HZ,
                                cmd_timeout=MAKER.CMD_TIMEOUT, source="<test>"),
                    sinks=[cap], on_event=None, clock=lambda: now[0], clock_ns=lambda: ns[0])
    for ts, kind, payload in MAKER.steps():
        now[0], ns[0] = ts / 1e9, ts
        if kind == "zero":
            node.wrote("tx", ZERO_FRAME)  # what the hardware's activation writes
        elif kind == "req":
            node.request(*payload)
        elif kind == "tick":
            node.wrote("tx", node.core.tick(now[0]))
        else:
            node.read(payload)
    assert cap.decoder is None and cap.recorder.decoder is None  # nothing decoded twice
    node.sinks.close()
    return MAKER.digest(path)  # type: ignore[no-any-return]


def test_the_recorder_writes_the_node_records_as_before(tmp_path: Path) -> None:
    got = _through_the_node(tmp_path / "node.mcap")
    want = GOLDEN["node"]
    assert [m for m in got if m[0] not in COUNTED] == [m for m in want if m[0] not in COUNTED]
    assert {"/odom", "/tf", "/cmd_vel", "/fwbridge/serial/rx"} <= {m[0] for m in got}
    from fwbridge.bridge.record.mcap_reader import read_mcap

    last = [r for r in read_mcap(tmp_path / "node.mcap", ["/fwbridge/counters"])][-1]
    assert json.loads(last.data)["rx"]["frames"] == 90  # the node's receiver, counted once


def test_a_link_without_a_node_is_decoded_as_before(tmp_path: Path) -> None:
    from fwbridge.bridge.node.base_core import BaseNodeCore
    from fwbridge.bridge.record.mcap_sink import McapSink
    from fwbridge.bridge.record.serial_mcap import SerialCapture

    path = tmp_path / "decoded.mcap"
    cap = SerialCapture([McapSink(path)], port="link", counter_period=MAKER.COUNTER_PERIOD)
    core = BaseNodeCore(rate_hz=MAKER.RATE_HZ, cmd_timeout=MAKER.CMD_TIMEOUT,
                        now=MAKER.T0 / 1e9)
    last = MAKER.T0
    for ts, kind, payload in MAKER.steps():
        last = ts
        if kind == "zero":
            cap.write("tx", ZERO_FRAME, ts)
        elif kind == "req":
            core.request(*payload, ts / 1e9)
        elif kind == "tick":
            cap.write("tx", core.tick(ts / 1e9), ts)
        else:
            cap.write("rx", payload, ts)
    cap.recorder.finish(last)
    cap.streams.close()
    assert MAKER.digest(path) == GOLDEN["decoding"]  # every message, counters too


def test_a_recorder_keeps_every_record_while_live_sinks_are_paced() -> None:
    # A read that brings 40 frames to sinks that take longer than the budget: a
    # recorder still gets all 40, in order; a live sink gets the first and the newest.
    from fwbridge.bridge.node.backoff import LinkPolicy

    class Kept(SinkBase):
        records_every_frame = True

        def __init__(self) -> None:
            self.got: list[float] = []

        def on_odometry(self, odom: Any) -> None:
            self.got.append(odom)

    class Live(Kept):
        records_every_frame = False

    recorder, live = Kept(), Live()
    sinks = Sinks([live, recorder])
    ticks = iter(range(1000))
    dropped = sinks.records(list(range(40)), LinkPolicy(budget=0.5),  # type: ignore[arg-type]
                            lambda: float(next(ticks)))
    assert recorder.got == list(range(40))
    assert live.got == [0, 39] and dropped == 38
