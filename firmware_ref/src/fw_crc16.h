/*
 * fw_crc16.h - table-driven CRC-16 with the presets of crcmod.predefined.
 *
 * The action frame's CRC (PROTOCOLS.md 3) defaults to CRC-16/CCITT-FALSE
 * (poly 0x1021, init 0xFFFF, not reflected, xorout 0); any CRC-16 that the
 * host's crcmod knows by name can be chosen per link, with the same name.
 *
 * `init` is the shift register's value before the first byte; for a
 * reflected CRC it is the reflected register (CRC-16/RIELLO's catalogue
 * init 0xB2AA is 0x554D here). crcmod's own table stores init ^ xorout
 * instead. The tests check every preset's check value (the CRC of
 * "123456789") here and against crcmod on the host.
 */
#ifndef FW_CRC16_H
#define FW_CRC16_H

#include "fw_common.h"

typedef struct {
    const char *name; /* crcmod.predefined name, e.g. "crc-ccitt-false" */
    uint16_t poly;    /* normal (MSB-first) form, without the x^16 term */
    uint16_t init;    /* register before the first byte */
    uint16_t xorout;
    uint8_t reflect;  /* 1: bytes and register LSB-first */
    uint16_t check;   /* CRC of the ASCII bytes "123456789" */
} fw_crc16_params;

/* One selected CRC with its 512-byte table (build it once, e.g. at boot). */
typedef struct {
    fw_crc16_params params;
    uint16_t table[256];
} fw_crc16;

#define FW_CRC16_DEFAULT "crc-ccitt-false"

/* The preset table; *count receives its length. */
const fw_crc16_params *fw_crc16_presets(size_t *count);
/* Look a preset up by name; NULL when unknown. */
const fw_crc16_params *fw_crc16_find(const char *name);

/* Build the table for the given parameters. */
void fw_crc16_init(fw_crc16 *crc, const fw_crc16_params *params);
/* By preset name (NULL: the default); returns -1 for an unknown name. */
int fw_crc16_init_name(fw_crc16 *crc, const char *name);

/* Incremental use: reg = start(); reg = update(reg, ...)...; crc = finish(reg). */
uint16_t fw_crc16_start(const fw_crc16 *crc);
uint16_t fw_crc16_update(const fw_crc16 *crc, uint16_t reg, const uint8_t *data, size_t len);
uint16_t fw_crc16_finish(const fw_crc16 *crc, uint16_t reg);
/* The CRC of one buffer. */
uint16_t fw_crc16_compute(const fw_crc16 *crc, const uint8_t *data, size_t len);

#endif /* FW_CRC16_H */
