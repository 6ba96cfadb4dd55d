"""CAN recordings in MCAP read back by the official ``mcap`` readers: every frame whole.

Both layouts (compact: no indexes; indexed), and the bounds on what a
recorder holds in memory: the open chunk (its size and time limits) and
the frames of a batch; a recorder killed mid-run leaves a file cut at a
chunk boundary, which :func:`read_mcap` reports as such.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcap")
pytest.importorskip("rosbags")

import can
from mcap.exceptions import EndOfFile
from mcap.reader import NonSeekingReader, make_reader
from mcap.records import Chunk, Message, MessageIndex
from mcap.stream_reader import StreamReader, breakup_chunk

from fwbridge.bridge.record.can_mcap import (
    BATCH,
    BATCH_SPAN,
    FRAME_TYPE,
    RX_TOPIC,
    TX_TOPIC,
    McapCanWriter,
    read_mcap_messages,
)
from fwbridge.bridge.record.mcap_reader import McapTruncated, read_mcap
from fwbridge.bridge.record.mcap_writer import McapWriter
from tests.helpers import can_frame_store as store

pytestmark = pytest.mark.filterwarnings("ignore:Field type should not be:DeprecationWarning")


@st.composite
def frames(draw: st.DrawFn) -> list[can.Message]:
    """Frames of every kind in time order (gaps from 1 us to 3 s: load windows, chunks)."""
    out = []
    t = draw(st.floats(1.6e9, 1.9e9))
    for _ in range(draw(st.integers(0, 60))):
        t += draw(st.sampled_from([1e-6, 1.3e-4, 0.05, 3.0]))
        ext = draw(st.booleans())
        rtr, err = draw(st.sampled_from([(False, False), (True, False), (False, True)]))
        data = b"" if rtr else draw(st.binary(max_size=8))
        out.append(can.Message(
            timestamp=t, arbitration_id=draw(st.integers(0, 0x1FFFFFFF if ext else 0x7FF)),
            is_extended_id=ext, is_remote_frame=rtr, is_error_frame=err, data=data,
            dlc=draw(st.integers(0, 8)) if rtr else len(data), is_rx=draw(st.booleans()),
            channel=draw(st.sampled_from([None, "can1"]))))
    return out


@settings(max_examples=40, deadline=None)
@given(msgs=frames(), index=st.booleans())
def test_every_frame_read_back_by_the_mcap_reader(msgs: list[can.Message], index: bool) -> None:
    ts = store()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bus.mcap"
        w = McapCanWriter(path, bitrate=500_000, channel="can0", index=index)
        for m in msgs:
            w.on_message_received(m)
        w.stop()
        with open(path, "rb") as f:
            reader = make_reader(f, validate_crcs=True)
            summary = reader.get_summary()
            assert summary is not None
            # compact: chunks without indexes (readers stream it); indexed: both indexes
            assert bool(summary.chunk_indexes) == (index and bool(msgs))
            got = [(ch.topic, m.log_time, ts.deserialize_cdr(m.data, FRAME_TYPE))  # type: ignore[attr-defined]
                   for _, ch, m in reader.iter_messages(topics=[RX_TOPIC, TX_TOPIC])]
            f.seek(0)
            streamed = [m.log_time for _, ch, m in NonSeekingReader(f).iter_messages(
                log_time_order=False) if ch.topic in (RX_TOPIC, TX_TOPIC)]
        assert len(got) == len(msgs) == summary.statistics.channel_message_counts.get(1, 0) + \
            summary.statistics.channel_message_counts.get(2, 0)
        assert streamed == [t for _, t, _ in got]
        for m, (topic, log_time, f_) in zip(msgs, got):
            ns = round(m.timestamp * 1e9)
            assert topic == (RX_TOPIC if m.is_rx else TX_TOPIC)
            assert log_time == ns  # the frame's time to the nanosecond, as its log time
            assert (f_.header.stamp.sec, f_.header.stamp.nanosec) == divmod(ns, 10**9)
            assert f_.header.frame_id == (m.channel or "can0")
            assert (f_.id, f_.is_extended, f_.is_rtr, f_.is_error, f_.dlc) == (
                m.arbitration_id, m.is_extended_id, m.is_remote_frame, m.is_error_frame, m.dlc)
            assert bytes(f_.data) == bytes(m.data).ljust(8, b"\0")
        assert [(b.arbitration_id, b.timestamp, bytes(b.data)) for b in read_mcap_messages(path)] \
            == [(m.arbitration_id, round(m.timestamp * 1e9) / 1e9, bytes(m.data)) for m in msgs]


def written(raw: bytes) -> list[int]:
    """Log times of the messages in the whole records of a file being written."""
    out = []
    try:
        for r in StreamReader(io.BytesIO(raw)).records:
            if isinstance(r, Message):
                out.append(r.log_time)
    except EndOfFile:
        pass
    return out


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), max_size=120),
       gaps=st.lists(st.integers(0, 400_000_000), min_size=1), index=st.booleans(),
       chunk_size=st.sampled_from([1, 500, 4096]), flush_ns=st.sampled_from([0, 10**9]),
       batch=st.integers(0, 5))
def test_a_chunk_closes_at_its_size_and_time_limits_and_at_finish(
        sizes: list[int], gaps: list[int], index: bool, chunk_size: int, flush_ns: int,
        batch: int) -> None:
    """``batch`` 0: one add_message a message; else add_messages, ``batch`` at a time."""
    out = io.BytesIO()
    w = McapWriter(out, chunk_size=chunk_size, index=index, flush_ns=flush_ns)
    w.add_schema(1, "pkg/msg/A", "ros2msg", b"uint8[] a")
    w.add_channel(1, 1, "/a", "cdr")
    t, sent = 1_000, []
    items = []
    for k, n in enumerate(sizes):
        t += gaps[k % len(gaps)]
        items.append((1, t, bytes(n)))
    for k in range(0, len(items), batch or 1):
        if batch:
            w.add_messages(items[k:k + batch])
        else:
            w.add_message(*items[k])
        sent += [it[1] for it in items[k:k + (batch or 1)]]
        assert w.buffered < chunk_size + 31 + 300  # never more than a limit and one message
        on_disk = written(out.getvalue())
        assert on_disk == sent[:len(on_disk)]  # what is out is whole and in order
        assert len(on_disk) == len(sent) or w.buffered  # the rest is in the open chunk
    w.finish()
    chunks = [r for r in StreamReader(io.BytesIO(out.getvalue()), emit_chunks=True).records
              if isinstance(r, Chunk)]
    indexes = [r for r in StreamReader(io.BytesIO(out.getvalue()), emit_chunks=True).records
               if isinstance(r, MessageIndex)]
    assert bool(indexes) == (index and bool(sizes))
    got = []
    for chunk in chunks:
        times = [r.log_time for r in breakup_chunk(chunk) if isinstance(r, Message)]
        assert times and (chunk.message_start_time, chunk.message_end_time) == (min(times),
                                                                               max(times))
        # closed at its size limit: only its last message took it over the limit
        assert chunk.uncompressed_size < chunk_size + 31 + 300 + 200  # + schema and channel
        if flush_ns:  # and at its time limit: all but its last within flush_ns of its first
            assert all(t_ < times[0] + flush_ns for t_ in times[:-1])
        got += times
    assert got == sent  # finish wrote the open chunk


def test_batches_are_bounded_in_frames_and_in_message_time(tmp_path: Path) -> None:
    w = McapCanWriter(tmp_path / "bus.mcap", bitrate=500_000)
    rec = w.recorder
    assert rec.batch == BATCH
    t = 1.7e9
    for k in range(1000):
        t += 1e-4 if k < 500 else 0.03  # a saturated bus, then a quiet one
        w.on_message_received(can.Message(timestamp=t, arbitration_id=k & 0x7FF, data=b"ab"))
        assert rec.pending < BATCH
        if k >= 510:  # the quiet bus: frames wait at most BATCH_SPAN of message time
            assert rec.pending <= BATCH_SPAN / 0.03 + 1
    w.on_message_received(can.Message(timestamp=t + 1e-4, arbitration_id=1, data=b"c"))
    held = rec.pending
    assert held and rec.frames == 1001 - held
    w.on_state_changed("module1", "ACTIVE", "PASSIVE", 128, 0, t)
    assert rec.pending == 0  # a state change comes after the frames before it
    w.stop()
    assert sum(1 for _ in read_mcap_messages(tmp_path / "bus.mcap")) == 1001


def test_a_killed_recorder_leaves_a_file_cut_at_a_chunk(tmp_path: Path) -> None:
    path = tmp_path / "bus.mcap"
    w = McapCanWriter(path, bitrate=1_000_000)
    t = 1.7e9
    for k in range(30_000):  # 3.6 s of a saturated bus: chunks closed by size and by time
        t += 1.2e-4
        w.on_message_received(can.Message(timestamp=t, arbitration_id=0x201 + (k & 7),
                                          data=k.to_bytes(8, "little")))
    cut = tmp_path / "cut.mcap"
    shutil.copy(path, cut)  # the file as a SIGKILL now would leave it
    assert 0 < cut.stat().st_size < 30_000 * 83  # chunks out, compressed; no summary yet
    why: list[str] = []
    got = [r for r in read_mcap(cut, [RX_TOPIC], on_error=why.append)]
    assert why and why[0].startswith("cut at byte")
    assert 5_000 < len(got) < 30_000  # up to the last whole chunk
    with pytest.raises(McapTruncated, match="cut at byte"):
        list(read_mcap_messages(cut))
    w.stop()
    msgs = list(read_mcap_messages(path))
    assert len(msgs) == 30_000 and msgs[-1].data == (29_999).to_bytes(8, "little")
    assert [r.log_time_ns for r in got] == [round(m.timestamp * 1e9) for m in msgs[:len(got)]]
