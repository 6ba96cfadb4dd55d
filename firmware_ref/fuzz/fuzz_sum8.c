/*
 * fuzz_sum8.c - the sum-8 receiver against the whole-buffer reference: the
 * same frames, offsets and counters, fed byte by byte and in random chunks;
 * and the receivers generated from protocols/frames/{odom,cmd}.toml
 * (fw_frames_gen.c, which the board build uses) against both.
 */
#include "fuzz_util.h"

#define CAP 8192

typedef struct {
    uint32_t offsets[CAP];
    size_t n;
} sink_t;

static void sink(void *ctx, const uint8_t *frame, fw_pos_t offset)
{
    sink_t *s = ctx;
    (void)frame;
    s->offsets[s->n++] = offset;
}

static void same_stats(const fw_sum8_stats *a, const fw_sum8_stats *b)
{
    FUZZ_CHECK(a->frames == b->frames);
    FUZZ_CHECK(a->bytes == b->bytes);
    FUZZ_CHECK(a->checksum_errors == b->checksum_errors);
    FUZZ_CHECK(a->discarded == b->discarded);
    FUZZ_CHECK(a->resyncs == b->resyncs);
    FUZZ_CHECK(a->nonfinite == b->nonfinite);
    FUZZ_CHECK(a->overlapping == b->overlapping);
}

static sink_t g;

static void gen_sink(void *ctx, const uint8_t *frame, size_t len, uint32_t offset)
{
    (void)frame;
    (void)len;
    sink(ctx, frame, offset);
}

/* The generated receiver's counters: the hand-written ones, plus a trailer count that a
 * trailer-less frame never moves. Compared before finish(): at the end of a stream the
 * two count a held partial candidate differently (the generated one does not call it
 * discarded); a link that never ends never gets there, and the frames still agree. */
#define SAME_GEN_STATS(gs, ref)                                                            \
    do {                                                                                  \
        FUZZ_CHECK((gs).frames == (ref).frames && (gs).bytes == (ref).bytes);             \
        FUZZ_CHECK((gs).checksum_errors == (ref).checksum_errors);                        \
        FUZZ_CHECK((gs).discarded == (ref).discarded && (gs).resyncs == (ref).resyncs);   \
        FUZZ_CHECK((gs).nonfinite == (ref).nonfinite);                                    \
        FUZZ_CHECK((gs).overlapping == (ref).overlapping && (gs).trailer_errors == 0);    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t stream[CAP];
    static uint32_t ref_offsets[CAP];
    static sink_t a, b;
    fz_in in;
    ref_sum8 ref;
    fw_sum8_rx rx1, rx2;
    fw_sum8_stats pre;
    unsigned fsize;
    size_t n, i;
    uint8_t mode;

    if (size < 2) {
        return 0;
    }
    mode = data[0];
    fsize = (mode & 1u) ? FW_CMD_SIZE : FW_ODOM_SIZE;
    in.p = data + 1;
    in.n = size - 1;
    in.i = 0;
    /* Half the inputs are raw bytes, half scripts of frames in noise. */
    if (mode & 2u) {
        n = in.n < CAP ? in.n : CAP;
        memcpy(stream, in.p, n);
    } else {
        n = fz_sum8_stream(&in, fsize, stream, CAP);
    }
    ref_sum8_scan(stream, n, fsize, ref_offsets, &ref);

    /* Byte by byte. */
    fw_sum8_rx_init(&rx1, (uint8_t)fsize);
    a.n = 0;
    memset(&pre, 0, sizeof pre);
    for (i = 0; i < n; i++) {
        if (fw_sum8_rx_byte(&rx1, stream[i])) {
            FUZZ_CHECK(fw_sum8_check(fw_sum8_rx_frame(&rx1), fsize, fsize) == 0);
            FUZZ_CHECK(memcmp(fw_sum8_rx_frame(&rx1), stream + rx1.frame_offset, fsize) == 0);
            sink(&a, fw_sum8_rx_frame(&rx1), rx1.frame_offset);
        }
        FUZZ_CHECK(rx1.len < fsize);
    }
    pre = rx1.stats; /* a live link never ends: the counters before finish() matter */
    fw_sum8_rx_finish(&rx1);

    /* In chunks whose sizes come from the mode byte. */
    fw_sum8_rx_init(&rx2, (uint8_t)fsize);
    b.n = 0;
    for (i = 0; i < n;) {
        size_t k = 1u + (i * 7u + mode) % (1u + (mode >> 2));
        if (k > n - i) {
            k = n - i;
        }
        fw_sum8_rx_feed(&rx2, stream + i, k, sink, &b);
        i += k;
    }
    fw_sum8_rx_finish(&rx2);

    /* The generated receiver, in the same chunks. */
    g.n = 0;
    if (fsize == FW_CMD_SIZE) {
        static fwg_cmd_rx gc;
        fwg_cmd_rx_init(&gc);
        for (i = 0; i < n;) {
            size_t k = 1u + (i * 7u + mode) % (1u + (mode >> 2));
            k = k > n - i ? n - i : k;
            fwg_cmd_rx_feed(&gc, stream + i, k, gen_sink, &g);
            i += k;
        }
        SAME_GEN_STATS(gc.stats, pre);
        fwg_cmd_rx_finish(&gc, gen_sink, &g);
    } else {
        static fwg_odom_rx go;
        fwg_odom_rx_init(&go);
        for (i = 0; i < n; i++) {
            fwg_odom_rx_byte(&go, stream[i], gen_sink, &g);
        }
        SAME_GEN_STATS(go.stats, pre);
        fwg_odom_rx_finish(&go, gen_sink, &g);
    }
    FUZZ_CHECK(g.n == ref.nframes);
    for (i = 0; i < ref.nframes; i++) {
        FUZZ_CHECK(g.offsets[i] == ref_offsets[i]);
    }

    FUZZ_CHECK(a.n == ref.nframes && b.n == ref.nframes);
    for (i = 0; i < ref.nframes; i++) {
        FUZZ_CHECK(a.offsets[i] == ref_offsets[i]);
        FUZZ_CHECK(b.offsets[i] == ref_offsets[i]);
    }
    same_stats(&rx1.stats, &ref.stats);
    same_stats(&rx2.stats, &ref.stats);
    return 0;
}
