/*
 * fw_crc_ccitt.h - the link's CRC as a constant, for a board that keeps the
 * table in flash instead of building it into RAM with fw_crc16_init. The unit
 * tests (tests/test_main.c) check it against the table fw_crc16_init builds.
 */
#ifndef FW_CRC_CCITT_H
#define FW_CRC_CCITT_H

#include "fw_crc16.h"

/* The link's CRC (crc-ccitt-false, FW_CRC16_DEFAULT) as a constant: its 512-byte table
 * lives in flash, not RAM (fw_crc16_init would build the same table at boot). The table is
 * linear in the byte (t[a ^ b] = t[a] ^ t[b]), so each entry is the XOR of the entries of
 * its set bits; CRC_B(k) is the entry of byte 1 << k, the register shifted 8 times. */
#define CRC_POLY 0x1021u
#define CRC_S(r) ((((r) << 1) ^ (((r) & 0x8000u) ? CRC_POLY : 0u)) & 0xFFFFu)
#define CRC_S8(r) CRC_S(CRC_S(CRC_S(CRC_S(CRC_S(CRC_S(CRC_S(CRC_S(r))))))))
#define CRC_B(i, k) (((i) >> (k) & 1u) ? CRC_S8(0x100u << (k)) : 0u)
#define CRC_T(i)                                                                              \
    (uint16_t)(CRC_B(i, 0) ^ CRC_B(i, 1) ^ CRC_B(i, 2) ^ CRC_B(i, 3) ^ CRC_B(i, 4) ^        \
               CRC_B(i, 5) ^ CRC_B(i, 6) ^ CRC_B(i, 7))
#define CRC_T4(i) CRC_T(i), CRC_T((i) + 1u), CRC_T((i) + 2u), CRC_T((i) + 3u)
#define CRC_T16(i) CRC_T4(i), CRC_T4((i) + 4u), CRC_T4((i) + 8u), CRC_T4((i) + 12u)
#define CRC_T64(i) CRC_T16(i), CRC_T16((i) + 16u), CRC_T16((i) + 32u), CRC_T16((i) + 48u)

static const fw_crc16 crc_ccitt = {
    {FW_CRC16_DEFAULT, CRC_POLY, 0xFFFFu, 0x0000u, 0, 0x29B1u},
    {CRC_T64(0u), CRC_T64(64u), CRC_T64(128u), CRC_T64(192u)}};

#endif /* FW_CRC_CCITT_H */
