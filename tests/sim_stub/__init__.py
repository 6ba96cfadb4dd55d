"""A stand-in simulated robot for the tests, provided as sim model ``simstub``.

Tests in this process call :func:`register`; a CLI subprocess finds it
through the ``fwbridge.sim_models`` entry-point group of a distribution
that :func:`install_entry_point` writes into a temporary directory (put it
on the subprocess's ``PYTHONPATH``), as an installed plugin package would.
"""

from __future__ import annotations

from pathlib import Path

from tests.sim_stub.model import SimStub

__all__ = ["SimStub", "install_entry_point", "register"]


def register() -> None:
    """Make ``sim://simstub`` available in this process (and offer ``sim://`` in it)."""
    from fwbridge.bridge.sim.models import register_model
    from fwbridge.bridge.sim.scheme import register as offer_sim

    register_model("simstub", SimStub)
    offer_sim()


def install_entry_point(site: Path) -> Path:
    """A minimal installed distribution in ``site`` declaring ``simstub`` as a sim model."""
    info = site / "fwbridge_simstub-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fwbridge-simstub\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[fwbridge.sim_models]\nsimstub = tests.sim_stub.model:SimStub\n")
    return site
