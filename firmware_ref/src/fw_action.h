/*
 * fw_action.h - action frames (PROTOCOLS.md 3): encoder, length-directed
 * receiver, ACK/NAK answers and the stop-and-wait sender.
 *
 *   FE EF | machine u8 | type u8 | N u16 | sub u8 | data[N] | crc u16 | FD DF
 *
 * 11 + N bytes. N counts the data bytes only (the patent's worked example,
 * not its prose). N and the CRC are little-endian. The CRC covers bytes
 * 2 .. 6+N (machine code through the last data byte) with the link's CRC-16
 * preset (fw_crc16.h; CRC-16/CCITT-FALSE by default).
 *
 * Everything here mirrors the host's protocols.action_receiver and
 * protocols.arq: the same frames, offsets, rejections and counters on the
 * same byte stream, the same answers, the same retransmissions.
 */
#ifndef FW_ACTION_H
#define FW_ACTION_H

#include "fw_common.h"
#include "fw_crc16.h"

#define FW_ACTION_H0 0xFEu
#define FW_ACTION_H1 0xEFu
#define FW_ACTION_T0 0xFDu
#define FW_ACTION_T1 0xDFu
#define FW_ACTION_ALT_H1 0xFFu /* the worked example's "FE FF" header */
#define FW_ACTION_OVERHEAD 11u
#define FW_ACTION_MAX_LEN_DEFAULT 1024u

/* The layout the hand-written receiver and responder assume is the one of the
 * description (protocols/frames/action.toml, generated in fw_frames_gen.h). */
#include "fw_frames_gen.h"
FW_STATIC_ASSERT(FWG_ACTION_MIN_SIZE == FW_ACTION_OVERHEAD, action_overhead_agrees);
FW_STATIC_ASSERT(FWG_ACTION_MAX_DATA == FW_ACTION_MAX_LEN_DEFAULT, action_max_agrees);
FW_STATIC_ASSERT(offsetof(fwg_action_wire, machine) == 2 && offsetof(fwg_action_wire, type) == 3
                     && offsetof(fwg_action_wire, length) == 4
                     && offsetof(fwg_action_wire, sub) == 6,
                 action_layout_agrees);
#define FW_ACTION_ANSWER_SIZE (FW_ACTION_OVERHEAD + 1u)
/* Buffer a receiver needs for frames of up to max_len data bytes. */
#define FW_ACTION_RX_BUF_SIZE(max_len) (FW_ACTION_OVERHEAD + (size_t)(max_len))

/* Wire layout of the parts around the data (uint8_t members only). */
typedef struct {
    uint8_t header[2];
    uint8_t machine;
    uint8_t type;
    uint8_t length[2];
    uint8_t sub;
} fw_action_head_wire;

typedef struct {
    uint8_t crc[2];
    uint8_t trailer[2];
} fw_action_tail_wire;

FW_STATIC_ASSERT(sizeof(fw_action_head_wire) == 7, action_head_size);
FW_STATIC_ASSERT(sizeof(fw_action_tail_wire) == 4, action_tail_size);
FW_STATIC_ASSERT(offsetof(fw_action_head_wire, sub) == 6, action_sub_offset);

/* Instruction types (patent table 2); the answer to request T is T + 0x10. */
enum {
    FW_TYPE_READ_PHONE = 0x01,
    FW_TYPE_READ_SIMULATOR = 0x02,
    FW_TYPE_READ_PC = 0x03,
    FW_TYPE_WRITE_PHONE = 0x04,
    FW_TYPE_WRITE_SIMULATOR = 0x05,
    FW_TYPE_WRITE_PC = 0x06,
    FW_TYPE_CONTROL_PHONE = 0x07,
    FW_TYPE_ANSWER_OFFSET = 0x10
};

/* Sub-commands (patent table 3). The patent lists 0x41 twice: "robot error
 * code" and "device enters CAN flash mode"; the second name is an alias. */
enum {
    FW_SUB_STATUS_UPDATE = 0x01,
    FW_SUB_STAND_STILL = 0x02,
    FW_SUB_FREE_SWIMMING = 0x03,
    FW_SUB_QUERY_ROBOT_INFO = 0x11,
    FW_SUB_QUERY_SERVO_INFO = 0x12,
    FW_SUB_QUERY_BUOYANCY_INFO = 0x13,
    FW_SUB_QUERY_CAN_ERROR_RATE = 0x14,
    FW_SUB_REALTIME_SERVO_CONTROL = 0x21,
    FW_SUB_WRITE_ACTION_GROUP = 0x31,
    FW_SUB_TEST_ACTION_GROUP = 0x32,
    FW_SUB_WRITE_USER_CONFIG = 0x33,
    FW_SUB_ERASE_COMMAND_FLASH = 0x34,
    FW_SUB_IAP_UPGRADE = 0x35,
    FW_SUB_READ_USER_CONFIG = 0x36,
    FW_SUB_READ_ACTIONS = 0x37,
    FW_SUB_SET_SERVO_POSITION = 0x38,
    FW_SUB_ENTER_FREE_MODE = 0x39,
    FW_SUB_ENTER_IDLE = 0x3A,
    FW_SUB_ROBOT_ERROR_CODE = 0x41,
    FW_SUB_DEVICE_CAN_FLASH = 0x41, /* alias, see above */
    FW_SUB_MAIN_CAN_FLASH = 0x42
};

/* The answer's status byte. */
enum {
    FW_STATUS_OK = 0x00,
    FW_STATUS_CRC_ERROR = 0x01,
    FW_STATUS_LENGTH_ERROR = 0x02,
    FW_STATUS_TRAILER_ERROR = 0x03,
    FW_STATUS_UNKNOWN_SUB = 0x04,
    FW_STATUS_BUSY = 0x05
};

/* 1 when `type` is a request (0x01..0x07): only requests are answered. */
int fw_action_is_request(uint8_t type);
/* 1 when `sub` is in table 3.2. */
int fw_action_sub_known(uint8_t sub);

/* A decoded frame; `data` points into the receiver's buffer and is valid
 * only during the callback. */
enum { FW_DEFECT_HEADER = 0x01, FW_DEFECT_CRC = 0x02 }; /* relaxed mode only */
typedef struct {
    uint8_t machine;
    uint8_t type;
    uint8_t sub;
    uint8_t defects; /* FW_DEFECT_*; always 0 in strict mode */
    uint16_t len;
    const uint8_t *data;
} fw_action_frame;

/* Encode into out (cap bytes); returns 11 + n, or 0 when it does not fit. */
size_t fw_action_encode(const fw_crc16 *crc, uint8_t machine, uint8_t type, uint8_t sub,
                        const uint8_t *data, uint16_t n, uint8_t *out, size_t cap);
/* Encode straight to the transmit callback, in three pieces, no buffer. */
void fw_action_send(const fw_crc16 *crc, uint8_t machine, uint8_t type, uint8_t sub,
                    const uint8_t *data, uint16_t n, fw_tx_fn tx, void *ctx);
/* Check exactly len bytes, in the host's order: size, header, length field,
 * trailer, CRC. Returns 0 or the first FW_CHECK_* failure. */
enum {
    FW_CHECK_OK = 0,
    FW_CHECK_SIZE = -1,    /* fewer than 11 bytes */
    FW_CHECK_HEADER = -2,
    FW_CHECK_LENGTH = -3,  /* length field disagrees with the size */
    FW_CHECK_TRAILER = -4,
    FW_CHECK_CRC = -5
};
int fw_action_check(const fw_crc16 *crc, const uint8_t *frame, size_t len);
/* Decode bytes that fw_action_check accepted. */
void fw_action_decode(const uint8_t *frame, fw_action_frame *out);

/* ------------------------------------------------------------------------ */
/* Receiver                                                                  */

/* Why a candidate with a FE EF header was rejected. */
enum {
    FW_REJECT_LENGTH = 1,   /* N over the maximum */
    FW_REJECT_TRAILER = 2,  /* no FD DF where N puts it */
    FW_REJECT_CRC = 3,
    FW_REJECT_TRUNCATED = 4 /* the stream ended inside it (finish) */
};

typedef struct {
    fw_pos_t offset;
    uint8_t reason; /* FW_REJECT_* */
    uint8_t machine;
    uint8_t type;
    uint8_t sub;
    uint8_t has_sub; /* 0: the stream ended before the sub-command byte */
} fw_action_reject;

typedef struct {
    uint32_t frames;
    uint32_t bytes;
    uint32_t discarded;
    uint32_t resyncs;
    uint32_t header_errors;  /* FE FF frames (length, trailer right) refused in strict mode */
    uint32_t length_errors;
    uint32_t trailer_errors;
    uint32_t checksum_errors;
    uint32_t truncated;
    uint32_t relaxed_accepts;
} fw_action_stats;

typedef void (*fw_action_frame_fn)(void *ctx, const fw_action_frame *frame, fw_pos_t offset);
typedef void (*fw_action_reject_fn)(void *ctx, const fw_action_reject *reject);

typedef struct {
    const fw_crc16 *crc;
    uint8_t *buf;      /* caller's memory, at least FW_ACTION_RX_BUF_SIZE(max_len) */
    size_t cap;
    size_t start, end; /* held bytes: buf[start..end) */
    size_t need;       /* held bytes needed before anything can be decided */
    uint16_t max_len;
    uint8_t relaxed;   /* accept the alternative header and skip the CRC check */
    uint8_t has_alt;   /* an alternative header is a candidate (default FE FF) */
    uint8_t alt[2];
    uint8_t gap;
    fw_action_frame_fn on_frame;
    fw_action_reject_fn on_reject;
    void *ctx;
    fw_action_stats stats;
} fw_action_rx;

/* Returns -1 when cap is too small for max_len. Callbacks may be NULL; they
 * run inside fw_action_rx_byte/feed/finish (in the ISR if you call it there)
 * and must not feed the same receiver. The alternative header FE FF is on. */
int fw_action_rx_init(fw_action_rx *rx, const fw_crc16 *crc, uint8_t *buf, size_t cap,
                      uint16_t max_len, fw_action_frame_fn on_frame,
                      fw_action_reject_fn on_reject, void *ctx);
/* Set (h0, h1) as the alternative header, or none with enable = 0. */
void fw_action_rx_alt_header(fw_action_rx *rx, int enable, uint8_t h0, uint8_t h1);

/* Feed bytes; return the number of frames delivered to on_frame. A byte may
 * complete several frames (held behind a false header's long length). */
size_t fw_action_rx_byte(fw_action_rx *rx, uint8_t b);
size_t fw_action_rx_feed(fw_action_rx *rx, const uint8_t *data, size_t len);
/* End of stream: reject the incomplete candidates (truncated) and deliver
 * the frames behind them; afterwards nothing is held. */
size_t fw_action_rx_finish(fw_action_rx *rx);

/* ------------------------------------------------------------------------ */
/* Answers (receiving side)                                                  */

typedef struct {
    uint32_t answered;
    uint32_t acks;
    uint32_t naks;
    uint32_t duplicates;
} fw_responder_stats;

typedef struct {
    const fw_crc16 *crc;
    uint8_t known[32];   /* bitmap of handled sub-commands */
    /* The last frame answered OK, to flag a duplicate (the sender missed our
     * answer and sent the same bytes again). Its data is kept when it fits
     * in keep_cap bytes; longer data is compared by length and CRC only. */
    uint8_t *keep;
    size_t keep_cap;
    uint8_t has_last;
    uint8_t last_machine, last_type, last_sub;
    uint16_t last_len;
    uint16_t last_crc;
    fw_responder_stats stats;
} fw_responder;

/* keep/keep_cap may be NULL/0. Known sub-commands: all of table 3.2. */
void fw_responder_init(fw_responder *r, const fw_crc16 *crc, uint8_t *keep, size_t keep_cap);
void fw_responder_set_known(fw_responder *r, uint8_t sub, int known);

#define FW_STATUS_AUTO (-1)
/* Answer a received frame into out; returns FW_ACTION_ANSWER_SIZE, or 0 when
 * the frame is not a request (answers are not answered). status:
 * FW_STATUS_AUTO gives OK, or UNKNOWN_SUB for an unhandled sub-command.
 * *duplicate (may be NULL) is set when the frame repeats the last one
 * answered OK. */
size_t fw_responder_answer(fw_responder *r, const fw_action_frame *frame, int status,
                           uint8_t out[FW_ACTION_ANSWER_SIZE], int *duplicate);
/* The negative answer to a rejected candidate, when it can be attributed
 * (sub-command received, type a request); else 0. */
size_t fw_responder_answer_rejected(fw_responder *r, const fw_action_reject *reject,
                                    uint8_t out[FW_ACTION_ANSWER_SIZE]);

/* ------------------------------------------------------------------------ */
/* Stop-and-wait sender                                                      */

/* Time is a free-running tick count (e.g. HAL_GetTick() milliseconds);
 * comparisons are wrap-safe. */
enum {
    FW_ARQ_NONE = 0,
    FW_ARQ_RETRANSMIT = 1, /* the frame was written again */
    FW_ARQ_DELIVERED = 2,  /* answered OK: the sender is idle again */
    FW_ARQ_FAILED = 3,     /* retry limit reached: the sender is idle again */
    FW_ARQ_ACKNOWLEDGED = 4 /* a read was answered OK: its result is awaited */
};

typedef struct {
    uint32_t sent;
    uint32_t retransmitted;
    uint32_t delivered;
    uint32_t failed;
    uint32_t timeouts;
    uint32_t naks;
    uint32_t ignored; /* frames that answer nothing outstanding */
    uint32_t missing_results; /* reads answered OK whose result did not come in time */
} fw_arq_stats;

typedef struct {
    fw_tx_fn tx;
    void *tx_ctx;
    uint32_t timeout; /* ticks */
    uint8_t retries;  /* retransmissions allowed after the first attempt */
    const uint8_t *frame; /* outstanding frame (caller's memory), NULL when idle */
    size_t frame_len;
    uint8_t machine, type, sub;
    uint8_t attempts;
    uint8_t last_status; /* status of the last answer (or 0xFF: none) */
    uint8_t acknowledged; /* a read's OK answer came: now its result is awaited */
    uint32_t result_timeout; /* ticks to wait for a read's result; 0: not a read */
    uint32_t deadline;
    fw_arq_stats stats;
} fw_arq;

void fw_arq_init(fw_arq *a, uint32_t timeout_ticks, uint8_t retries, fw_tx_fn tx, void *ctx);
int fw_arq_busy(const fw_arq *a);
/* Send an encoded frame (kept by the caller until DELIVERED/FAILED); writes
 * it at once. Returns -1 when busy or when the frame is not a request. */
int fw_arq_send(fw_arq *a, const uint8_t *frame, size_t len, uint32_t now);
/* A read (PROTOCOLS.md 3.3): delivered by its result frame, not by its answer. The OK
 * answer gives FW_ARQ_ACKNOWLEDGED and starts a result deadline of result_timeout ticks;
 * no result by then sends the read again, from the same retry budget as a lost answer.
 * A result that comes before its answer (the answer lost) delivers the read. */
int fw_arq_send_read(fw_arq *a, const uint8_t *frame, size_t len, uint32_t now,
                     uint32_t result_timeout);
/* Every answer the link delivers; returns an FW_ARQ_* event. */
int fw_arq_on_answer(fw_arq *a, const fw_action_frame *frame, uint32_t now);
/* The outstanding read's result arrived (the caller matched it): FW_ARQ_DELIVERED. */
int fw_arq_on_result(fw_arq *a, uint32_t now);
/* Any frame: a result of the outstanding read (type T + 0x10, its machine code and
 * sub-command, data not one byte) goes to fw_arq_on_result, the rest to on_answer. */
int fw_arq_on_frame(fw_arq *a, const fw_action_frame *frame, uint32_t now);
/* Call periodically; retransmits or fails once the deadline has passed. */
int fw_arq_poll(fw_arq *a, uint32_t now);

#endif /* FW_ACTION_H */
