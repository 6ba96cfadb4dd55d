"""A channel per frame description: its frames as JSON, with a schema from the description.

A recording (MCAP, the live Foxglove view) of a link whose robot file names
more descriptions (``link.frames_in``) carries each on ``/fwbridge/frames/NAME``:
one JSON object a frame, its fields by name, under a JSON schema made from
the description (each field's type, unit and doc; an enum's or a flag
field's labels in its description), so Foxglove plots any field and a
reader knows what each number is.

A value JSON cannot hold (NaN, an infinity) is left out of its message: the
schema lists every field, none is required, and Foxglove's parser takes one
type per field (``["number", "null"]`` is refused by the app).
"""

from __future__ import annotations

import enum
import json
import math
from typing import Any

from fwbridge.bridge.record.channel_streams import ChannelSpec
from fwbridge.protocols.descriptions.model import FieldSpec, FrameDescription

__all__ = ["TOPIC_PREFIX", "frame_message", "frame_spec"]

TOPIC_PREFIX = "/fwbridge/frames/"


def _field_schema(f: FieldSpec) -> dict[str, Any]:
    kind = {"bytes": "string", "float": "number"}.get(f.info.kind, "integer")
    if f.scaled:
        kind = "number"
    notes = [f.doc] if f.doc else []
    if f.unit:
        notes.append(f"unit: {f.unit}")
    if f.enum:
        notes.append("values: " + ", ".join(f"{k} {v}" for k, v in f.enum))
    if f.flags:
        notes.append("flags: " + ", ".join(f"{k:#x} {v}" for k, v in f.flags))
    if f.type == "bytes":
        notes.append("bytes as hex")
    out: dict[str, Any] = {"type": kind}
    if notes:
        out["description"] = "; ".join(notes)
    return out


def frame_spec(desc: FrameDescription, namespace: str = "") -> ChannelSpec:
    """The channel of ``desc``'s frames (``namespace`` prefixes the topic)."""
    schema = {"type": "object", "title": desc.doc or f"{desc.name} frames",
              "properties": {f.name: _field_schema(f) for f in desc.fields}}
    topic = namespace.rstrip("/") + TOPIC_PREFIX + desc.name
    return ChannelSpec(topic, f"fwbridge.frames.{desc.name}", "jsonschema", json.dumps(schema),
                       "json")


def frame_message(frame: Any, desc: FrameDescription) -> bytes:
    """One frame as the JSON its channel's schema describes."""
    out: dict[str, Any] = {}
    for f in desc.fields:
        value = getattr(frame, f.name, None)
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, (bytes, bytearray)):
            value = value.hex(" ")
        elif (isinstance(value, float) and not math.isfinite(value)) or value is None:
            continue
        out[f.name] = value
    return json.dumps(out, separators=(",", ":")).encode()
