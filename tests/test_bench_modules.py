"""Every benchmark the report runs still imports against the code it measures.

Benchmarks are not run here (speed is bench/'s business, not the tests'); a
rename in the package must not leave one that fails before printing a figure.
"""

from __future__ import annotations

import importlib

import pytest

from bench.report import BENCHMARKS


@pytest.mark.parametrize("module", [m for m, _ in BENCHMARKS])
def test_benchmark_imports(module: str) -> None:
    mod = importlib.import_module(f"bench.{module}")
    assert callable(getattr(mod, "main", None)), f"bench.{module} has no main()"
