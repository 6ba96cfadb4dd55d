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
byte for byte, with the length-directed shape's options too (the
description's alternative headers, relaxed mode, kept rejections, a link's
CRC and length maximum: :func:`receiver_for` passes them to whichever
receiver it picks). ``generic=True`` asks for the generic path whatever the
shape.
:func:`record_type` (from :mod:`~fwbridge.protocols.engine.records`, below the
receivers that use the records) makes the frozen, slotted record class of a description's
fields (``OdomFrame``, ``CmdFrame``, ``ActionFrame``, ``ActuatorStruct``), its
enum and flags fields typed by the module's ``IntEnum``/``IntFlag`` held to
the description's tables.
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from fwbridge.protocols.checksums import algorithm, algorithm_names
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
def _with_crc(desc: FrameDescription, crc: str) -> FrameDescription:
    """``desc`` with the check a link chose, ``crc``: an algorithm of
    :mod:`~fwbridge.protocols.checksums` as wide as the description's (the frame's layout
    stays the same), a CRC in place of a CRC."""
    ck = desc.checksum
    if ck is None:
        raise ConfigError(f"{desc.name}: crc={crc!r} given, but the frame has no check")
    width, kind = 8 * ck.size, "crc" if ck.algo.kind == "crc" else None
    try:
        algo = algorithm(crc) if isinstance(crc, str) else None
    except ConfigError:  # the choices below are the ones that fit
        algo = None
    if algo is None or algo.size != ck.size or (kind is not None and algo.kind != kind):
        what = f"CRC-{width} preset" if kind else f"{width}-bit check"
        raise ConfigError(f"unknown {what} {crc!r} for {desc.name}; choose one of: "
                          f"{', '.join(algorithm_names(width=width, kind=kind))}")
    return replace(desc, checksum=replace(ck, algorithm=algo.name))


def action_receiver(*, crc: str | None = None, max_length: int | None = None,
                    relaxed: bool = False, keep_rejects: bool = False) -> ActionReceiver:
    """The built-in action description's receiver with a link's options (what
    :func:`receiver_for` gives it): the action kernel, with the description's ``FE FF``."""
    from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver

    rx = receiver_for(builtin("action"), crc=crc, max_length=max_length, relaxed=relaxed,
                      keep_rejects=keep_rejects)
    assert isinstance(rx, ActionReceiver)
    return rx


@overload
def receiver_for(spec: Sum8Codec[T], *, relaxed: Literal[False] = False,
                 keep_rejects: Literal[False] = False, crc: None = None,
                 max_length: int | None = None,
                 generic: Literal[False] = False) -> Sum8Receiver[T]: ...


@overload
def receiver_for(spec: DescriptionLike | FrameCodec[Any], *, relaxed: bool = False,
                 keep_rejects: bool = False, crc: str | None = None,
                 max_length: int | None = None, generic: bool = False) -> Receiver: ...


def receiver_for(spec: DescriptionLike | FrameCodec[Any], *, relaxed: bool = False,
                 keep_rejects: bool = False, crc: str | None = None,
                 max_length: int | None = None, generic: bool = False) -> Receiver:
    """The receiver of a description, of the path of its TOML file (as
    :func:`codec_for` takes), or of a codec :func:`codec_for` made.

    Sum-8 shape: :class:`Sum8Receiver`; the action frame's shape:
    :class:`ActionReceiver`; otherwise :class:`FixedReceiver` (fixed size) or
    :class:`LengthReceiver` (length-directed). The length-directed shape takes
    a link's options, and its kernel the same: ``relaxed`` (accept the
    description's alternative headers, skip the check), ``keep_rejects``
    (keep the rejected candidates), ``crc`` (the link's check, in place of the
    description's, as wide) and ``max_length`` (the largest length value, in
    place of the description's maximum). A fixed-size description takes none
    of them (:class:`ConfigError`).
    """
    if isinstance(spec, FrameCodec):
        desc, codec = spec.desc, spec
    else:
        desc, codec = _description(spec), None
    if desc.length is None:
        given = [k for k, v in (("relaxed", relaxed), ("keep_rejects", keep_rejects),
                                ("crc", crc), ("max_length", max_length))
                 if v is not None and v is not False]
        if given:
            raise ConfigError(f"{desc.name}: {given[0]} is an option of length-directed "
                              "frames; this frame has a fixed size")
    if crc is not None:
        desc = _with_crc(desc, crc)
        codec = FrameCodec(desc, codec.cls if codec is not None else None)
    if not generic:
        if fits_sum8(desc):
            from fwbridge.protocols.engine.kernels.sum8_receiver import Sum8Receiver

            if not isinstance(codec, Sum8Codec):
                codec = codec_for(desc, codec.cls if codec is not None else None)
            assert isinstance(codec, Sum8Codec)
            return Sum8Receiver(codec)
        if fits_action(desc):
            from fwbridge.protocols.engine.kernels.action_receiver import ActionReceiver

            assert desc.checksum is not None and desc.length is not None
            return ActionReceiver(crc=desc.checksum.algo.name,
                                  max_length=desc.length.max if max_length is None else max_length,
                                  relaxed=relaxed, alt_headers=desc.alt_headers,
                                  keep_rejects=keep_rejects)
    if codec is None or isinstance(codec, Sum8Codec):
        codec = FrameCodec(desc, codec.cls if codec is not None else None)
    if desc.length is not None:
        from fwbridge.protocols.engine.length_receiver import LengthReceiver

        return LengthReceiver(codec, max_length, relaxed=relaxed, keep_rejects=keep_rejects)
    from fwbridge.protocols.engine.fixed_receiver import FixedReceiver  # numpy: only when receiving

    return FixedReceiver(codec)
