"""Kept for older imports: the helpers live in :mod:`tests.helpers`."""

from tests.helpers import (
    Arrival,
    FirmwarePeer,
    LagMeter,
    ManualClock,
    Recorder,
    config,
    pair,
    peer,
    run_verb,
    spawn_verb,
)

__all__ = ["Arrival", "FirmwarePeer", "LagMeter", "ManualClock", "Recorder", "config", "pair",
           "peer", "run_verb", "spawn_verb"]
