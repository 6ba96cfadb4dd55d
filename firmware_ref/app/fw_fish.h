/*
 * fw_fish.h - the fish's system commands (PROTOCOLS.md 6.2) on the main
 * controller: 0x01 status, 0x02/0x03 stand still / free swimming, 0x31
 * stored action groups, 0x33/0x36 user configuration, 0x34 erase, 0x37
 * stored actions, 0x41 error records (read) and device CAN flash mode
 * (write), 0x42 main CAN flash mode, 0x35 IAP with its dual-bank rules.
 * Portable: the banks and the store come from board.h.
 */
#ifndef FW_FISH_H
#define FW_FISH_H

#include "fw_action.h"

#define FW_FISH_MAX_CONFIG (8u + 7u * 32u) /* header + 32 scenes */
#define FW_FISH_MAX_GROUPS 16u
#define FW_FISH_GROUP_BYTES 2048u          /* stored action-group payloads, all slots */
#define FW_FISH_MAX_ERRORS 16u
#define FW_FISH_FACTORY_VERSION 0x0100u    /* 1.0: what bank A runs before any upgrade */

/* What "flash" keeps (a real part: a flash sector; here the board's no-init RAM). */
typedef struct {
    uint32_t magic;
    uint16_t boots;
    uint8_t active; /* bank 0 (A) or 1 (B) */
    uint8_t cfg_len;
    uint32_t image_len[2]; /* a verified image in that bank; 0: none (bank A: factory) */
    uint8_t cfg[FW_FISH_MAX_CONFIG];
    uint8_t group_count;
    uint16_t group_len[FW_FISH_MAX_GROUPS];
    uint8_t groups[FW_FISH_GROUP_BYTES];
    uint32_t crc; /* CRC-32 of everything above: a torn or blank store reads as new */
} fw_fish_store;

typedef struct {
    uint8_t code, module;
    uint8_t time_ms[4]; /* little-endian: 6 bytes a record, no padding */
} fw_fish_error;

typedef struct {
    const fw_crc16 *crc;
    fw_tx_fn tx;
    void *tx_ctx;
    fw_fish_store *store;
    uint32_t boot_ms;
    uint8_t mode;          /* 0 idle, 1 free, 2 still, 3 CAN flash */
    uint8_t flashing;      /* modules in CAN flash mode, bit k-1: module k */
    uint8_t reboot;        /* reset once the current frame is answered */
    /* the upgrade in progress (in RAM: a power loss forgets it) */
    uint8_t up_active;
    uint32_t up_total, up_crc32, up_have;
    uint16_t up_chunks, up_chunk_size, up_next, up_last_len;
    fw_fish_error errors[FW_FISH_MAX_ERRORS];
    uint8_t error_count, error_head;
} fw_fish;

/* Load (or make new) the store, count the boot. */
void fw_fish_init(fw_fish *f, const fw_crc16 *crc, fw_fish_store *store, fw_tx_fn tx,
                  void *tx_ctx, uint32_t now_ms);
/* 1 when the fish handles this sub-command (else the plain responder does). */
int fw_fish_handles(uint8_t sub);
/* The answer's status for a request (FW_STATUS_AUTO: OK or the responder decides). */
int fw_fish_check(fw_fish *f, const fw_action_frame *frame);
/* After an OK answer: do it, and send its result frame when it has one. */
void fw_fish_execute(fw_fish *f, const fw_action_frame *frame, int duplicate, uint32_t now_ms);

#endif /* FW_FISH_H */
