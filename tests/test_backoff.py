"""The base node's link policy, sans-I/O: back-off bounded, reset after success,
every answer a function of the ``now`` passed in; and the pacing of records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwbridge.bridge.node.backoff import LinkPolicy
from fwbridge.bridge.node.config import RobotConfig, parse_config
from fwbridge.protocols.errors import ConfigError

delays = st.floats(1e-3, 60.0, allow_nan=False)
times = st.floats(0.0, 1e6, allow_nan=False)
# what happens at each attempt: False = it fails, True = it works, with the time it took
attempts = st.lists(st.tuples(st.booleans(), st.floats(0.0, 100.0, allow_nan=False)),
                    max_size=60)


def policy_of(lo: float, span: float, limit: int) -> LinkPolicy:
    return LinkPolicy(lo, lo + span, limit)


def run(policy: LinkPolicy, start: float, script: list[tuple[bool, float]]
        ) -> list[object]:
    """Every answer of the policy along ``script``, from a loss at ``start``."""
    now = start
    out: list[object] = [policy.lost(now)]
    for works, took in script:
        now += policy.wait(now) + took
        if works:
            out.append(("took", policy.succeeded(now)))
            out.append(policy.lost(now))  # and the link goes again at once
        else:
            delay = policy.failed(now)
            out.append(delay)
            if delay is None:
                break
        out.append(policy.wait(now))
    return out


@given(lo=delays, span=st.floats(0.0, 600.0), limit=st.integers(0, 8), start=times,
       script=attempts)
def test_delays_stay_within_bounds_and_double_up_to_the_cap(
        lo: float, span: float, limit: int, start: float, script: list[tuple[bool, float]]
) -> None:
    policy = policy_of(lo, span, limit)
    now = start
    assert policy.lost(now) == lo
    delay: float | None = lo
    failures = 0
    for works, took in script:
        assert delay is not None
        assert policy.wait(now) == pytest.approx(delay)  # the next attempt is one delay on
        now += delay + took
        if works:
            assert policy.succeeded(now) == failures + 1
            failures = 0
            assert policy.wait(now) == 0.0  # linked: nothing to wait for
            delay = policy.lost(now)
            assert delay == lo  # reset: the next loss starts from the shortest delay
            continue
        before = delay
        delay = policy.failed(now)
        failures += 1
        if limit and failures >= limit:
            assert delay is None  # gave up, after exactly `limit` failures in a row
            return
        assert delay is not None
        assert lo <= delay <= lo + span  # bounded
        assert delay == min(before * 2, lo + span)  # doubling up to the cap


@given(lo=delays, span=st.floats(0.0, 600.0), limit=st.integers(0, 8), start=times,
       script=attempts)
def test_the_same_nows_give_the_same_answers(
        lo: float, span: float, limit: int, start: float, script: list[tuple[bool, float]]
) -> None:
    # deterministic: no clock of its own, the answers follow from the nows alone
    assert run(policy_of(lo, span, limit), start, script) == run(
        policy_of(lo, span, limit), start, script)


@given(start=times, late=st.floats(0.0, 1e3, allow_nan=False))
def test_wait_counts_down_from_the_now_given(start: float, late: float) -> None:
    policy = LinkPolicy(0.5, 4.0)
    policy.lost(start)
    assert policy.wait(start + late) == pytest.approx(max(0.0, 0.5 - late), abs=1e-6)
    assert policy.wait(start - 1.0) == pytest.approx(1.5)  # earlier: longer to wait


def test_a_config_gives_its_reconnect_table() -> None:
    cfg = parse_config({"link": {"url": "/dev/null"},
                        "reconnect": {"min_delay": 0.2, "max_delay": 1.0, "attempts": 3}})
    policy = LinkPolicy.for_config(cfg)
    assert (policy.min_delay, policy.max_delay, policy.limit) == (0.2, 1.0, 3)
    assert LinkPolicy.for_config(RobotConfig(url="/dev/null")).limit == 0  # forever


@pytest.mark.parametrize("args", [(0.0, 1.0, 0), (2.0, 1.0, 0), (0.1, 1.0, -1)])
def test_bad_bounds_are_refused(args: tuple[float, float, int]) -> None:
    with pytest.raises(ConfigError):
        LinkPolicy(*args)


@given(n=st.integers(0, 50), budget=st.floats(0.0, 5.0), costs=st.lists(
    st.floats(0.0, 1.0, allow_nan=False), min_size=51, max_size=51))
def test_delivery_keeps_order_ends_on_the_newest_and_counts_what_it_skips(
        n: int, budget: float, costs: list[float]) -> None:
    records = list(range(n))
    clock = [0.0]
    policy = LinkPolicy(budget=budget)
    got = []
    skipped = 0
    for k, (record, skip) in enumerate(policy.deliver(records, lambda: clock[0])):
        got.append(record)
        skipped += skip
        clock[0] += costs[k]  # what the sinks took over this record
    if n:
        assert got[-1] == n - 1  # the newest always arrives
    assert got == sorted(got) and len(got) + skipped == n  # in order, nothing lost uncounted
    if sum(costs[:n]) <= budget:
        assert got == records  # within budget: every record
