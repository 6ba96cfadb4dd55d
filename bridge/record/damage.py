"""Damage said once, never passed over in silence: in a capture a reader got past, and in
an output the disk refused.

A reader that recovers every frame anyway (an MCAP file whose summary is
damaged or cut, read again by scanning its data section) warns with a
:class:`CaptureWarning` naming the file and the damage; the command line
prints it as one ``warning: FILE: ...`` line on stderr. Damage that loses
frames is an error instead (:class:`~fwbridge.protocols.errors.CaptureError`).

An output whose write failed (a full disk) is noted by
:func:`output_failed` (from ``safe_output.OutputFile``, on whatever thread
wrote): :func:`failures` lists them and :data:`on_failure` is told, so the
command line stops the verb and ends it with one ``error: FILE: disk full``.
This module is small on purpose: the command line imports it at start.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["CaptureWarning", "failures", "output_failed", "warn_damage"]

#: Called (on the writing thread) when an output fails: the command line stops the verb's
#: run with it; None for a library caller, whose writes then end quietly.
on_failure: Callable[[Exception], Any] | None = None
_failures: list[Exception] = []


class CaptureWarning(UserWarning):
    """Damage in a capture that lost no frame; the message names the file."""


def warn_damage(path: str | os.PathLike[str], what: str) -> None:
    """Say ``FILE: what`` as a :class:`CaptureWarning`."""
    warnings.warn(CaptureWarning(f"{os.fspath(path)}: {what}"), stacklevel=3)


def output_failed(exc: Exception) -> None:
    """Note an output that failed (its message names the file and why)."""
    _failures.append(exc)
    if on_failure is not None:
        on_failure(exc)


def failures(*, take: bool = False) -> list[Exception]:
    """The outputs that failed (a full disk, a quota) in this process. ``take``: and
    forget them (a caller that says them itself, under another name)."""
    out = list(_failures)
    if take:
        _failures.clear()
    return out
