"""No old spelling is kept: the moved modules and names, the old pacing words and
keywords are gone, and using one is the ordinary error for an unknown name. (The
hidden option aliases of ``cli_verbs.common.Renamed`` are kept on purpose.)"""

from __future__ import annotations

import importlib

import pytest
import serial

import fwbridge.can_bus
import fwbridge.lazy
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.scheme import register as offer_sim
from fwbridge.cli_verbs.sim import sim_cmd
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.pacing import parse_pacing


@pytest.mark.parametrize("old", ["fwbridge.bridge.arm", "fwbridge.bridge.transports",
                                 "fwbridge.bridge.topics"])
def test_a_moved_module_has_no_alias(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


@pytest.mark.parametrize("name", [
    "PcapngWriter", "PcapngReader", "read_pcap", "open_writer", "read_messages",  # record room
    "MainController", "ActuatorModule", "NodeRunner", "start_modules",  # the floor above
])
def test_the_can_package_answers_only_for_its_own_floor(name: str) -> None:
    assert not hasattr(fwbridge.can_bus, name)
    assert name not in dir(fwbridge.can_bus) and name not in fwbridge.can_bus.__all__


def test_the_lazy_module_keeps_no_alias_machinery() -> None:
    assert fwbridge.lazy.__all__ == ["lazy_exports", "one_name"]


def test_the_old_pacing_spellings_are_refused() -> None:
    with pytest.raises(ConfigError, match="pacing must be one of realtime, afap, not 'fast'"):
        parse_pacing("fast")
    with pytest.raises(TypeError, match="pace"):
        SimEndpoint("echo", pace="fast")  # type: ignore[call-arg]
    offer_sim()
    with pytest.raises(serial.SerialException, match="unknown option 'pace'"):
        serial.serial_for_url("sim://echo?pace=fast")
    assert "--pace" not in {opt for p in sim_cmd.params for opt in p.opts}
