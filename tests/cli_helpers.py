"""Run the installed ``fwbridge`` command as a subprocess, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fwbridge_argv() -> list[str]:
    """The console script next to this interpreter, else ``python -m cli``."""
    script = Path(sys.executable).with_name("fwbridge")
    if script.exists():
        return [str(script)]
    found = shutil.which("fwbridge")
    return [found] if found else [sys.executable, str(ROOT / "cli.py")]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: wide, uncoloured, and able to import
    the test-only packages (``tests.sim_stub``) that some tests point it at."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONPATH": path, **(extra or {})}


def run_cli(
    *args: str, input: bytes | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*fwbridge_argv(), *args], input=input, capture_output=True, timeout=timeout,
        env=cli_env(env), cwd=ROOT, check=False,
    )
