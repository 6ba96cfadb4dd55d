/*
 * test_main.c - unit tests of the reference firmware (run under ASan and
 * UBSan by `make check`). Argument: the fixtures directory shared with the
 * host's tests (golden vectors, the noisy odometry capture).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "fw_action.h"
#include "fw_actuator.h"
#include "fw_crc16.h"
#include "fw_crc_ccitt.h"
#include "fw_sum8.h"

static int passed, failed, case_failed;
static const char *fixtures = "../tests/fixtures";

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            case_failed = 1;                                                        \
        }                                                                           \
    } while (0)

#define RUN(fn)                                                      \
    do {                                                             \
        case_failed = 0;                                             \
        fn();                                                        \
        printf("%s %s\n", case_failed ? "FAIL" : "ok  ", #fn);       \
        if (case_failed) {                                           \
            failed++;                                                \
        } else {                                                     \
            passed++;                                                \
        }                                                            \
    } while (0)

/* ---- small helpers ---------------------------------------------------- */

static size_t unhex(const char *s, size_t n, uint8_t *out)
{
    size_t i;
    for (i = 0; i + 1 < n; i += 2) {
        unsigned v;
        if (sscanf(s + i, "%2x", &v) != 1) {
            break;
        }
        out[i / 2] = (uint8_t)v;
    }
    return n / 2;
}

static char *read_file(const char *name, size_t *len)
{
    char path[1024];
    FILE *f;
    char *buf;
    long n;
    snprintf(path, sizeof path, "%s/%s", fixtures, name);
    f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1); /* test code only: the firmware never allocates */
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* The objects of the JSON array under "key": calls fn(object text) for each.
 * Enough JSON for the fixture files (no braces inside strings). */
static int each_object(const char *json, const char *key, void (*fn)(const char *obj))
{
    char pat[64];
    const char *p;
    int count = 0;
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    p = strstr(json, pat);
    if (p == NULL) {
        return -1;
    }
    p += strlen(pat);
    for (;;) {
        const char *q;
        int depth = 0;
        char obj[8192];
        while (*p == ' ' || *p == '\n' || *p == ',') {
            p++;
        }
        if (*p != '{') {
            break;
        }
        for (q = p; *q; q++) {
            if (*q == '{') {
                depth++;
            } else if (*q == '}' && --depth == 0) {
                break;
            }
        }
        if ((size_t)(q - p + 1) >= sizeof obj) {
            return -1;
        }
        memcpy(obj, p, (size_t)(q - p + 1));
        obj[q - p + 1] = '\0';
        fn(obj);
        count++;
        p = q + 1;
    }
    return count;
}

static double json_num(const char *obj, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    p = strstr(obj, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* Copies the string value into out; returns its length or -1. */
static int json_str(const char *obj, const char *key, char *out, size_t cap)
{
    char pat[64];
    const char *p, *q;
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    p = strstr(obj, pat);
    if (p == NULL) {
        return -1;
    }
    p += strlen(pat);
    q = strchr(p, '"');
    if (q == NULL || (size_t)(q - p) >= cap) {
        return -1;
    }
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return (int)(q - p);
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- CRC ---------------------------------------------------------------- */

static void test_crc_presets(void)
{
    size_t n, i;
    const fw_crc16_params *p = fw_crc16_presets(&n);
    const uint8_t msg[] = "123456789";
    CHECK(n == 19);
    for (i = 0; i < n; i++) {
        fw_crc16 crc;
        uint16_t reg;
        fw_crc16_init(&crc, &p[i]);
        CHECK(fw_crc16_compute(&crc, msg, 9) == p[i].check);
        reg = fw_crc16_update(&crc, fw_crc16_start(&crc), msg, 4);
        reg = fw_crc16_update(&crc, reg, msg + 4, 5);
        CHECK(fw_crc16_finish(&crc, reg) == p[i].check);
        CHECK(fw_crc16_find(p[i].name) == &p[i]);
    }
    CHECK(strcmp(fw_crc16_find(NULL)->name, "crc-ccitt-false") == 0);
    CHECK(fw_crc16_find("crc-32") == NULL);
}

/* The board's constant table (app/fw_crc_ccitt.h) is the one fw_crc16_init builds. */
static void test_crc_flash_table(void)
{
    fw_crc16 built;
    fw_crc16_init_name(&built, FW_CRC16_DEFAULT);
    CHECK(memcmp(built.table, crc_ccitt.table, sizeof built.table) == 0);
    CHECK(strcmp(crc_ccitt.params.name, built.params.name) == 0);
    CHECK(crc_ccitt.params.poly == built.params.poly && crc_ccitt.params.init == built.params.init);
    CHECK(crc_ccitt.params.xorout == built.params.xorout);
    CHECK(crc_ccitt.params.reflect == built.params.reflect);
    CHECK(crc_ccitt.params.check == built.params.check);
}

/* ---- sum-8: golden vectors ------------------------------------------------ */

static int golden_count;

static void golden_odom(const char *obj)
{
    char hex[128];
    uint8_t want[FW_ODOM_SIZE], got[FW_ODOM_SIZE];
    fw_odom o, d;
    CHECK(json_str(obj, "hex", hex, sizeof hex) == 2 * FW_ODOM_SIZE);
    unhex(hex, strlen(hex), want);
    o.vx = (float)json_num(obj, "vx");
    o.vy = (float)json_num(obj, "vy");
    o.wz = (float)json_num(obj, "wz");
    o.yaw_deg = (float)json_num(obj, "yaw_deg");
    CHECK(fw_odom_encode(&o, got) == FW_ODOM_SIZE);
    CHECK(memcmp(got, want, FW_ODOM_SIZE) == 0);
    CHECK(fw_sum8_check(want, FW_ODOM_SIZE, FW_ODOM_SIZE) == 0);
    fw_odom_decode(want, &d);
    CHECK(same_bits(d.vx, o.vx) && same_bits(d.vy, o.vy) && same_bits(d.wz, o.wz) &&
          same_bits(d.yaw_deg, o.yaw_deg));
    golden_count++;
}

static void golden_cmd(const char *obj)
{
    char hex[128];
    uint8_t want[FW_CMD_SIZE], got[FW_CMD_SIZE];
    fw_cmd c, d;
    CHECK(json_str(obj, "hex", hex, sizeof hex) == 2 * FW_CMD_SIZE);
    unhex(hex, strlen(hex), want);
    c.vx = (float)json_num(obj, "vx");
    c.vy = (float)json_num(obj, "vy");
    c.wz = (float)json_num(obj, "wz");
    CHECK(fw_cmd_encode(&c, got) == FW_CMD_SIZE);
    CHECK(memcmp(got, want, FW_CMD_SIZE) == 0);
    fw_cmd_decode(want, &d);
    CHECK(same_bits(d.vx, c.vx) && same_bits(d.vy, c.vy) && same_bits(d.wz, c.wz));
    golden_count++;
}

static void test_golden_sum8(void)
{
    size_t len;
    char *json = read_file("sum8_golden.json", &len);
    CHECK(json != NULL);
    if (json == NULL) {
        return;
    }
    golden_count = 0;
    CHECK(each_object(json, "odom", golden_odom) > 0);
    CHECK(each_object(json, "cmd", golden_cmd) > 0);
    CHECK(golden_count >= 2);
    free(json);
}

/* The noisy capture: the same frames (offsets, fields) and counters as the
 * host's receiver recorded in odom_noisy.json. */
static uint32_t noisy_offsets[4096];
static float noisy_fields[4096][4];
static size_t noisy_n;

static void noisy_frame(const char *obj)
{
    if (noisy_n < 4096) {
        noisy_offsets[noisy_n] = (uint32_t)json_num(obj, "offset");
        noisy_fields[noisy_n][0] = (float)json_num(obj, "vx");
        noisy_fields[noisy_n][1] = (float)json_num(obj, "vy");
        noisy_fields[noisy_n][2] = (float)json_num(obj, "wz");
        noisy_fields[noisy_n][3] = (float)json_num(obj, "yaw_deg");
    }
    noisy_n++;
}

static void test_noisy_capture(void)
{
    size_t blen, jlen, i, k = 0;
    char *bin = read_file("odom_noisy.bin", &blen);
    char *json = read_file("odom_noisy.json", &jlen);
    const char *stats;
    fw_sum8_rx rx;
    CHECK(bin != NULL && json != NULL);
    if (bin == NULL || json == NULL) {
        free(bin);
        free(json);
        return;
    }
    noisy_n = 0;
    CHECK(each_object(json, "frames", noisy_frame) > 0);
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    for (i = 0; i < blen; i++) {
        if (fw_sum8_rx_byte(&rx, (uint8_t)bin[i])) {
            fw_odom o;
            fw_odom_decode(fw_sum8_rx_frame(&rx), &o);
            CHECK(k < noisy_n);
            if (k < noisy_n) {
                CHECK(rx.frame_offset == noisy_offsets[k]);
                CHECK(same_bits(o.vx, noisy_fields[k][0]) && same_bits(o.vy, noisy_fields[k][1]) &&
                      same_bits(o.wz, noisy_fields[k][2]) &&
                      same_bits(o.yaw_deg, noisy_fields[k][3]));
            }
            k++;
        }
    }
    fw_sum8_rx_finish(&rx);
    CHECK(k == noisy_n);
    stats = strstr(json, "\"stats\"");
    CHECK(stats != NULL);
    if (stats != NULL) {
        CHECK(rx.stats.frames == (uint32_t)json_num(stats, "frames"));
        CHECK(rx.stats.bytes == (uint32_t)json_num(stats, "bytes"));
        CHECK(rx.stats.checksum_errors == (uint32_t)json_num(stats, "checksum_errors"));
        CHECK(rx.stats.discarded == (uint32_t)json_num(stats, "discarded"));
        CHECK(rx.stats.resyncs == (uint32_t)json_num(stats, "resyncs"));
        CHECK(rx.stats.nonfinite == (uint32_t)json_num(stats, "nonfinite"));
        CHECK(rx.stats.overlapping == (uint32_t)json_num(stats, "overlapping"));
    }
    free(bin);
    free(json);
}

/* ---- sum-8: receiver behaviour -------------------------------------------- */

static size_t odom_frame(float vx, float yaw, uint8_t *out)
{
    fw_odom o;
    o.vx = vx;
    o.vy = -vx;
    o.wz = 0.5f;
    o.yaw_deg = yaw;
    return fw_odom_encode(&o, out);
}

/* Feed bytewise; collect offsets. */
static size_t collect(fw_sum8_rx *rx, const uint8_t *s, size_t n, uint32_t *offs)
{
    size_t i, k = 0;
    for (i = 0; i < n; i++) {
        if (fw_sum8_rx_byte(rx, s[i])) {
            offs[k++] = rx->frame_offset;
        }
    }
    fw_sum8_rx_finish(rx);
    return k;
}

static void test_sum8_seed_failures(void)
{
    uint8_t s[256];
    uint32_t offs[16];
    size_t n = 0;
    fw_sum8_rx rx;
    /* AA AA 55 ...: the seed's machine resets on the second AA. */
    s[n++] = 0xAA;
    n += odom_frame(0.1f, 10.0f, s + n); /* frame at 1 */
    /* A false AA 55 in noise, 5 bytes before a real frame. */
    s[n++] = 0xAA;
    s[n++] = 0x55;
    s[n++] = 0x01;
    s[n++] = 0x02;
    s[n++] = 0x03;
    n += odom_frame(0.2f, 20.0f, s + n); /* frame at 25 */
    /* Truncated frame, then a frame. */
    n += odom_frame(0.3f, 30.0f, s + n) - 7;
    n += odom_frame(0.4f, 40.0f, s + n); /* frame at 56 */
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    CHECK(collect(&rx, s, n, offs) == 3);
    CHECK(offs[0] == 1 && offs[1] == 25 && offs[2] == 56);
    CHECK(rx.stats.frames == 3);
    CHECK(rx.stats.bytes == n);
    CHECK(rx.stats.discarded == 1 + 5 + 12);
    CHECK(rx.stats.resyncs == 3);
    CHECK(rx.stats.checksum_errors == 2); /* the false header, the truncated frame */
    CHECK(rx.stats.overlapping == 0);
}

static void test_sum8_overlap(void)
{
    /* A frame at 0 whose payload starts with an AA 55 that heads another
     * valid frame at 2: both are reported; the second one overlaps. */
    uint8_t s[17];
    uint32_t offs[8];
    size_t k;
    unsigned i;
    fw_sum8_rx rx;
    s[0] = 0xAA;
    s[1] = 0x55;
    s[2] = 0xAA;
    s[3] = 0x55;
    for (i = 4; i < 14; i++) {
        s[i] = (uint8_t)i;
    }
    s[14] = fw_sum8(s + 2, 12); /* the outer checksum is also an inner payload byte */
    s[15] = 0x42;
    s[16] = fw_sum8(s + 4, 12);
    fw_sum8_rx_init(&rx, FW_CMD_SIZE);
    k = collect(&rx, s, sizeof s, offs);
    CHECK(k == 2);
    CHECK(offs[0] == 0 && offs[1] == 2);
    CHECK(rx.stats.overlapping == 1);
    CHECK(rx.stats.discarded == 0);
    CHECK(rx.stats.checksum_errors == 0);
}

static void test_sum8_pending_and_finish(void)
{
    uint8_t f[FW_ODOM_SIZE];
    fw_sum8_rx rx;
    size_t i;
    odom_frame(1.0f, 1.0f, f);
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    /* A lone trailing AA is held, not discarded, until the next byte. */
    CHECK(fw_sum8_rx_byte(&rx, 0x00) == 0);
    CHECK(fw_sum8_rx_byte(&rx, 0xAA) == 0);
    CHECK(rx.len == 1 && rx.stats.discarded == 1);
    for (i = 0; i < 10; i++) {
        fw_sum8_rx_byte(&rx, f[i]);
    }
    CHECK(rx.stats.discarded == 2); /* the held AA was followed by AA */
    CHECK(fw_sum8_rx_finish(&rx) == 10);
    CHECK(rx.stats.discarded == 12 && rx.len == 0);
    /* After finish the stream goes on: the next frame is a resync. */
    CHECK(fw_sum8_rx_feed(&rx, f, sizeof f, NULL, NULL) == 1);
    CHECK(rx.frame_offset == 12 && rx.stats.resyncs == 1);
}

static void test_sum8_nonfinite(void)
{
    uint8_t f[FW_ODOM_SIZE];
    fw_sum8_rx rx;
    fw_odom o = {0.0f, 0.0f, 0.0f, 0.0f};
    o.wz = (float)INFINITY;
    fw_odom_encode(&o, f);
    fw_sum8_rx_init(&rx, FW_ODOM_SIZE);
    CHECK(fw_sum8_rx_feed(&rx, f, sizeof f, NULL, NULL) == 1);
    o.wz = (float)NAN;
    fw_odom_encode(&o, f);
    CHECK(fw_sum8_rx_feed(&rx, f, sizeof f, NULL, NULL) == 1);
    o.wz = 3.4e38f;
    fw_odom_encode(&o, f);
    CHECK(fw_sum8_rx_feed(&rx, f, sizeof f, NULL, NULL) == 1);
    CHECK(rx.stats.nonfinite == 2);
}

static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Every class of float the wire can carry: nan, +-inf, +-FLT_MAX, subnormals,
 * 2^33, 1e30, -8e9 (the values that hung the 360-step loops), and ordinary ones. */
static const uint32_t hostile_bits[] = {
    0x7FC00000u, 0xFFFFFFFFu, 0x7F800001u, 0x7F800000u, 0xFF800000u, 0x7F7FFFFFu,
    0xFF7FFFFFu, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x50000000u /* 2^33 */,
    0x7149F2CAu /* 1e30 */, 0xCF0E1AC0u /* -8e9 */, 0x4B000000u /* 2^23 */,
};

static void test_wrap_deg(void)
{
    size_t k;
    int i;
    CHECK(fw_wrap_deg(0.0f) == 0.0f && fw_wrap_deg(179.5f) == 179.5f);
    CHECK(fw_wrap_deg(180.0f) == -180.0f && fw_wrap_deg(-180.0f) == -180.0f);
    CHECK(fw_wrap_deg(540.0f) == -180.0f && fw_wrap_deg(359.0f) == -1.0f);
    CHECK(fw_wrap_deg(-181.0f) == 179.0f && fw_wrap_deg(720.25f) == 0.25f);
    for (k = 0; k < sizeof hostile_bits / sizeof hostile_bits[0]; k++) {
        float w = fw_wrap_deg(f32_of_bits(hostile_bits[k])); /* returns: no endless loop */
        CHECK(w >= -180.0f && w < 180.0f);
    }
    CHECK(fw_wrap_deg(f32_of_bits(0x50000000u)) == 0.0f); /* 2^33: no fraction left */
    CHECK(fw_wrap_deg((float)NAN) == 0.0f && fw_wrap_deg((float)INFINITY) == 0.0f);
    /* Against fmod in double over the whole range the wrap keeps (to 2^23 degrees). */
    for (i = -1999; i <= 1999; i++) {
        float d = (float)i * 4194.3037f + 0.37f * (float)(i % 7);
        double want = fmod((double)d, 360.0);
        float w = fw_wrap_deg(d);
        want = want >= 180.0 ? want - 360.0 : want < -180.0 ? want + 360.0 : want;
        CHECK(w >= -180.0f && w < 180.0f);
        CHECK(fabs((double)w - want) < 1e-3 || fabs(fabs((double)w - want) - 360.0) < 1e-3);
    }
}

static void test_cmd_plausible(void)
{
    size_t k, f;
    fw_cmd ok = {FW_CMD_MAX_SPEED, -FW_CMD_MAX_SPEED, FW_CMD_MAX_TURN};
    CHECK(fw_cmd_plausible(&ok));
    for (k = 0; k < sizeof hostile_bits / sizeof hostile_bits[0]; k++) {
        float v = f32_of_bits(hostile_bits[k]);
        int tiny = v >= -1e-30f && v <= 1e-30f; /* subnormals are valid speeds */
        for (f = 0; f < 3; f++) {
            fw_cmd c = {0.1f, -0.1f, 0.2f};
            float *field = f == 0 ? &c.vx : f == 1 ? &c.vy : &c.wz;
            *field = v;
            CHECK(fw_cmd_plausible(&c) == tiny);
        }
    }
    ok.vx = 5.0001f;
    CHECK(!fw_cmd_plausible(&ok));
}

/* Random noisy streams: byte-wise, chunked and the reference agree. */
static void test_sum8_against_reference(void)
{
    static uint8_t script[4096], stream[16384];
    static uint32_t ref_offs[16384], offs[16384];
    unsigned seed;
    for (seed = 1; seed <= 200; seed++) {
        fz_in in;
        ref_sum8 ref;
        fw_sum8_rx rx;
        size_t n, i, k;
        unsigned size = seed & 1 ? FW_CMD_SIZE : FW_ODOM_SIZE;
        srand(seed);
        for (i = 0; i < sizeof script; i++) {
            script[i] = (uint8_t)(rand() & 0xFF);
        }
        in.p = script;
        in.n = sizeof script;
        in.i = 0;
        n = fz_sum8_stream(&in, size, stream, sizeof stream);
        ref_sum8_scan(stream, n, size, ref_offs, &ref);
        fw_sum8_rx_init(&rx, (uint8_t)size);
        k = collect(&rx, stream, n, offs);
        CHECK(k == ref.nframes);
        CHECK(memcmp(offs, ref_offs, k * sizeof offs[0]) == 0);
        CHECK(memcmp(&rx.stats, &ref.stats, sizeof rx.stats) == 0);
        CHECK(ref.nframes > 10);
    }
}

/* ---- action frames --------------------------------------------------------- */

static fw_crc16 ccitt;

typedef struct {
    fw_pos_t offsets[64];
    fw_action_frame frames[64];
    uint8_t data[64][128];
    fw_action_reject rejects[64];
    size_t nf, nr;
} act_sink;

static void act_on_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    act_sink *s = ctx;
    if (s->nf < 64) {
        s->offsets[s->nf] = offset;
        s->frames[s->nf] = *f;
        memcpy(s->data[s->nf], f->data, f->len < 128 ? f->len : 128);
        s->frames[s->nf].data = s->data[s->nf];
    }
    s->nf++;
}

static void act_on_reject(void *ctx, const fw_action_reject *r)
{
    act_sink *s = ctx;
    if (s->nr < 64) {
        s->rejects[s->nr] = *r;
    }
    s->nr++;
}

static uint8_t act_buf[FW_ACTION_RX_BUF_SIZE(1024)];

static void act_rx(fw_action_rx *rx, act_sink *s, uint16_t max_len)
{
    memset(s, 0, sizeof *s);
    fw_action_rx_init(rx, &ccitt, act_buf, sizeof act_buf, max_len, act_on_frame, act_on_reject,
                      s);
}

static int golden_action_count;

static void golden_action(const char *obj)
{
    char hex[1024], dhex[512], crc_name[32];
    uint8_t want[512], data[256], got[512];
    fw_crc16 crc;
    fw_action_frame f;
    size_t n, dn;
    CHECK(json_str(obj, "crc", crc_name, sizeof crc_name) > 0);
    CHECK(fw_crc16_init_name(&crc, crc_name) == 0);
    n = unhex(hex, (size_t)json_str(obj, "hex", hex, sizeof hex), want);
    dn = unhex(dhex, (size_t)json_str(obj, "data", dhex, sizeof dhex), data);
    CHECK(fw_action_check(&crc, want, n) == FW_CHECK_OK);
    fw_action_decode(want, &f);
    CHECK(f.machine == (uint8_t)json_num(obj, "machine"));
    CHECK(f.type == (uint8_t)json_num(obj, "type"));
    CHECK(f.sub == (uint8_t)json_num(obj, "sub"));
    CHECK(f.len == dn && memcmp(f.data, data, dn) == 0);
    CHECK(fw_action_encode(&crc, f.machine, f.type, f.sub, data, (uint16_t)dn, got, sizeof got) ==
          n);
    CHECK(memcmp(got, want, n) == 0);
    golden_action_count++;
}

static void golden_relaxed(const char *obj)
{
    char hex[1024];
    uint8_t want[512];
    size_t n = unhex(hex, (size_t)json_str(obj, "hex", hex, sizeof hex), want);
    fw_action_rx rx;
    act_sink s;
    /* Strict: refused, and counted as a header error (and a CRC error). */
    act_rx(&rx, &s, 1024);
    fw_action_rx_feed(&rx, want, n);
    fw_action_rx_finish(&rx);
    CHECK(s.nf == 0 && rx.stats.header_errors == 1 && rx.stats.checksum_errors == 1);
    CHECK(rx.stats.discarded == n);
    /* Relaxed: accepted, its defects named. */
    act_rx(&rx, &s, 1024);
    rx.relaxed = 1;
    fw_action_rx_feed(&rx, want, n);
    CHECK(s.nf == 1);
    if (s.nf == 1) {
        CHECK(s.frames[0].defects == (FW_DEFECT_HEADER | FW_DEFECT_CRC));
        CHECK(s.frames[0].len == 69 && s.frames[0].sub == 0x32 && s.frames[0].type == 0x06);
        char dhex[512];
        CHECK(json_str(obj, "data", dhex, sizeof dhex) == 2 * 69);
    }
    CHECK(rx.stats.relaxed_accepts == 1);
    golden_action_count++;
}

static void test_golden_action(void)
{
    size_t len;
    char *json = read_file("action_golden.json", &len);
    CHECK(json != NULL);
    if (json == NULL) {
        return;
    }
    golden_action_count = 0;
    CHECK(each_object(json, "frames", golden_action) >= 8);
    CHECK(each_object(json, "relaxed", golden_relaxed) == 1);
    CHECK(golden_action_count >= 9);
    CHECK((uint16_t)json_num(json, "crc-ccitt-false") == 0x29B1);
    free(json);
}

static int golden_actuator_count;

static void golden_actuator(const char *obj)
{
    char hex[64];
    uint8_t want[8], got[8];
    fw_actuator a;
    unhex(hex, (size_t)json_str(obj, "hex", hex, sizeof hex), want);
    fw_actuator_unpack(want, &a);
    CHECK(a.angle == (int)json_num(obj, "angle"));
    CHECK(a.speed == (int)json_num(obj, "speed"));
    CHECK(a.current == (int)json_num(obj, "current"));
    CHECK(a.module_id == (int)json_num(obj, "module_id"));
    CHECK(a.command == (int)json_num(obj, "command"));
    CHECK(a.fault == (int)json_num(obj, "fault"));
    CHECK(a.reserved_a == (int)json_num(obj, "reserved_a"));
    CHECK(a.reserved_b == (int)json_num(obj, "reserved_b"));
    fw_actuator_pack(&a, got);
    CHECK(memcmp(got, want, 8) == 0);
    golden_actuator_count++;
}

static void test_golden_actuator(void)
{
    size_t len;
    char *json = read_file("actuator_golden.json", &len);
    CHECK(json != NULL);
    if (json == NULL) {
        return;
    }
    golden_actuator_count = 0;
    CHECK(each_object(json, "structs", golden_actuator) >= 4);
    CHECK(golden_actuator_count >= 4);
    CHECK(FW_CAN_CMD_ID(3) == 0x103 && FW_CAN_FEEDBACK_ID(3) == 0x203);
    free(json);
}

static void test_action_trailer_in_data(void)
{
    /* Data holding FD DF and FE EF: the patent's receiver loses these. */
    const uint8_t data[] = {0xFD, 0xDF, 0xFE, 0xEF, 0x00, 0xFD, 0xDF};
    uint8_t s[64];
    size_t n;
    fw_action_rx rx;
    act_sink k;
    n = fw_action_encode(&ccitt, 1, FW_TYPE_WRITE_PC, FW_SUB_WRITE_USER_CONFIG, data,
                         sizeof data, s, sizeof s);
    act_rx(&rx, &k, 1024);
    CHECK(fw_action_rx_feed(&rx, s, n) == 1);
    CHECK(k.nf == 1 && k.frames[0].len == sizeof data);
    CHECK(memcmp(k.data[0], data, sizeof data) == 0);
    CHECK(rx.stats.discarded == 0 && rx.stats.trailer_errors == 0 && k.nr == 0);
}

static void test_action_false_header_backtracks(void)
{
    /* FE EF with a long length in noise, then two real frames: they come out
     * once the false candidate's trailer position is known to be wrong. */
    uint8_t s[512];
    size_t n = 0, a;
    fw_action_rx rx;
    act_sink k;
    const uint8_t junk[] = {0x00, 0xFE, 0xEF, 0x01, 0x04, 0x64, 0x00, 0x21};
    memcpy(s, junk, sizeof junk); /* claims N = 100 */
    n = sizeof junk;
    a = fw_action_encode(&ccitt, 1, FW_TYPE_CONTROL_PHONE, FW_SUB_STAND_STILL, NULL, 0, s + n, 64);
    n += a;
    n += fw_action_encode(&ccitt, 2, FW_TYPE_READ_PHONE, FW_SUB_QUERY_ROBOT_INFO, NULL, 0, s + n,
                          64);
    act_rx(&rx, &k, 1024);
    fw_action_rx_feed(&rx, s, n);
    CHECK(k.nf == 0); /* still held: the false header's trailer is not here yet */
    CHECK(rx.end - rx.start == n - 1);
    fw_action_rx_finish(&rx);
    CHECK(k.nf == 2);
    CHECK(k.offsets[0] == sizeof junk && k.offsets[1] == sizeof junk + a);
    CHECK(rx.stats.truncated == 1 && k.nr == 1 && k.rejects[0].reason == FW_REJECT_TRUNCATED);
    CHECK(k.rejects[0].has_sub && k.rejects[0].sub == 0x21 && k.rejects[0].offset == 1);
    CHECK(rx.stats.discarded == sizeof junk && rx.stats.resyncs == 1);
    /* The same with the stream going on: the bytes decide it without finish. */
    act_rx(&rx, &k, 1024);
    fw_action_rx_feed(&rx, s, n);
    memset(s, 0x11, 100);
    fw_action_rx_feed(&rx, s, 100);
    CHECK(k.nf == 2 && rx.stats.trailer_errors == 1 && rx.stats.truncated == 0);
}

static void test_action_max_length(void)
{
    uint8_t data[40] = {0};
    uint8_t s[128];
    size_t n;
    fw_action_rx rx;
    act_sink k;
    n = fw_action_encode(&ccitt, 1, FW_TYPE_WRITE_PHONE, FW_SUB_WRITE_ACTION_GROUP, data, 40, s,
                         sizeof s);
    act_rx(&rx, &k, 32);
    fw_action_rx_feed(&rx, s, n);
    fw_action_rx_finish(&rx);
    CHECK(k.nf == 0 && rx.stats.length_errors == 1 && k.nr == 1);
    CHECK(k.rejects[0].reason == FW_REJECT_LENGTH && k.rejects[0].sub == FW_SUB_WRITE_ACTION_GROUP);
    CHECK(rx.stats.discarded == n);
    CHECK(fw_action_rx_init(&rx, &ccitt, act_buf, 100, 1024, NULL, NULL, NULL) == -1);
}

static void test_responder(void)
{
    uint8_t s[64], ans[FW_ACTION_ANSWER_SIZE], keep[64];
    size_t n;
    int dup = -1;
    fw_responder r;
    fw_action_frame f;
    fw_action_reject rej;
    const uint8_t d[] = {1, 80, 60, 0};
    fw_responder_init(&r, &ccitt, keep, sizeof keep);
    n = fw_action_encode(&ccitt, 3, FW_TYPE_WRITE_PHONE, FW_SUB_REALTIME_SERVO_CONTROL, d, 4, s,
                         sizeof s);
    CHECK(n == 15);
    fw_action_decode(s, &f);
    CHECK(fw_responder_answer(&r, &f, FW_STATUS_AUTO, ans, &dup) == FW_ACTION_ANSWER_SIZE);
    CHECK(dup == 0);
    CHECK(fw_action_check(&ccitt, ans, sizeof ans) == 0);
    CHECK(ans[2] == 3 && ans[3] == 0x14 && ans[6] == 0x21 && ans[4] == 1 && ans[7] == 0);
    /* Sent again (our answer was lost): a duplicate, answered OK again. */
    CHECK(fw_responder_answer(&r, &f, FW_STATUS_AUTO, ans, &dup) == FW_ACTION_ANSWER_SIZE);
    CHECK(dup == 1 && ans[7] == FW_STATUS_OK && r.stats.duplicates == 1);
    /* Unknown sub-command. */
    f.sub = 0x99;
    CHECK(fw_responder_answer(&r, &f, FW_STATUS_AUTO, ans, &dup) == FW_ACTION_ANSWER_SIZE);
    CHECK(ans[7] == FW_STATUS_UNKNOWN_SUB && dup == 0);
    /* Answers are not answered. */
    f.type = 0x14;
    CHECK(fw_responder_answer(&r, &f, FW_STATUS_AUTO, ans, &dup) == 0);
    CHECK(r.stats.answered == 3 && r.stats.acks == 2 && r.stats.naks == 1);
    /* Rejections. */
    rej.offset = 0;
    rej.machine = 9;
    rej.type = FW_TYPE_READ_PC;
    rej.sub = 0x36;
    rej.has_sub = 1;
    rej.reason = FW_REJECT_CRC;
    CHECK(fw_responder_answer_rejected(&r, &rej, ans) == FW_ACTION_ANSWER_SIZE);
    CHECK(ans[3] == 0x13 && ans[7] == FW_STATUS_CRC_ERROR);
    rej.reason = FW_REJECT_TRAILER;
    fw_responder_answer_rejected(&r, &rej, ans);
    CHECK(ans[7] == FW_STATUS_TRAILER_ERROR);
    rej.reason = FW_REJECT_TRUNCATED;
    fw_responder_answer_rejected(&r, &rej, ans);
    CHECK(ans[7] == FW_STATUS_LENGTH_ERROR);
    rej.has_sub = 0;
    CHECK(fw_responder_answer_rejected(&r, &rej, ans) == 0);
    rej.has_sub = 1;
    rej.type = 0x13;
    CHECK(fw_responder_answer_rejected(&r, &rej, ans) == 0);
}

typedef struct {
    size_t writes;
} tx_count;

static void count_tx(void *ctx, const uint8_t *data, size_t len)
{
    (void)data;
    (void)len;
    ((tx_count *)ctx)->writes++;
}

static void test_arq(void)
{
    uint8_t req[32], ans[FW_ACTION_ANSWER_SIZE];
    size_t n;
    fw_arq a;
    fw_action_frame af;
    tx_count tx = {0};
    fw_responder r;
    const uint32_t t0 = 0xFFFFFF00u; /* across the tick counter's wrap */
    fw_arq_init(&a, 100, 2, count_tx, &tx);
    fw_responder_init(&r, &ccitt, NULL, 0);
    n = fw_action_encode(&ccitt, 1, FW_TYPE_CONTROL_PHONE, FW_SUB_FREE_SWIMMING, NULL, 0, req,
                         sizeof req);
    CHECK(fw_arq_send(&a, req, n, t0) == 0 && tx.writes == 1);
    CHECK(fw_arq_send(&a, req, n, t0) == -1); /* one at a time */
    CHECK(fw_arq_poll(&a, t0 + 99) == FW_ARQ_NONE);
    CHECK(fw_arq_poll(&a, t0 + 100) == FW_ARQ_RETRANSMIT && tx.writes == 2);
    /* A negative answer: send again. */
    {
        fw_action_frame f;
        fw_action_decode(req, &f);
        fw_responder_answer(&r, &f, FW_STATUS_BUSY, ans, NULL);
    }
    fw_action_decode(ans, &af);
    CHECK(fw_arq_on_answer(&a, &af, t0 + 150) == FW_ARQ_RETRANSMIT && tx.writes == 3);
    /* Retry limit (2) reached: the next timeout fails. */
    CHECK(fw_arq_poll(&a, t0 + 249) == FW_ARQ_NONE);
    CHECK(fw_arq_poll(&a, t0 + 250) == FW_ARQ_FAILED && !fw_arq_busy(&a));
    CHECK(a.stats.sent == 1 && a.stats.retransmitted == 2 && a.stats.failed == 1);
    CHECK(a.stats.timeouts == 2 && a.stats.naks == 1);
    /* A late answer is ignored; then a clean delivery. */
    CHECK(fw_arq_on_answer(&a, &af, t0 + 300) == FW_ARQ_NONE && a.stats.ignored == 1);
    CHECK(fw_arq_send(&a, req, n, t0 + 400) == 0);
    {
        fw_action_frame f;
        fw_action_decode(req, &f);
        fw_responder_answer(&r, &f, FW_STATUS_AUTO, ans, NULL);
    }
    fw_action_decode(ans, &af);
    af.sub = 0x02; /* another sub-command: not ours */
    CHECK(fw_arq_on_answer(&a, &af, t0 + 401) == FW_ARQ_NONE);
    af.sub = FW_SUB_FREE_SWIMMING;
    CHECK(fw_arq_on_answer(&a, &af, t0 + 402) == FW_ARQ_DELIVERED);
    CHECK(a.stats.delivered == 1 && a.stats.ignored == 2);
    /* Unknown sub-command: the request itself is refused, so no retransmission. */
    CHECK(fw_arq_send(&a, req, n, t0 + 500) == 0 && tx.writes == 5);
    {
        fw_action_frame f;
        fw_action_decode(req, &f);
        fw_responder_answer(&r, &f, FW_STATUS_UNKNOWN_SUB, ans, NULL);
    }
    fw_action_decode(ans, &af);
    CHECK(fw_arq_on_answer(&a, &af, t0 + 501) == FW_ARQ_FAILED && !fw_arq_busy(&a));
    CHECK(tx.writes == 5 && a.stats.failed == 2 && a.stats.naks == 2);
    /* Answers cannot be sent (nobody would answer them). */
    n = fw_action_encode(&ccitt, 1, 0x17, FW_SUB_FREE_SWIMMING, NULL, 0, req, sizeof req);
    CHECK(fw_arq_send(&a, req, n, t0) == -1);
}

/* A read (PROTOCOLS.md 3.3): its OK answer only acknowledges it; a lost result asks again. */
static void test_arq_read_reask(void)
{
    uint8_t req[32], res[32], ok[FW_ACTION_ANSWER_SIZE];
    size_t n, m;
    fw_arq a;
    fw_action_frame f;
    tx_count tx = {0};
    const uint32_t t0 = 0xFFFFFFF0u; /* across the wrap */
    const uint8_t config[3] = {0x00, 0x01, 0x02};
    fw_arq_init(&a, 10, 1, count_tx, &tx);
    n = fw_action_encode(&ccitt, 1, FW_TYPE_READ_PHONE, FW_SUB_READ_USER_CONFIG, NULL, 0, req,
                         sizeof req);
    CHECK(fw_arq_send_read(&a, req, n, t0, 30) == 0 && tx.writes == 1);
    /* The OK answer: one status byte 0x00 (config[0]). */
    fw_action_encode(&ccitt, 1, 0x11, FW_SUB_READ_USER_CONFIG, config, 1, ok, sizeof ok);
    fw_action_decode(ok, &f);
    CHECK(fw_arq_on_frame(&a, &f, t0 + 2) == FW_ARQ_ACKNOWLEDGED && fw_arq_busy(&a));
    CHECK(fw_arq_on_frame(&a, &f, t0 + 3) == FW_ARQ_NONE); /* a second answer: ignored */
    CHECK(fw_arq_poll(&a, t0 + 31) == FW_ARQ_NONE);
    CHECK(fw_arq_poll(&a, t0 + 32) == FW_ARQ_RETRANSMIT && tx.writes == 2);
    CHECK(a.stats.missing_results == 1 && a.stats.timeouts == 1);
    /* The result comes before the second answer (that answer lost): delivered. */
    m = fw_action_encode(&ccitt, 1, 0x11, FW_SUB_READ_USER_CONFIG, config, sizeof config, res,
                         sizeof res);
    CHECK(m == FW_ACTION_OVERHEAD + sizeof config);
    fw_action_decode(res, &f);
    CHECK(fw_arq_on_frame(&a, &f, t0 + 35) == FW_ARQ_DELIVERED && !fw_arq_busy(&a));
    CHECK(a.stats.delivered == 1 && a.stats.retransmitted == 1 && a.stats.failed == 0);
    /* Out of retries without a result: failed, counted once more as missing. */
    CHECK(fw_arq_send_read(&a, req, n, t0 + 40, 30) == 0);
    fw_action_decode(ok, &f);
    CHECK(fw_arq_on_frame(&a, &f, t0 + 41) == FW_ARQ_ACKNOWLEDGED);
    CHECK(fw_arq_poll(&a, t0 + 71) == FW_ARQ_RETRANSMIT);
    CHECK(fw_arq_on_frame(&a, &f, t0 + 72) == FW_ARQ_ACKNOWLEDGED);
    CHECK(fw_arq_poll(&a, t0 + 102) == FW_ARQ_FAILED && a.stats.missing_results == 3);
}

static void test_layouts(void)
{
    CHECK(sizeof(fw_odom_wire) == 19 && sizeof(fw_cmd_wire) == 15);
    CHECK(sizeof(fw_action_head_wire) == 7 && sizeof(fw_action_tail_wire) == 4);
    CHECK(sizeof(fw_actuator_wire) == 8);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fixtures = argv[1];
    }
    fw_crc16_init_name(&ccitt, NULL);
    RUN(test_layouts);
    RUN(test_crc_presets);
    RUN(test_crc_flash_table);
    RUN(test_golden_sum8);
    RUN(test_noisy_capture);
    RUN(test_sum8_seed_failures);
    RUN(test_sum8_overlap);
    RUN(test_sum8_pending_and_finish);
    RUN(test_sum8_nonfinite);
    RUN(test_wrap_deg);
    RUN(test_cmd_plausible);
    RUN(test_sum8_against_reference);
    RUN(test_golden_action);
    RUN(test_golden_actuator);
    RUN(test_action_trailer_in_data);
    RUN(test_action_false_header_backtracks);
    RUN(test_action_max_length);
    RUN(test_responder);
    RUN(test_arq);
    RUN(test_arq_read_reask);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
