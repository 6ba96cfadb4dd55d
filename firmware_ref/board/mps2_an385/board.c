/*
 * board.c - the MPS2 AN385 (QEMU mps2-an385): SysTick as the clock,
 * TIMER0 as a 1 kHz wake-up, UART0 (the link) on interrupt-driven RX and TX
 * rings, UART1 (diagnostics) polled. The only file that knows registers.
 *
 * Why SysTick free-runs instead of interrupting every millisecond: time
 * counted in tick interrupts loses every tick whose interrupt comes late (an
 * emulator descheduled by a busy host reloads its timer from when the
 * interrupt ran, and a real part masked in a long critical section misses
 * them too). Read from the counter itself (board_ms), time stays right
 * however late the interrupts are.
 */
#include "board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))

/* CMSDK APB UART */
#define UART0 0x40004000u
#define UART1 0x40005000u
#define UART_DATA(u) REG((u) + 0x00u)
#define UART_STATE(u) REG((u) + 0x04u)
#define UART_CTRL(u) REG((u) + 0x08u)
#define UART_INT(u) REG((u) + 0x0Cu) /* read: status; write 1: clear */
#define UART_BAUDDIV(u) REG((u) + 0x10u)
#define STATE_TXFULL 0x1u
#define STATE_RXFULL 0x2u
#define CTRL_TXEN 0x1u
#define CTRL_RXEN 0x2u
#define CTRL_TXINT 0x4u
#define CTRL_RXINT 0x8u
#define INT_TX 0x1u
#define INT_RX 0x2u

/* System control space */
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define NVIC_ISER0 REG(0xE000E100u)
/* CMSDK APB timer 0 */
#define TIMER0_CTRL REG(0x40000000u)
#define TIMER0_RELOAD REG(0x40000008u)
#define TIMER0_INT REG(0x4000000Cu)
#define IRQ_TIMER0 8u
#define SYST_WRAP 0x01000000u /* the 24-bit counter's period, in clock cycles */
#define SCB_AIRCR REG(0xE000ED0Cu)
#define IRQ_UART0RX 0u
#define IRQ_UART0TX 1u

#define SYSCLK_HZ 25000000u
#define BAUD 115200u

/* Power-of-two rings, indices free-running: the ISR owns one end, main() the other. */
#define RX_RING 64u  /* 5.5 ms of bytes at 115200 Bd; the main loop drains it every 1 ms */
#define TX_RING 128u /* an odometry frame and an answer; results wait for room in pieces */

static uint64_t cycles;     /* SysTick clock cycles since boot (board_ms) */
static uint32_t syst_last;  /* SysTick's value at the last board_ms() */
static uint32_t ms_now;     /* milliseconds since boot */
static uint32_t ms_rem;     /* cycles towards the next millisecond */
static uint8_t rx_held;     /* the RX ring was full: bytes wait in the UART (flow control) */
static uint8_t rx_ring[RX_RING];
static volatile uint32_t rx_head, rx_tail; /* head: ISR writes; tail: main reads */
static uint8_t tx_ring[TX_RING];
static volatile uint32_t tx_head, tx_tail; /* head: main writes; tail: ISR reads */
static volatile uint8_t tx_busy;           /* a byte is in the UART, its TX interrupt will come */
static board_stats stats;

void Timer0_Handler(void);
void Uart0Rx_Handler(void);
void Uart0Tx_Handler(void);

static inline void irq_off(void) { __asm__ volatile("cpsid i" ::: "memory"); }
static inline void irq_on(void) { __asm__ volatile("cpsie i" ::: "memory"); }

void board_init(void)
{
    SYST_RVR = SYST_WRAP - 1u;
    SYST_CVR = 0;
    syst_last = 0;
    SYST_CSR = 0x5u; /* processor clock, enable; no interrupt (see board_ms) */
    TIMER0_RELOAD = SYSCLK_HZ / 1000u - 1u;
    TIMER0_CTRL = 0x9u; /* enable, interrupt */

    UART_BAUDDIV(UART0) = SYSCLK_HZ / BAUD;
    UART_CTRL(UART0) = CTRL_TXEN | CTRL_RXEN | CTRL_TXINT | CTRL_RXINT;
    UART_BAUDDIV(UART1) = SYSCLK_HZ / BAUD;
    UART_CTRL(UART1) = CTRL_TXEN | CTRL_RXEN;
    NVIC_ISER0 = (1u << IRQ_UART0RX) | (1u << IRQ_UART0TX) | (1u << IRQ_TIMER0);
    irq_on();
}

/* Only wakes the main loop (board_idle's WFI) every millisecond. */
void Timer0_Handler(void)
{
    TIMER0_INT = 1u;
}

uint64_t board_cycles(void)
{
    /* Cycles since boot, from how far the down-counter moved since the last call (mod its
     * period): exact as long as calls come less than one period (671 ms) apart, and the
     * main loop calls every millisecond. No interrupt in the path, so none can be missed. */
    uint32_t v = SYST_CVR;
    uint32_t delta = (syst_last - v) & (SYST_WRAP - 1u);
    syst_last = v;
    cycles += delta;
    ms_rem += delta;
    while (ms_rem >= SYSCLK_HZ / 1000u) { /* no 64-bit division: a few passes at most */
        ms_rem -= SYSCLK_HZ / 1000u;
        ms_now++;
    }
    return cycles;
}

uint32_t board_cycle_hz(void)
{
    return SYSCLK_HZ;
}

uint32_t board_ms(void)
{
    (void)board_cycles();
    return ms_now;
}

/* The DWT cycle counter (Cortex-M3 debug unit); 0 when it does not count (QEMU). */
int board_dwt_cycles(uint32_t *out)
{
    uint32_t a, b;
    REG(0xE000EDFCu) |= 1u << 24; /* DEMCR.TRCENA */
    REG(0xE0001000u) |= 1u;       /* DWT_CTRL.CYCCNTENA */
    a = REG(0xE0001004u);
    __asm__ volatile("nop; nop; nop; nop");
    b = REG(0xE0001004u);
    *out = b;
    return b != a;
}

/* Move received bytes from the UART to the ring; when the ring is full, leave the byte in
 * the UART and stop its interrupt: the UART holds the line (QEMU stops taking bytes from
 * the pty; a real UART without RTS would overrun and count it) until main drains. */
static void rx_pull(void)
{
    while (UART_STATE(UART0) & STATE_RXFULL) {
        uint32_t h = rx_head;
        if (h - rx_tail >= RX_RING) {
            UART_CTRL(UART0) &= ~CTRL_RXINT;
            rx_held = 1;
            stats.rx_held++;
            return;
        }
        rx_ring[h & (RX_RING - 1u)] = (uint8_t)UART_DATA(UART0);
        rx_head = h + 1u;
        stats.rx_bytes++;
    }
}

/* One byte per interrupt, as the UART delivers them. */
void Uart0Rx_Handler(void)
{
    UART_INT(UART0) = INT_RX;
    rx_pull();
}

void Uart0Tx_Handler(void)
{
    uint32_t t = tx_tail;
    UART_INT(UART0) = INT_TX;
    if (t != tx_head && !(UART_STATE(UART0) & STATE_TXFULL)) {
        UART_DATA(UART0) = tx_ring[t & (TX_RING - 1u)];
        tx_tail = t + 1u;
    } else {
        tx_busy = 0;
    }
}

size_t board_link_read(uint8_t *buf, size_t cap)
{
    uint32_t t = rx_tail;
    uint32_t h = rx_head;
    size_t n = 0;
    while (t != h && n < cap) {
        buf[n++] = rx_ring[t & (RX_RING - 1u)];
        t++;
    }
    rx_tail = t;
    if (rx_held) { /* room again: take what waits in the UART, then its interrupt again */
        irq_off();
        rx_held = 0;
        rx_pull();
        if (!rx_held) {
            UART_CTRL(UART0) |= CTRL_RXINT;
        }
        irq_on();
    }
    return n;
}

void board_link_write(void *ctx, const uint8_t *data, size_t len)
{
    uint32_t h = tx_head;
    size_t i;
    uint32_t t0 = board_ms();
    (void)ctx;
    /* A burst (a long result) waits for the TX interrupt to make room, a little: a host
     * that does not read at all gets its bytes dropped, as a UART would drop them. */
    while (len > TX_RING - (h - tx_tail) && len <= TX_RING && board_ms() - t0 < 20u) {
    }
    if (len > TX_RING - (h - tx_tail)) {
        stats.tx_dropped += (uint32_t)len;
        return;
    }
    for (i = 0; i < len; i++) {
        tx_ring[(h + i) & (TX_RING - 1u)] = data[i];
    }
    tx_head = h + (uint32_t)len;
    stats.tx_bytes += (uint32_t)len;
    irq_off();
    if (!tx_busy) { /* idle: start it; the TX interrupt sends the rest */
        uint32_t t = tx_tail;
        tx_busy = 1;
        UART_DATA(UART0) = tx_ring[t & (TX_RING - 1u)];
        tx_tail = t + 1u;
    }
    irq_on();
}

void board_diag_write(const char *text)
{
    while (*text) {
        while (UART_STATE(UART1) & STATE_TXFULL) {
        }
        UART_DATA(UART1) = (uint8_t)*text++;
    }
}

int board_diag_getc(void)
{
    if (UART_STATE(UART1) & STATE_RXFULL) {
        return (int)(UART_DATA(UART1) & 0xFFu);
    }
    return -1;
}

void board_idle(void)
{
    /* With interrupts masked, an interrupt that comes after the check still ends the WFI. */
    irq_off();
    if (rx_head == rx_tail) {
        __asm__ volatile("wfi");
    }
    irq_on();
}

/* Linker-placed regions that no start-up code touches (NOLOAD, outside the image). */
extern uint8_t __persist_start[], __persist_end[], __banks_start[], __banks_end[];

void *board_persist(size_t *size)
{
    *size = (size_t)(__persist_end - __persist_start);
    return __persist_start;
}

uint8_t *board_bank(unsigned bank, uint32_t *size)
{
    uint32_t half = (uint32_t)(__banks_end - __banks_start) / 2u;
    *size = half;
    return bank < 2u ? __banks_start + bank * half : NULL;
}

void board_link_flush(uint32_t timeout_ms)
{
    uint32_t t0 = board_ms();
    while ((tx_head != tx_tail || tx_busy) && board_ms() - t0 < timeout_ms) {
    }
}

void board_reset(void)
{
    SCB_AIRCR = 0x05FA0004u; /* VECTKEY | SYSRESETREQ */
    for (;;) {
    }
}

const board_stats *board_link_stats(void)
{
    return &stats;
}
