"""sim:// on the asyncio path: pyserial-asyncio, fwbridge's streams and its asyncio node."""

from __future__ import annotations

import asyncio

import pytest
import serial_asyncio

from fwbridge.bridge.link.transports import open_async_streams, open_link
from fwbridge.bridge.node.aio import AsyncBaseNode
from fwbridge.bridge.node.config import parse_config
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.sim.scheme import register as offer_sim

pytestmark = pytest.mark.pty  # a sim:// URL opened on the asyncio path is served on a pty

offer_sim()  # this module's links are sim:// URLs (nothing is registered on import)


def _loop_errors(loop: asyncio.AbstractEventLoop) -> list[dict[str, object]]:
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    return errors


@pytest.mark.parametrize("pacing", ["realtime", "afap"])
def test_pyserial_asyncio_opens_a_sim_url_and_talks_to_it(pacing: str) -> None:

    async def echo() -> bytes:
        errors = _loop_errors(asyncio.get_running_loop())
        reader, writer = await serial_asyncio.open_serial_connection(
            url=f"sim://echo?pacing={pacing}")
        try:
            writer.write(b"hello sim")
            await writer.drain()
            got = b""
            while len(got) < 9:
                got += await asyncio.wait_for(reader.read(64), 5.0)
        finally:
            writer.close()
        assert errors == []  # nothing failed in an event-loop callback
        return got

    assert asyncio.run(echo()) == b"hello sim"


def test_fwbridge_async_streams_on_a_sim_url() -> None:
    async def echo() -> bytes:
        reader, writer = await open_async_streams("sim://echo")
        try:
            writer.write(b"\xaa\x55\x01")
            return await asyncio.wait_for(reader.readexactly(3), 5.0)
        finally:
            writer.close()

    assert asyncio.run(echo()) == b"\xaa\x55\x01"


def test_the_asyncio_node_runs_on_a_sim_url() -> None:
    got: list[Odometry] = []
    cfg = parse_config({"use_sim": True, "link": {"url": "/dev/null"},
                        "sim": {"url": "sim://mecanum"}, "watchdog": {"cmd_timeout": 30.0}})
    node = AsyncBaseNode(cfg, on_odometry=got.append, on_event=None)

    async def drive() -> None:
        task = asyncio.create_task(node.run())
        for _ in range(200):
            await asyncio.sleep(0.02)  # pacing: a request every 20 ms, as a host sends them
            node.request(0.2, 0.0, 0.0)
            if any(o.vx > 0.1 for o in got):
                break
        node.stop()
        await asyncio.wait_for(task, 5.0)

    asyncio.run(drive())
    assert any(o.vx > 0.1 for o in got), got[-3:]


def test_the_blocking_path_is_unchanged_and_fileno_after_use_is_refused() -> None:
    with open_link("sim://echo") as link:
        link.write(b"abc")
        assert link.read(3) == b"abc"
        with pytest.raises(Exception, match="fileno\\(\\) after the port was used"):
            link.fileno()
