/*
 * fw_actuator.h - the 8-byte actuator struct carried in a CAN data field
 * (PROTOCOLS.md 4). Byte order follows the patent's per-module description
 * (ID, command, fault), not its summary (priority, fault, command).
 *
 *   0 angle      int8   degrees
 *   1 speed      uint8  the action groups' speed unit
 *   2 current    uint8  units of 100 mA
 *   3 module_id  uint8  also the CAN priority: lower value wins arbitration
 *   4 command    uint8  a sub-command of PROTOCOLS.md 3.2 (0x21, 0x38, 0x12, ...)
 *   5 fault      uint8  FW_FAULT_* flags
 *   6 reserved_a uint8
 *   7 reserved_b uint8
 */
#ifndef FW_ACTUATOR_H
#define FW_ACTUATOR_H

#include "fw_common.h"
#include "fw_frames_gen.h" /* generated from protocols/frames/actuator.toml */

#define FW_ACTUATOR_SIZE FWG_ACTUATOR_SIZE

/* CAN identifiers (standard 11-bit): command master -> module k, feedback
 * module k -> master. The module ID is the priority, so the lowest k wins. */
#define FW_CAN_CMD_ID(k) (0x100u + (unsigned)(k))
#define FW_CAN_FEEDBACK_ID(k) (0x200u + (unsigned)(k))

enum {
    FW_FAULT_OVER_CURRENT = 0x01,
    FW_FAULT_OVER_TEMPERATURE = 0x02,
    FW_FAULT_WATER_INGRESS = 0x04,
    FW_FAULT_HALL_SENSOR = 0x08,
    FW_FAULT_ANGLE_SENSOR = 0x10,
    FW_FAULT_STALL_TIMEOUT = 0x20,
    FW_FAULT_CAN_ERROR = 0x40,
    FW_FAULT_RESERVED = 0x80
};

/* Wire layout (uint8_t members only: no padding). */
typedef fwg_actuator_wire fw_actuator_wire;
FW_STATIC_ASSERT(FW_FAULT_CAN_ERROR == FWG_ACTUATOR_FAULT_CAN_ERROR, fault_bits_agree);

FW_STATIC_ASSERT(sizeof(fw_actuator_wire) == FW_ACTUATOR_SIZE, actuator_wire_size);
FW_STATIC_ASSERT(offsetof(fw_actuator_wire, fault) == 5, actuator_fault_offset);

typedef struct {
    int8_t angle;       /* degrees */
    uint8_t speed;
    uint8_t current;    /* x 100 mA */
    uint8_t module_id;
    uint8_t command;
    uint8_t fault;      /* FW_FAULT_* */
    uint8_t reserved_a;
    uint8_t reserved_b;
} fw_actuator;

void fw_actuator_pack(const fw_actuator *a, uint8_t out[FW_ACTUATOR_SIZE]);
void fw_actuator_unpack(const uint8_t in[FW_ACTUATOR_SIZE], fw_actuator *a);

#endif /* FW_ACTUATOR_H */
