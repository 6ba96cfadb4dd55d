"""The lean MCAP writer against the mcap package's own readers (index, summary, CRCs)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcap")
from mcap.reader import NonSeekingReader, SeekingReader
from mcap.stream_reader import StreamReader

from fwbridge.bridge.record.mcap_writer import McapWriter

MESSAGES = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2**63 - 1), st.binary(max_size=64)),
                    max_size=200)


@settings(max_examples=60, deadline=None)
@given(messages=MESSAGES, compression=st.sampled_from(["zstd", "lz4", ""]),
       chunk_size=st.sampled_from([64, 1024, 1 << 20]), index=st.booleans())
def test_files_read_back_whole_by_the_mcap_readers(messages: list[tuple[int, int, bytes]],
                                                   compression: str, chunk_size: int,
                                                   index: bool) -> None:
    out = io.BytesIO()
    w = McapWriter(out, compression=compression, chunk_size=chunk_size, profile="ros2",
                   index=index)
    w.add_metadata("fwbridge", {"port": "/dev/ttyUSB0"})
    w.add_schema(1, "pkg/msg/A", "ros2msg", b"int32 a")
    for channel in (1, 2, 3):
        w.add_channel(channel, 1, f"/t{channel}", "cdr", {"k": "v"} if channel == 2 else None)
    for seq, (channel, t, data) in enumerate(messages):
        w.add_message(channel, t, data, seq)
    w.finish()
    raw = out.getvalue()
    # every record, chunks decompressed, CRCs checked
    records = list(StreamReader(io.BytesIO(raw), validate_crcs=True).records)
    assert type(records[-1]).__name__ == "Footer"
    reader = SeekingReader(io.BytesIO(raw), validate_crcs=True)
    summary = reader.get_summary()
    assert summary is not None and reader.get_header().profile == "ros2"
    assert summary.statistics.message_count == len(messages)
    assert summary.statistics.channel_count == 3
    counts = {c: sum(1 for m in messages if m[0] == c) for c in (1, 2, 3)}
    assert {c: n for c, n in summary.statistics.channel_message_counts.items()} == {
        c: n for c, n in counts.items() if n}
    assert summary.channels[2].metadata == {"k": "v"}
    assert [m.name for m in reader.iter_metadata()] == ["fwbridge"]
    # indexed: message and chunk indexes; compact: neither (the readers stream it)
    assert len(summary.chunk_indexes) == (summary.statistics.chunk_count if index else 0)
    assert all(c.message_index_offsets for c in summary.chunk_indexes)
    # through the indexes (or streamed), in log-time order, one topic at a time
    got = [(ch.id, m.log_time, m.data, m.sequence)
           for _, ch, m in reader.iter_messages(log_time_order=True)]
    want = sorted(((c, t, d, s) for s, (c, t, d) in enumerate(messages)), key=lambda x: x[1])
    assert sorted(got) == sorted(want)
    assert [g[1] for g in got] == [w_[1] for w_ in want]
    only = [m.data for _, _, m in reader.iter_messages(topics=["/t2"], log_time_order=False)]
    assert sorted(only) == sorted(d for c, _, d in messages if c == 2)
    streamed = [(ch.id, m.log_time, m.data)
                for _, ch, m in NonSeekingReader(io.BytesIO(raw)).iter_messages(
                    log_time_order=False)]
    assert streamed == [(c, t, d) for c, t, d in messages]
