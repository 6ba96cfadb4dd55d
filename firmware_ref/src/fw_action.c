/*
 * fw_action.c - action frames: encoder, receiver, answers, stop-and-wait.
 * See fw_action.h; the logic mirrors protocols/engine/kernels/action_receiver.py and
 * protocols/families/arq.py step for step so both sides count the same things.
 */
#include "fw_action.h"

int fw_action_is_request(uint8_t type)
{
    return type >= FW_TYPE_READ_PHONE && type <= FW_TYPE_CONTROL_PHONE;
}

static const uint8_t known_subs[] = {
    0x01, 0x02, 0x03, 0x11, 0x12, 0x13, 0x14, 0x21, 0x31, 0x32, 0x33,
    0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x41, 0x42,
};

int fw_action_sub_known(uint8_t sub)
{
    size_t i;
    for (i = 0; i < sizeof known_subs; i++) {
        if (known_subs[i] == sub) {
            return 1;
        }
    }
    return 0;
}

static void put_head(uint8_t *h, uint8_t machine, uint8_t type, uint8_t sub, uint16_t n)
{
    h[0] = FW_ACTION_H0;
    h[1] = FW_ACTION_H1;
    h[2] = machine;
    h[3] = type;
    fw_put_u16le(h + 4, n);
    h[6] = sub;
}

static void put_tail(uint8_t *t, uint16_t crc)
{
    fw_put_u16le(t, crc);
    t[2] = FW_ACTION_T0;
    t[3] = FW_ACTION_T1;
}

static uint16_t frame_crc(const fw_crc16 *crc, const uint8_t *head, const uint8_t *data,
                          uint16_t n)
{
    uint16_t reg = fw_crc16_start(crc);
    reg = fw_crc16_update(crc, reg, head + 2, 5);
    if (n != 0) {
        reg = fw_crc16_update(crc, reg, data, n);
    }
    return fw_crc16_finish(crc, reg);
}

size_t fw_action_encode(const fw_crc16 *crc, uint8_t machine, uint8_t type, uint8_t sub,
                        const uint8_t *data, uint16_t n, uint8_t *out, size_t cap)
{
    const size_t total = FW_ACTION_OVERHEAD + (size_t)n;
    if (cap < total) {
        return 0;
    }
    put_head(out, machine, type, sub, n);
    if (n != 0) {
        memmove(out + 7, data, n);
    }
    put_tail(out + 7 + n, fw_crc16_compute(crc, out + 2, 5u + n));
    return total;
}

void fw_action_send(const fw_crc16 *crc, uint8_t machine, uint8_t type, uint8_t sub,
                    const uint8_t *data, uint16_t n, fw_tx_fn tx, void *ctx)
{
    uint8_t head[7];
    uint8_t tail[4];
    put_head(head, machine, type, sub, n);
    put_tail(tail, frame_crc(crc, head, data, n));
    tx(ctx, head, sizeof head);
    if (n != 0) {
        tx(ctx, data, n);
    }
    tx(ctx, tail, sizeof tail);
}

int fw_action_check(const fw_crc16 *crc, const uint8_t *frame, size_t len)
{
    if (len < FW_ACTION_OVERHEAD) {
        return FW_CHECK_SIZE;
    }
    if (frame[0] != FW_ACTION_H0 || frame[1] != FW_ACTION_H1) {
        return FW_CHECK_HEADER;
    }
    if (FW_ACTION_OVERHEAD + (size_t)fw_get_u16le(frame + 4) != len) {
        return FW_CHECK_LENGTH;
    }
    if (frame[len - 2] != FW_ACTION_T0 || frame[len - 1] != FW_ACTION_T1) {
        return FW_CHECK_TRAILER;
    }
    if (fw_crc16_compute(crc, frame + 2, len - 6) != fw_get_u16le(frame + len - 4)) {
        return FW_CHECK_CRC;
    }
    return FW_CHECK_OK;
}

void fw_action_decode(const uint8_t *frame, fw_action_frame *out)
{
    out->machine = frame[2];
    out->type = frame[3];
    out->len = fw_get_u16le(frame + 4);
    out->sub = frame[6];
    out->defects = 0;
    out->data = frame + 7;
}

/* ------------------------------------------------------------------------ */
/* Receiver                                                                  */

int fw_action_rx_init(fw_action_rx *rx, const fw_crc16 *crc, uint8_t *buf, size_t cap,
                      uint16_t max_len, fw_action_frame_fn on_frame,
                      fw_action_reject_fn on_reject, void *ctx)
{
    memset(rx, 0, sizeof *rx);
    if (cap < FW_ACTION_RX_BUF_SIZE(max_len)) {
        return -1;
    }
    rx->crc = crc;
    rx->buf = buf;
    rx->cap = cap;
    rx->need = 1;
    rx->max_len = max_len;
    rx->has_alt = 1;
    rx->alt[0] = FW_ACTION_H0;
    rx->alt[1] = FW_ACTION_ALT_H1;
    rx->on_frame = on_frame;
    rx->on_reject = on_reject;
    rx->ctx = ctx;
    return 0;
}

void fw_action_rx_alt_header(fw_action_rx *rx, int enable, uint8_t h0, uint8_t h1)
{
    /* The primary header as "alternative" would be counted twice: refuse it. */
    rx->has_alt = (uint8_t)(enable && !(h0 == FW_ACTION_H0 && h1 == FW_ACTION_H1));
    rx->alt[0] = h0;
    rx->alt[1] = h1;
}

static int is_first(const fw_action_rx *rx, uint8_t b)
{
    return b == FW_ACTION_H0 || (rx->has_alt && b == rx->alt[0]);
}

/* Drop k held bytes that are in no frame. */
static void drop(fw_action_rx *rx, size_t k)
{
    rx->start += k;
    rx->stats.discarded += (uint32_t)k;
    rx->gap = 1;
}

static void reject(fw_action_rx *rx, const uint8_t *p, size_t avail, uint8_t reason)
{
    fw_action_reject r;
    if (rx->on_reject == NULL || avail < 4) {
        return; /* machine code and type not received: nothing to attribute */
    }
    r.offset = rx->stats.bytes - (fw_pos_t)avail;
    r.reason = reason;
    r.machine = p[2];
    r.type = p[3];
    r.has_sub = (uint8_t)(avail > 6);
    r.sub = r.has_sub ? p[6] : 0;
    rx->on_reject(rx->ctx, &r);
}

/* Decide every held candidate that the held bytes allow (all of them at the
 * end of the stream); deliver frames; leave the undecided tail. */
static size_t settle(fw_action_rx *rx, int final)
{
    size_t frames = 0;
    for (;;) {
        const size_t avail = rx->end - rx->start;
        const uint8_t *p = rx->buf + rx->start;
        size_t n;
        size_t total;
        int primary;
        int crc_ok;
        uint8_t defects = 0;

        if (avail == 0) {
            rx->need = 1;
            break;
        }
        if (!is_first(rx, p[0])) {
            /* Skip to the next possible header byte. */
            size_t k = 1;
            while (k < avail && !is_first(rx, p[k])) {
                k++;
            }
            drop(rx, k);
            continue;
        }
        if (avail < 2) {
            if (final) {
                drop(rx, 1);
                continue;
            }
            rx->need = 2;
            break;
        }
        primary = p[0] == FW_ACTION_H0 && p[1] == FW_ACTION_H1;
        if (!primary && !(rx->has_alt && p[0] == rx->alt[0] && p[1] == rx->alt[1])) {
            drop(rx, 1);
            continue;
        }
        if (avail < 7) { /* length field and sub-command not here yet */
            if (!final) {
                rx->need = 7;
                break;
            }
            if (primary) {
                rx->stats.truncated++;
                reject(rx, p, avail, FW_REJECT_TRUNCATED);
            }
            drop(rx, 1);
            continue;
        }
        n = fw_get_u16le(p + 4);
        if (n > rx->max_len) {
            if (primary) {
                rx->stats.length_errors++;
                reject(rx, p, avail, FW_REJECT_LENGTH);
            }
            drop(rx, 1);
            continue;
        }
        total = FW_ACTION_OVERHEAD + n;
        if (avail < total) {
            if (!final) {
                rx->need = total;
                break;
            }
            if (primary) {
                rx->stats.truncated++;
                reject(rx, p, avail, FW_REJECT_TRUNCATED);
            }
            drop(rx, 1);
            continue;
        }
        if (p[total - 2] != FW_ACTION_T0 || p[total - 1] != FW_ACTION_T1) {
            if (primary) {
                rx->stats.trailer_errors++;
                reject(rx, p, avail, FW_REJECT_TRAILER);
            }
            drop(rx, 1);
            continue;
        }
        crc_ok = fw_crc16_compute(rx->crc, p + 2, total - 6) == fw_get_u16le(p + total - 4);
        if (!(primary && crc_ok)) {
            if (!rx->relaxed) {
                if (!primary) {
                    rx->stats.header_errors++;
                }
                if (!crc_ok) {
                    rx->stats.checksum_errors++;
                    if (primary) {
                        reject(rx, p, avail, FW_REJECT_CRC);
                    }
                }
                drop(rx, 1);
                continue;
            }
            defects = (uint8_t)((primary ? 0 : FW_DEFECT_HEADER) | (crc_ok ? 0 : FW_DEFECT_CRC));
            rx->stats.relaxed_accepts++;
        }
        if (rx->gap) {
            rx->stats.resyncs++;
            rx->gap = 0;
        }
        rx->stats.frames++;
        frames++;
        if (rx->on_frame != NULL) {
            fw_action_frame f;
            fw_action_decode(p, &f);
            f.defects = defects;
            rx->on_frame(rx->ctx, &f, rx->stats.bytes - (fw_pos_t)avail);
        }
        /* An accepted frame is skipped whole: a frame inside its data is data. */
        rx->start += total;
    }
    if (rx->start == rx->end) {
        rx->start = rx->end = 0;
    }
    return frames;
}

size_t fw_action_rx_byte(fw_action_rx *rx, uint8_t b)
{
    if (rx->end == rx->cap) {
        /* Held bytes are always fewer than 11 + max_len: compaction makes room. */
        memmove(rx->buf, rx->buf + rx->start, rx->end - rx->start);
        rx->end -= rx->start;
        rx->start = 0;
    }
    rx->buf[rx->end++] = b;
    rx->stats.bytes++;
    if (rx->end - rx->start < rx->need) {
        return 0;
    }
    return settle(rx, 0);
}

size_t fw_action_rx_feed(fw_action_rx *rx, const uint8_t *data, size_t len)
{
    size_t frames = 0;
    size_t i;
    for (i = 0; i < len; i++) {
        frames += fw_action_rx_byte(rx, data[i]);
    }
    return frames;
}

size_t fw_action_rx_finish(fw_action_rx *rx)
{
    size_t frames = settle(rx, 1);
    rx->start = rx->end = 0;
    rx->need = 1;
    return frames;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                   */

void fw_responder_init(fw_responder *r, const fw_crc16 *crc, uint8_t *keep, size_t keep_cap)
{
    size_t i;
    memset(r, 0, sizeof *r);
    r->crc = crc;
    r->keep = keep;
    r->keep_cap = keep != NULL ? keep_cap : 0;
    for (i = 0; i < sizeof known_subs; i++) {
        fw_responder_set_known(r, known_subs[i], 1);
    }
}

void fw_responder_set_known(fw_responder *r, uint8_t sub, int known)
{
    if (known) {
        r->known[sub >> 3] = (uint8_t)(r->known[sub >> 3] | (1u << (sub & 7u)));
    } else {
        r->known[sub >> 3] = (uint8_t)(r->known[sub >> 3] & ~(1u << (sub & 7u)));
    }
}

static size_t make_answer(const fw_crc16 *crc, uint8_t machine, uint8_t type, uint8_t sub,
                          uint8_t status, uint8_t *out)
{
    return fw_action_encode(crc, machine, (uint8_t)(type + FW_TYPE_ANSWER_OFFSET), sub, &status,
                            1, out, FW_ACTION_ANSWER_SIZE);
}

static uint16_t body_crc(const fw_crc16 *crc, const fw_action_frame *f)
{
    uint8_t head[7];
    put_head(head, f->machine, f->type, f->sub, f->len);
    return frame_crc(crc, head, f->data, f->len);
}

size_t fw_responder_answer(fw_responder *r, const fw_action_frame *frame, int status,
                           uint8_t out[FW_ACTION_ANSWER_SIZE], int *duplicate)
{
    uint16_t crc;
    int dup;
    if (!fw_action_is_request(frame->type)) {
        return 0;
    }
    if (status == FW_STATUS_AUTO) {
        status = (r->known[frame->sub >> 3] >> (frame->sub & 7u)) & 1u ? FW_STATUS_OK
                                                                       : FW_STATUS_UNKNOWN_SUB;
    }
    crc = body_crc(r->crc, frame);
    dup = r->has_last && r->last_machine == frame->machine && r->last_type == frame->type &&
          r->last_sub == frame->sub && r->last_len == frame->len && r->last_crc == crc &&
          (frame->len > r->keep_cap || frame->len == 0 ||
           memcmp(r->keep, frame->data, frame->len) == 0);
    if (dup) {
        r->stats.duplicates++;
    }
    if (status == FW_STATUS_OK) {
        r->stats.acks++;
        r->has_last = 1;
        r->last_machine = frame->machine;
        r->last_type = frame->type;
        r->last_sub = frame->sub;
        r->last_len = frame->len;
        r->last_crc = crc;
        if (frame->len != 0 && frame->len <= r->keep_cap) {
            memcpy(r->keep, frame->data, frame->len);
        }
    } else {
        r->stats.naks++;
        r->has_last = 0;
    }
    r->stats.answered++;
    if (duplicate != NULL) {
        *duplicate = dup;
    }
    return make_answer(r->crc, frame->machine, frame->type, frame->sub,
                       (uint8_t)(status & 0xFF), out);
}

size_t fw_responder_answer_rejected(fw_responder *r, const fw_action_reject *reject,
                                    uint8_t out[FW_ACTION_ANSWER_SIZE])
{
    uint8_t status;
    if (!reject->has_sub || !fw_action_is_request(reject->type)) {
        return 0;
    }
    switch (reject->reason) {
    case FW_REJECT_CRC:
        status = FW_STATUS_CRC_ERROR;
        break;
    case FW_REJECT_TRAILER:
        status = FW_STATUS_TRAILER_ERROR;
        break;
    default: /* length over the maximum, or truncated */
        status = FW_STATUS_LENGTH_ERROR;
        break;
    }
    r->stats.answered++;
    r->stats.naks++;
    return make_answer(r->crc, reject->machine, reject->type, reject->sub, status, out);
}

/* ------------------------------------------------------------------------ */
/* Stop-and-wait sender                                                      */

void fw_arq_init(fw_arq *a, uint32_t timeout_ticks, uint8_t retries, fw_tx_fn tx, void *ctx)
{
    memset(a, 0, sizeof *a);
    a->timeout = timeout_ticks;
    a->retries = retries;
    a->tx = tx;
    a->tx_ctx = ctx;
    a->last_status = 0xFF;
}

int fw_arq_busy(const fw_arq *a)
{
    return a->frame != NULL;
}

int fw_arq_send(fw_arq *a, const uint8_t *frame, size_t len, uint32_t now)
{
    return fw_arq_send_read(a, frame, len, now, 0);
}

int fw_arq_send_read(fw_arq *a, const uint8_t *frame, size_t len, uint32_t now,
                     uint32_t result_timeout)
{
    if (a->frame != NULL || len < FW_ACTION_OVERHEAD || !fw_action_is_request(frame[3])) {
        return -1; /* one frame at a time; a frame nobody answers would always fail */
    }
    a->frame = frame;
    a->frame_len = len;
    a->machine = frame[2];
    a->type = frame[3];
    a->sub = frame[6];
    a->attempts = 1;
    a->acknowledged = 0;
    a->result_timeout = result_timeout;
    a->deadline = now + a->timeout;
    a->stats.sent++;
    a->tx(a->tx_ctx, frame, len);
    return 0;
}

static void arq_idle(fw_arq *a)
{
    a->frame = NULL;
    a->frame_len = 0;
    a->acknowledged = 0;
    a->result_timeout = 0;
}

/* Damaged on the way (CRC, length, trailer) or not now (busy): worth sending again. */
static int arq_transient(uint8_t status)
{
    return status == FW_STATUS_CRC_ERROR || status == FW_STATUS_LENGTH_ERROR ||
           status == FW_STATUS_TRAILER_ERROR || status == FW_STATUS_BUSY;
}

static int arq_again(fw_arq *a, uint32_t now)
{
    if (a->attempts > a->retries) {
        a->stats.failed++;
        arq_idle(a);
        return FW_ARQ_FAILED;
    }
    a->attempts++;
    a->deadline = now + a->timeout;
    a->stats.retransmitted++;
    a->tx(a->tx_ctx, a->frame, a->frame_len);
    return FW_ARQ_RETRANSMIT;
}

int fw_arq_on_answer(fw_arq *a, const fw_action_frame *frame, uint32_t now)
{
    /* An answer: type T + 0x10 with T a request, one status byte, and the
     * outstanding frame's machine code and sub-command. */
    if (a->frame == NULL || a->acknowledged || frame->len != 1 ||
        frame->type < FW_TYPE_ANSWER_OFFSET ||
        !fw_action_is_request((uint8_t)(frame->type - FW_TYPE_ANSWER_OFFSET)) ||
        frame->type - FW_TYPE_ANSWER_OFFSET != a->type || frame->machine != a->machine ||
        frame->sub != a->sub) {
        a->stats.ignored++;
        return FW_ARQ_NONE;
    }
    a->last_status = frame->data[0];
    if (frame->data[0] == FW_STATUS_OK && a->result_timeout != 0) {
        a->acknowledged = 1; /* a read: its result delivers it */
        a->deadline = now + a->result_timeout;
        return FW_ARQ_ACKNOWLEDGED;
    }
    if (frame->data[0] == FW_STATUS_OK) {
        a->stats.delivered++;
        arq_idle(a);
        return FW_ARQ_DELIVERED;
    }
    a->stats.naks++;
    if (!arq_transient(frame->data[0])) {
        /* The request itself is refused (unknown sub-command, or a status this side
         * does not know): the same bytes again would be refused again. */
        a->stats.failed++;
        arq_idle(a);
        return FW_ARQ_FAILED;
    }
    return arq_again(a, now);
}

int fw_arq_poll(fw_arq *a, uint32_t now)
{
    if (a->frame == NULL || fw_pos_before(now, a->deadline)) {
        return FW_ARQ_NONE;
    }
    a->stats.timeouts++;
    if (a->acknowledged) {
        a->acknowledged = 0; /* answered, but the result was lost or damaged: ask again */
        a->stats.missing_results++;
    }
    return arq_again(a, now);
}

int fw_arq_on_result(fw_arq *a, uint32_t now)
{
    (void)now;
    if (a->frame == NULL || a->result_timeout == 0) {
        a->stats.ignored++;
        return FW_ARQ_NONE;
    }
    a->stats.delivered++;
    arq_idle(a);
    return FW_ARQ_DELIVERED;
}

int fw_arq_on_frame(fw_arq *a, const fw_action_frame *frame, uint32_t now)
{
    if (a->frame != NULL && a->result_timeout != 0 && frame->len != 1 &&
        frame->type == (uint8_t)(a->type + FW_TYPE_ANSWER_OFFSET) &&
        frame->machine == a->machine && frame->sub == a->sub) {
        return fw_arq_on_result(a, now);
    }
    return fw_arq_on_answer(a, frame, now);
}
