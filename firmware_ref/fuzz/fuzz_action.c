/*
 * fuzz_action.c - the action receiver against the whole-buffer reference
 * (the host's scan): frames, rejections and counters, byte by byte and in
 * chunks; every frame it delivers re-encodes to the bytes it came from, and
 * every answer is a valid frame.
 */
#include "fuzz_util.h"

#define CAP 16384
#define MAXF 4096

typedef struct {
    ref_action_frame frames[MAXF];
    fw_action_reject rejects[MAXF];
    size_t nf, nr;
    const uint8_t *stream;
    const fw_crc16 *crc;
    fw_responder resp;
    uint8_t keep[256];
} sink_t;

static void on_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    sink_t *s = ctx;
    uint8_t enc[11 + 256];
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n;
    FUZZ_CHECK(s->nf < MAXF);
    s->frames[s->nf].offset = offset;
    s->frames[s->nf].len = f->len;
    s->frames[s->nf].defects = f->defects;
    s->nf++;
    FUZZ_CHECK(f->data == NULL || f->len <= 256);
    if (f->defects == 0) {
        n = fw_action_encode(s->crc, f->machine, f->type, f->sub, f->data, f->len, enc,
                             sizeof enc);
        FUZZ_CHECK(n == 11u + f->len);
        FUZZ_CHECK(memcmp(enc, s->stream + offset, n) == 0);
    }
    n = fw_responder_answer(&s->resp, f, FW_STATUS_AUTO, ans, NULL);
    FUZZ_CHECK(n == 0 || fw_action_check(s->crc, ans, n) == 0);
}

static void on_reject(void *ctx, const fw_action_reject *r)
{
    sink_t *s = ctx;
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n;
    FUZZ_CHECK(s->nr < MAXF);
    s->rejects[s->nr++] = *r;
    n = fw_responder_answer_rejected(&s->resp, r, ans);
    FUZZ_CHECK(n == 0 || fw_action_check(s->crc, ans, n) == 0);
}

static void same(const sink_t *s, const fw_action_stats *st, const ref_action *ref,
                 const ref_action_frame *rf, const fw_action_reject *rr)
{
    size_t i;
    FUZZ_CHECK(s->nf == ref->nframes);
    FUZZ_CHECK(s->nr == ref->nrejects);
    for (i = 0; i < s->nf; i++) {
        FUZZ_CHECK(s->frames[i].offset == rf[i].offset);
        FUZZ_CHECK(s->frames[i].len == rf[i].len);
        FUZZ_CHECK(s->frames[i].defects == rf[i].defects);
    }
    for (i = 0; i < s->nr; i++) {
        FUZZ_CHECK(s->rejects[i].offset == rr[i].offset);
        FUZZ_CHECK(s->rejects[i].reason == rr[i].reason);
        FUZZ_CHECK(s->rejects[i].has_sub == rr[i].has_sub);
        FUZZ_CHECK(s->rejects[i].sub == rr[i].sub);
        FUZZ_CHECK(s->rejects[i].type == rr[i].type);
        FUZZ_CHECK(s->rejects[i].machine == rr[i].machine);
    }
    FUZZ_CHECK(memcmp(st, &ref->stats, sizeof *st) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t stream[CAP];
    static uint8_t rxbuf[FW_ACTION_RX_BUF_SIZE(256)];
    static ref_action_frame rf[MAXF];
    static fw_action_reject rr[MAXF];
    static sink_t s;
    static fw_crc16 crc;
    static int crc_ready = 0;
    fz_in in;
    ref_action ref;
    fw_action_rx rx;
    unsigned max_len;
    int relaxed, alt, pass;
    size_t n, i;

    if (size < 3) {
        return 0;
    }
    if (!crc_ready) {
        fw_crc16_init_name(&crc, NULL);
        crc_ready = 1;
    }
    max_len = data[0] % 80u;
    relaxed = (data[1] & 1u) != 0;
    alt = (data[1] & 2u) == 0;
    in.p = data + 2;
    in.n = size - 2;
    in.i = 0;
    if (data[1] & 4u) {
        n = in.n < CAP ? in.n : CAP;
        memcpy(stream, in.p, n);
    } else {
        n = fz_action_stream(&in, &crc, max_len, stream, CAP);
    }
    ref_action_scan(&crc, stream, n, max_len, relaxed, alt, 0xFE, 0xFF, rf, rr, &ref);

    for (pass = 0; pass < 2; pass++) {
        s.nf = s.nr = 0;
        s.stream = stream;
        s.crc = &crc;
        fw_responder_init(&s.resp, &crc, s.keep, sizeof s.keep);
        FUZZ_CHECK(fw_action_rx_init(&rx, &crc, rxbuf, sizeof rxbuf, (uint16_t)max_len, on_frame,
                                     on_reject, &s) == 0);
        rx.relaxed = (uint8_t)relaxed;
        fw_action_rx_alt_header(&rx, alt, 0xFE, 0xFF);
        if (pass == 0) {
            for (i = 0; i < n; i++) {
                fw_action_rx_byte(&rx, stream[i]);
                FUZZ_CHECK(rx.end - rx.start < FW_ACTION_RX_BUF_SIZE(max_len));
            }
        } else {
            for (i = 0; i < n;) {
                size_t k = 1u + (i * 13u + data[1]) % 97u;
                if (k > n - i) {
                    k = n - i;
                }
                fw_action_rx_feed(&rx, stream + i, k);
                i += k;
            }
        }
        fw_action_rx_finish(&rx);
        same(&s, &rx.stats, &ref, rf, rr);
    }
    return 0;
}
