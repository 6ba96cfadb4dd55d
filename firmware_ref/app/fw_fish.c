/*
 * fw_fish.c - the fish's system commands; the same decisions as the host's
 * simulator (bridge/sim/fish/system.py, flash.py), byte for byte in the
 * results (protocols/families/fish_commands.py).
 */
#include "fw_fish.h"

#include "board.h"

#define STORE_MAGIC 0x46495348u /* "FISH" */

enum { IAP_OK = 0, IAP_BAD_CHUNK_CRC, IAP_MISSING, IAP_WRONG_TOTAL, IAP_IMAGE_CRC,
       IAP_NOT_STARTED, IAP_BAD_IMAGE, IAP_BAD_REQUEST };
enum { ERR_IAP_REJECTED = 4 };

static uint32_t crc32_update(uint32_t c, const uint8_t *p, size_t n)
{
    /* Bitwise CRC-32 (zlib's): no 1 KB table for a check run once per upgrade. */
    size_t i;
    int k;
    c = ~c;
    for (i = 0; i < n; i++) {
        c ^= p[i];
        for (k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
    }
    return ~c;
}

static uint32_t store_crc(const fw_fish_store *s)
{
    return crc32_update(0, (const uint8_t *)s, offsetof(fw_fish_store, crc));
}

static void store_save(fw_fish *f)
{
    f->store->crc = store_crc(f->store);
}

/* The factory configuration: scenes water ingress or battery < 15 % -> surface, deeper
 * than 200 cm -> ascend (DEFAULT_CONFIG on the host). */
static const uint8_t factory_config[7 + 3 * 7] = {
    1, 100, 0, 0x58, 0x02, 30, 3,
    3, 1, 0, 0, 0, 0, 7,
    2, 1, 200, 0, 0, 0, 5,
    4, 0, 15, 0, 0, 0, 7,
};

static uint16_t u16le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, v);
    put16(p + 2, v >> 16);
}

void fw_fish_init(fw_fish *f, const fw_crc16 *crc, fw_fish_store *store, fw_tx_fn tx,
                  void *tx_ctx, uint32_t now_ms)
{
    memset(f, 0, sizeof *f);
    f->crc = crc;
    f->tx = tx;
    f->tx_ctx = tx_ctx;
    f->store = store;
    f->boot_ms = now_ms;
    if (store->magic != STORE_MAGIC || store->crc != store_crc(store)) {
        memset(store, 0, sizeof *store); /* a new (or torn) store: the factory state */
        store->magic = STORE_MAGIC;
        memcpy(store->cfg, factory_config, sizeof factory_config);
        store->cfg_len = (uint8_t)sizeof factory_config;
    }
    store->boots++;
    store_save(f);
}

int fw_fish_handles(uint8_t sub)
{
    switch (sub) {
    case 0x01: case 0x02: case 0x03: case 0x31: case 0x33: case 0x34: case 0x35: case 0x36:
    case 0x37: case 0x41: case 0x42:
        return 1;
    default:
        return 0;
    }
}

static int is_read(uint8_t type)
{
    return type >= FW_TYPE_READ_PHONE && type <= FW_TYPE_READ_PC;
}

/* UserConfig.unpack's checks. */
static int config_ok(const uint8_t *d, uint16_t n)
{
    uint16_t k;
    if (n < 7 || d[0] != 1 || n != 7u + 7u * d[6] || d[6] > 32 || u16le(d + 1) < 10 ||
        d[5] > 100) {
        return 0;
    }
    for (k = 0; k < d[6]; k++) {
        const uint8_t *s = d + 7 + 7 * k;
        if (s[0] > 7 || s[1] > 2 || s[6] == 0xFF) {
            return 0;
        }
    }
    return 1;
}

/* Steps of an action-group payload (3.4), or -1 when it does not decode. */
static int group_steps(const uint8_t *d, uint16_t n)
{
    uint32_t pos = 16;
    int steps = 0;
    if (n < 16) {
        return -1;
    }
    while (n - pos >= 12) {
        uint16_t len = u16le(d + pos + 2);
        if (len < 12 || (len - 12) % 4 != 0 || pos + len > n) {
            return -1;
        }
        steps++;
        pos += len;
    }
    return steps;
}

static int iap_request_ok(const uint8_t *d, uint16_t n)
{
    if (n == 0 || d[0] < 1 || d[0] > 5) {
        return 0;
    }
    if (d[0] == 1) {
        return n == 13;
    }
    if (d[0] == 2) {
        return n > 5;
    }
    return n == 1;
}

int fw_fish_check(fw_fish *f, const fw_action_frame *fr)
{
    fw_fish_store *s = f->store;
    if (f->mode == 3 && fr->sub != 0x35 && fr->sub != 0x42) {
        return FW_STATUS_BUSY; /* CAN flash mode: only the flash commands */
    }
    switch (fr->sub) {
    case 0x33:
        return config_ok(fr->data, fr->len) ? FW_STATUS_AUTO : FW_STATUS_LENGTH_ERROR;
    case 0x35:
        return iap_request_ok(fr->data, fr->len) ? FW_STATUS_AUTO : FW_STATUS_LENGTH_ERROR;
    case 0x37:
        return fr->len > 1 ? FW_STATUS_LENGTH_ERROR : FW_STATUS_AUTO;
    case 0x41:
        if (!is_read(fr->type) && (fr->len != 1 || fr->data[0] < 1 || fr->data[0] > 8)) {
            return FW_STATUS_LENGTH_ERROR;
        }
        return FW_STATUS_AUTO;
    case 0x31: {
        uint32_t used = 0;
        uint8_t k;
        if (group_steps(fr->data, fr->len) < 0) {
            return FW_STATUS_LENGTH_ERROR;
        }
        for (k = 0; k < s->group_count; k++) {
            used += s->group_len[k];
        }
        if (s->group_count >= FW_FISH_MAX_GROUPS || used + fr->len > FW_FISH_GROUP_BYTES) {
            return FW_STATUS_BUSY; /* full (a repeat of the last one is a duplicate: OK) */
        }
        return FW_STATUS_AUTO;
    }
    default:
        return FW_STATUS_AUTO;
    }
}

static void note_error(fw_fish *f, uint8_t code, uint8_t module, uint32_t now)
{
    fw_fish_error *e = &f->errors[f->error_head];
    e->code = code;
    e->module = module;
    put32(e->time_ms, now - f->boot_ms);
    f->error_head = (uint8_t)((f->error_head + 1u) % FW_FISH_MAX_ERRORS);
    if (f->error_count < FW_FISH_MAX_ERRORS) {
        f->error_count++;
    }
}

static uint16_t bank_version(const fw_fish *f, uint8_t bank)
{
    uint32_t size;
    const uint8_t *b = board_bank(bank, &size);
    uint32_t n = f->store->image_len[bank];
    if (n >= 6 && b != NULL && memcmp(b, "FWFI", 4) == 0) {
        return u16le(b + 4);
    }
    return bank == 0 ? FW_FISH_FACTORY_VERSION : 0;
}

static void send_result2(fw_fish *f, const fw_action_frame *req, const uint8_t *a, size_t na,
                         const uint8_t *b, size_t nb);

/* The result frame: type T + 0x10, status byte 0x00, then the fields. */
static void send_result(fw_fish *f, const fw_action_frame *req, const uint8_t *body, size_t n)
{
    send_result2(f, req, body, n, NULL, 0);
}

/* A result whose fields are two pieces (a prefix and stored bytes), written in pieces
 * (the CRC runs over them): no buffer holds the whole frame. */
static void send_result2(fw_fish *f, const fw_action_frame *req, const uint8_t *a, size_t na,
                         const uint8_t *b, size_t nb)
{
    uint8_t head[8], tail[4];
    uint16_t reg;
    head[0] = FW_ACTION_H0;
    head[1] = FW_ACTION_H1;
    head[2] = req->machine;
    head[3] = (uint8_t)(req->type + FW_TYPE_ANSWER_OFFSET);
    put16(head + 4, (uint32_t)(na + nb + 1u));
    head[6] = req->sub;
    head[7] = 0x00;
    reg = fw_crc16_start(f->crc);
    reg = fw_crc16_update(f->crc, reg, head + 2, sizeof head - 2);
    reg = fw_crc16_update(f->crc, reg, a, na);
    if (nb > 0) {
        reg = fw_crc16_update(f->crc, reg, b, nb);
    }
    put16(tail, fw_crc16_finish(f->crc, reg));
    tail[2] = FW_ACTION_T0;
    tail[3] = FW_ACTION_T1;
    f->tx(f->tx_ctx, head, sizeof head);
    f->tx(f->tx_ctx, a, na);
    while (nb > 0) {
        size_t piece = nb < 64u ? nb : 64u;
        f->tx(f->tx_ctx, b, piece);
        b += piece;
        nb -= piece;
    }
    f->tx(f->tx_ctx, tail, sizeof tail);
}

static void status_result(fw_fish *f, const fw_action_frame *req, uint32_t now)
{
    uint8_t b[16];
    b[0] = f->mode;
    b[1] = 0; /* no action group running: no servos on this board */
    b[2] = f->store->active;
    put16(b + 3, bank_version(f, f->store->active));
    put16(b + 5, f->store->boots);
    b[7] = f->error_count;
    b[8] = f->store->group_count;
    b[9] = f->flashing;
    put32(b + 10, now - f->boot_ms);
    send_result(f, req, b, 14);
}

static void actions_result(fw_fish *f, const fw_action_frame *req)
{
    const fw_fish_store *s = f->store;
    uint8_t b[2 + 3 * FW_FISH_MAX_GROUPS];
    uint32_t off = 0;
    uint8_t k;
    if (req->len == 1) { /* one slot's payload */
        uint8_t slot = req->data[0];
        uint8_t out[2];
        uint16_t n = 0;
        for (k = 0; k < s->group_count && k < slot; k++) {
            off += s->group_len[k];
        }
        if (slot < s->group_count) {
            n = s->group_len[slot];
        }
        out[0] = 1;
        out[1] = slot;
        send_result2(f, req, out, sizeof out, s->groups + off, n);
        return;
    }
    b[0] = 0;
    b[1] = s->group_count;
    for (k = 0; k < s->group_count; k++) {
        int steps = group_steps(s->groups + off, s->group_len[k]);
        b[2 + 3 * k] = (uint8_t)(steps < 0 ? 0 : steps > 255 ? 255 : steps);
        put16(b + 3 + 3 * k, s->group_len[k]);
        off += s->group_len[k];
    }
    send_result(f, req, b, 2u + 3u * s->group_count);
}

static void errors_result(fw_fish *f, const fw_action_frame *req)
{
    uint8_t b[1 + 6 * FW_FISH_MAX_ERRORS];
    uint8_t k;
    uint8_t first = (uint8_t)((f->error_head + FW_FISH_MAX_ERRORS - f->error_count) %
                              FW_FISH_MAX_ERRORS);
    b[0] = f->error_count;
    for (k = 0; k < f->error_count; k++) {
        const fw_fish_error *e = &f->errors[(first + k) % FW_FISH_MAX_ERRORS];
        b[1 + 6 * k] = e->code;
        b[2 + 6 * k] = e->module;
        memcpy(b + 3 + 6 * k, e->time_ms, 4);
    }
    send_result(f, req, b, 1u + 6u * f->error_count);
}

/* 0x35: chunks go straight into the bank that is not running (as a dual-bank part
 * programs its other bank); the switch is one store write, after the whole check. */
static void iap(fw_fish *f, const fw_action_frame *req, uint32_t now)
{
    const uint8_t *d = req->data;
    uint8_t op = d[0];
    uint8_t status = IAP_OK;
    uint8_t other = (uint8_t)(f->store->active ^ 1u);
    uint32_t size;
    uint8_t *bank = board_bank(other, &size);
    uint8_t b[7];
    if (op == 1) { /* begin */
        uint32_t total = u32le(d + 1);
        uint16_t chunks = u16le(d + 5), csize = u16le(d + 7);
        f->up_active = 0;
        if (bank == NULL || total < 6 || total > size || csize < 1 ||
            chunks != (total + csize - 1u) / csize) {
            status = (bank != NULL && total <= size) ? IAP_WRONG_TOTAL : IAP_BAD_IMAGE;
        } else {
            f->up_active = 1;
            f->up_total = total;
            f->up_chunks = chunks;
            f->up_chunk_size = csize;
            f->up_crc32 = u32le(d + 9);
            f->up_have = 0;
            f->up_next = 0;
            f->up_last_len = 0;
            f->store->image_len[other] = 0; /* its old image is being overwritten */
            store_save(f);
        }
    } else if (op == 4) { /* abort */
        f->up_active = 0;
    } else if (op == 5) { /* reset */
        f->reboot = 1;
    } else if (!f->up_active) {
        status = IAP_NOT_STARTED;
    } else if (op == 2) { /* chunk */
        uint16_t index = u16le(d + 1), crc = u16le(d + 3);
        const uint8_t *p = d + 5;
        uint16_t n = (uint16_t)(req->len - 5u);
        if (fw_crc16_compute(f->crc, p, n) != crc) {
            status = IAP_BAD_CHUNK_CRC;
        } else if (f->up_next > 0 && index == f->up_next - 1u) {
            /* The same chunk again (its answer was lost): already written. */
            status = (n == f->up_last_len &&
                      memcmp(bank + f->up_have - f->up_last_len, p, n) == 0) ? IAP_OK
                                                                           : IAP_MISSING;
        } else if (index != f->up_next) {
            status = IAP_MISSING;
        } else if (index >= f->up_chunks || f->up_have + n > f->up_total ||
                   (n != f->up_chunk_size && index != f->up_chunks - 1u)) {
            status = IAP_WRONG_TOTAL;
        } else {
            memcpy(bank + f->up_have, p, n);
            f->up_have += n;
            f->up_next++;
            f->up_last_len = n;
        }
    } else { /* end: the whole image checked before the switch */
        if (f->up_next < f->up_chunks && f->up_have < f->up_total) {
            status = IAP_MISSING;
        } else if (f->up_have != f->up_total) {
            status = IAP_WRONG_TOTAL;
        } else if (crc32_update(0, bank, f->up_have) != f->up_crc32) {
            status = IAP_IMAGE_CRC;
        } else if (memcmp(bank, "FWFI", 4) != 0) {
            status = IAP_BAD_IMAGE;
        } else {
            f->store->image_len[other] = f->up_have;
            f->store->active = other; /* one write: the old bank or the new, never half */
            store_save(f);
            f->reboot = 1;
        }
        f->up_active = 0;
    }
    if (status != IAP_OK) {
        note_error(f, ERR_IAP_REJECTED, status, now);
    }
    b[0] = status;
    b[1] = op;
    put16(b + 2, f->up_active ? f->up_next : 0);
    put16(b + 4, bank_version(f, f->store->active));
    b[6] = f->store->active;
    send_result(f, req, b, sizeof b);
}

void fw_fish_execute(fw_fish *f, const fw_action_frame *fr, int duplicate, uint32_t now)
{
    fw_fish_store *s = f->store;
    switch (fr->sub) {
    case 0x01:
        status_result(f, fr, now);
        break;
    case 0x02:
        f->mode = 2;
        break;
    case 0x03:
        f->mode = 1;
        break;
    case 0x31: { /* store an action group (a duplicate is not stored twice) */
        uint32_t used = 0;
        uint8_t k;
        if (duplicate) {
            break;
        }
        for (k = 0; k < s->group_count; k++) {
            used += s->group_len[k];
        }
        memcpy(s->groups + used, fr->data, fr->len);
        s->group_len[s->group_count++] = fr->len;
        store_save(f);
        break;
    }
    case 0x33:
        memcpy(s->cfg, fr->data, fr->len);
        s->cfg_len = (uint8_t)fr->len;
        store_save(f);
        break;
    case 0x34:
        s->group_count = 0;
        store_save(f);
        break;
    case 0x35:
        iap(f, fr, now);
        break;
    case 0x36:
        send_result(f, fr, s->cfg, s->cfg_len);
        break;
    case 0x37:
        actions_result(f, fr);
        break;
    case 0x41:
        if (is_read(fr->type)) {
            errors_result(f, fr);
        } else {
            f->flashing |= (uint8_t)(1u << (fr->data[0] - 1u));
        }
        break;
    case 0x42:
        f->mode = 3;
        break;
    default:
        break;
    }
}
