"""firmware_ref's own C tests: unit tests and fuzz targets under ASan + UBSan."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import FIXTURES
from tests.fwref import FIRMWARE, Firmware
from tests.fwref import firmware as firmware  # the session fixture

FUZZ_TARGETS = ("sum8", "action", "arq", "actuator")
FUZZ_SECONDS = os.environ.get("FWBRIDGE_C_FUZZ_SECONDS", "1.5")


def test_c_unit_tests_pass_under_sanitizers(firmware: Firmware) -> None:
    proc = subprocess.run([str(firmware.unit), str(FIXTURES)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("passed, 0 failed"), proc.stdout
    # Every case ran (a fixture that failed to load fails its case, so none may be missing).
    assert proc.stdout.count("ok   ") >= 16, proc.stdout


def test_c_unit_tests_fail_without_fixtures(firmware: Firmware) -> None:
    # The golden-vector cases read the shared fixtures: pointing them elsewhere must fail.
    proc = subprocess.run([str(firmware.unit), str(FIRMWARE / "no-such-dir")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "FAIL test_golden_sum8" in proc.stdout


@pytest.mark.parametrize("target", FUZZ_TARGETS)
def test_fuzz_target_brief_run(firmware: Firmware, target: str) -> None:
    """A short random run of each differential fuzz target (gcc build, ASan + UBSan)."""
    binary = firmware.fuzz_dir / f"fuzz_{target}"
    proc = subprocess.run([str(binary), f"-seconds={FUZZ_SECONDS}", "-seed=7"],
                          capture_output=True, text=True, timeout=120, cwd=firmware.fuzz_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no failure" in proc.stdout


def test_fuzz_driver_replays_files(firmware: Firmware) -> None:
    sample = FIXTURES / "odom_noisy.bin"
    proc = subprocess.run([str(firmware.fuzz_dir / "fuzz_sum8"), str(sample)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "1 inputs replayed" in proc.stdout


def test_libfuzzer_build_when_clang_is_there(firmware: Firmware) -> None:
    if shutil.which("clang") is None:
        pytest.skip("clang not installed: libFuzzer targets not built (the gcc driver ran above)")
    proc = subprocess.run(["make", "-s", "-C", str(FIRMWARE), "libfuzzer"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    binary = FIRMWARE / "build" / "libfuzzer" / "fuzz_sum8"
    run = subprocess.run([str(binary), "-max_total_time=2"], capture_output=True, text=True,
                         timeout=120, cwd=binary.parent)
    assert run.returncode == 0, run.stderr[-2000:]
