"""Robot config files and the ros2_control lifecycle on a real pty."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fwbridge.bridge.link.transports import LinkNotFound, PtyPair
from fwbridge.bridge.node.base_node import ZERO_FRAME
from fwbridge.bridge.node.config import ConfigError, load_config, parse_config
from fwbridge.bridge.node.hardware import (
    HardwareInterface,
    LifecycleError,
    LifecycleState,
    LinkHardware,
    load_calibration,
)

FULL = """
use_sim = false
calibration = "calib.json"

[link]
url = "/dev/ttyUSB0"
baud = 57600
protocol = "odom-cmd"
exclusive = false

[sim]
url = "sim://mecanum?seed=3"

[control]
rate_hz = 50

[watchdog]
enabled = true
cmd_timeout = 0.25
garbage_timeout = 0

[reconnect]
min_delay = 0.2
max_delay = 1.0
attempts = 5
"""


def write(tmp_path: Path, text: str, name: str = "robot.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_full_config_is_read(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, FULL))
    assert cfg.link_url == "/dev/ttyUSB0" and cfg.baud == 57600 and not cfg.exclusive
    assert cfg.rate_hz == 50.0 and cfg.period == pytest.approx(0.02)
    assert (cfg.cmd_timeout, cfg.garbage_timeout) == (0.25, 0)
    assert (cfg.reconnect_min_delay, cfg.reconnect_max_delay, cfg.reconnect_attempts) == (
        0.2, 1.0, 5,
    )
    assert cfg.calibration == tmp_path / "calib.json"  # relative to the config file


def test_defaults_match_the_design(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, '[link]\nurl = "/dev/ttyACM0"\n'))
    assert (cfg.rate_hz, cfg.cmd_timeout, cfg.baud, cfg.watchdog) == (100.0, 0.5, 115200, True)
    assert cfg.protocol == "odom-cmd" and cfg.use_sim is False and cfg.calibration is None


def test_use_sim_swaps_only_the_link_url(tmp_path: Path) -> None:
    real = load_config(write(tmp_path, FULL))
    sim = load_config(write(tmp_path, FULL.replace("use_sim = false", "use_sim = true"), "s.toml"))
    assert sim.link_url == "sim://mecanum?seed=3"
    differing = {
        f.name for f in dataclasses.fields(real) if getattr(real, f.name) != getattr(sim, f.name)
    }
    assert differing == {"use_sim", "source"}
    # the command-line override gives the same result as editing the file
    overridden = load_config(write(tmp_path, FULL), use_sim=True)
    assert dataclasses.replace(overridden, source="x") == dataclasses.replace(sim, source="x")


def test_environment_variables_and_home_expand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_PORT", "/dev/ttyUSB3")
    cfg = parse_config({"link": {"url": "$ROBOT_PORT"}, "calibration": "~/calib.json"})
    assert cfg.link_url == "/dev/ttyUSB3"
    assert cfg.calibration is not None and "~" not in str(cfg.calibration)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[link]\nurl = "/dev/x"\nbaud = "fast"\n', "link.baud: must be an integer"),
        ('[link]\nurl = "/dev/x"\n[control]\nrate_hz = 0\n', "control.rate_hz: must be > 0"),
        ('[link]\nurl = "/dev/x"\n[watchdog]\ncmd_timeout = -1\n', "watchdog.cmd_timeout"),
        ('[link]\nurl = "/dev/x"\nbuad = 9600\n', "link.buad: unknown key (known here: baud"),
        ('[link]\nurl = "/dev/x"\n[controll]\nrate_hz = 5\n', "controll: unknown section"),
        ('[link]\nurl = "/dev/x"\nprotocol = "xml"\n', "link.protocol: unknown protocol 'xml'"),
        ("use_sim = true\n[link]\nurl = '/dev/x'\n", "use_sim = true needs sim.url"),
        ("[control]\nrate_hz = 10\n", "link.url is required"),
        ("use_sim = 'yes'\n", "use_sim: must be true or false"),
        ('[link]\nurl = "/dev/x"\n[reconnect]\nmin_delay = 3.0\n', "must not exceed"),
        ("[link\nurl=", "invalid TOML"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


# -- calibration ----------------------------------------------------------------------
def test_calibration_file(tmp_path: Path) -> None:
    path = tmp_path / "calib.json"
    path.write_text(json.dumps({"vx_scale": 1.02, "yaw_offset_deg": -1.5}))
    cal = load_calibration(path)
    assert (cal.vx_scale, cal.vy_scale, cal.yaw_offset_deg) == (1.02, 1.0, -1.5)
    path.write_text(json.dumps({"vx_scael": 1.0}))
    with pytest.raises(ConfigError, match="unknown key 'vx_scael'"):
        load_calibration(path)
    with pytest.raises(ConfigError, match="calibration file not found"):
        load_calibration(tmp_path / "missing.json")


# -- the lifecycle ----------------------------------------------------------------------
class Recorder(HardwareInterface):
    def __init__(self, fail_on: str = "") -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail_on = fail_on

    def _hook(self, name: str) -> None:
        if name == self.fail_on:
            raise OSError(f"{name} failed")
        self.calls.append(name)

    def on_configure(self) -> None:
        self._hook("configure")

    def on_activate(self) -> None:
        self._hook("activate")

    def on_deactivate(self) -> None:
        self._hook("deactivate")

    def on_cleanup(self) -> None:
        self._hook("cleanup")


def test_lifecycle_walks_the_ros2_control_states() -> None:
    hw = Recorder()
    seen = [hw.state]
    for step in (hw.configure, hw.activate):
        step()
        seen.append(hw.state)
    S = LifecycleState
    assert seen == [S.UNCONFIGURED, S.INACTIVE, S.ACTIVE]
    hw.require_active("write")
    hw.deactivate()
    seen.append(hw.state)
    hw.activate()
    hw.shutdown()  # from active: deactivate, cleanup, finalized
    seen.append(hw.state)
    assert seen[3:] == [S.INACTIVE, S.FINALIZED]
    assert hw.calls == ["configure", "activate", "deactivate", "activate", "deactivate", "cleanup"]


@pytest.mark.parametrize(
    ("steps", "bad", "needle"),
    [
        ([], "activate", "cannot activate: hardware is unconfigured (configure first)"),
        ([], "deactivate", "cannot deactivate: hardware is unconfigured"),
        (["configure"], "configure", "cannot configure: hardware is inactive"),
        (["configure", "activate"], "cleanup", "cannot cleanup: hardware is active (deactivate"),
        (["configure", "activate"], "configure", "cannot configure: hardware is active"),
    ],
)
def test_illegal_transitions_are_clear_errors(steps: list[str], bad: str, needle: str) -> None:
    hw = Recorder()
    for step in steps:
        getattr(hw, step)()
    state = hw.state
    with pytest.raises(LifecycleError) as info:
        getattr(hw, bad)()
    assert needle in str(info.value)
    assert hw.state is state


def test_read_write_only_while_active() -> None:
    hw = Recorder()
    hw.configure()
    with pytest.raises(LifecycleError, match="cannot write: hardware is inactive"):
        hw.require_active("write")


def test_a_failing_hook_goes_through_on_error() -> None:
    """ros2_control: a failing transition -> ErrorProcessing -> on_error decides."""
    hw = Recorder(fail_on="activate")
    hw.configure()
    with pytest.raises(OSError, match="activate failed"):
        hw.activate()
    assert hw.state is LifecycleState.UNCONFIGURED  # on_error's default: recovered
    hw.configure()  # and it can start again

    class Fatal(Recorder):
        def on_error(self, transition: str, exc: BaseException) -> bool:
            self.calls.append(f"error:{transition}:{self.state.value}")
            return False

    fatal = Fatal(fail_on="configure")
    with pytest.raises(OSError, match="configure failed"):
        fatal.configure()
    assert fatal.state is LifecycleState.FINALIZED
    assert fatal.calls[-1] == "error:configure:error-processing"


def _active_link_hardware(pair: PtyPair, tap: object = None) -> LinkHardware:
    hw = LinkHardware(parse_config({"link": {"url": pair.path}}), reset_frame=ZERO_FRAME,
                      safe_stop_frame=ZERO_FRAME)
    hw.configure()
    hw.activate()
    assert pair.read(timeout=1.0) == ZERO_FRAME
    hw.tap = tap  # type: ignore[assignment]
    return hw


def test_shutdown_releases_the_link_when_deactivate_fails() -> None:
    def full_disk(direction: str, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    with PtyPair() as pair:
        hw = _active_link_hardware(pair, tap=full_disk)
        with pytest.raises(OSError, match="No space left"):
            hw.shutdown()
        assert pair.read(timeout=1.0) == ZERO_FRAME  # the safe stop still went out
        assert hw.state is LifecycleState.FINALIZED
        assert not hw.connected  # the link was released, not left open


def test_send_only_while_active_but_the_safe_stop_goes_out() -> None:
    with PtyPair() as pair:
        hw = _active_link_hardware(pair)
        hw.send(b"\x01")
        assert pair.read(timeout=1.0) == b"\x01"
        hw.deactivate()
        assert pair.read(timeout=1.0) == ZERO_FRAME  # deactivate's own frame is allowed
        with pytest.raises(LifecycleError, match="cannot send: hardware is inactive"):
            hw.send(b"\x02")
        assert pair.read(timeout=0.1) == b""
        hw.shutdown()
        with pytest.raises(LifecycleError, match="cannot send: hardware is finalized"):
            hw.send(b"\x03")


def test_link_hardware_on_a_pty(tmp_path: Path) -> None:
    with PtyPair() as pair:
        cal = tmp_path / "calib.json"
        cal.write_text('{"wz_scale": 0.5}')
        cfg = parse_config({"link": {"url": pair.path}, "calibration": str(cal)})
        hw = LinkHardware(cfg, reset_frame=ZERO_FRAME, safe_stop_frame=ZERO_FRAME)
        with pytest.raises(LifecycleError, match="configure first"):
            _ = hw.link
        hw.configure()  # opens the port, loads the calibration
        assert hw.connected and hw.calibration.wz_scale == 0.5
        assert pair.read(timeout=0.05) == b""  # configuring sends nothing
        hw.activate()  # reset state: zero velocity
        assert pair.read(timeout=1.0) == ZERO_FRAME
        hw.send(b"\xaa\x55xyz")
        assert pair.read(timeout=1.0) == b"\xaa\x55xyz"
        hw.deactivate()  # safe stop
        assert pair.read(timeout=1.0) == ZERO_FRAME
        hw.cleanup()
        assert not hw.connected


def test_configure_failure_leaves_hardware_unconfigured(tmp_path: Path) -> None:
    cfg = parse_config({"link": {"url": str(tmp_path / "ttyNOPE")}})
    hw = LinkHardware(cfg)
    with pytest.raises(LinkNotFound, match="no such device"):
        hw.configure()
    assert hw.state is LifecycleState.UNCONFIGURED
