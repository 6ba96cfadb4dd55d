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


def run_cli(
    *args: str, input: bytes | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [*fwbridge_argv(), *args], input=input, capture_output=True, timeout=timeout,
        env=full_env, cwd=ROOT, check=False,
    )
