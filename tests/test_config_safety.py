"""A config file names links, models and numbers: never a file to write or a module to import."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fwbridge.bridge.link.link_urls import allowed_schemes, check_link_url
from fwbridge.bridge.link.transports import LinkError, LinkURLError, open_link
from fwbridge.bridge.node.config import ConfigError, load_config, parse_config
from fwbridge.bridge.sim.models import ENTRY_POINT_GROUP, model_names
from tests import sim_stub
from tests.helpers import ROOT, run_cli


def one_error_line(proc: object) -> str:
    lines = proc.stderr.decode().strip().splitlines()  # type: ignore[attr-defined]
    assert proc.returncode == 2, proc.stderr  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return str(lines[0])


@pytest.mark.parametrize("scheme", ["spy", "alt", "hwgrep", "SPY"])
def test_unsafe_schemes_are_refused_by_the_config_loader(tmp_path: Path, scheme: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    url = f"{scheme}:///dev/x?file={victim}"
    for data in ({"link": {"url": url}},
                 {"use_sim": True, "link": {"url": "/dev/x"}, "sim": {"url": url}}):
        with pytest.raises(ConfigError, match=rf"'{scheme.lower()}://' URLs are not allowed"
                                              r".*one of: .*socket://"):
            parse_config(data)
    assert victim.read_text() == "precious"


def test_open_link_refuses_spy_and_leaves_the_file_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    with pytest.raises(LinkURLError, match=r"'spy://' URLs are not allowed \(it writes a trace"):
        open_link(f"spy://loop://?file={victim}")
    assert victim.read_text() == "precious"


def test_safe_schemes_pass() -> None:
    for url in ("/dev/ttyUSB0", "COM3", "socket://127.0.0.1:9", "rfc2217://h:1", "loop://",
                "sim://mecanum"):
        check_link_url(url)
    assert {"socket", "rfc2217", "loop", "sim"} <= set(allowed_schemes())
    assert not {"spy", "alt", "hwgrep"} & set(allowed_schemes())


def test_bridge_cli_refuses_a_spy_url_in_the_config(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[link]\nurl = "spy://loop://?file={victim}"\n')
    line = one_error_line(run_cli("bridge", str(cfg), "--duration", "0.3"))
    assert "link.url" in line and "'spy://' URLs are not allowed" in line and "loop://" in line
    assert victim.read_text() == "precious"


def test_sniff_cli_refuses_a_spy_url(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    line = one_error_line(run_cli("sniff", f"spy://loop://?file={victim}", "-p", "odom",
                                  "--duration", "0.2"))
    assert "'spy://' URLs are not allowed" in line
    assert victim.read_text() == "precious"


def test_handler_package_is_no_longer_a_config_key(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text('use_sim = true\n[sim]\nurl = "sim://mecanum"\nhandler_package = "os"\n')
    with pytest.raises(ConfigError, match=r"sim.handler_package: no longer accepted.*"
                                          r"fwbridge.sim_models"):
        load_config(cfg)
    line = one_error_line(run_cli("bridge", str(cfg), "--duration", "0.3"))
    assert "sim.handler_package" in line and ENTRY_POINT_GROUP in line


def test_sim_models_come_from_the_entry_point_group(tmp_path: Path) -> None:
    site = sim_stub.install_entry_point(tmp_path / "site")
    env = {"PYTHONPATH": os.pathsep.join((str(site), str(ROOT)))}
    # `fwbridge sim` offers it and runs it on a pty.
    proc = run_cli("sim", "simstub", "--duration", "0.3", env=env)
    assert proc.returncode == 0, proc.stderr
    without = run_cli("sim", "simstub", "--duration", "0.3")
    assert without.returncode == 2 and b"simstub" in without.stderr


def test_register_model_is_the_in_process_api() -> None:
    sim_stub.register()
    assert "simstub" in model_names() and "mecanum" in model_names()
    with pytest.raises(LinkError, match=r"unknown robot model .nosuch."):
        open_link("sim://nosuch")
