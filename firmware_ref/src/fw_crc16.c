/*
 * fw_crc16.c - table-driven CRC-16, crcmod's predefined CRC-16 presets.
 */
#include "fw_crc16.h"

static const fw_crc16_params presets[] = {
    /* name, poly, init (register), xorout, reflect, check("123456789") */
    {"crc-ccitt-false", 0x1021u, 0xFFFFu, 0x0000u, 0, 0x29B1u}, /* the default */
    {"crc-16", 0x8005u, 0x0000u, 0x0000u, 1, 0xBB3Du},
    {"crc-16-buypass", 0x8005u, 0x0000u, 0x0000u, 0, 0xFEE8u},
    {"crc-16-dds-110", 0x8005u, 0x800Du, 0x0000u, 0, 0x9ECFu},
    {"crc-16-dect", 0x0589u, 0x0000u, 0x0001u, 0, 0x007Eu},
    {"crc-16-dnp", 0x3D65u, 0x0000u, 0xFFFFu, 1, 0xEA82u},
    {"crc-16-en-13757", 0x3D65u, 0x0000u, 0xFFFFu, 0, 0xC2B7u},
    {"crc-16-genibus", 0x1021u, 0xFFFFu, 0xFFFFu, 0, 0xD64Eu},
    {"crc-16-maxim", 0x8005u, 0x0000u, 0xFFFFu, 1, 0x44C2u},
    {"crc-16-mcrf4xx", 0x1021u, 0xFFFFu, 0x0000u, 1, 0x6F91u},
    {"crc-16-riello", 0x1021u, 0x554Du, 0x0000u, 1, 0x63D0u},
    {"crc-16-t10-dif", 0x8BB7u, 0x0000u, 0x0000u, 0, 0xD0DBu},
    {"crc-16-teledisk", 0xA097u, 0x0000u, 0x0000u, 0, 0x0FB3u},
    {"crc-16-usb", 0x8005u, 0xFFFFu, 0xFFFFu, 1, 0xB4C8u},
    {"x-25", 0x1021u, 0xFFFFu, 0xFFFFu, 1, 0x906Eu},
    {"xmodem", 0x1021u, 0x0000u, 0x0000u, 0, 0x31C3u},
    {"modbus", 0x8005u, 0xFFFFu, 0x0000u, 1, 0x4B37u},
    {"kermit", 0x1021u, 0x0000u, 0x0000u, 1, 0x2189u},
    {"crc-aug-ccitt", 0x1021u, 0x1D0Fu, 0x0000u, 0, 0xE5CCu},
};

const fw_crc16_params *fw_crc16_presets(size_t *count)
{
    *count = sizeof presets / sizeof presets[0];
    return presets;
}

const fw_crc16_params *fw_crc16_find(const char *name)
{
    size_t i;
    if (name == NULL) {
        return &presets[0];
    }
    for (i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            return &presets[i];
        }
    }
    return NULL;
}

static uint16_t reflect16(uint16_t v)
{
    uint16_t r = 0;
    int i;
    for (i = 0; i < 16; i++) {
        r = (uint16_t)((r << 1) | (v & 1u));
        v >>= 1;
    }
    return r;
}

void fw_crc16_init(fw_crc16 *crc, const fw_crc16_params *params)
{
    unsigned i;
    int bit;
    crc->params = *params;
    if (params->reflect) {
        const uint16_t rpoly = reflect16(params->poly);
        for (i = 0; i < 256; i++) {
            uint16_t r = (uint16_t)i;
            for (bit = 0; bit < 8; bit++) {
                r = (uint16_t)((r & 1u) ? (r >> 1) ^ rpoly : r >> 1);
            }
            crc->table[i] = r;
        }
    } else {
        for (i = 0; i < 256; i++) {
            uint16_t r = (uint16_t)(i << 8);
            for (bit = 0; bit < 8; bit++) {
                r = (uint16_t)((r & 0x8000u) ? (r << 1) ^ params->poly : r << 1);
            }
            crc->table[i] = r;
        }
    }
}

int fw_crc16_init_name(fw_crc16 *crc, const char *name)
{
    const fw_crc16_params *p = fw_crc16_find(name);
    if (p == NULL) {
        return -1;
    }
    fw_crc16_init(crc, p);
    return 0;
}

uint16_t fw_crc16_start(const fw_crc16 *crc)
{
    return crc->params.init;
}

uint16_t fw_crc16_update(const fw_crc16 *crc, uint16_t reg, const uint8_t *data, size_t len)
{
    size_t i;
    if (crc->params.reflect) {
        for (i = 0; i < len; i++) {
            reg = (uint16_t)((reg >> 8) ^ crc->table[(reg ^ data[i]) & 0xFFu]);
        }
    } else {
        for (i = 0; i < len; i++) {
            reg = (uint16_t)((reg << 8) ^ crc->table[((reg >> 8) ^ data[i]) & 0xFFu]);
        }
    }
    return reg;
}

uint16_t fw_crc16_finish(const fw_crc16 *crc, uint16_t reg)
{
    return (uint16_t)(reg ^ crc->params.xorout);
}

uint16_t fw_crc16_compute(const fw_crc16 *crc, const uint8_t *data, size_t len)
{
    return fw_crc16_finish(crc, fw_crc16_update(crc, fw_crc16_start(crc), data, len));
}
