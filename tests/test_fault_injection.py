"""Fault injection on the serial receivers: every intact frame survives every fault kind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fault_suite import KINDS, measure


@pytest.mark.parametrize("protocol", ["odom", "action"])
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=8, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([1e-3, 1e-2, 5e-2]))
def test_intact_frames_all_recovered(protocol: str, kind: str, seed: int, rate: float) -> None:
    out = measure(protocol, kind, rate, n=400, seed=seed)
    assert out.recovered == out.intact, out
    if protocol == "action":
        # Trailer and CRC-16 together: a corrupted candidate passes about 1 in 2**32.
        assert out.false_accepts == 0, out
    else:
        # sum-8 passes about 1 in 256 random candidates; never a single bit flip.
        assert out.false_accepts <= max(3, out.corrupted // 20), out


def test_single_bit_flips_never_pass_sum8() -> None:
    out = measure("odom", "bitflip", 1e-4, n=20_000, seed=1)
    assert out.faults > 10 and out.corrupted == out.faults  # one flip per frame
    assert out.false_accepts == 0
