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
    from fwbridge.protocols.descriptions.loader import (
        load_description as load_description,
    )
    from fwbridge.protocols.engine import (
        codec_for as codec_for,
    )
    from fwbridge.protocols.engine import (
        receiver_for as receiver_for,
    )
    from fwbridge.protocols.engine.builtin_records import CmdFrame as CmdFrame
    from fwbridge.protocols.engine.builtin_records import OdomFrame as OdomFrame
    from fwbridge.protocols.engine.kernels.action_receiver import (
        ActionReceived as ActionReceived,
    )
    from fwbridge.protocols.engine.kernels.action_receiver import (
        ActionReceiver as ActionReceiver,
    )
    from fwbridge.protocols.engine.kernels.action_receiver import (
        Rejected as Rejected,
    )
    from fwbridge.protocols.engine.kernels.sum8 import Sum8Codec as Sum8Codec
    from fwbridge.protocols.engine.kernels.sum8_received import (
        Sum8Received as Sum8Received,
    )
    from fwbridge.protocols.engine.kernels.sum8_receiver import (
        Sum8Receiver as Sum8Receiver,
    )
    from fwbridge.protocols.engine.kernels.sum8_receiver import (
        decode_columns as decode_columns,
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
    from fwbridge.protocols.families.action_group import (
        ActionGroup as ActionGroup,
    )
    from fwbridge.protocols.families.action_group import (
        ServoEntry as ServoEntry,
    )
    from fwbridge.protocols.families.action_group import (
        Step as Step,
    )
    from fwbridge.protocols.families.actuator import (
        ActuatorStruct as ActuatorStruct,
    )
    from fwbridge.protocols.families.actuator import (
        Fault as Fault,
    )
    from fwbridge.protocols.families.arq import (
        Answer as Answer,
    )
    from fwbridge.protocols.families.arq import (
        Delivered as Delivered,
    )
    from fwbridge.protocols.families.arq import (
        Failed as Failed,
    )
    from fwbridge.protocols.families.arq import (
        Responder as Responder,
    )
    from fwbridge.protocols.families.arq import (
        Retransmit as Retransmit,
    )
    from fwbridge.protocols.families.arq import (
        Status as Status,
    )
    from fwbridge.protocols.families.arq import (
        StopAndWaitSender as StopAndWaitSender,
    )
    from fwbridge.protocols.families.arq import (
        make_answer as make_answer,
    )
    from fwbridge.protocols.families.arq import (
        parse_answer as parse_answer,
    )
    from fwbridge.protocols.families.fish_payloads import (
        Result as Result,
    )
    from fwbridge.protocols.families.fish_payloads import (
        decode_result as decode_result,
    )
    from fwbridge.protocols.families.fish_payloads import (
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


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "ActionFrame": "fwbridge.protocols.action_frame",
    "InstructionType": "fwbridge.protocols.action_frame",
    "SubCommand": "fwbridge.protocols.action_frame",
    "ActionGroup": "fwbridge.protocols.families.action_group",
    "ServoEntry": "fwbridge.protocols.families.action_group",
    "Step": "fwbridge.protocols.families.action_group",
    "ActionReceived": "fwbridge.protocols.engine.kernels.action_receiver",
    "ActionReceiver": "fwbridge.protocols.engine.kernels.action_receiver",
    "Rejected": "fwbridge.protocols.engine.kernels.action_receiver",
    "ActuatorStruct": "fwbridge.protocols.families.actuator",
    "Fault": "fwbridge.protocols.families.actuator",
    "Answer": "fwbridge.protocols.families.arq",
    "Delivered": "fwbridge.protocols.families.arq",
    "Failed": "fwbridge.protocols.families.arq",
    "Responder": "fwbridge.protocols.families.arq",
    "Retransmit": "fwbridge.protocols.families.arq",
    "Status": "fwbridge.protocols.families.arq",
    "StopAndWaitSender": "fwbridge.protocols.families.arq",
    "make_answer": "fwbridge.protocols.families.arq",
    "parse_answer": "fwbridge.protocols.families.arq",
    "CmdFrame": "fwbridge.protocols.engine.builtin_records",
    "DEFAULT_CRC": "fwbridge.protocols.crc",
    "crc16": "fwbridge.protocols.crc",
    "crc_function": "fwbridge.protocols.crc",
    "preset_names": "fwbridge.protocols.crc",
    "load_description": "fwbridge.protocols.descriptions.loader",
    "codec_for": "fwbridge.protocols.engine",
    "receiver_for": "fwbridge.protocols.engine",
    "ArmError": "fwbridge.protocols.errors",
    "CanError": "fwbridge.protocols.errors",
    "CanFrameError": "fwbridge.protocols.errors",
    "CaptureError": "fwbridge.protocols.errors",
    "ChecksumError": "fwbridge.protocols.errors",
    "ConfigError": "fwbridge.protocols.errors",
    "Error": "fwbridge.protocols.errors",
    "FieldValueError": "fwbridge.protocols.errors",
    "FrameError": "fwbridge.protocols.errors",
    "HeaderError": "fwbridge.protocols.errors",
    "LengthError": "fwbridge.protocols.errors",
    "LifecycleError": "fwbridge.protocols.errors",
    "LinkError": "fwbridge.protocols.errors",
    "SimStopped": "fwbridge.protocols.errors",
    "StateError": "fwbridge.protocols.errors",
    "TrailerError": "fwbridge.protocols.errors",
    "Result": "fwbridge.protocols.families.fish_payloads",
    "decode_result": "fwbridge.protocols.families.fish_payloads",
    "encode_result": "fwbridge.protocols.families.fish_payloads",
    "HexTextError": "fwbridge.protocols.hextext",
    "parse_hex": "fwbridge.protocols.hextext",
    "to_hex": "fwbridge.protocols.hextext",
    "OdomFrame": "fwbridge.protocols.engine.builtin_records",
    "PACINGS": "fwbridge.protocols.pacing",
    "parse_pacing": "fwbridge.protocols.pacing",
    "PcapngPacket": "fwbridge.protocols.pcapng",
    "enhanced_packet": "fwbridge.protocols.pcapng",
    "interface_description": "fwbridge.protocols.pcapng",
    "iter_packets": "fwbridge.protocols.pcapng",
    "section_header": "fwbridge.protocols.pcapng",
    "Sum8Codec": "fwbridge.protocols.engine.kernels.sum8",
    "Sum8Received": "fwbridge.protocols.engine.kernels.sum8_received",
    "Sum8Receiver": "fwbridge.protocols.engine.kernels.sum8_receiver",
    "decode_columns": "fwbridge.protocols.engine.kernels.sum8_receiver",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
