/*
 * board.h - what the portable firmware (app/) needs from a board: a
 * millisecond tick, the link UART, a diagnostics UART, sleep and reset.
 * One implementation per board (board/<board>/board.c); it is the only file
 * that knows registers.
 */
#ifndef FW_BOARD_H
#define FW_BOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t rx_bytes;    /* bytes the link's RX interrupt took from the UART */
    uint32_t rx_overruns; /* bytes lost in the UART (a real part without flow control) */
    uint32_t rx_held;     /* times the RX ring was full and the UART held the line */
    uint32_t tx_bytes;    /* bytes handed to the link's TX ring */
    uint32_t tx_dropped;  /* bytes refused because the TX ring was full (like the harness) */
} board_stats;

/* Clocks, UARTs and interrupts; called once, first thing in main(). */
void board_init(void);
/* Milliseconds since boot, from SysTick; wraps after 49 days (callers use wrap-safe math). */
uint32_t board_ms(void);
/* Clock cycles since boot (the SysTick clock), and its rate. */
uint64_t board_cycles(void);
uint32_t board_cycle_hz(void);
/* The core's own cycle counter (DWT), when the part has one that counts: 1 and *out. */
int board_dwt_cycles(uint32_t *out);
/* Move up to cap received link bytes out of the RX ring; returns how many. */
size_t board_link_read(uint8_t *buf, size_t cap);
/* Queue bytes for the link's TX interrupt; a write that does not fit whole is dropped. */
void board_link_write(void *ctx, const uint8_t *data, size_t len);
/* Diagnostics UART (a second port: counters for people and tests). Polled: may wait. */
void board_diag_write(const char *text);
/* A byte from the diagnostics UART, or -1. */
int board_diag_getc(void);
/* Sleep until an interrupt; returns at once when link bytes are already waiting. */
void board_idle(void);
/* Software reset (RAM marked no-init survives it). */
void board_reset(void);
/* Memory that stands for flash: `persist` survives a soft reset (the store of
 * settings), the two banks hold firmware images (dual-bank upgrade). A real part
 * erases and programs flash sectors here; the emulated board has RAM that a reset
 * keeps and a power cycle (QEMU restarted) clears. NULL when the board has none. */
void *board_persist(size_t *size);
uint8_t *board_bank(unsigned bank, uint32_t *size);
/* Block until the link's TX ring is empty (before a reset), at most timeout_ms. */
void board_link_flush(uint32_t timeout_ms);
/* The link driver's counters. */
const board_stats *board_link_stats(void);
/* Stack bytes ever used (the stack is painted at boot); and the stack's size. */
uint32_t board_stack_used(void);
uint32_t board_stack_size(void);

#endif /* FW_BOARD_H */
