"""``fwbridge convert CAPTURE OUT``: captures to MCAP (Foxglove) and rosbag2 (``ros2 bag play``).

Inputs: serial pcapng (and MCAP), CAN logs (candump ``.log``, ``.asc``,
``.blf``, ``.pcapng``, ... and ``.mcap``). MCAP output carries what an
``.mcap`` recording carries (raw bytes, ROS 2 messages, counters; CAN frames,
load, joint_states); rosbag2 takes the CDR channels (the JSON ones, counters
and load, have no ROS type and are left out, said on stderr).

Outputs are written beside their final name and renamed into place when
whole: nothing existing is overwritten, and a failed conversion leaves nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import click

from fwbridge.bridge.record.mcap_sink import looks_like_mcap
from fwbridge.cli_verbs.common import fail
from fwbridge.protocols.errors import CaptureError
from fwbridge.protocols.pcapng import (
    LINKTYPE_CAN_SOCKETCAN,
    MAGIC,
    PCAP_BIG,
    PCAP_LITTLE,
    first_link_type,
)

__all__ = ["capture_kind", "convert_cmd", "to_mcap"]

#: CAN log suffixes python-can reads, plus ours.
CAN_SUFFIXES = (".log", ".asc", ".blf", ".csv", ".trc", ".mf4", ".db")


def capture_kind(path: Path) -> str:
    """``"mcap"``, ``"serial"`` (a pcapng of a serial link) or ``"can"``."""
    with open(path, "rb") as f:
        head = f.read(24)
        if looks_like_mcap(head):
            return "mcap"
        if head[:4] == MAGIC:  # the first interface's link type, in the section's byte order
            f.seek(0)
            try:
                linktype = first_link_type(f.read)
            except CaptureError:
                linktype = None  # damaged: the serial reader names what and where
            return "can" if linktype == LINKTYPE_CAN_SOCKETCAN else "serial"
    if head[:4] in PCAP_LITTLE + PCAP_BIG and len(head) == 24:  # link type: bytes 20-23
        linktype = int.from_bytes(head[20:24], "little" if head[:4] in PCAP_LITTLE else "big")
        return "can" if linktype & 0xFFFF == LINKTYPE_CAN_SOCKETCAN else "serial"
    if path.suffix.lower() in CAN_SUFFIXES:
        return "can"
    raise click.ClickException(f"{path}: not a capture fwbridge reads (pcapng, MCAP, "
                               f"{', '.join(CAN_SUFFIXES)})")


def to_mcap(src: Path, out: Path, *, bitrate: int | None = None) -> int:
    """Write the MCAP of a serial or CAN capture to ``out`` (a new file); messages in."""
    kind = capture_kind(src)
    if kind == "mcap":
        from fwbridge.bridge.record.mcap_reader import read_mcap

        for _ in read_mcap(src):  # read whole first: a damaged file is not "converted"
            pass
        shutil.copyfile(src, out)
        return 0
    if kind == "serial":
        from fwbridge.bridge.record.mcap_sink import McapSink
        from fwbridge.bridge.record.serial_captures import read_capture
        from fwbridge.bridge.record.serial_mcap import SerialCapture

        cap = SerialCapture([McapSink(out, metadata={"converted_from": src.name})],
                            port=src.stem)
        last = 0
        try:
            for packet in read_capture(src):
                if packet.direction:
                    cap.write(packet.direction, packet.data, packet.ts_ns)
                    last = packet.ts_ns
            cap.recorder.finish(last)
        finally:
            cap.streams.close()
        return cap.packets
    from fwbridge.bridge.record.can_joint_states import JointStates
    from fwbridge.bridge.record.can_logs import read_messages
    from fwbridge.bridge.record.can_mcap import McapCanWriter

    writer = McapCanWriter(out, bitrate=bitrate, extend=[JointStates])
    n = 0
    try:
        for msg in read_messages(src):
            writer.on_message_received(msg)
            n += 1
    finally:
        writer.stop()
    return n


def to_rosbag2(src_mcap: Path, out: Path) -> tuple[Counter[str], set[str]]:
    """The CDR channels of an MCAP file as a rosbag2 directory (sqlite3 storage)."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import get_types_from_msg

    from fwbridge.bridge.record.mcap_reader import Declared, read_mcap
    from fwbridge.bridge.rosmsg import cdr

    store = cdr.typestore("jazzy")
    schemas: Declared = {}  # filled by the read, each channel before its first message
    written: Counter[str] = Counter()
    skipped: set[str] = set()
    writer = Writer(out, version=9)
    writer.open()
    conns: dict[str, Any] = {}
    try:
        for rec in read_mcap(src_mcap, channels=schemas):
            encoding, text = schemas.get(rec.topic, ("", ""))
            if encoding != "cdr":
                skipped.add(rec.topic)
                continue
            conn = conns.get(rec.topic)
            if conn is None:
                if rec.schema_name not in store.types:  # e.g. can_msgs/msg/Frame
                    store.register(get_types_from_msg(text.split("\n" + "=" * 80)[0],
                                                      rec.schema_name))
                conn = conns[rec.topic] = writer.add_connection(rec.topic, rec.schema_name,
                                                                typestore=store)
            writer.write(conn, rec.log_time_ns, rec.data)
            written[rec.topic] += 1
    finally:
        writer.close()
    return written, skipped


def _whole(dst: Path) -> None:
    """Refuse to put a cut output in place: a write the disk refused (full) ends it here."""
    from fwbridge.bridge.record.damage import failures

    failed = failures(take=True)  # they name the file beside DST: said here as DST's
    if failed:
        fail(f"{dst}: {str(failed[0]).rpartition(': ')[2]}")


@click.command("convert")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.argument("out", type=click.Path())
@click.option("--to", "fmt", type=click.Choice(["mcap", "rosbag2"]), default=None,
              help="Output format (default: mcap for a .mcap name, else rosbag2).")
@click.option("--bitrate", type=click.IntRange(min=1), default=None, metavar="BIT/S",
              help="CAN logs: the bus's bit rate, for the load channel.")
def convert_cmd(capture: str, out: str, fmt: str | None, bitrate: int | None) -> None:
    """Convert CAPTURE (serial pcapng, CAN log, MCAP) to MCAP or a rosbag2 directory OUT.

    \b
    fwbridge convert run.pcapng run.mcap           open it in Foxglove
    fwbridge convert run.mcap run_bag --to rosbag2  then: ros2 bag play run_bag
    """
    src, dst = Path(capture), Path(out)
    if not src.is_file():
        fail(f"{src}: no such capture file")
    if os.path.lexists(dst):  # a symbolic link too, dangling or not: never written through
        what = " (a symbolic link)" if dst.is_symlink() else ""
        fail(f"{dst}: exists already{what}; give a new name (nothing is overwritten)")
    fmt = fmt or ("mcap" if dst.suffix.lower() == ".mcap" else "rosbag2")
    from fwbridge.bridge.record.mcap_sink import McapError

    try:  # the temporary directory beside OUT is never named: OUT is what the user gave
        tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.",
                                    dir=dst.parent if str(dst.parent) else "."))
    except OSError as exc:
        fail(f"{dst}: cannot write: {exc.strerror or exc}")
    try:
        if fmt == "mcap":
            n = to_mcap(src, tmp / "out.mcap", bitrate=bitrate)
            _whole(dst)
            os.replace(tmp / "out.mcap", dst)
            click.echo(f"converted {src} to {dst}" + (f" ({n} packets/frames)" if n else ""),
                       err=True)
            return
        mcap_src = src
        if capture_kind(src) != "mcap":
            mcap_src = tmp / "via.mcap"
            to_mcap(src, mcap_src, bitrate=bitrate)
        _whole(dst)
        written, skipped = to_rosbag2(mcap_src, tmp / "bag")
        os.replace(tmp / "bag", dst)
        click.echo(f"converted {src} to rosbag2 {dst}: "
                   + ", ".join(f"{t} {n}" for t, n in sorted(written.items())), err=True)
        if skipped:
            click.echo(f"left out (JSON, no ROS 2 type): {', '.join(sorted(skipped))}", err=True)
    except (McapError, ValueError, EOFError) as exc:
        text = str(exc)
        fail(text if text.startswith(f"{src}:") else f"{src}: cannot convert: {text}")
    except OSError as exc:  # named by what the user gave, not by the file beside it
        from fwbridge.bridge.record.safe_output import disk_error

        fail(f"{src}: cannot convert: {disk_error(dst, exc)}")
    except click.ClickException as exc:
        fail(exc.format_message())
    except KeyboardInterrupt:  # a stop signal, or a write the disk refused (it stops the verb)
        _whole(dst)
        raise
    except ImportError as exc:
        fail(f"convert needs the mcap extra (pip install 'fwbridge[mcap]'): {exc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
