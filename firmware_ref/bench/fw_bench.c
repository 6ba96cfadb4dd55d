/*
 * fw_bench.c - receiver throughput: firmware_ref's sum-8 receiver against
 * the seed's GetOneByte (and its ROS-side twin) on the same stream.
 *
 *   fw_bench [--kind odom|cmd] [--repeat R] [--chunk C] [--out DIR] STREAM
 *
 * Prints one JSON object: for each receiver the best time over R runs and
 * the frames it decoded. With --out, also writes each receiver's frame
 * offsets (uint32, native byte order, from an untimed run) to DIR/<name>.offsets,
 * so frames can be matched with the intact ones by position. The seed's
 * code reports no offsets: its frame's offset is the position of the byte
 * that completed it, minus the frame size plus one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../bench/baselines/seed_getonebyte.h"
#include "fw_sum8.h"

static uint32_t seed_frames;
static int seed_track;
static uint32_t seed_pos;
static uint32_t *seed_offsets;
static unsigned seed_size;

void seed_on_frame(void)
{
    if (seed_track) {
        seed_offsets[seed_frames] = seed_pos + 1u - seed_size;
    }
    seed_frames++;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    uint32_t *offsets; /* NULL: count only */
    uint32_t n;
} sink_t;

static void on_frame(void *ctx, const uint8_t *frame, fw_pos_t offset)
{
    sink_t *s = ctx;
    (void)frame;
    if (s->offsets != NULL) {
        s->offsets[s->n] = offset;
    }
    s->n++;
}

/* The receivers under test; each returns the number of frames. */
static uint32_t run_ours_bytewise(const uint8_t *d, size_t n, unsigned size, uint32_t *offs)
{
    fw_sum8_rx rx;
    uint32_t k = 0;
    size_t i;
    fw_sum8_rx_init(&rx, (uint8_t)size);
    for (i = 0; i < n; i++) {
        if (fw_sum8_rx_byte(&rx, d[i])) {
            if (offs != NULL) {
                offs[k] = rx.frame_offset;
            }
            k++;
        }
    }
    fw_sum8_rx_finish(&rx);
    return k;
}

static size_t chunk = 4096;

static uint32_t run_ours_feed(const uint8_t *d, size_t n, unsigned size, uint32_t *offs)
{
    fw_sum8_rx rx;
    sink_t s;
    size_t i;
    s.offsets = offs;
    s.n = 0;
    fw_sum8_rx_init(&rx, (uint8_t)size);
    for (i = 0; i < n; i += chunk) {
        fw_sum8_rx_feed(&rx, d + i, n - i < chunk ? n - i : chunk, on_frame, &s);
    }
    fw_sum8_rx_finish(&rx);
    return s.n;
}

/* The seed's state is static: one instance per process, fresh per run only
 * in the sense that a run starts where the last left off (at most one
 * partial frame, the same for every repeat). */
static uint32_t run_seed(const uint8_t *d, size_t n, unsigned size, uint32_t *offs)
{
    size_t i;
    void (*one)(uint8_t) = size == FW_CMD_SIZE ? GetOneByte : RosOdomOneByte;
    seed_frames = 0;
    seed_size = size;
    seed_offsets = offs;
    seed_track = offs != NULL;
    if (seed_track) {
        for (i = 0; i < n; i++) {
            seed_pos = (uint32_t)i;
            one(d[i]);
        }
    } else if (size == FW_CMD_SIZE) {
        for (i = 0; i < n; i++) {
            GetOneByte(d[i]);
        }
    } else {
        for (i = 0; i < n; i++) {
            RosOdomOneByte(d[i]);
        }
    }
    /* Flush the seed's partial state with bytes that complete no frame. */
    for (i = 0; i < 2u * size; i++) {
        uint32_t before = seed_frames;
        one(0x00);
        seed_frames = before;
    }
    return seed_frames;
}

typedef struct {
    const char *name;
    uint32_t (*fn)(const uint8_t *, size_t, unsigned, uint32_t *);
} receiver_t;

int main(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    unsigned size = FW_ODOM_SIZE;
    int repeat = 3, i, r;
    FILE *f;
    uint8_t *data;
    uint32_t *offs;
    long n;
    receiver_t rxs[3];
    const char *seed_name;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kind") == 0 && i + 1 < argc) {
            size = strcmp(argv[++i], "cmd") == 0 ? FW_CMD_SIZE : FW_ODOM_SIZE;
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
            chunk = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            path = argv[i];
        }
    }
    if (path == NULL || repeat < 1 || chunk < 1) {
        fprintf(stderr, "usage: fw_bench [--kind odom|cmd] [--repeat R] [--chunk C] "
                        "[--out DIR] STREAM\n");
        return 2;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* Host benchmark only: the firmware itself never allocates. */
    data = malloc((size_t)n + 1);
    offs = malloc(((size_t)n + 1) * sizeof *offs);
    if (data == NULL || offs == NULL || fread(data, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    fclose(f);

    seed_name = size == FW_CMD_SIZE ? "seed_getonebyte" : "seed_ros_twin";
    rxs[0].name = seed_name;
    rxs[0].fn = run_seed;
    rxs[1].name = "fw_sum8_rx_byte";
    rxs[1].fn = run_ours_bytewise;
    rxs[2].name = "fw_sum8_rx_feed";
    rxs[2].fn = run_ours_feed;

    printf("{\"bytes\": %ld, \"frame_size\": %u, \"chunk\": %lu, \"receivers\": [", n, size,
           (unsigned long)chunk);
    for (r = 0; r < 3; r++) {
        double best = 1e30;
        uint32_t frames = 0;
        for (i = 0; i < repeat; i++) {
            double t0 = now_s();
            frames = rxs[r].fn(data, (size_t)n, size, NULL);
            t0 = now_s() - t0;
            if (t0 < best) {
                best = t0;
            }
        }
        if (out != NULL) {
            char name[1024];
            uint32_t k = rxs[r].fn(data, (size_t)n, size, offs);
            FILE *o;
            snprintf(name, sizeof name, "%s/%s.offsets", out, rxs[r].name);
            o = fopen(name, "wb");
            if (o == NULL || fwrite(offs, sizeof *offs, k, o) != k) {
                perror(name);
                return 1;
            }
            fclose(o);
        }
        printf("%s{\"name\": \"%s\", \"seconds\": %.9f, \"frames\": %lu}", r ? ", " : "",
               rxs[r].name, best, (unsigned long)frames);
    }
    printf("]}\n");
    free(data);
    free(offs);
    return 0;
}
