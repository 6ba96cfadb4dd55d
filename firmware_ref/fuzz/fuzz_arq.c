/*
 * fuzz_arq.c - the stop-and-wait sender driven by a script of sends,
 * answers (right, wrong, negative), stray frames and time steps. Checks its
 * bookkeeping: every frame sent ends delivered or failed exactly once, the
 * retransmissions per frame never exceed the limit, and every byte written
 * is a whole copy of the outstanding frame.
 */
#include "fuzz_util.h"

typedef struct {
    size_t writes;
    size_t bytes;
    const uint8_t *expect;
    size_t expect_len;
} tx_t;

static void tx(void *ctx, const uint8_t *data, size_t len)
{
    tx_t *t = ctx;
    FUZZ_CHECK(len == t->expect_len);
    FUZZ_CHECK(memcmp(data, t->expect, len) == 0);
    t->writes++;
    t->bytes += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fw_crc16 crc;
    static int ready = 0;
    uint8_t frame[11 + 8];
    uint8_t payload[8];
    fw_arq a;
    tx_t t;
    fz_in in;
    uint32_t now;
    uint32_t done = 0;
    size_t writes_this = 0;
    unsigned retries, timeout;

    if (size < 3) {
        return 0;
    }
    if (!ready) {
        fw_crc16_init_name(&crc, NULL);
        ready = 1;
    }
    retries = data[0] % 5u;
    timeout = 1u + data[1] % 50u;
    in.p = data + 2;
    in.n = size - 2;
    in.i = 0;
    memset(&t, 0, sizeof t);
    fw_arq_init(&a, timeout, (uint8_t)retries, tx, &t);
    /* Start near the wrap of the tick counter. */
    now = 0xFFFFFFF0u;
    while (in.i < in.n) {
        uint8_t op = fz_u8(&in);
        fw_action_frame f;
        uint8_t status = 0;
        int ev = FW_ARQ_NONE;
        switch (op & 3u) {
        case 0: { /* send */
            uint8_t type = (uint8_t)(fz_u8(&in) % 0x1Au);
            size_t len;
            memset(payload, op, sizeof payload);
            len = fw_action_encode(&crc, 1, type, 0x21, payload, (uint16_t)(op % 8u), frame,
                                   sizeof frame);
            if (fw_arq_busy(&a) || !fw_action_is_request(type)) {
                FUZZ_CHECK(fw_arq_send(&a, frame, len, now) == -1);
            } else {
                t.expect = frame;
                t.expect_len = len;
                writes_this = t.writes;
                FUZZ_CHECK(fw_arq_send(&a, frame, len, now) == 0);
                FUZZ_CHECK(t.writes == writes_this + 1);
            }
            break;
        }
        case 1: /* an answer, matching or not */
            f.machine = (op & 4u) ? 2 : 1;
            f.type = (uint8_t)(((op & 8u) ? 0x10 : 0x11) + (fz_u8(&in) % 8u));
            f.sub = (op & 16u) ? 0x22 : 0x21;
            f.len = (op & 32u) ? 2 : 1;
            status = (op & 64u) ? (uint8_t)(1 + op % 5u) : 0;
            f.data = &status;
            if (f.len == 2) {
                f.data = payload;
            }
            f.defects = 0;
            ev = fw_arq_on_answer(&a, &f, now);
            break;
        case 2: /* time passes */
            now += fz_u8(&in) % (2u * timeout);
            ev = fw_arq_poll(&a, now);
            break;
        default:
            ev = fw_arq_poll(&a, now);
            break;
        }
        if (ev == FW_ARQ_DELIVERED || ev == FW_ARQ_FAILED) {
            done++;
            FUZZ_CHECK(!fw_arq_busy(&a));
            /* first attempt + at most `retries` retransmissions */
            FUZZ_CHECK(t.writes - writes_this <= 1u + retries);
        }
        FUZZ_CHECK(a.stats.delivered + a.stats.failed == done);
        FUZZ_CHECK(a.stats.sent == done + (fw_arq_busy(&a) ? 1u : 0u));
        FUZZ_CHECK(t.writes == a.stats.sent + a.stats.retransmitted);
        FUZZ_CHECK(a.stats.retransmitted + a.stats.failed == a.stats.timeouts + a.stats.naks);
    }
    return 0;
}
