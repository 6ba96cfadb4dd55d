/*
 * fw_host.c - flat C entry points for the host's ctypes cross-checks.
 *
 * Not firmware: it wraps the firmware modules so Python can drive them with
 * plain buffers. Receiver events are written to a byte log that Python
 * parses (see tests/firmware_lib.py):
 *
 *   frame:  'F' offset:u32le defects:u8 machine:u8 type:u8 sub:u8 len:u16le data[len]
 *   reject: 'R' offset:u32le reason:u8 machine:u8 type:u8 sub:u8 has_sub:u8
 *   answer: 'A' duplicate:u8 len:u8 bytes[len]      (the responder's answer)
 */
#include "fw_action.h"
#include "fw_actuator.h"
#include "fw_crc16.h"
#include "fw_sum8.h"

#define FWH_MAX_LEN 0xFFFFu
#define FWH_LOG_SIZE (1u << 20)

/* -- sum-8 ------------------------------------------------------------- */

size_t fwh_sum8_rx_sizeof(void)
{
    return sizeof(fw_sum8_rx);
}

void fwh_sum8_rx_init(fw_sum8_rx *rx, unsigned frame_size)
{
    fw_sum8_rx_init(rx, (uint8_t)frame_size);
}

typedef struct {
    uint32_t *offsets;
    float *values;
    size_t max, n, nf;
} sum8_sink;

static void sink_frame(void *ctx, const uint8_t *frame, fw_pos_t offset)
{
    sum8_sink *s = ctx;
    if (s->n < s->max) {
        size_t f;
        s->offsets[s->n] = offset;
        for (f = 0; f < s->nf; f++) {
            s->values[s->n * s->nf + f] = fw_get_f32le(frame + 2 + 4 * f);
        }
    }
    s->n++;
}

/* Feed bytes (bytewise: one fw_sum8_rx_byte call per byte, else one
 * fw_sum8_rx_feed call); store up to max frames as offsets and floats.
 * Returns the number of frames. */
size_t fwh_sum8_feed(fw_sum8_rx *rx, const uint8_t *data, size_t len, uint32_t *offsets,
                     float *values, size_t max, int bytewise)
{
    sum8_sink s;
    size_t i;
    s.offsets = offsets;
    s.values = values;
    s.max = max;
    s.n = 0;
    s.nf = (rx->size - 3u) / 4u;
    if (!bytewise) {
        fw_sum8_rx_feed(rx, data, len, sink_frame, &s);
        return s.n;
    }
    for (i = 0; i < len; i++) {
        if (fw_sum8_rx_byte(rx, data[i])) {
            sink_frame(&s, fw_sum8_rx_frame(rx), rx->frame_offset);
        }
    }
    return s.n;
}

size_t fwh_sum8_finish(fw_sum8_rx *rx)
{
    return fw_sum8_rx_finish(rx);
}

void fwh_sum8_stats(const fw_sum8_rx *rx, uint32_t out[7])
{
    out[0] = rx->stats.frames;
    out[1] = rx->stats.bytes;
    out[2] = rx->stats.checksum_errors;
    out[3] = rx->stats.discarded;
    out[4] = rx->stats.resyncs;
    out[5] = rx->stats.nonfinite;
    out[6] = rx->stats.overlapping;
}

size_t fwh_odom_encode(const float v[4], uint8_t out[FW_ODOM_SIZE])
{
    fw_odom o;
    o.vx = v[0];
    o.vy = v[1];
    o.wz = v[2];
    o.yaw_deg = v[3];
    return fw_odom_encode(&o, out);
}

size_t fwh_cmd_encode(const float v[3], uint8_t out[FW_CMD_SIZE])
{
    fw_cmd c;
    c.vx = v[0];
    c.vy = v[1];
    c.wz = v[2];
    return fw_cmd_encode(&c, out);
}

/* Check and decode one frame of frame_size bytes; returns fw_sum8_check's code. */
int fwh_sum8_decode(const uint8_t *data, size_t len, size_t frame_size, float *out)
{
    int rc = fw_sum8_check(data, len, frame_size);
    if (rc == 0) {
        if (frame_size == FW_ODOM_SIZE) {
            fw_odom o;
            fw_odom_decode(data, &o);
            out[0] = o.vx;
            out[1] = o.vy;
            out[2] = o.wz;
            out[3] = o.yaw_deg;
        } else {
            fw_cmd c;
            fw_cmd_decode(data, &c);
            out[0] = c.vx;
            out[1] = c.vy;
            out[2] = c.wz;
        }
    }
    return rc;
}

/* -- CRC ---------------------------------------------------------------- */

size_t fwh_crc16_preset_count(void)
{
    size_t n;
    (void)fw_crc16_presets(&n);
    return n;
}

const char *fwh_crc16_preset_name(size_t i)
{
    size_t n;
    const fw_crc16_params *p = fw_crc16_presets(&n);
    return i < n ? p[i].name : NULL;
}

/* CRC of data with the named preset; -1 for an unknown name. */
long fwh_crc16(const char *name, const uint8_t *data, size_t len)
{
    fw_crc16 crc;
    if (fw_crc16_init_name(&crc, name) != 0) {
        return -1;
    }
    return (long)fw_crc16_compute(&crc, data, len);
}

/* -- action frames --------------------------------------------------------- */

size_t fwh_action_encode(const char *crc_name, unsigned machine, unsigned type, unsigned sub,
                         const uint8_t *data, size_t n, uint8_t *out, size_t cap)
{
    fw_crc16 crc;
    if (n > 0xFFFFu || fw_crc16_init_name(&crc, crc_name) != 0) {
        return 0;
    }
    return fw_action_encode(&crc, (uint8_t)machine, (uint8_t)type, (uint8_t)sub, data,
                            (uint16_t)n, out, cap);
}

int fwh_action_check(const char *crc_name, const uint8_t *frame, size_t len)
{
    fw_crc16 crc;
    if (fw_crc16_init_name(&crc, crc_name) != 0) {
        return 1;
    }
    return fw_action_check(&crc, frame, len);
}

typedef struct {
    fw_crc16 crc;
    fw_action_rx rx;
    fw_responder resp;
    int answer; /* run the responder on every frame and rejection */
    size_t log_len;
    int overflow;
    uint8_t buf[FW_ACTION_RX_BUF_SIZE(FWH_MAX_LEN)];
    uint8_t keep[FWH_MAX_LEN];
    uint8_t log[FWH_LOG_SIZE];
} fwh_action;

static void log_bytes(fwh_action *h, const uint8_t *p, size_t n)
{
    if (h->log_len + n > sizeof h->log) {
        h->overflow = 1;
        return;
    }
    memcpy(h->log + h->log_len, p, n);
    h->log_len += n;
}

static void log_answer(fwh_action *h, const uint8_t *ans, size_t n, int dup)
{
    uint8_t head[3];
    if (n == 0) {
        return;
    }
    head[0] = 'A';
    head[1] = (uint8_t)dup;
    head[2] = (uint8_t)n;
    log_bytes(h, head, 3);
    log_bytes(h, ans, n);
}

static void on_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    fwh_action *h = ctx;
    uint8_t head[11];
    head[0] = 'F';
    head[1] = (uint8_t)(offset & 0xFFu);
    head[2] = (uint8_t)((offset >> 8) & 0xFFu);
    head[3] = (uint8_t)((offset >> 16) & 0xFFu);
    head[4] = (uint8_t)(offset >> 24);
    head[5] = f->defects;
    head[6] = f->machine;
    head[7] = f->type;
    head[8] = f->sub;
    fw_put_u16le(head + 9, f->len);
    log_bytes(h, head, sizeof head);
    log_bytes(h, f->data, f->len);
    if (h->answer) {
        uint8_t ans[FW_ACTION_ANSWER_SIZE];
        int dup = 0;
        size_t n = fw_responder_answer(&h->resp, f, FW_STATUS_AUTO, ans, &dup);
        log_answer(h, ans, n, dup);
    }
}

static void on_reject(void *ctx, const fw_action_reject *r)
{
    fwh_action *h = ctx;
    uint8_t rec[10];
    rec[0] = 'R';
    rec[1] = (uint8_t)(r->offset & 0xFFu);
    rec[2] = (uint8_t)((r->offset >> 8) & 0xFFu);
    rec[3] = (uint8_t)((r->offset >> 16) & 0xFFu);
    rec[4] = (uint8_t)(r->offset >> 24);
    rec[5] = r->reason;
    rec[6] = r->machine;
    rec[7] = r->type;
    rec[8] = r->sub;
    rec[9] = r->has_sub;
    log_bytes(h, rec, sizeof rec);
    if (h->answer) {
        uint8_t ans[FW_ACTION_ANSWER_SIZE];
        size_t n = fw_responder_answer_rejected(&h->resp, r, ans);
        log_answer(h, ans, n, 0);
    }
}

size_t fwh_action_sizeof(void)
{
    return sizeof(fwh_action);
}

int fwh_action_open(fwh_action *h, const char *crc_name, unsigned max_len, int relaxed,
                    int alt_enable, unsigned alt0, unsigned alt1, int answer)
{
    memset(h, 0, offsetof(fwh_action, buf));
    if (max_len > FWH_MAX_LEN || fw_crc16_init_name(&h->crc, crc_name) != 0) {
        return -1;
    }
    if (fw_action_rx_init(&h->rx, &h->crc, h->buf, sizeof h->buf, (uint16_t)max_len, on_frame,
                          on_reject, h) != 0) {
        return -1;
    }
    h->rx.relaxed = (uint8_t)(relaxed != 0);
    fw_action_rx_alt_header(&h->rx, alt_enable, (uint8_t)alt0, (uint8_t)alt1);
    fw_responder_init(&h->resp, &h->crc, h->keep, sizeof h->keep);
    h->answer = answer;
    return 0;
}

/* Feed (bytewise != 0: one call per byte; else one call for the buffer). */
size_t fwh_action_feed(fwh_action *h, const uint8_t *data, size_t len, int bytewise)
{
    size_t frames = 0;
    size_t i;
    if (!bytewise) {
        return fw_action_rx_feed(&h->rx, data, len);
    }
    for (i = 0; i < len; i++) {
        frames += fw_action_rx_byte(&h->rx, data[i]);
    }
    return frames;
}

size_t fwh_action_finish(fwh_action *h)
{
    return fw_action_rx_finish(&h->rx);
}

/* Copy the log out (up to cap bytes), clear it; returns its length or
 * (size_t)-1 when it overflowed. */
size_t fwh_action_take_log(fwh_action *h, uint8_t *out, size_t cap)
{
    size_t n = h->log_len;
    if (h->overflow || n > cap) {
        return (size_t)-1;
    }
    memcpy(out, h->log, n);
    h->log_len = 0;
    return n;
}

size_t fwh_action_pending(const fwh_action *h)
{
    return h->rx.end - h->rx.start;
}

void fwh_action_stats(const fwh_action *h, uint32_t out[14])
{
    const fw_action_stats *s = &h->rx.stats;
    out[0] = s->frames;
    out[1] = s->bytes;
    out[2] = s->discarded;
    out[3] = s->resyncs;
    out[4] = s->header_errors;
    out[5] = s->length_errors;
    out[6] = s->trailer_errors;
    out[7] = s->checksum_errors;
    out[8] = s->truncated;
    out[9] = s->relaxed_accepts;
    out[10] = h->resp.stats.answered;
    out[11] = h->resp.stats.acks;
    out[12] = h->resp.stats.naks;
    out[13] = h->resp.stats.duplicates;
}

/* -- stop-and-wait sender --------------------------------------------------- */

typedef struct {
    fw_crc16 crc;
    fw_arq arq;
    uint8_t frame[FW_ACTION_RX_BUF_SIZE(FWH_MAX_LEN)];
    size_t tx_len;
    uint8_t tx[1u << 18];
} fwh_arq;

static void arq_tx(void *ctx, const uint8_t *data, size_t len)
{
    fwh_arq *h = ctx;
    if (h->tx_len + len <= sizeof h->tx) {
        memcpy(h->tx + h->tx_len, data, len);
        h->tx_len += len;
    }
}

size_t fwh_arq_sizeof(void)
{
    return sizeof(fwh_arq);
}

int fwh_arq_open(fwh_arq *h, const char *crc_name, uint32_t timeout, unsigned retries)
{
    memset(h, 0, offsetof(fwh_arq, frame));
    if (fw_crc16_init_name(&h->crc, crc_name) != 0 || retries > 255u) {
        return -1;
    }
    fw_arq_init(&h->arq, timeout, (uint8_t)retries, arq_tx, h);
    return 0;
}

/* Encode and send; -1 busy or not a request. */
int fwh_arq_send(fwh_arq *h, unsigned machine, unsigned type, unsigned sub, const uint8_t *data,
                 size_t n, uint32_t now)
{
    size_t len;
    if (fw_arq_busy(&h->arq) || n > FWH_MAX_LEN) {
        return -1;
    }
    len = fw_action_encode(&h->crc, (uint8_t)machine, (uint8_t)type, (uint8_t)sub, data,
                           (uint16_t)n, h->frame, sizeof h->frame);
    return fw_arq_send(&h->arq, h->frame, len, now);
}

/* Encode and send a read (delivered by its result); -1 busy or not a request. */
int fwh_arq_send_read(fwh_arq *h, unsigned machine, unsigned type, unsigned sub,
                      const uint8_t *data, size_t n, uint32_t now, uint32_t result_timeout)
{
    size_t len;
    if (fw_arq_busy(&h->arq) || n > FWH_MAX_LEN) {
        return -1;
    }
    len = fw_action_encode(&h->crc, (uint8_t)machine, (uint8_t)type, (uint8_t)sub, data,
                           (uint16_t)n, h->frame, sizeof h->frame);
    return fw_arq_send_read(&h->arq, h->frame, len, now, result_timeout);
}

int fwh_arq_on_result(fwh_arq *h, uint32_t now)
{
    return fw_arq_on_result(&h->arq, now);
}

uint32_t fwh_arq_missing_results(const fwh_arq *h)
{
    return h->arq.stats.missing_results;
}

/* A frame from the peer (exact bytes; must pass fw_action_check). */
int fwh_arq_on_answer(fwh_arq *h, const uint8_t *frame, size_t len, uint32_t now)
{
    fw_action_frame f;
    if (fw_action_check(&h->crc, frame, len) != 0) {
        return -1;
    }
    fw_action_decode(frame, &f);
    return fw_arq_on_answer(&h->arq, &f, now);
}

int fwh_arq_poll(fwh_arq *h, uint32_t now)
{
    return fw_arq_poll(&h->arq, now);
}

int fwh_arq_busy(const fwh_arq *h)
{
    return fw_arq_busy(&h->arq);
}

uint32_t fwh_arq_deadline(const fwh_arq *h)
{
    return h->arq.deadline;
}

size_t fwh_arq_take_tx(fwh_arq *h, uint8_t *out, size_t cap)
{
    size_t n = h->tx_len < cap ? h->tx_len : cap;
    memcpy(out, h->tx, n);
    h->tx_len = 0;
    return n;
}

void fwh_arq_stats(const fwh_arq *h, uint32_t out[8])
{
    const fw_arq_stats *s = &h->arq.stats;
    out[0] = s->sent;
    out[1] = s->retransmitted;
    out[2] = s->delivered;
    out[3] = s->failed;
    out[4] = s->timeouts;
    out[5] = s->naks;
    out[6] = s->ignored;
    out[7] = h->arq.attempts;
}

/* -- actuator --------------------------------------------------------------- */

void fwh_actuator_pack(const int v[8], uint8_t out[FW_ACTUATOR_SIZE])
{
    fw_actuator a;
    a.angle = (int8_t)v[0];
    a.speed = (uint8_t)v[1];
    a.current = (uint8_t)v[2];
    a.module_id = (uint8_t)v[3];
    a.command = (uint8_t)v[4];
    a.fault = (uint8_t)v[5];
    a.reserved_a = (uint8_t)v[6];
    a.reserved_b = (uint8_t)v[7];
    fw_actuator_pack(&a, out);
}

void fwh_actuator_unpack(const uint8_t in[FW_ACTUATOR_SIZE], int v[8])
{
    fw_actuator a;
    fw_actuator_unpack(in, &a);
    v[0] = a.angle;
    v[1] = a.speed;
    v[2] = a.current;
    v[3] = a.module_id;
    v[4] = a.command;
    v[5] = a.fault;
    v[6] = a.reserved_a;
    v[7] = a.reserved_b;
}
