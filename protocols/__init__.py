"""Pure protocol layer of fwbridge: schemas, codecs, receive state machines.

Sans-I/O: bytes in, events out; no serial, sockets, threads or clocks (time
comes in as an argument). See ``DESIGN.md`` for the floors above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.protocols.action_frame import (
        ActionFrame as ActionFrame,
    )
    from fwbridge.protocols.action_frame import (
        InstructionType as InstructionType,
    )
    from fwbridge.protocols.action_frame import (
        SubCommand as SubCommand,
    )
    from fwbridge.protocols.action_group import (
        ActionGroup as ActionGroup,
    )
    from fwbridge.protocols.action_group import (
        ServoEntry as ServoEntry,
    )
    from fwbridge.protocols.action_group import (
        Step as Step,
    )
    from fwbridge.protocols.action_receiver import (
        ActionReceived as ActionReceived,
    )
    from fwbridge.protocols.action_receiver import (
        ActionReceiver as ActionReceiver,
    )
    from fwbridge.protocols.action_receiver import (
        Rejected as Rejected,
    )
    from fwbridge.protocols.actuator import (
        ActuatorStruct as ActuatorStruct,
    )
    from fwbridge.protocols.actuator import (
        Fault as Fault,
    )
    from fwbridge.protocols.arq import (
        Answer as Answer,
    )
    from fwbridge.protocols.arq import (
        Delivered as Delivered,
    )
    from fwbridge.protocols.arq import (
        Failed as Failed,
    )
    from fwbridge.protocols.arq import (
        Responder as Responder,
    )
    from fwbridge.protocols.arq import (
        Retransmit as Retransmit,
    )
    from fwbridge.protocols.arq import (
        Status as Status,
    )
    from fwbridge.protocols.arq import (
        StopAndWaitSender as StopAndWaitSender,
    )
    from fwbridge.protocols.arq import (
        make_answer as make_answer,
    )
    from fwbridge.protocols.arq import (
        parse_answer as parse_answer,
    )
    from fwbridge.protocols.cmd_frame import CmdFrame as CmdFrame
    from fwbridge.protocols.crc import (
        DEFAULT_CRC as DEFAULT_CRC,
    )
    from fwbridge.protocols.crc import (
        crc16 as crc16,
    )
    from fwbridge.protocols.crc import (
        crc_function as crc_function,
    )
    from fwbridge.protocols.crc import (
        preset_names as preset_names,
    )
    from fwbridge.protocols.description import (
        load_description as load_description,
    )
    from fwbridge.protocols.engine import (
        codec_for as codec_for,
    )
    from fwbridge.protocols.engine import (
        receiver_for as receiver_for,
    )
    from fwbridge.protocols.errors import (
        ArmError as ArmError,
    )
    from fwbridge.protocols.errors import (
        CanError as CanError,
    )
    from fwbridge.protocols.errors import (
        CanFrameError as CanFrameError,
    )
    from fwbridge.protocols.errors import (
        CaptureError as CaptureError,
    )
    from fwbridge.protocols.errors import (
        ChecksumError as ChecksumError,
    )
    from fwbridge.protocols.errors import (
        ConfigError as ConfigError,
    )
    from fwbridge.protocols.errors import (
        Error as Error,
    )
    from fwbridge.protocols.errors import (
        FieldValueError as FieldValueError,
    )
    from fwbridge.protocols.errors import (
        FrameError as FrameError,
    )
    from fwbridge.protocols.errors import (
        HeaderError as HeaderError,
    )
    from fwbridge.protocols.errors import (
        LengthError as LengthError,
    )
    from fwbridge.protocols.errors import (
        LifecycleError as LifecycleError,
    )
    from fwbridge.protocols.errors import (
        LinkError as LinkError,
    )
    from fwbridge.protocols.errors import (
        SimStopped as SimStopped,
    )
    from fwbridge.protocols.errors import (
        StateError as StateError,
    )
    from fwbridge.protocols.errors import (
        TrailerError as TrailerError,
    )
    from fwbridge.protocols.fish_payloads import (
        Result as Result,
    )
    from fwbridge.protocols.fish_payloads import (
        decode_result as decode_result,
    )
    from fwbridge.protocols.fish_payloads import (
        encode_result as encode_result,
    )
    from fwbridge.protocols.hextext import (
        HexTextError as HexTextError,
    )
    from fwbridge.protocols.hextext import (
        parse_hex as parse_hex,
    )
    from fwbridge.protocols.hextext import (
        to_hex as to_hex,
    )
    from fwbridge.protocols.odom_frame import OdomFrame as OdomFrame
    from fwbridge.protocols.pacing import (
        PACINGS as PACINGS,
    )
    from fwbridge.protocols.pacing import (
        parse_pacing as parse_pacing,
    )
    from fwbridge.protocols.pcapng import (
        PcapngPacket as PcapngPacket,
    )
    from fwbridge.protocols.pcapng import (
        enhanced_packet as enhanced_packet,
    )
    from fwbridge.protocols.pcapng import (
        interface_description as interface_description,
    )
    from fwbridge.protocols.pcapng import (
        iter_packets as iter_packets,
    )
    from fwbridge.protocols.pcapng import (
        section_header as section_header,
    )
    from fwbridge.protocols.sum8 import Sum8Codec as Sum8Codec
    from fwbridge.protocols.sum8_receiver import (
        Sum8Received as Sum8Received,
    )
    from fwbridge.protocols.sum8_receiver import (
        Sum8Receiver as Sum8Receiver,
    )
    from fwbridge.protocols.sum8_receiver import (
        decode_columns as decode_columns,
    )


__getattr__, __dir__ = lazy_exports(__name__)
