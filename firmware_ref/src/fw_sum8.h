/*
 * fw_sum8.h - the fixed-length sum-8 frames of PROTOCOLS.md sections 1-2.
 *
 *   odometry (firmware -> host), 19 bytes:
 *     AA 55 | vx f32 | vy f32 | wz f32 | yaw_deg f32 | sum8(bytes 2..17)
 *   command (host -> firmware), 15 bytes:
 *     AA 55 | vx f32 | vy f32 | wz f32 | sum8(bytes 2..13)
 *
 * Floats are IEEE-754 little-endian; yaw is in degrees.
 *
 * The receiver is a byte-wise machine (call it from the UART RX interrupt)
 * that holds at most one frame. Unlike the seed's GetOneByte it backtracks:
 * every AA 55 position is a candidate, including positions inside a frame
 * just accepted, and after a candidate is resolved the scan resumes at the
 * byte after its header. So neither "AA AA 55 ..." nor a false AA 55 in noise
 * or in a payload can make it lose a frame that is intact on the wire. It
 * yields the same frames (and stream offsets) and the same counters as the
 * host's protocols.sum8_receiver.Sum8Receiver on the same stream.
 */
#ifndef FW_SUM8_H
#define FW_SUM8_H

#include "fw_common.h"
/* Wire layouts, encoders and decoders generated from the descriptions in protocols/frames/
 * (`fwbridge gen c odom cmd action actuator --name fw_frames_gen --prefix fwg_`). */
#include "fw_frames_gen.h"

#define FW_SUM8_H0 0xAAu
#define FW_SUM8_H1 0x55u
#define FW_ODOM_SIZE FWG_ODOM_SIZE
#define FW_CMD_SIZE FWG_CMD_SIZE

/* Wire layouts (uint8_t members only: no padding), from the descriptions. */
typedef fwg_odom_wire fw_odom_wire;
typedef fwg_cmd_wire fw_cmd_wire;

FW_STATIC_ASSERT(sizeof(fw_odom_wire) == FW_ODOM_SIZE, odom_wire_size);
FW_STATIC_ASSERT(sizeof(fw_cmd_wire) == FW_CMD_SIZE, cmd_wire_size);
FW_STATIC_ASSERT(offsetof(fw_odom_wire, checksum) == 18, odom_checksum_offset);
FW_STATIC_ASSERT(offsetof(fw_cmd_wire, checksum) == 14, cmd_checksum_offset);

/* Decoded values. */
typedef struct {
    float vx, vy, wz; /* m/s, m/s, rad/s (body frame) */
    float yaw_deg;    /* degrees */
} fw_odom;

typedef struct {
    float vx, vy, wz; /* m/s, m/s, rad/s */
} fw_cmd;

/* Sum of the bytes, mod 256 (the seed's "checkout"). */
uint8_t fw_sum8(const uint8_t *data, size_t len);

/* Encoders: write exactly FW_*_SIZE bytes to out; return that size. NaN and
 * infinity are encoded as given (the firmware reports what it has). */
size_t fw_odom_encode(const fw_odom *odom, uint8_t out[FW_ODOM_SIZE]);
size_t fw_cmd_encode(const fw_cmd *cmd, uint8_t out[FW_CMD_SIZE]);
/* Encode and hand the bytes to the board's transmit callback. */
void fw_odom_send(const fw_odom *odom, fw_tx_fn tx, void *ctx);

/* Decoders for a frame the receiver accepted (no checks: it checked). */
void fw_odom_decode(const uint8_t frame[FW_ODOM_SIZE], fw_odom *out);
void fw_cmd_decode(const uint8_t frame[FW_CMD_SIZE], fw_cmd *out);
/* Full check of exactly `len` bytes: 0 ok, -1 length, -2 header, -3 checksum. */
int fw_sum8_check(const uint8_t *data, size_t len, size_t frame_size);

/* Counters; the same names and meaning as the host's ReceiverStats. Every
 * byte fed is eventually in a frame or discarded. */
typedef struct {
    uint32_t frames;          /* frames accepted (overlapping ones included) */
    uint32_t bytes;           /* bytes fed */
    uint32_t checksum_errors; /* rejected candidates outside every accepted frame */
    uint32_t discarded;       /* bytes in no accepted frame */
    uint32_t resyncs;         /* frames that follow discarded bytes */
    uint32_t nonfinite;       /* accepted frames with a NaN/inf field */
    uint32_t overlapping;     /* accepted frames starting inside an earlier one */
} fw_sum8_stats;

typedef struct {
    /* Word-sized on purpose: the per-byte path stores and reloads len on
     * every byte, and a byte-wide field there measured 2x slower. */
    uint32_t len;                /* bytes held: a partial candidate or a lone AA */
    uint32_t size;               /* FW_ODOM_SIZE or FW_CMD_SIZE */
    uint8_t gap;                 /* bytes were discarded since the last frame */
    uint8_t in_copy;             /* the last frame is in copy[], not buf[] */
    uint8_t buf[FW_ODOM_SIZE];   /* buf[0] is at stream position stats.bytes - len */
    uint8_t copy[FW_ODOM_SIZE];  /* the last frame, when the rescan moved buf */
    fw_pos_t frame_offset;       /* the last frame's stream offset (its AA) */
    fw_pos_t covered;            /* end of the last accepted frame */
    fw_sum8_stats stats;
} fw_sum8_rx;

/* frame_size: FW_ODOM_SIZE (host-side odometry) or FW_CMD_SIZE (firmware). */
void fw_sum8_rx_init(fw_sum8_rx *rx, uint8_t frame_size);

/* Everything but the common case of fw_sum8_rx_byte(). */
int fw_sum8_rx_byte_slow(fw_sum8_rx *rx, uint8_t b);

/* Feed one byte. Returns 1 when it completed a frame: fw_sum8_rx_frame()
 * gives its bytes and rx->frame_offset its stream offset, until the next
 * call. At most one frame completes per byte. ISR-safe: bounded time, no
 * allocation, no copy of the frame in the common case.
 *
 * Inline so that the common case (a payload byte of a candidate: one store)
 * costs no call in the UART interrupt handler. */
static inline int fw_sum8_rx_byte(fw_sum8_rx *rx, uint8_t b)
{
    /* Both read before the store: a uint8_t store may alias anything, so
     * reading them after it would cost a reload on every byte. */
    const unsigned len = rx->len;
    const unsigned size = rx->size;
    if (len >= 2 && len + 1 < size) {
        rx->buf[len] = b;
        rx->len = len + 1;
        rx->stats.bytes++;
        return 0;
    }
    return fw_sum8_rx_byte_slow(rx, b);
}
/* The frame that fw_sum8_rx_byte() just reported. */
static inline const uint8_t *fw_sum8_rx_frame(const fw_sum8_rx *rx)
{
    return rx->in_copy ? rx->copy : rx->buf;
}

/* Feed a buffer (a DMA half-buffer, a read() chunk); on_frame (may be NULL)
 * is called for each frame with a pointer that is valid during the call
 * (often straight into `data`: frames are checked in place). Returns the
 * number of frames. */
typedef void (*fw_sum8_frame_fn)(void *ctx, const uint8_t *frame, fw_pos_t offset);
size_t fw_sum8_rx_feed(fw_sum8_rx *rx, const uint8_t *data, size_t len,
                       fw_sum8_frame_fn on_frame, void *ctx);

/* End of stream: drop the held-back bytes (counting those outside every
 * frame as discarded); returns how many were held. */
size_t fw_sum8_rx_finish(fw_sum8_rx *rx);

/*
 * Command watchdog: a base must stop when its host goes quiet (crashed,
 * unplugged, killed). Feed it with every valid command; when it has expired,
 * zero the motors. Ticks are any free-running millisecond counter
 * (HAL_GetTick()); the arithmetic is wrap-safe. A timeout of 0 turns it off
 * (the seed firmware's behaviour: the last command is kept for ever).
 */
#ifndef FW_CMD_TIMEOUT_MS
#define FW_CMD_TIMEOUT_MS 500u /* default silence before the motors stop; -D to change */
#endif

typedef struct {
    uint32_t timeout_ms; /* 0: off */
    uint32_t last_tick;  /* tick of the last command */
    uint8_t fed;         /* a command has arrived since the last expiry */
} fw_watchdog;

static inline void fw_watchdog_init(fw_watchdog *w, uint32_t timeout_ms)
{
    w->timeout_ms = timeout_ms;
    w->last_tick = 0;
    w->fed = 0;
}

/* A valid command arrived at ``tick``. */
static inline void fw_watchdog_feed(fw_watchdog *w, uint32_t tick)
{
    w->last_tick = tick;
    w->fed = 1;
}

/* 1 once, when the silence since the last command passes the timeout: stop the motors. */
static inline int fw_watchdog_expired(fw_watchdog *w, uint32_t tick)
{
    if (w->timeout_ms == 0 || !w->fed || (uint32_t)(tick - w->last_tick) <= w->timeout_ms) {
        return 0;
    }
    w->fed = 0;
    return 1;
}

/*
 * Command plausibility: a frame that passes its checksum can still carry a value no
 * base follows (NaN, 1e30: a host's typo, or noise that passes sum-8 one time in 256).
 * Such a command is refused whole and counted: the velocity stays what it was and
 * the watchdog is not fed, so refused commands alone stop the base as silence does.
 * The limits are the simulated firmware's (bridge/sim/models/base.py); -D to change.
 */
#ifndef FW_CMD_MAX_SPEED
#define FW_CMD_MAX_SPEED 5.0f /* m/s, |vx| and |vy| */
#endif
#ifndef FW_CMD_MAX_TURN
#define FW_CMD_MAX_TURN 20.0f /* rad/s, |wz| */
#endif

/* 1 when every field is finite and within the limits. Written as ranges so that NaN,
 * which fails every comparison, is refused without isnan() (no libm). */
static inline int fw_cmd_plausible(const fw_cmd *c)
{
    return c->vx >= -FW_CMD_MAX_SPEED && c->vx <= FW_CMD_MAX_SPEED
        && c->vy >= -FW_CMD_MAX_SPEED && c->vy <= FW_CMD_MAX_SPEED
        && c->wz >= -FW_CMD_MAX_TURN && c->wz <= FW_CMD_MAX_TURN;
}

/* Degrees into [-180, 180) in constant time. A loop of 360-degree steps is not: past
 * 2^33 a step no longer changes the float, and infinity never gets smaller, so the
 * loop (and the main loop with the watchdog in it) never ends. No libm: fmodf would
 * bring errno's data into RAM. A heading that is not finite, or so large (2^23
 * degrees) that a float keeps no fraction of a turn, restarts at 0 rather than
 * poisoning every later frame. */
#define FW_WRAP_DEG_MAX 8388608.0f

static inline float fw_wrap_deg(float deg)
{
    float r;
    if (deg >= -180.0f && deg < 180.0f) {
        return deg;
    }
    if (!(deg > -FW_WRAP_DEG_MAX && deg < FW_WRAP_DEG_MAX)) {
        return 0.0f; /* NaN fails this too */
    }
    /* Whole turns off: |deg / 360| < 2^15 fits the cast, and a rounded quotient
     * leaves |r| a hair over 360 at most, which one step below brings home. */
    r = deg - (float)(int32_t)(deg * (1.0f / 360.0f)) * 360.0f;
    if (r >= 180.0f) {
        r -= 360.0f;
    } else if (r < -180.0f) {
        r += 360.0f;
    }
    return r;
}

#endif /* FW_SUM8_H */
