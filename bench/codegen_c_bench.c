/*
 * codegen_c_bench.c - generated receivers (fw_frames_gen.c, from the
 * descriptions) against firmware_ref's hand-written ones, on the same streams.
 *
 *   codegen_c_bench ODOM_STREAM ACTION_STREAM REPEAT
 *
 * Prints one JSON object: for each receiver the best time over REPEAT runs
 * and the frames it accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fw_action.h"
#include "fw_frames_gen.h"
#include "fw_sum8.h"

#define CHUNK 4096u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *d;
    long len;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0) {
        exit(2);
    }
    rewind(f);
    d = malloc((size_t)len + 1u);
    if (d == NULL || fread(d, 1, (size_t)len, f) != (size_t)len) {
        exit(2);
    }
    fclose(f);
    *n = (size_t)len;
    return d;
}

static uint32_t count;
static void gen_frame(void *ctx, const uint8_t *f, size_t len, uint32_t off)
{
    (void)ctx; (void)f; (void)len; (void)off;
    count++;
}
static void hand_sum8(void *ctx, const uint8_t *f, fw_pos_t off)
{
    (void)ctx; (void)f; (void)off;
    count++;
}
static void hand_action(void *ctx, const fw_action_frame *f, fw_pos_t off)
{
    (void)ctx; (void)f; (void)off;
    count++;
}

static uint32_t odom_hand_feed(const uint8_t *d, size_t n)
{
    fw_sum8_rx rx;
    size_t i;
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    for (i = 0; i < n; i += CHUNK) {
        fw_sum8_rx_feed(&rx, d + i, n - i < CHUNK ? n - i : CHUNK, hand_sum8, NULL);
    }
    fw_sum8_rx_finish(&rx);
    return rx.stats.frames;
}

static uint32_t odom_hand_byte(const uint8_t *d, size_t n)
{
    fw_sum8_rx rx;
    size_t i;
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    for (i = 0; i < n; i++) {
        count += (uint32_t)fw_sum8_rx_byte(&rx, d[i]);
    }
    fw_sum8_rx_finish(&rx);
    return rx.stats.frames;
}

static uint32_t odom_gen_feed(const uint8_t *d, size_t n)
{
    fwg_odom_rx rx;
    size_t i;
    fwg_odom_rx_init(&rx);
    for (i = 0; i < n; i += CHUNK) {
        fwg_odom_rx_feed(&rx, d + i, n - i < CHUNK ? n - i : CHUNK, gen_frame, NULL);
    }
    fwg_odom_rx_finish(&rx, gen_frame, NULL);
    return rx.stats.frames;
}

static uint32_t odom_gen_byte(const uint8_t *d, size_t n)
{
    fwg_odom_rx rx;
    size_t i;
    fwg_odom_rx_init(&rx);
    for (i = 0; i < n; i++) {
        fwg_odom_rx_byte(&rx, d[i], gen_frame, NULL);
    }
    fwg_odom_rx_finish(&rx, gen_frame, NULL);
    return rx.stats.frames;
}

static fw_crc16 crc;
static uint8_t abuf[FW_ACTION_RX_BUF_SIZE(FW_ACTION_MAX_LEN_DEFAULT)];

static uint32_t action_hand(const uint8_t *d, size_t n, size_t chunk)
{
    fw_action_rx rx;
    size_t i;
    fw_action_rx_init(&rx, &crc, abuf, sizeof abuf, FW_ACTION_MAX_LEN_DEFAULT, hand_action, NULL,
                      NULL);
    fw_action_rx_alt_header(&rx, 0, 0, 0);
    for (i = 0; i < n; i += chunk) {
        fw_action_rx_feed(&rx, d + i, n - i < chunk ? n - i : chunk);
    }
    fw_action_rx_finish(&rx);
    return rx.stats.frames;
}

static uint32_t action_gen(const uint8_t *d, size_t n, size_t chunk)
{
    static fwg_action_rx rx;
    size_t i;
    fwg_action_rx_init(&rx);
    for (i = 0; i < n; i += chunk) {
        fwg_action_rx_feed(&rx, d + i, n - i < chunk ? n - i : chunk, gen_frame, NULL);
    }
    fwg_action_rx_finish(&rx, gen_frame, NULL);
    return rx.stats.frames;
}

static uint32_t action_hand_feed(const uint8_t *d, size_t n) { return action_hand(d, n, CHUNK); }
static uint32_t action_hand_byte(const uint8_t *d, size_t n) { return action_hand(d, n, 1); }
static uint32_t action_gen_feed(const uint8_t *d, size_t n) { return action_gen(d, n, CHUNK); }
static uint32_t action_gen_byte(const uint8_t *d, size_t n) { return action_gen(d, n, 1); }

typedef uint32_t (*run_fn)(const uint8_t *, size_t);

typedef struct {
    const char *name;
    run_fn fn;
    int action; /* 0: the odometry stream, 1: the action stream */
} bench_t;

static const bench_t benches[] = {
    {"odom hand feed", odom_hand_feed, 0},     {"odom gen feed", odom_gen_feed, 0},
    {"odom hand byte", odom_hand_byte, 0},     {"odom gen byte", odom_gen_byte, 0},
    {"action hand feed", action_hand_feed, 1}, {"action gen feed", action_gen_feed, 1},
    {"action hand byte", action_hand_byte, 1}, {"action gen byte", action_gen_byte, 1},
};
#define NBENCH (sizeof benches / sizeof benches[0])

int main(int argc, char **argv)
{
    size_t no, na;
    uint8_t *odom, *action;
    int repeat;
    if (argc != 4) {
        fprintf(stderr, "usage: codegen_c_bench ODOM_STREAM ACTION_STREAM REPEAT\n");
        return 2;
    }
    odom = slurp(argv[1], &no);
    action = slurp(argv[2], &na);
    repeat = atoi(argv[3]);
    fw_crc16_init_name(&crc, FW_CRC16_DEFAULT);
    {
        /* Repeats interleaved across the receivers, best of each: a load spike on a
         * shared machine then hits all of them alike. */
        double best[NBENCH];
        uint32_t frames[NBENCH];
        size_t k;
        int r;
        for (k = 0; k < NBENCH; k++) {
            best[k] = 1e30;
            frames[k] = 0;
        }
        for (r = 0; r < repeat; r++) {
            for (k = 0; k < NBENCH; k++) {
                const uint8_t *d = benches[k].action ? action : odom;
                const size_t n = benches[k].action ? na : no;
                double t0 = now_s(), dt;
                frames[k] = benches[k].fn(d, n);
                dt = now_s() - t0;
                if (dt < best[k]) {
                    best[k] = dt;
                }
            }
        }
        printf("{\n");
        for (k = 0; k < NBENCH; k++) {
            printf("\"%s\": {\"s\": %.9f, \"frames\": %u}%s\n", benches[k].name, best[k],
                   frames[k], k + 1 < NBENCH ? "," : "");
        }
        printf("}\n");
    }
    free(odom);
    free(action);
    return 0;
}
