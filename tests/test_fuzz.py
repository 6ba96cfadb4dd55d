"""Fuzz targets: a short atheris run of each, replayed crashes, and random inputs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz.targets import TARGETS
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
CRASHES = FIXTURES / "fuzz"
SECONDS = os.environ.get("FWBRIDGE_FUZZ_SECONDS", "10")


@pytest.mark.parametrize("name", sorted(TARGETS))
@given(st.binary(max_size=400))
def test_target_invariants_hold_on_random_input(name: str, data: bytes) -> None:
    TARGETS[name](data)


@pytest.mark.parametrize("name", sorted(set(TARGETS) - {"all"}))
def test_saved_crashes_stay_fixed(name: str) -> None:
    for path in sorted((CRASHES / name).glob("*")) if (CRASHES / name).is_dir() else []:
        TARGETS[name](path.read_bytes())


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None,
                    reason="atheris is not installed (pip install atheris): no coverage-guided run")
def test_short_atheris_run(tmp_path: Path) -> None:
    """Every target, one atheris process (the first byte of an input picks the target)."""
    name = "all"
    cmd = [sys.executable, "-m", "fuzz.run", name, f"-max_total_time={SECONDS}",
           "-rss_limit_mb=1024", "-timeout=10", f"-artifact_prefix={tmp_path}/"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    crashes = sorted(p.name for p in tmp_path.iterdir())
    assert res.returncode == 0 and not crashes, (
        f"a target crashed; keep the input (less its first byte) in {CRASHES}/<target>/:\n"
        f"{res.stderr[-3000:]}"
    )
