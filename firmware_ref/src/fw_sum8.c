/*
 * fw_sum8.c - sum-8 frames: encoders, decoders and the backtracking receiver.
 * See fw_sum8.h for the wire format and the receiver's contract.
 */
#include "fw_sum8.h"

uint8_t fw_sum8(const uint8_t *data, size_t len)
{
    unsigned s = 0;
    size_t i;
    for (i = 0; i < len; i++) {
        s += data[i];
    }
    return (uint8_t)(s & 0xFFu);
}

/* The codecs are the generated ones (fw_frames_gen.c); these keep the API. */
size_t fw_odom_encode(const fw_odom *odom, uint8_t out[FW_ODOM_SIZE])
{
    fwg_odom_t v;
    v.vx = odom->vx;
    v.vy = odom->vy;
    v.wz = odom->wz;
    v.yaw_deg = odom->yaw_deg;
    return fwg_odom_encode(&v, out, FW_ODOM_SIZE);
}

size_t fw_cmd_encode(const fw_cmd *cmd, uint8_t out[FW_CMD_SIZE])
{
    fwg_cmd_t v;
    v.vx = cmd->vx;
    v.vy = cmd->vy;
    v.wz = cmd->wz;
    return fwg_cmd_encode(&v, out, FW_CMD_SIZE);
}

void fw_odom_send(const fw_odom *odom, fw_tx_fn tx, void *ctx)
{
    uint8_t buf[FW_ODOM_SIZE];
    tx(ctx, buf, fw_odom_encode(odom, buf));
}

void fw_odom_decode(const uint8_t frame[FW_ODOM_SIZE], fw_odom *out)
{
    fwg_odom_t v;
    fwg_odom_decode(frame, FW_ODOM_SIZE, &v);
    out->vx = v.vx;
    out->vy = v.vy;
    out->wz = v.wz;
    out->yaw_deg = v.yaw_deg;
}

void fw_cmd_decode(const uint8_t frame[FW_CMD_SIZE], fw_cmd *out)
{
    fwg_cmd_t v;
    fwg_cmd_decode(frame, FW_CMD_SIZE, &v);
    out->vx = v.vx;
    out->vy = v.vy;
    out->wz = v.wz;
}

int fw_sum8_check(const uint8_t *data, size_t len, size_t frame_size)
{
    if (len != frame_size) {
        return -1;
    }
    if (data[0] != FW_SUM8_H0 || data[1] != FW_SUM8_H1) {
        return -2;
    }
    if (fw_sum8(data + 2, len - 3) != data[len - 1]) {
        return -3;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Receiver                                                                  */

void fw_sum8_rx_init(fw_sum8_rx *rx, uint8_t frame_size)
{
    memset(rx, 0, sizeof *rx);
    rx->size = frame_size == FW_CMD_SIZE ? FW_CMD_SIZE : FW_ODOM_SIZE;
}

/* n bytes starting at stream position `at` leave the buffer: those at or
 * after the end of the last accepted frame were in no frame. */
static void drop(fw_sum8_rx *rx, fw_pos_t at, unsigned n)
{
    int32_t inside = (int32_t)(rx->covered - at);
    unsigned k;
    if (inside <= 0) {
        k = n;
    } else if ((uint32_t)inside >= n) {
        k = 0;
    } else {
        k = n - (unsigned)inside;
    }
    if (k != 0) {
        rx->stats.discarded += k;
        rx->gap = 1;
    }
}

static uint32_t load32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w); /* unaligned-safe; compiles to one load */
    return w;
}

/* Sum of 4*words bytes mod 256, four at a time: a sum does not depend on
 * the byte order, so the word trick is portable. */
static unsigned sum8_words(const uint8_t *p, unsigned words)
{
    uint32_t acc = 0;
    unsigned i;
    for (i = 0; i < words; i++) {
        uint32_t w = load32(p + 4 * i);
        acc += (w & 0x00FF00FFu) + ((w >> 8) & 0x00FF00FFu);
    }
    acc = (acc & 0xFFFFu) + (acc >> 16);
    return acc & 0xFFu;
}

/* 1 when one of the float32 LE fields at p is NaN or infinite (exponent all
 * ones: low 7 bits of the high byte and the top bit of the next), branch-free. */
static unsigned any_nonfinite(const uint8_t *p, unsigned fields)
{
    unsigned m = 0, i;
    for (i = 0; i < fields; i++) {
        unsigned x = (p[4 * i + 3] | 0x80u) & (p[4 * i + 2] | 0x7Fu);
        m |= (x + 1u) >> 8;
    }
    return m;
}

/* Nonzero when some byte of w is 0xAA (exact presence test). */
static uint32_t has_aa(uint32_t w)
{
    uint32_t v = w ^ 0xAAAAAAAAu;
    return (v - 0x01010101u) & ~v & 0x80808080u;
}

/* Where the scan resumes after the candidate at p[0..size): the first AA 55
 * after the header, or a lone AA in the last byte; size when there is none. */
static unsigned next_candidate(const uint8_t *p, unsigned size)
{
    unsigned j = 1;
    /* Skip AA-free words first: the common case is none at all. */
    while (j + 4 <= size && !has_aa(load32(p + j))) {
        j += 4;
    }
    for (; j < size; j++) {
        if (p[j] == FW_SUM8_H0 && (j == size - 1 || p[j + 1] == FW_SUM8_H1)) {
            return j;
        }
    }
    return size;
}

/* Judge the whole candidate at p (stream position pos) and count it.
 * Returns 1 when it is a frame. */
static int judge(fw_sum8_rx *rx, const uint8_t *p, fw_pos_t pos)
{
    const unsigned size = rx->size;
    /* Constant trip counts for the two frame sizes: the loops unroll. */
    const unsigned sum = size == FW_ODOM_SIZE ? sum8_words(p + 2, 4) : sum8_words(p + 2, 3);
    if (sum != p[size - 1]) {
        if (!fw_pos_before(pos, rx->covered)) {
            /* A rejected candidate inside an accepted frame is payload, not an error. */
            rx->stats.checksum_errors++;
        }
        return 0;
    }
    rx->frame_offset = pos;
    rx->stats.frames++;
    rx->stats.nonfinite += size == FW_ODOM_SIZE ? any_nonfinite(p + 2, 4) : any_nonfinite(p + 2, 3);
    if (fw_pos_before(pos, rx->covered)) {
        /* A false accept cannot swallow the real frame: both are reported. */
        rx->stats.overlapping++;
    } else if (rx->gap) {
        rx->stats.resyncs++;
        rx->gap = 0;
    }
    rx->covered = pos + size;
    return 1;
}

/* The buffer holds one whole candidate (len == size): judge it, then rescan
 * from the byte after its header. Returns 1 when it was a frame. */
static int resolve(fw_sum8_rx *rx)
{
    const unsigned size = rx->size;
    const fw_pos_t pos = rx->stats.bytes - size;
    const int ok = judge(rx, rx->buf, pos);
    const unsigned j = next_candidate(rx->buf, size);
    drop(rx, pos, j);
    rx->len = (uint32_t)(size - j);
    if (ok) {
        rx->in_copy = 0;
    }
    if (j < size) {
        if (ok) {
            /* Keep the frame readable while buf moves on (rare: an AA in it). */
            memcpy(rx->copy, rx->buf, size);
            rx->in_copy = 1;
        }
        memmove(rx->buf, rx->buf + j, size - j);
    }
    return ok;
}

int fw_sum8_rx_byte_slow(fw_sum8_rx *rx, uint8_t b)
{
    const unsigned len = rx->len;
    const unsigned size = rx->size;
    rx->stats.bytes++;
    if (len >= 2) {
        rx->buf[len] = (uint8_t)b;
        if (len + 1 < size) {
            rx->len = (uint32_t)(len + 1);
            return 0;
        }
        rx->len = (uint32_t)size;
        return resolve(rx);
    }
    if (len == 1) {
        if (b == FW_SUM8_H1) {
            rx->buf[1] = b;
            rx->len = 2;
            return 0;
        }
        drop(rx, rx->stats.bytes - 2, 1); /* the held AA heads nothing */
        if (b == FW_SUM8_H0) {
            return 0; /* the new AA takes its place */
        }
        rx->len = 0;
    } else if (b == FW_SUM8_H0) {
        rx->buf[0] = b;
        rx->len = 1;
        return 0;
    }
    drop(rx, rx->stats.bytes - 1, 1);
    return 0;
}

size_t fw_sum8_rx_feed(fw_sum8_rx *rx, const uint8_t *data, size_t len,
                       fw_sum8_frame_fn on_frame, void *ctx)
{
    const unsigned size = rx->size;
    size_t i = 0;
    size_t frames = 0;
    while (i < len) {
        unsigned held = rx->len;
        if (held == 0) {
            const uint8_t *p = data + i;
            size_t left = len - i;
            if (p[0] != FW_SUM8_H0) {
                /* Noise: skip to the next AA. */
                const uint8_t *aa = memchr(p, FW_SUM8_H0, left);
                size_t k = aa != NULL ? (size_t)(aa - p) : left;
                drop(rx, rx->stats.bytes, (unsigned)k);
                rx->stats.bytes += (uint32_t)k;
                i += k;
                continue;
            }
            if (left >= size && p[1] == FW_SUM8_H1) {
                /* A whole candidate in the chunk: judge it in place, no copy. */
                const fw_pos_t pos = rx->stats.bytes;
                unsigned j;
                if (judge(rx, p, pos)) {
                    frames++;
                    if (on_frame != NULL) {
                        on_frame(ctx, p, pos);
                    }
                }
                j = next_candidate(p, size);
                drop(rx, pos, j);
                rx->stats.bytes += j;
                i += j; /* the bytes from j on are scanned again */
                continue;
            }
            fw_sum8_rx_byte(rx, data[i++]); /* AA at the chunk's end, or AA not followed by 55 */
        } else if (held >= 2) {
            /* Inside a candidate: take the rest of it in one copy. */
            size_t want = (size_t)size - held;
            size_t k = len - i < want ? len - i : want;
            memcpy(rx->buf + held, data + i, k);
            i += k;
            rx->stats.bytes += (uint32_t)k;
            if (k < want) {
                rx->len = (uint32_t)(held + k);
                break;
            }
            rx->len = (uint32_t)size;
            if (resolve(rx)) {
                frames++;
                if (on_frame != NULL) {
                    on_frame(ctx, fw_sum8_rx_frame(rx), rx->frame_offset);
                }
            }
        } else {
            fw_sum8_rx_byte(rx, data[i++]); /* a lone AA held */
        }
    }
    return frames;
}

size_t fw_sum8_rx_finish(fw_sum8_rx *rx)
{
    size_t held = rx->len;
    if (held != 0) {
        drop(rx, rx->stats.bytes - (fw_pos_t)held, (unsigned)held);
    }
    rx->len = 0;
    return held;
}
