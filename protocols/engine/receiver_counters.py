"""The one vocabulary of the receivers' counters, and each receiver shape's record of them.

Every receiver counts with names from :data:`RECEIVER_COUNTERS`, each with
one meaning whatever the frame's shape; a receiver keeps the counters its
shape can count (a frame without a trailer has no ``trailer_errors``). The
specialisations count as the shape they belong to: the sum-8 receiver as the
fixed-size one without a trailer, the action receiver as the length-directed
one (its record, alternative headers included). The C receivers ``fwbridge gen c`` writes
count with the fixed-size and length-directed records here, in their order
(:func:`counter_names`), and firmware_ref's with the same names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from fwbridge.protocols.counters import Counters

__all__ = ["RECEIVER_COUNTERS", "FixedReceiverStats", "LengthReceiverStats",
           "Sum8ReceiverStats", "counter_names"]

#: Every receiver counter, and what it counts.
RECEIVER_COUNTERS: dict[str, str] = {
    "frames": "frames given to the caller",
    "bytes": "bytes fed; each is in a frame, discarded, or still pending",
    "discarded": "bytes in no frame (noise, damaged frames, false headers)",
    "resyncs": "frames found after discarded bytes (the stream was re-found)",
    "header_errors": "frames under an alternative header refused (strict mode)",
    "length_errors": "length fields over the description's maximum",
    "checksum_errors": "candidates whose checksum or CRC is wrong",
    "trailer_errors": "candidates whose trailer is wrong",
    "truncated": "candidates still incomplete when the stream ended (finish())",
    "nonfinite": "frames with a NaN or infinite float (given, and counted)",
    "overlapping": "frames found overlapping a frame already taken (both given)",
    "relaxed_accepts": "frames taken in relaxed mode despite an alternative header or a wrong "
                       "checksum",
}


def counter_names(record: type[Counters] | Counters) -> tuple[str, ...]:
    """The field names of a counter record, in order."""
    return tuple(f.name for f in fields(record))


@dataclass(slots=True)
class FixedReceiverStats(Counters):
    """The fixed-size shape's counters (``FixedReceiver``, ``ColumnsReceiver``)."""

    frames: int = 0
    bytes: int = 0
    checksum_errors: int = 0
    trailer_errors: int = 0
    discarded: int = 0
    resyncs: int = 0
    nonfinite: int = 0
    overlapping: int = 0


@dataclass(slots=True)
class LengthReceiverStats(Counters):
    """The length-directed shape's counters (``LengthReceiver`` and the action kernel).

    ``header_errors`` counts the frames under a description's alternative headers that strict
    mode refuses (zero when it names none), ``relaxed_accepts`` the frames relaxed mode takes
    with a defect (zero in strict mode); the other rejections count candidates under its
    header only.
    """

    frames: int = 0
    bytes: int = 0
    discarded: int = 0
    resyncs: int = 0
    header_errors: int = 0
    length_errors: int = 0
    trailer_errors: int = 0
    checksum_errors: int = 0
    truncated: int = 0
    relaxed_accepts: int = 0


@dataclass(slots=True)
class Sum8ReceiverStats(Counters):
    """The sum-8 specialisation's: the fixed-size shape's but ``trailer_errors`` (no trailer)."""

    frames: int = 0
    bytes: int = 0
    checksum_errors: int = 0
    discarded: int = 0
    resyncs: int = 0
    nonfinite: int = 0
    overlapping: int = 0

