"""The prefix values a receiver keeps between calls: each byte of a flood is read once
whatever the chunking, and the checks they give equal each window's checksum."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bench.bench_hostile_streams import FIXED, LENGTH
from fwbridge.protocols.checksums import algorithm, algorithm_names
from fwbridge.protocols.descriptions.loader import loads
from fwbridge.protocols.engine import codec_for, receiver_for
from fwbridge.protocols.engine.fixed_columns import columns_receiver
from fwbridge.protocols.engine.length_scan import gather_int
from fwbridge.protocols.engine.stream_accounting import WORK
from fwbridge.protocols.engine.stream_prefix import StreamPrefix


def _feed(rx: Any, data: bytes, chunk: int) -> None:
    for i in range(0, len(data), chunk):
        rx.feed(data[i:i + chunk])
    rx.finish()


def _feed_columns(rx: Any, data: bytes, chunk: int) -> None:
    for i in range(0, len(data), chunk):
        rx.feed_columns(data[i:i + chunk])
    rx.finish()


#: Each shape: its receiver, a flood of false headers against it, how it is fed.
SHAPES: dict[str, tuple[Callable[[], Any], Callable[[int], bytes], Callable[..., None]]] = {
    "fixed": (lambda: receiver_for(loads(FIXED, "f.toml")), lambda n: b"\x5a\xa5" * (n // 2),
              _feed),
    # every false header's length field says 4096: valid, so each is checked
    "length": (lambda: receiver_for(loads(LENGTH, "l.toml")),
               lambda n: b"\x5a\xa5\x00\x10" * (n // 4), _feed),
    "columns": (lambda: columns_receiver(codec_for(loads(FIXED, "f.toml"), generic=True)),
                lambda n: b"\x5a\xa5" * (n // 2), _feed_columns),
}


def work(make: Callable[[], Any], data: bytes, run: Callable[..., None], chunk: int) -> int:
    before = WORK.steps
    run(make(), data, chunk)
    return WORK.steps - before


@pytest.mark.parametrize("shape", ["fixed", "length", "columns"])
def test_a_flood_in_small_chunks_reads_each_byte_once(shape: str) -> None:
    # A candidate waiting for its frame holds up to a frame of bytes into the next call:
    # recomputing their prefix values there read every byte twice with 4 KiB chunks.
    make, flood, run = SHAPES[shape]
    data = flood(1 << 18)
    whole, chunked = work(make, data, run, 1 << 20), work(make, data, run, 4096)
    assert chunked <= whole * 1.02 + 8192, (shape, chunked / len(data), whole / len(data))


@pytest.mark.parametrize("name", algorithm_names())
def test_kept_prefix_values_give_each_window_s_check(name: str) -> None:
    algo = algorithm(name)
    rnd = random.Random(name)
    stream = rnd.randbytes(60_000)
    prefix = StreamPrefix(algo)
    held, base, pos = b"", 0, 0
    matched = 0
    while pos < len(stream):
        step = rnd.choice([1, 3, 130, 700, 20_000])  # one block, many; serial and doubling
        held += stream[pos:pos + step]
        pos += step
        size = algo.width // 8
        order = rnd.choice(["little", "big"])  # the register's own byte order, or not
        if rnd.random() < 0.3:  # one length, as in a flood
            starts = np.arange(rnd.randrange(4), len(held) - 5 - size, rnd.choice([2, 9]))
            ends = starts + 5
        else:
            starts = np.array(sorted(rnd.randrange(len(held) + 1) for _ in range(12)))
            ends = np.array([rnd.randrange(s, len(held) + 1) for s in starts])
            fits = ends + size <= len(held)
            starts, ends = starts[fits], ends[fits]
        # some windows followed by their own check: written over the stream's bytes
        data = bytearray(held)
        for s, e in zip(starts.tolist(), ends.tolist()):
            if rnd.random() < 0.5:
                data[e:e + size] = algo.func(bytes(data[s:e])).to_bytes(size, order)
        fresh = StreamPrefix(algo)  # the kept values are of the stream, not of this copy
        a = np.frombuffer(bytes(data), np.uint8)
        got = fresh.matches(a, base, starts, ends, size, order)
        want = [algo.func(bytes(data[s:e])) == int.from_bytes(data[e:e + size], order)
                for s, e in zip(starts.tolist(), ends.tolist())]
        assert got.tolist() == want, (name, order, base)
        matched += sum(want)
        a = np.frombuffer(held, np.uint8)
        got = prefix.matches(a, base, starts, ends, size, order)
        want = [algo.func(held[s:e]) == int.from_bytes(held[e:e + size], order)
                for s, e in zip(starts.tolist(), ends.tolist())]
        assert got.tolist() == want, (name, order, base, len(held))
        cut = rnd.randrange(len(held) + 1)  # the receiver keeps a tail
        held, base = held[cut:], base + cut
        if rnd.random() < 0.05:
            held, base = b"", pos  # a fresh buffer past what was kept: computed anew
    assert matched > 20  # the windows followed by their check were found


def test_gather_int_reads_each_integer_or_zero_past_the_end() -> None:
    rnd = random.Random(7)
    for _ in range(500):
        n = rnd.randrange(60)
        raw = rnd.randbytes(n)
        a = np.frombuffer(raw, np.uint8)
        for code in ("<u1", "<u2", ">u2", "<u4", ">u4", "<u8", ">u8"):
            dt = np.dtype(code)
            size = dt.itemsize
            if rnd.random() < 0.5:
                at = np.array(sorted(rnd.randrange(n + 5) for _ in range(rnd.randrange(40))),
                              dtype=np.intp)
            else:  # a flood: every position the same distance from the size grid
                at = np.arange(rnd.randrange(4), n + 3, size * rnd.choice([1, 2]),
                               dtype=np.intp)
            order = "little" if code[0] == "<" else "big"
            want = [int.from_bytes(raw[p:p + size], order) if p + size <= n else 0
                    for p in at.tolist()]
            got = gather_int(a, at, dt).astype(np.uint64).tolist()
            assert got == want, (n, code, at)


@pytest.mark.parametrize("shape", ["fixed", "length"])
def test_the_kept_prefix_values_stay_within_the_held_bytes(shape: str) -> None:
    make, flood, _ = SHAPES[shape]
    rx = make()
    rx.feed(flood(1 << 20))  # one large read: its prefix values are not all kept
    kept = rx._prefix._p
    assert kept is not None and len(kept) <= 4 * (rx.pending + 1), (len(kept), rx.pending)
    rx.feed(flood(1 << 16))
    assert len(rx._prefix._p) <= 4 * (rx.pending + 1)
