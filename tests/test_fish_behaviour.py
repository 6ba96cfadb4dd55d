"""The fish's free-action priorities: scene, then avoidance, then seeded random actions."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwbridge.bridge.sim.fish.behaviour import FreeBehaviour, RandomAction, Sensors

ranges = st.floats(0.05, 10.0)


@given(ranges, ranges)
def test_avoidance_turns_away_from_the_nearer_sonar(left: float, right: float) -> None:
    fb = FreeBehaviour(seed=1)
    d = fb.decide(Sensors(sonar_left=left, sonar_right=right))
    if min(left, right) < fb.avoid_distance:
        assert d.source == "avoid"
        assert d.action == ("turn-right" if left < right else "turn-left")
    else:
        assert d.source in ("random", "idle")


def test_scene_mode_comes_first() -> None:
    fb = FreeBehaviour(seed=1)
    d = fb.decide(Sensors(sonar_left=0.1, water_ingress=True))
    assert (d.source, d.action, d.reason) == ("scene", "surface", "water-ingress")
    d = fb.decide(Sensors(sonar_left=0.1, depth=5.0))
    assert (d.source, d.action) == ("scene", "ascend")


def test_random_actions_are_seeded_and_follow_their_probabilities() -> None:
    clear = Sensors()
    runs = []
    for _ in range(2):
        fb = FreeBehaviour(seed=42)
        runs.append([fb.decide(clear).action for _ in range(3000)])
    assert runs[0] == runs[1]  # reproducible
    counts = Counter(runs[0])
    # swim-forward (p=0.6) is drawn 1/6 of the time and kept 60 %: about 300 of 3000.
    assert 200 < counts["swim-forward"] < 400
    # dive needs two kept draws (p=0.1): about 3000/6*0.1/2 = 25.
    assert 5 < counts["dive"] < 60
    other = FreeBehaviour(seed=43)
    assert [other.decide(clear).action for _ in range(3000)] != runs[0]


def test_occurrences_delay_an_action() -> None:
    fb = FreeBehaviour(seed=0, actions=(RandomAction("wag", 1.0, occurrences=3),))
    assert [fb.decide(Sensors()).action for _ in range(6)] == ["idle", "idle", "wag"] * 2


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="probability"):
        RandomAction("x", 1.5)
    with pytest.raises(ValueError, match="at least one action"):
        FreeBehaviour(actions=())
