/*
 * fuzz_util.h - shared by the fuzz targets and the unit tests: whole-buffer
 * reference receivers (written independently of the incremental ones, in
 * the style of the host's scanners) and a script decoder that turns fuzz
 * input into streams of valid, corrupted and truncated frames in noise, so
 * random inputs reach deep into the receivers.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "fw_action.h"
#include "fw_sum8.h"

#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* A byte cursor over the fuzz input. */
typedef struct {
    const uint8_t *p;
    size_t n, i;
} fz_in;

static inline uint8_t fz_u8(fz_in *in)
{
    return in->i < in->n ? in->p[in->i++] : 0;
}

/* ---- sum-8 reference: every complete AA 55 position is a candidate ---- */

typedef struct {
    fw_sum8_stats stats;
    size_t nframes;
} ref_sum8;

/* offsets: room for n entries. Semantics after finish(). */
static inline void ref_sum8_scan(const uint8_t *b, size_t n, unsigned size, uint32_t *offsets,
                          ref_sum8 *out)
{
    size_t i;
    size_t cur = 0;     /* end of the frames so far */
    size_t covered = 0; /* bytes inside accepted frames */
    memset(out, 0, sizeof *out);
    out->stats.bytes = (uint32_t)n;
    for (i = 0; i + 1 < n; i++) {
        unsigned s = 0, k;
        if (b[i] != 0xAA || b[i + 1] != 0x55 || i + size > n) {
            continue;
        }
        for (k = 2; k < size - 1; k++) {
            s += b[i + k];
        }
        if ((s & 0xFFu) != b[i + size - 1]) {
            if (i >= cur) {
                out->stats.checksum_errors++;
            }
            continue;
        }
        offsets[out->nframes++] = (uint32_t)i;
        out->stats.frames++;
        for (k = 2; k + 4 <= size - 1; k += 4) {
            if ((b[i + k + 3] & 0x7F) == 0x7F && (b[i + k + 2] & 0x80)) {
                out->stats.nonfinite++;
                break;
            }
        }
        if (i < cur) {
            out->stats.overlapping++;
            covered += i + size - cur;
        } else {
            if (i > cur) {
                out->stats.resyncs++;
            }
            covered += size;
        }
        cur = i + size;
    }
    out->stats.discarded = (uint32_t)(n - covered);
}

/* ---- action reference: the host's scan over the whole stream, final ---- */

typedef struct {
    fw_action_stats stats;
    size_t nframes;
    size_t nrejects;
} ref_action;

typedef struct {
    uint32_t offset;
    uint16_t len;
    uint8_t defects;
} ref_action_frame;

static inline void ref_action_scan(const fw_crc16 *crc, const uint8_t *b, size_t n, unsigned max_len,
                            int relaxed, int alt, uint8_t a0, uint8_t a1,
                            ref_action_frame *frames, fw_action_reject *rejects,
                            ref_action *out)
{
    size_t pos = 0, cur = 0;
    int gap = 0;
    memset(out, 0, sizeof *out);
    out->stats.bytes = (uint32_t)n;
    if (a0 == 0xFE && a1 == 0xEF) {
        alt = 0;
    }
    while (pos < n) {
        size_t i = pos, avail, len, end;
        int primary, isalt, crc_ok;
        uint8_t reason = 0;
        while (i < n && !(b[i] == 0xFE || (alt && b[i] == a0))) {
            i++;
        }
        if (i + 1 >= n) {
            break; /* none, or a lone first byte at the very end */
        }
        primary = b[i] == 0xFE && b[i + 1] == 0xEF;
        isalt = alt && b[i] == a0 && b[i + 1] == a1;
        pos = i + 1;
        if (!primary && !isalt) {
            continue;
        }
        avail = n - i;
        if (avail < 7) {
            reason = FW_REJECT_TRUNCATED;
        } else {
            len = (size_t)b[i + 4] | ((size_t)b[i + 5] << 8);
            end = i + 11 + len;
            if (len > max_len) {
                reason = FW_REJECT_LENGTH;
            } else if (end > n) {
                reason = FW_REJECT_TRUNCATED;
            } else if (b[end - 2] != 0xFD || b[end - 1] != 0xDF) {
                reason = FW_REJECT_TRAILER;
            } else {
                crc_ok = fw_crc16_compute(crc, b + i + 2, 5 + len) ==
                         (uint16_t)(b[end - 4] | (b[end - 3] << 8));
                if (!(primary && crc_ok) && !relaxed) {
                    if (!primary) {
                        out->stats.header_errors++;
                    }
                    if (!crc_ok) {
                        out->stats.checksum_errors++;
                        if (primary) {
                            reason = FW_REJECT_CRC;
                        }
                    }
                    if (reason == 0) {
                        continue;
                    }
                } else {
                    uint8_t defects = 0;
                    if (!(primary && crc_ok)) {
                        defects = (uint8_t)((primary ? 0 : FW_DEFECT_HEADER) |
                                            (crc_ok ? 0 : FW_DEFECT_CRC));
                        out->stats.relaxed_accepts++;
                    }
                    if (i > cur || gap) {
                        out->stats.resyncs++;
                        gap = 0;
                    }
                    out->stats.discarded += (uint32_t)(i - cur);
                    frames[out->nframes].offset = (uint32_t)i;
                    frames[out->nframes].len = (uint16_t)len;
                    frames[out->nframes].defects = defects;
                    out->nframes++;
                    out->stats.frames++;
                    cur = pos = end;
                    continue;
                }
            }
        }
        if (!primary) {
            continue;
        }
        switch (reason) {
        case FW_REJECT_TRUNCATED:
            out->stats.truncated++;
            break;
        case FW_REJECT_LENGTH:
            out->stats.length_errors++;
            break;
        case FW_REJECT_TRAILER:
            out->stats.trailer_errors++;
            break;
        default:
            break; /* CRC: counted above */
        }
        if (avail >= 4) {
            fw_action_reject *r = &rejects[out->nrejects++];
            r->offset = (uint32_t)i;
            r->reason = reason;
            r->machine = b[i + 2];
            r->type = b[i + 3];
            r->has_sub = (uint8_t)(avail > 6);
            r->sub = r->has_sub ? b[i + 6] : 0;
        }
    }
    out->stats.discarded += (uint32_t)(n - cur);
}

/* ---- stream scripts ---- */

/* Turn fuzz input into a sum-8 stream in out (cap bytes); returns its length. */
static inline size_t fz_sum8_stream(fz_in *in, unsigned size, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (in->i < in->n && n + 64 <= cap) {
        uint8_t op = fz_u8(in);
        uint8_t frame[FW_ODOM_SIZE];
        unsigned k, m;
        frame[0] = 0xAA;
        frame[1] = 0x55;
        for (k = 2; k < size - 1; k++) {
            frame[k] = fz_u8(in);
        }
        frame[size - 1] = fw_sum8(frame + 2, size - 3);
        switch (op & 7u) {
        case 0: case 1: case 2: /* a valid frame */
            memcpy(out + n, frame, size);
            n += size;
            break;
        case 3: /* a truncated frame */
            m = 2u + fz_u8(in) % (size - 2u);
            memcpy(out + n, frame, m);
            n += m;
            break;
        case 4: /* a corrupted frame */
            frame[2u + fz_u8(in) % (size - 2u)] ^= (uint8_t)(1u + fz_u8(in) % 255u);
            memcpy(out + n, frame, size);
            n += size;
            break;
        case 5: /* header bytes */
            m = 1u + (op >> 3) % 4u;
            for (k = 0; k < m; k++) {
                out[n++] = (op & 0x40) ? 0xAA : (k & 1u ? 0x55 : 0xAA);
            }
            break;
        default: /* raw bytes */
            m = (op >> 3) % 24u;
            for (k = 0; k < m; k++) {
                out[n++] = fz_u8(in);
            }
            break;
        }
    }
    return n;
}

/* An action stream: valid, corrupted, truncated frames, FE EF in noise. */
static inline size_t fz_action_stream(fz_in *in, const fw_crc16 *crc, unsigned max_len, uint8_t *out,
                               size_t cap)
{
    size_t n = 0;
    uint8_t data[80];
    while (in->i < in->n && n + 200 <= cap) {
        uint8_t op = fz_u8(in);
        unsigned dlen = fz_u8(in) % (max_len + 8u < sizeof data ? max_len + 8u : sizeof data);
        unsigned k, m;
        size_t len;
        uint8_t machine = fz_u8(in), type = (uint8_t)(fz_u8(in) % 0x1Au), sub = fz_u8(in);
        for (k = 0; k < dlen; k++) {
            data[k] = fz_u8(in);
            if ((op & 0x80) && k + 1 < dlen && (k % 7u) == 3u) {
                /* trailer/header bytes in the data */
                data[k] = (k & 8u) ? 0xFD : 0xFE;
                data[k + 1] = (k & 8u) ? 0xDF : 0xEF;
                k++;
            }
        }
        len = fw_action_encode(crc, machine, type, sub, data, (uint16_t)dlen, out + n, cap - n);
        switch (op & 7u) {
        case 0: case 1: case 2:
            n += len;
            break;
        case 3: /* truncated */
            n += 2u + fz_u8(in) % (len - 2u);
            break;
        case 4: /* one byte changed */
            out[n + 2u + fz_u8(in) % (len - 2u)] ^= (uint8_t)(1u + fz_u8(in) % 255u);
            n += len;
            break;
        case 5: /* the worked example's header */
            out[n + 1] = 0xFF;
            n += len;
            break;
        default: /* raw bytes, rich in header values */
            m = (op >> 3) % 16u;
            for (k = 0; k < m; k++) {
                uint8_t v = fz_u8(in);
                out[n++] = (v & 3u) == 0 ? 0xFE : (v & 3u) == 1 ? 0xEF : v;
            }
            break;
        }
    }
    return n;
}

#endif /* FUZZ_UTIL_H */
