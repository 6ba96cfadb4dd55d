"""One pacing vocabulary for every simulation: ``realtime`` and ``afap``.

- ``realtime``: simulated time follows the wall clock;
- ``afap``: as fast as possible; simulated time moves only when the program
  asks (deterministic runs).

The simulated serial endpoints (``sim://…?pacing=``, ``fwbridge sim
--pacing``) and the simulated CAN bus (``pacing=``) take the same words. The
old spelling ``fast`` is still read, with a :class:`FutureWarning` (shown on
stderr by default).
"""

from __future__ import annotations

import warnings

from fwbridge.protocols.errors import ConfigError

__all__ = ["AFAP", "PACINGS", "REALTIME", "parse_pacing"]

REALTIME, AFAP = "realtime", "afap"
PACINGS = (REALTIME, AFAP)
#: Old spellings -> the word that replaced them.
DEPRECATED = {"fast": AFAP}


def parse_pacing(value: str, where: str = "pacing") -> str:
    """``value`` as one of :data:`PACINGS`: an old spelling warns, others raise ConfigError."""
    word = str(value).strip().lower()
    if word in DEPRECATED:
        new = DEPRECATED[word]
        warnings.warn(f"{where}={word} is deprecated; use {where}={new}", FutureWarning,
                      stacklevel=2)
        return new
    if word not in PACINGS:
        raise ConfigError(f"{where} must be one of {', '.join(PACINGS)}, not {value!r}")
    return word
