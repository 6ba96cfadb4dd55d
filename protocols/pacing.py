"""One pacing vocabulary for every simulation: ``realtime`` and ``afap``.

- ``realtime``: simulated time follows the wall clock;
- ``afap``: as fast as possible; simulated time moves only when the program
  asks (deterministic runs).

The simulated serial endpoints (``sim://…?pacing=``, ``fwbridge sim
--pacing``) and the simulated CAN bus (``pacing=``) take the same words.
"""

from __future__ import annotations

from fwbridge.protocols.errors import ConfigError

__all__ = ["AFAP", "PACINGS", "REALTIME", "parse_pacing"]

REALTIME, AFAP = "realtime", "afap"
PACINGS = (REALTIME, AFAP)


def parse_pacing(value: str, where: str = "pacing") -> str:
    """``value`` as one of :data:`PACINGS`; anything else raises ConfigError."""
    word = str(value).strip().lower()
    if word not in PACINGS:
        raise ConfigError(f"{where} must be one of {', '.join(PACINGS)}, not {value!r}")
    return word
