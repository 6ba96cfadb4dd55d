"""Fuzz targets: a short atheris run of each, replayed crashes, and random inputs."""

from __future__ import annotations

import importlib.util
import os
import shutil
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


#: Every saved crash input, as (target, file): one case each, none for targets without.
SAVED = sorted(
    (path.parent.name, path)
    for path in CRASHES.glob("*/*")
    if path.is_file() and path.parent.name in TARGETS
)


def test_saved_crash_files_belong_to_targets() -> None:
    folders = {p.name for p in CRASHES.iterdir() if p.is_dir()}
    assert folders <= set(TARGETS), f"crash folders without a target: {folders - set(TARGETS)}"
    assert SAVED, f"no saved crash in {CRASHES}: the replay test below would run nothing"


@pytest.mark.parametrize(("name", "path"), SAVED, ids=[f"{n}/{p.name}" for n, p in SAVED])
def test_saved_crashes_stay_fixed(name: str, path: Path) -> None:
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


#: Seed corpora (fuzz/corpus/<target>/): valid inputs a run starts from.
SEEDS = sorted((p.parent.name, p) for p in (ROOT / "fuzz" / "corpus").glob("*/*") if p.is_file())


def test_seed_corpora_belong_to_targets() -> None:
    assert SEEDS and {name for name, _ in SEEDS} <= set(TARGETS)


@pytest.mark.parametrize(("name", "path"), SEEDS, ids=[f"{n}/{p.name}" for n, p in SEEDS])
def test_seeds_pass_their_target(name: str, path: Path) -> None:
    TARGETS[name](path.read_bytes())
    if name == "description_loader":  # a seed that loads: the run starts past the refusals
        from fwbridge.protocols.descriptions.loader import loads

        loads(path.read_text())


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None,
                    reason="atheris is not installed (pip install atheris): no coverage-guided run")
def test_short_atheris_run_of_the_description_loader_from_its_seeds(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "fuzz" / "corpus" / "description_loader", corpus)
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    cmd = [sys.executable, "-m", "fuzz.run", "description_loader", f"-max_total_time={SECONDS}",
           "-rss_limit_mb=1024", "-timeout=20", f"-artifact_prefix={crashes}/", str(corpus)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    found = sorted(p.name for p in crashes.iterdir())
    assert res.returncode == 0 and not found, (
        f"the loader target crashed; keep the input in {CRASHES}/description_loader/:\n"
        f"{res.stderr[-3000:]}")
