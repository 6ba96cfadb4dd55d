/*
 * fw_app.c - the reference firmware on a microcontroller: the seed-002 base
 * (commands in, odometry out at FW_ODOM_RATE_HZ, the command watchdog) and
 * the action-frame responder on one link UART, timed by the board's SysTick.
 * The same behaviour as harness/fw_harness.c, with board.h in place of file
 * descriptors and POSIX clocks; it knows no registers.
 *
 * Diagnostics: a JSON line of counters on the board's second UART every
 * FW_DIAG_PERIOD_MS, and at once when a byte arrives there.
 */
#include "board.h"
#include "fw_action.h"
#include "fw_crc_ccitt.h"
#include "fw_fish.h"
#include "fw_sum8.h"

#ifndef FW_ODOM_RATE_HZ
#define FW_ODOM_RATE_HZ 50u /* the harness's default --rate */
#endif
#ifndef FW_ACTION_MAX_LEN
/* Largest action data accepted (longer frames get a length NAK). The harness takes
 * 1024; a microcontroller keeps what its frames need: an IAP chunk of 256 bytes with
 * its 5-byte header, a user configuration of 32 scenes (232 bytes). */
#define FW_ACTION_MAX_LEN 320u
#endif
#ifndef FW_ACTION_KEEP
#define FW_ACTION_KEEP 64u /* data kept for duplicate detection; longer: by length and CRC */
#endif
#ifndef FW_DIAG_PERIOD_MS
#define FW_DIAG_PERIOD_MS 1000u
#endif

#define ODOM_PERIOD_MS (1000u / FW_ODOM_RATE_HZ)

typedef struct {
    /* The receiver generated from protocols/frames/cmd.toml (fw_frames_gen.c): the same
     * frames and counters as fw_sum8_rx (fuzz/fuzz_sum8.c checks both). */
    fwg_cmd_rx cmd_rx;
    fw_action_rx act_rx;
    fw_responder resp;
    fw_watchdog watchdog;
    fw_cmd cmd;     /* the velocity the base runs at (zeroed by the watchdog) */
    fw_cmd last_rx; /* the last command applied */
    uint32_t last_cmd_ms;
    uint32_t cmd_applied;
    uint32_t cmd_rejected; /* checksum-valid but not finite or beyond the limits */
    uint32_t trip_ms; /* when the watchdog last stopped the base */
    float yaw_deg;
    uint32_t odom_sent;
    uint32_t watchdog_trips;
    uint32_t boot_ms;
} app_t;

static app_t A;
static fw_fish F;
static uint8_t act_buf[FW_ACTION_RX_BUF_SIZE(FW_ACTION_MAX_LEN)];
static uint8_t keep_buf[FW_ACTION_KEEP];

static void on_action_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n;
    int dup = 0;
    const int fish = fw_action_is_request(f->type) && fw_fish_handles(f->sub);
    (void)ctx;
    (void)offset;
    n = fw_responder_answer(&A.resp, f, fish ? fw_fish_check(&F, f) : FW_STATUS_AUTO, ans, &dup);
    if (n == 0) {
        return;
    }
    board_link_write(NULL, ans, n);
    if (fish && ans[7] == FW_STATUS_OK) {
        fw_fish_execute(&F, f, dup, board_ms()); /* its result, if it has one, follows */
    }
    if (F.reboot) { /* IAP end or reset: the answer and result out, then restart */
        board_link_flush(100);
        board_reset();
    }
}

static void on_action_reject(void *ctx, const fw_action_reject *r)
{
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n = fw_responder_answer_rejected(&A.resp, r, ans);
    (void)ctx;
    if (n != 0) {
        board_link_write(NULL, ans, n);
    }
}

static void on_cmd_frame(void *ctx, const uint8_t *frame, size_t len, uint32_t offset)
{
    fwg_cmd_t v;
    fw_cmd c;
    (void)ctx;
    (void)offset;
    fwg_cmd_decode(frame, len, &v);
    c.vx = v.vx;
    c.vy = v.vy;
    c.wz = v.wz;
    if (!fw_cmd_plausible(&c)) {
        A.cmd_rejected++; /* the base keeps its velocity; the watchdog is not fed */
        return;
    }
    A.cmd_applied++;
    A.cmd = c;
    A.last_rx = c;
    A.last_cmd_ms = board_ms();
    fw_watchdog_feed(&A.watchdog, A.last_cmd_ms);
}

static void send_odom(uint32_t dt_ms)
{
    fw_odom o;
    const float rad_to_deg = 57.29577951308232f;
    A.yaw_deg = fw_wrap_deg(A.yaw_deg + A.cmd.wz * ((float)dt_ms * 0.001f) * rad_to_deg);
    o.vx = A.cmd.vx;
    o.vy = A.cmd.vy;
    o.wz = A.cmd.wz;
    o.yaw_deg = A.yaw_deg;
    fw_odom_send(&o, board_link_write, NULL);
    A.odom_sent++;
}

/* ---- the counters line: no printf (a few hundred bytes of code, not 20 KB) and no
 * line buffer (written as it is made: the diagnostics UART is polled) ---- */

typedef struct {
    int comma; /* a field was written in the current object */
} line_t;

static void put(line_t *l, const char *s)
{
    (void)l;
    board_diag_write(s);
}

static void put_u32(line_t *l, const char *key, uint32_t v)
{
    char digits[12];
    int n = 11;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    put(l, l->comma ? ", \"" : "\"");
    put(l, key);
    put(l, "\": ");
    put(l, digits + n);
    l->comma = 1;
}

static void open_obj(line_t *l, const char *key)
{
    put(l, ", \"");
    put(l, key);
    put(l, "\": {");
    l->comma = 0;
}

static void close_obj(line_t *l)
{
    put(l, "}");
    l->comma = 1;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void report(uint32_t now)
{
    line_t l;
    const fwg_cmd_stats *c = &A.cmd_rx.stats;
    const fw_action_stats *a = &A.act_rx.stats;
    const fw_responder_stats *r = &A.resp.stats;
    const board_stats *b = board_link_stats();
    l.comma = 0;
    put(&l, "{");
    put_u32(&l, "ms", now);
    put_u32(&l, "odom_sent", A.odom_sent);
    put_u32(&l, "watchdog_trips", A.watchdog_trips);
    put_u32(&l, "watchdog_trip_ms", A.trip_ms);
    put_u32(&l, "last_cmd_ms", A.last_cmd_ms);
    put_u32(&l, "cmd_applied", A.cmd_applied);
    put_u32(&l, "cmd_rejected", A.cmd_rejected);
    put_u32(&l, "rate_hz", FW_ODOM_RATE_HZ);
    put_u32(&l, "cmd_timeout_ms", A.watchdog.timeout_ms);
    put_u32(&l, "tx_bytes", b->tx_bytes);
    put_u32(&l, "tx_dropped", b->tx_dropped);
    put_u32(&l, "rx_bytes", b->rx_bytes);
    put_u32(&l, "rx_overruns", b->rx_overruns);
    put_u32(&l, "rx_held", b->rx_held);
    put_u32(&l, "stack_used", board_stack_used());
    put_u32(&l, "stack_size", board_stack_size());
    open_obj(&l, "cmd");
    put_u32(&l, "frames", c->frames);
    put_u32(&l, "bytes", c->bytes);
    put_u32(&l, "checksum_errors", c->checksum_errors);
    put_u32(&l, "discarded", c->discarded);
    put_u32(&l, "resyncs", c->resyncs);
    put_u32(&l, "nonfinite", c->nonfinite);
    put_u32(&l, "overlapping", c->overlapping);
    close_obj(&l);
    /* Floats as their IEEE-754 bit patterns: exact, and no float formatting code. */
    open_obj(&l, "velocity_bits");
    put_u32(&l, "vx", f32_bits(A.cmd.vx));
    put_u32(&l, "vy", f32_bits(A.cmd.vy));
    put_u32(&l, "wz", f32_bits(A.cmd.wz));
    close_obj(&l);
    open_obj(&l, "last_cmd_bits");
    put_u32(&l, "vx", f32_bits(A.last_rx.vx));
    put_u32(&l, "vy", f32_bits(A.last_rx.vy));
    put_u32(&l, "wz", f32_bits(A.last_rx.wz));
    close_obj(&l);
    open_obj(&l, "action");
    put_u32(&l, "frames", a->frames);
    put_u32(&l, "bytes", a->bytes);
    put_u32(&l, "discarded", a->discarded);
    put_u32(&l, "resyncs", a->resyncs);
    put_u32(&l, "header_errors", a->header_errors);
    put_u32(&l, "length_errors", a->length_errors);
    put_u32(&l, "trailer_errors", a->trailer_errors);
    put_u32(&l, "checksum_errors", a->checksum_errors);
    put_u32(&l, "truncated", a->truncated);
    put_u32(&l, "relaxed_accepts", a->relaxed_accepts);
    close_obj(&l);
    open_obj(&l, "responder");
    put_u32(&l, "answered", r->answered);
    put_u32(&l, "acks", r->acks);
    put_u32(&l, "naks", r->naks);
    put_u32(&l, "duplicates", r->duplicates);
    put(&l, "}}\n");
}

int main(void)
{
    uint32_t next_odom, last_odom, next_diag;
    board_init();
    fwg_cmd_rx_init(&A.cmd_rx);
    fw_action_rx_init(&A.act_rx, &crc_ccitt, act_buf, sizeof act_buf, FW_ACTION_MAX_LEN,
                      on_action_frame, on_action_reject, NULL);
    fw_responder_init(&A.resp, &crc_ccitt, keep_buf, sizeof keep_buf);
    fw_watchdog_init(&A.watchdog, FW_CMD_TIMEOUT_MS);
    {
        size_t size;
        void *store = board_persist(&size);
        /* The store is the board's persistent region (a flash sector on a real part). */
        if (store == NULL || size < sizeof(fw_fish_store)) {
            for (;;) {
            }
        }
        fw_fish_init(&F, &crc_ccitt, (fw_fish_store *)store, board_link_write, NULL, board_ms());
    }
    A.boot_ms = board_ms();
    board_diag_write("fwref: ready\n");
    last_odom = A.boot_ms;
    next_odom = A.boot_ms + ODOM_PERIOD_MS;
    next_diag = A.boot_ms + FW_DIAG_PERIOD_MS;
    for (;;) {
        uint8_t buf[64];
        size_t n;
        uint32_t now;
        while ((n = board_link_read(buf, sizeof buf)) > 0) {
            fwg_cmd_rx_feed(&A.cmd_rx, buf, n, on_cmd_frame, NULL);
            fw_action_rx_feed(&A.act_rx, buf, n);
        }
        now = board_ms();
        if (fw_watchdog_expired(&A.watchdog, now)) {
            A.cmd.vx = A.cmd.vy = A.cmd.wz = 0.0f; /* the host went quiet: stop the base */
            A.watchdog_trips++;
            A.trip_ms = now;
        }
        if ((int32_t)(now - next_odom) >= 0) {
            send_odom(now - last_odom);
            last_odom = now;
            next_odom += ODOM_PERIOD_MS;
            if ((int32_t)(now - next_odom) >= 0) {
                next_odom = now + ODOM_PERIOD_MS; /* fell behind: do not burst */
            }
        }
        if (board_diag_getc() >= 0 || (int32_t)(now - next_diag) >= 0) {
            report(now);
            if ((int32_t)(now - next_diag) >= 0) {
                next_diag += FW_DIAG_PERIOD_MS;
            }
        }
        board_idle();
    }
}
