"""Description texts and the checks of their refusal, shared by the tests of hostile
descriptions (at load and through ``fwbridge gen``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fwbridge.protocols.descriptions.loader import DescriptionError, loads
from tests.helpers import run_cli

#: A small frame; ``{frame}`` and ``{field}`` take extra keys of the frame and its field.
IMU = """\
[frame]
name = "imu"
header = "5A A5"
{frame}
[[field]]
name = "ax"
type = "i16"
{field}
[checksum]
algorithm = "sum8"
"""


def imu(frame: str = "", field: str = "") -> str:
    return IMU.format(frame=frame, field=field)


def refused(text: str, source: str = "x.toml") -> str:
    """The error of loading ``text`` (it must be refused)."""
    with pytest.raises(DescriptionError) as info:
        loads(text, source)
    return str(info.value)


def description_files(tmp_path: Path, *texts: str) -> list[str]:
    paths = []
    for k, text in enumerate(texts):
        p = tmp_path / f"d{k}.toml"
        p.write_text(text, encoding="utf-8")
        paths.append(str(p))
    return paths


def one_error(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The one ``error:`` line of a CLI run that exited 2."""
    err = proc.stderr.decode()
    assert proc.returncode == 2, (proc.returncode, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def gen_error(tmp_path: Path, verb: str, *texts: str) -> str:
    """``fwbridge gen VERB`` on description files: one error line, exit 2, nothing written."""
    out = tmp_path / {"wireshark": "out.lua", "dbc": "out.dbc"}.get(verb, "c")
    err = one_error(run_cli("gen", verb, *description_files(tmp_path, *texts), "-o", str(out)))
    assert not out.exists()
    return err
