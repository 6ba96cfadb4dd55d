"""One factory for every frame description: its codec, its receiver, its record type.

A description (``protocols/frames/*.toml`` or a user's file) is the source
of truth of a frame family. :func:`codec_for` and :func:`receiver_for` turn
one into working parts, the built-ins included; where the description has
the shape of a hand-tuned path they pick it, otherwise the generic,
description-driven one:

================================  ==========================  ============================
shape                             codec                       receiver
================================  ==========================  ============================
``AA 55``, float32 LE, sum-8      ``Sum8Codec``               ``Sum8Receiver``
the action frame's (``FE EF``,    ``FrameCodec``              ``ActionReceiver`` (its CRC
length, CRC-16, ``FD DF``)                                    the description's)
anything else                     ``FrameCodec``              ``FixedReceiver`` or
                                                              ``LengthReceiver``
================================  ==========================  ============================

The specialisations are built from the same description (their construct
schema is the generic codec's); the tests hold them to the generic path
byte for byte. ``generic=True`` asks for the generic path whatever the shape.
:func:`record_type` (from :mod:`~fwbridge.protocols.engine.records`, below the
receivers that use the records) makes the frozen, slotted record class of a description's
fields (``OdomFrame``, ``CmdFrame``, ``ActionFrame``, ``ActuatorStruct``), its
enum and flags fields typed by the module's ``IntEnum``/``IntFlag`` held to
the description's tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from fwbridge.protocols.descriptions.builtin import BUILTIN_NAMES, builtin
from fwbridge.protocols.descriptions.loader import FrameDescription, load
from fwbridge.protocols.engine.codec import FrameCodec
from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec, fits_sum8
from fwbridge.protocols.engine.records import FloatFields, LabelType, check_labels, record_type
from fwbridge.protocols.errors import ConfigError

if TYPE_CHECKING:
    from fwbridge.protocols.engine.fixed_receiver import FixedReceiver
    from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver
    from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver
    from fwbridge.protocols.engine.length_receiver import LengthReceiver

    Receiver = Sum8Receiver[Any] | ActionReceiver | FixedReceiver | LengthReceiver

__all__ = ["FloatFields", "LabelType", "action_receiver", "check_labels", "codec_for",
           "fast_path", "receiver_for", "record_type", "sum8_codec"]

T = TypeVar("T")

#: A description, or the path of its TOML file (``str`` or ``os.PathLike``).
DescriptionLike = FrameDescription | str | os.PathLike[str]


# -- which path --------------------------------------------------------------------------
def _field_shape(desc: FrameDescription) -> list[tuple[Any, ...]]:
    return [(f.name, f.type, f.byte_order if f.type != "u8" else "", f.scale, f.offset,
             f.enum, f.flags, f.size) for f in desc.fields]


def fits_action(desc: FrameDescription) -> bool:
    """True when ``desc`` is the action frame's layout, whatever its CRC-16 and length max.

    The action receiver decodes with the action frame's own enums and
    offsets, so everything it reads is compared: header, trailer, fields
    (names, types, byte order, tables), the length field and the checksum's
    span and byte order.
    """
    ref = builtin("action")
    ck, lg = desc.checksum, desc.length
    return (desc is ref or (
        desc.header == ref.header and desc.trailer == ref.trailer
        and lg is not None and ref.length is not None
        and (lg.field, lg.counts, lg.data) == (ref.length.field, ref.length.counts, ref.length.data)
        and ck is not None and ck.algo.kind == "crc" and ck.algo.width == 16
        and ck.span == "payload" and ck.byte_order == "little"
        and _field_shape(desc) == _field_shape(ref)))


def fast_path(desc: FrameDescription) -> Literal["sum8", "action"] | None:
    """The specialisation :func:`codec_for`/:func:`receiver_for` pick for ``desc``, if any."""
    if fits_sum8(desc):
        return "sum8"
    if fits_action(desc):
        return "action"
    return None


def _description(spec: DescriptionLike) -> FrameDescription:
    """``spec`` itself, or the description in the file it names (``load``: one
    :class:`~fwbridge.protocols.descriptions.loader.DescriptionError` naming the file when it
    is missing or invalid)."""
    return spec if isinstance(spec, FrameDescription) else load(os.fspath(spec))


def _builtin_name(desc: FrameDescription) -> str | None:
    """The built-in name of ``desc`` when it is the shipped description itself."""
    return desc.name if desc.name in BUILTIN_NAMES and desc is builtin(desc.name) else None


# -- codecs ------------------------------------------------------------------------------
@cache
def _builtin_codec(name: str) -> FrameCodec[Any] | None:
    """The one codec of the built-in description ``name`` when it has a record type of
    its own (made on first use: the record types are built from the descriptions)."""
    from fwbridge.protocols.engine.builtin_records import RECORD_TYPES

    cls = RECORD_TYPES.get(name)
    if cls is None:
        return None
    desc = builtin(name)
    return Sum8Codec(desc, cls) if fits_sum8(desc) else FrameCodec(desc, cls)


def sum8_codec(desc: FrameDescription, cls: type[T]) -> Sum8Codec[T]:
    """The sum-8 specialisation for ``desc``; :class:`ConfigError` when it does not fit."""
    return Sum8Codec(desc, cls)


@overload
def codec_for(desc: DescriptionLike, cls: type[T], *, generic: bool = False) -> FrameCodec[T]:
    ...


@overload
def codec_for(desc: DescriptionLike, cls: None = None, *,
              generic: bool = False) -> FrameCodec[Any]: ...


def codec_for(desc: DescriptionLike, cls: type[Any] | None = None, *,
              generic: bool = False) -> FrameCodec[Any]:
    """The codec of ``desc``: the sum-8 specialisation when it fits, else the generic one.

    ``desc``: a description, or the path of its TOML file (``str`` or ``Path``,
    read with :func:`~fwbridge.protocols.descriptions.loader.load_description`).

    ``cls``: the class of decoded frames (default: the generic codec's named
    tuple). A built-in description with a record type of its own (odometry,
    command: :mod:`~fwbridge.protocols.engine.builtin_records`) asked for without
    ``cls`` gets the one codec made here for it, which
    :mod:`~fwbridge.protocols.odom_frame` and :mod:`~fwbridge.protocols.cmd_frame`
    offer as ``CODEC``.
    """
    desc = _description(desc)
    if generic:
        return FrameCodec(desc, cls)
    if cls is None:
        name = _builtin_name(desc)
        if name is not None:
            builtin_codec = _builtin_codec(name)
            if builtin_codec is not None:
                return builtin_codec
    if fits_sum8(desc):
        return Sum8Codec(desc, cls)
    return FrameCodec(desc, cls)


# -- receivers ---------------------------------------------------------------------------
def action_receiver(desc: FrameDescription | None = None, *, crc: str | None = None,
                    max_length: int | None = None, relaxed: bool = False,
                    alt_headers: Iterable[bytes] | None = None,
                    keep_rejects: bool = False) -> ActionReceiver:
    """The action specialisation of the receiver, with its link options.

    ``desc`` (default: the built-in action description) must have the
    action frame's shape; ``crc`` overrides its CRC-16 (a link chooses
    one), ``max_length`` lowers its length maximum. ``alt_headers``: the
    headers counted as ``header_errors`` (accepted in ``relaxed`` mode);
    by default the action frame's ``FE FF`` for the built-in description,
    none for another.
    """
    from fwbridge.protocols.action_frame import RELAXED_HEADERS
    from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver

    d = builtin("action") if desc is None else desc
    if not fits_action(d):
        raise ConfigError(f"{d.source}: not an action-frame description")
    assert d.checksum is not None and d.length is not None
    limit = d.length.max if max_length is None else max_length  # a link may allow more
    if alt_headers is None:
        alt_headers = RELAXED_HEADERS[1:] if d is builtin("action") else ()
    return ActionReceiver(crc=crc or d.checksum.algo.name, max_length=limit, relaxed=relaxed,
                          alt_headers=alt_headers, keep_rejects=keep_rejects)


@overload
def receiver_for(spec: Sum8Codec[T], *, max_length: int | None = None,
                 generic: Literal[False] = False) -> Sum8Receiver[T]: ...


@overload
def receiver_for(spec: DescriptionLike | FrameCodec[Any], *, max_length: int | None = None,
                 generic: bool = False) -> Receiver: ...


def receiver_for(spec: DescriptionLike | FrameCodec[Any], *, max_length: int | None = None,
                 generic: bool = False) -> Receiver:
    """The receiver of a description, of the path of its TOML file (as
    :func:`codec_for` takes), or of a codec :func:`codec_for` made.

    Sum-8 shape: :class:`Sum8Receiver`; the action frame's shape:
    :class:`ActionReceiver` (no alternative headers: exactly the
    description); otherwise :class:`FixedReceiver` (fixed size) or
    :class:`LengthReceiver` (length-directed). ``max_length`` lowers a
    length-directed description's maximum.
    """
    if isinstance(spec, FrameCodec):
        desc, codec = spec.desc, spec
    else:
        desc, codec = _description(spec), None
    if not generic:
        if fits_sum8(desc):
            from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

            if not isinstance(codec, Sum8Codec):
                codec = codec_for(desc, codec.cls if codec is not None else None)
            assert isinstance(codec, Sum8Codec)
            return Sum8Receiver(codec)
        if fits_action(desc):
            assert desc.length is not None
            limit = desc.length.max if max_length is None else min(max_length, desc.length.max)
            return action_receiver(desc, max_length=limit, alt_headers=())
    if codec is None or isinstance(codec, Sum8Codec):
        codec = FrameCodec(desc, codec.cls if codec is not None else None)
    if desc.length is not None:
        from fwbridge.protocols.engine.length_receiver import LengthReceiver

        return LengthReceiver(codec, max_length)
    from fwbridge.protocols.engine.fixed_receiver import FixedReceiver  # numpy: only when receiving

    return FixedReceiver(codec)
