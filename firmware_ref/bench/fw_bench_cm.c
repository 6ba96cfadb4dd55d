/*
 * fw_bench_cm.c - instructions (or cycles) per received byte on the
 * Cortex-M: the firmware's receive path (both receivers on each chunk, as
 * app/fw_app.c's main loop runs them; and the sum-8 receiver byte by byte,
 * as a UART interrupt would) over streams built here. Results as JSON lines
 * on the board's diagnostics UART, then "done".
 *
 * Time is the board's SysTick clock. Under QEMU with -icount shift=0 one
 * instruction is one nanosecond of emulated time, so SysTick cycles x
 * (1e9 / clock) / bytes is instructions per byte; on a real part it is
 * cycles per byte. The DWT cycle counter is used when it counts.
 */
#include "board.h"
#include "fw_action.h"
#include "fw_crc16.h"
#include "fw_sum8.h"

#define STREAM 16384u

static uint8_t stream[STREAM];
static uint8_t act_buf[FW_ACTION_RX_BUF_SIZE(1024)];
static uint8_t keep[256];
static fw_crc16 crc;
static fw_sum8_rx cmd_rx;
static fw_action_rx act_rx;
static fw_responder resp;
static uint32_t seed = 12345u;
static volatile uint32_t sink;

static uint32_t rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

static void on_cmd(void *ctx, const uint8_t *frame, fw_pos_t offset)
{
    fw_cmd c;
    (void)ctx;
    (void)offset;
    fw_cmd_decode(frame, &c);
    sink += (uint32_t)c.vx;
}

static void on_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    (void)ctx;
    (void)offset;
    sink += (uint32_t)fw_responder_answer(&resp, f, FW_STATUS_AUTO, ans, NULL);
}

static size_t fill_cmd(size_t garbage_pct)
{
    size_t n = 0;
    while (n + FW_CMD_SIZE <= STREAM) {
        fw_cmd c;
        c.vx = (float)(rnd() % 1000u) * 0.001f;
        c.vy = 0.0f;
        c.wz = (float)(rnd() % 1000u) * -0.002f;
        fw_cmd_encode(&c, stream + n);
        n += FW_CMD_SIZE;
        while (rnd() % 100u < garbage_pct && n < STREAM) {
            stream[n++] = (rnd() & 1u) ? 0xAAu : (uint8_t)rnd();
        }
    }
    return n;
}

static size_t fill_action(void)
{
    size_t n = 0;
    uint8_t data[32];
    size_t k;
    for (k = 0; k < sizeof data; k++) {
        data[k] = (uint8_t)rnd();
    }
    while (n + FW_ACTION_OVERHEAD + sizeof data <= STREAM) {
        data[0] = (uint8_t)n;
        n += fw_action_encode(&crc, 0x01, 0x04, 0x21, data, sizeof data, stream + n,
                              STREAM - n);
    }
    return n;
}

static void put_u32(const char *key, uint32_t v, int last)
{
    char digits[12];
    int n = 11;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    board_diag_write("\"");
    board_diag_write(key);
    board_diag_write("\": ");
    board_diag_write(digits + n);
    board_diag_write(last ? "}\n" : ", ");
}

typedef struct {
    uint64_t sys;
    uint32_t dwt;
} stamp_t;

static stamp_t stamp(void)
{
    stamp_t s;
    s.sys = board_cycles();
    (void)board_dwt_cycles(&s.dwt);
    return s;
}

static void result(const char *name, size_t bytes, stamp_t a, stamp_t b, uint32_t frames)
{
    uint32_t probe;
    board_diag_write("{\"case\": \"");
    board_diag_write(name);
    board_diag_write("\", ");
    put_u32("bytes", (uint32_t)bytes, 0);
    put_u32("frames", frames, 0);
    put_u32("clock_hz", board_cycle_hz(), 0);
    put_u32("dwt", (uint32_t)board_dwt_cycles(&probe), 0);
    put_u32("dwt_cycles", b.dwt - a.dwt, 0);
    put_u32("systick_cycles", (uint32_t)(b.sys - a.sys), 1);
}

static void run_feed(const char *name, size_t n, int both)
{
    stamp_t a, b;
    size_t i;
    fw_sum8_rx_init(&cmd_rx, FW_CMD_SIZE);
    fw_action_rx_init(&act_rx, &crc, act_buf, sizeof act_buf, 1024, on_frame, NULL, NULL);
    fw_responder_init(&resp, &crc, keep, sizeof keep);
    a = stamp();
    for (i = 0; i < n; i += 64u) {
        size_t len = n - i < 64u ? n - i : 64u;
        fw_sum8_rx_feed(&cmd_rx, stream + i, len, on_cmd, NULL);
        if (both) {
            fw_action_rx_feed(&act_rx, stream + i, len);
        }
    }
    b = stamp();
    result(name, n, a, b, cmd_rx.stats.frames + act_rx.stats.frames);
}

static void on_gen(void *ctx, const uint8_t *frame, size_t len, uint32_t offset)
{
    fwg_cmd_t v;
    (void)ctx;
    (void)offset;
    fwg_cmd_decode(frame, len, &v);
    sink += (uint32_t)v.vx;
}

/* The board's path: the generated command receiver and the action receiver, 64-byte chunks. */
static void run_gen_feed(const char *name, size_t n, int both)
{
    static fwg_cmd_rx g;
    stamp_t a, b;
    size_t i;
    fwg_cmd_rx_init(&g);
    fw_action_rx_init(&act_rx, &crc, act_buf, sizeof act_buf, 1024, on_frame, NULL, NULL);
    fw_responder_init(&resp, &crc, keep, sizeof keep);
    a = stamp();
    for (i = 0; i < n; i += 64u) {
        size_t len = n - i < 64u ? n - i : 64u;
        fwg_cmd_rx_feed(&g, stream + i, len, on_gen, NULL);
        if (both) {
            fw_action_rx_feed(&act_rx, stream + i, len);
        }
    }
    b = stamp();
    result(name, n, a, b, g.stats.frames + act_rx.stats.frames);
}

static void run_bytewise(const char *name, size_t n)
{
    stamp_t a, b;
    size_t i;
    uint32_t frames = 0;
    fw_sum8_rx_init(&cmd_rx, FW_CMD_SIZE);
    a = stamp();
    for (i = 0; i < n; i++) {
        if (fw_sum8_rx_byte(&cmd_rx, stream[i])) {
            on_cmd(NULL, fw_sum8_rx_frame(&cmd_rx), cmd_rx.frame_offset);
            frames++;
        }
    }
    b = stamp();
    result(name, n, a, b, frames);
}

int main(void)
{
    size_t n;
    board_init();
    fw_crc16_init_name(&crc, FW_CRC16_DEFAULT);
    n = fill_cmd(0);
    run_bytewise("cmd_clean_sum8_byte", n);
    run_feed("cmd_clean_sum8_feed", n, 0);
    run_feed("cmd_clean_both_receivers", n, 1);
    run_gen_feed("cmd_clean_generated_feed", n, 0);
    run_gen_feed("cmd_clean_generated_and_action", n, 1);
    n = fill_cmd(5);
    run_bytewise("cmd_garbage5_sum8_byte", n);
    run_feed("cmd_garbage5_both_receivers", n, 1);
    run_gen_feed("cmd_garbage5_generated_and_action", n, 1);
    n = fill_action();
    run_feed("action32_both_receivers", n, 1);
    board_diag_write("done\n");
    for (;;) {
        board_idle();
    }
}
