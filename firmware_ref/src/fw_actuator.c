/*
 * fw_actuator.c - pack/unpack of the 8-byte actuator struct.
 */
#include "fw_actuator.h"

void fw_actuator_pack(const fw_actuator *a, uint8_t out[FW_ACTUATOR_SIZE])
{
    /* int8 -> uint8 is defined (modulo 256): two's complement on the wire. */
    out[0] = (uint8_t)a->angle;
    out[1] = a->speed;
    out[2] = a->current;
    out[3] = a->module_id;
    out[4] = a->command;
    out[5] = a->fault;
    out[6] = a->reserved_a;
    out[7] = a->reserved_b;
}

void fw_actuator_unpack(const uint8_t in[FW_ACTUATOR_SIZE], fw_actuator *a)
{
    /* uint8 -> int8 is implementation-defined above 127: convert by hand. */
    a->angle = (int8_t)(in[0] < 128u ? (int)in[0] : (int)in[0] - 256);
    a->speed = in[1];
    a->current = in[2];
    a->module_id = in[3];
    a->command = in[4];
    a->fault = in[5];
    a->reserved_a = in[6];
    a->reserved_b = in[7];
}
