/*
 * fw_actuator.c - pack/unpack of the 8-byte actuator struct.
 */
#include "fw_actuator.h"

/* The value structs have the same members in the same order: the generated
 * codec (fw_frames_gen.c) does the work. */
FW_STATIC_ASSERT(sizeof(fw_actuator) == sizeof(fwg_actuator_t), actuator_values_agree);

static void to_gen(const fw_actuator *a, fwg_actuator_t *v)
{
    v->angle = a->angle;
    v->speed = a->speed;
    v->current = a->current;
    v->module_id = a->module_id;
    v->command = a->command;
    v->fault = a->fault;
    v->reserved_a = a->reserved_a;
    v->reserved_b = a->reserved_b;
}

void fw_actuator_pack(const fw_actuator *a, uint8_t out[FW_ACTUATOR_SIZE])
{
    fwg_actuator_t v;
    to_gen(a, &v);
    (void)fwg_actuator_encode(&v, out, FW_ACTUATOR_SIZE);
}

void fw_actuator_unpack(const uint8_t in[FW_ACTUATOR_SIZE], fw_actuator *a)
{
    fwg_actuator_t v;
    fwg_actuator_decode(in, FW_ACTUATOR_SIZE, &v);
    a->angle = v.angle;
    a->speed = v.speed;
    a->current = v.current;
    a->module_id = v.module_id;
    a->command = v.command;
    a->fault = v.fault;
    a->reserved_a = v.reserved_a;
    a->reserved_b = v.reserved_b;
}
