"""Shared test settings: Hypothesis profiles and paths."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The pty fixtures of the bridge tests (``pair``, ``peer``), for every test module;
# FIXTURES for the modules that take it from here.
from tests.helpers import FIXTURES, pair, peer  # noqa: F401

# "ci" keeps the suite to a few minutes on two cores; "long" is for hunting.
# Health checks judge the generators, not the code: on a loaded two-core CI
# machine they fail at random, so the ci profile does not let them fail a run.
settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)
settings.register_profile("long", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
