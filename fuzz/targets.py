"""Fuzz targets: one function per parser of untrusted bytes.

The invariant for each: decode, count, or raise the project's own documented
error; never any other exception, never a hang, memory bounded. A target
raises ``AssertionError`` when the invariant breaks (atheris reports any
uncaught exception as a crash). Targets import lazily so that a tree without
some part (say, the CAN layer) can still fuzz the rest.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

#: Bytes a receiver may hold back between calls: one frame (bounded memory).
MAX_PENDING = 1 << 12


def _split(data: bytes) -> list[bytes]:
    """Use the first byte to choose a chunking, so the fuzzer explores them."""
    if not data:
        return []
    step = (data[0] % 23) + 1
    body = data[1:]
    return [body[i : i + step] for i in range(0, len(body), step)]


def sum8_receiver(data: bytes) -> None:
    from fwbridge.protocols import cmd_frame, odom_frame
    from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

    for codec in (odom_frame.CODEC, cmd_frame.CODEC):
        rx = Sum8Receiver(codec)
        frames = 0
        for chunk in _split(data):
            got = rx.feed(chunk)
            frames += len(got)
            for r in got:
                assert codec.encode(r.frame, allow_nonfinite=True) == bytes(
                    data[1:][r.offset : r.offset + codec.size]
                ) or r.frame.nonfinite
            assert rx.pending < codec.size
        rx.finish()
        assert rx.stats.frames == frames
        assert rx.stats.bytes == max(0, len(data) - 1)


def sum8_decode(data: bytes) -> None:
    from fwbridge.protocols import odom_frame
    from fwbridge.protocols.errors import FrameError

    with contextlib.suppress(FrameError):
        odom_frame.decode(data)
    with contextlib.suppress(FrameError):
        odom_frame.CODEC.decode_with_schema(data)


def hex_parser(data: bytes) -> None:
    from fwbridge.protocols.hextext import HexTextError, looks_like_hex, parse_hex

    text = data.decode("utf-8", errors="replace")
    try:
        out = parse_hex(text)
    except HexTextError:
        return
    assert len(out) * 2 <= len(text)
    looks_like_hex(data)


def action_receiver(data: bytes) -> None:
    from fwbridge.protocols import action_frame
    from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver

    body = data[1:]
    for relaxed in (False, True):
        rx = ActionReceiver(max_length=64, relaxed=relaxed)
        got = []
        for chunk in _split(data):
            got += rx.feed(chunk)
            assert rx.pending <= action_frame.OVERHEAD + 64 + 23
        got += rx.finish()
        assert rx.stats.frames == len(got)
        for r in got:
            raw = body[r.offset : r.offset + action_frame.OVERHEAD + len(r.frame.data)]
            if not relaxed:
                assert action_frame.encode(r.frame) == raw


def action_decode(data: bytes) -> None:
    from fwbridge.protocols import action_frame
    from fwbridge.protocols.errors import FrameError
    from fwbridge.protocols.families import action_group, actuator

    with contextlib.suppress(FrameError):
        action_frame.decode(data, relaxed=bool(data[:1] == b"\x00"))
    with contextlib.suppress(FrameError):
        action_group.encode(action_group.decode(data)) == data  # noqa: B015
    with contextlib.suppress(FrameError):
        actuator.decode(data[:8])


_SCRATCH = Path(tempfile.gettempdir()) / f"fwbridge-fuzz-{os.getpid()}"


def _scratch(data: bytes, suffix: str) -> Path:
    path = _SCRATCH.with_suffix(suffix)
    path.write_bytes(data)
    return path


def serial_pcapng(data: bytes) -> None:
    from fwbridge.bridge.record.serial_captures import read_capture
    from fwbridge.bridge.record.serial_pcapng import CaptureError

    with contextlib.suppress(CaptureError):
        for packet in read_capture(_scratch(data, ".pcapng")):
            assert isinstance(packet.data, bytes)


def can_pcapng(data: bytes) -> None:
    from fwbridge.bridge.record.can_pcapng import parse

    with contextlib.suppress(ValueError):
        for msg in parse(data):
            assert 0 <= msg.dlc <= 8 or msg.is_fd


def candump(data: bytes) -> None:
    from fwbridge.bridge.record.can_logs import format_frame, parse_frame, read_messages

    text = data.decode("utf-8", errors="replace")
    for line in text.splitlines()[:20]:
        try:
            msg = parse_frame(line)
        except ValueError:
            continue
        assert parse_frame(format_frame(msg)).arbitration_id == msg.arbitration_id
    with contextlib.suppress(ValueError, EOFError):
        list(read_messages(_scratch(data, ".log")))


def bus_wire(data: bytes) -> None:
    """The shared bus's packets, either way: split whatever the chunking, each body
    checked by its kind's parser; only :class:`WireError` may come out."""
    from fwbridge.protocols import bus_wire as wire

    parse = {wire.Kind.SEND: wire.unpack_message, wire.Kind.MESSAGE: wire.unpack_message,
             wire.Kind.WAIT: wire.parse_wait, wire.Kind.HELLO: wire.parse_hello,
             wire.Kind.CALL: wire.parse_call, wire.Kind.DONE: wire.parse_done,
             wire.Kind.REPLY: wire.parse_json, wire.Kind.WELCOME: wire.parse_json,
             wire.Kind.ERROR: wire.parse_json}
    for side in ("daemon", "node"):
        reader = wire.PacketReader(side)
        with contextlib.suppress(wire.WireError):
            for chunk in _split(data):
                for kind, body in reader.feed(chunk):
                    with contextlib.suppress(wire.WireError):
                        fn = parse.get(kind)
                        if fn is not None:
                            fn(body)
                assert reader.pending < wire.MAX_PACKET + wire.HEADER.size


_BUS: list[object] = []


def bus_daemon(data: bytes) -> None:
    """A shared bus daemon fed one client's bytes (no socket I/O, afap, no thread): it
    answers or drops that client, and no exception leaves it."""
    import socket

    from fwbridge.can_bus.daemon import BusDaemon
    from fwbridge.can_bus.daemon_nodes import Client

    if not _BUS:
        run = _SCRATCH.with_suffix(".run")
        run.mkdir(mode=0o700, exist_ok=True)
        os.environ["FWBRIDGE_RUNTIME_DIR"] = str(run)
        _BUS.append(BusDaemon("fuzz", pacing="afap", data_bitrate=2_000_000))
    daemon = _BUS[0]
    assert isinstance(daemon, BusDaemon)
    mine, theirs = socket.socketpair()
    with theirs:
        client = Client(mine, daemon)
        daemon.clients[mine] = client
        for chunk in _split(data):
            daemon.receive(client, chunk)
            if mine not in daemon.clients:
                break
        with daemon.ch.lock:
            daemon._advance()
        daemon._drop(client)
    assert daemon.bugs == 0, "a client's packets met a bug in the daemon"
    assert not daemon.ch.model.nodes


def config_loader(data: bytes) -> None:
    import tomllib

    from fwbridge.bridge.node.config import ConfigError, parse_config
    from fwbridge.bridge.robots.arm.config import ArmConfigError, parse_arm
    from fwbridge.protocols.config_text import TextLimitError, parse_toml

    try:  # as load_config reads a robot file: nesting bounded
        table = parse_toml(data.decode("utf-8", errors="replace"), "fuzz.toml")
    except (tomllib.TOMLDecodeError, TextLimitError):
        return
    with contextlib.suppress(ConfigError):
        parse_config(table)
    arm = table.get("arm")
    if isinstance(arm, dict):
        with contextlib.suppress(ArmConfigError):
            parse_arm(arm)


def description_loader(data: bytes) -> None:
    """A frame description (a file people share): refused with one error line, or loaded
    into a description every generator and a receiver take."""
    from fwbridge.codegen import c, dbc, wireshark
    from fwbridge.protocols.described import Described
    from fwbridge.protocols.descriptions.loader import DescriptionError, loads
    from fwbridge.protocols.errors import ConfigError

    try:
        desc = loads(data.decode("utf-8", errors="replace"), "fuzz.toml")
    except DescriptionError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.toml"), str(exc)
        return
    d = Described.of(desc)
    files = c.generate([desc], "fw")
    assert all("*/" not in line.split("/*", 1)[-1].rsplit("*/", 1)[0]
               for text in files.values() for line in text.splitlines() if "/*" in line)
    if desc.header:
        wireshark.generate([desc])
        rx = d.receiver()
        frames = rx.feed(data[:256])
        assert rx.stats.frames == len(frames)
    if desc.can and (desc.size or 0) <= 8:
        try:
            dbc.generate([desc])
        except ConfigError as exc:  # a signal range no DBC number holds: one line, its key
            assert "\n" not in str(exc) and str(exc).startswith("fuzz.toml: "), str(exc)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "sum8_receiver": sum8_receiver,
    "sum8_decode": sum8_decode,
    "hex_parser": hex_parser,
    "action_receiver": action_receiver,
    "action_decode": action_decode,
    "serial_pcapng": serial_pcapng,
    "can_pcapng": can_pcapng,
    "candump": candump,
    "config_loader": config_loader,
    "description_loader": description_loader,
    "bus_wire": bus_wire,
    "bus_daemon": bus_daemon,
}


def every_target(data: bytes) -> None:
    """All targets behind one entry point: the first byte picks one (one process, one
    start-up, for the short run in the test suite)."""
    if data:
        names = sorted(TARGETS)
        TARGETS[names[data[0] % len(names)]](data[1:])


TARGETS["all"] = every_target
