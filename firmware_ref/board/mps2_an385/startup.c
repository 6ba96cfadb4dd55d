/*
 * startup.c - reset and vector table of the MPS2 AN385 (Cortex-M3): copy
 * .data, zero .bss, paint the stack, call main(). No libc start files.
 */
#include <stdint.h>
#include <string.h>

#include "board.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[], __stack_bottom[];

void Reset_Handler(void);
void Default_Handler(void);
/* Weak: a program without a board driver (the semihosted unit tests) still links. */
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));
void Uart0Rx_Handler(void) __attribute__((weak, alias("Default_Handler")));
void Uart0Tx_Handler(void) __attribute__((weak, alias("Default_Handler")));
void Timer0_Handler(void) __attribute__((weak, alias("Default_Handler")));

#ifdef FW_SEMIHOSTED
/* The unit tests: stdio and files through the debugger interface (newlib's rdimon). */
#include <stdlib.h>
int main(int argc, char **argv);
extern void initialise_monitor_handles(void);
void _init(void);
void _fini(void);
void _init(void) {} /* no C++ constructors or destructors here: newlib's hooks are empty */
void _fini(void) {}
static int run_main(void)
{
    static char name[] = "fw_unit";
    static char *argv[] = {name, NULL};
    initialise_monitor_handles();
    exit(main(1, argv)); /* exit status back to the host (SYS_EXIT) */
}
#else
int main(void);
static int run_main(void)
{
    return main();
}
#endif

#define STACK_PAINT 0xC5C5C5C5u

void Reset_Handler(void)
{
    uint32_t *p;
    uintptr_t sp;
    memcpy(__data_start, __data_load,
           (size_t)((uintptr_t)__data_end - (uintptr_t)__data_start));
    memset(__bss_start, 0, (size_t)((uintptr_t)__bss_end - (uintptr_t)__bss_start));
    /* Paint the stack below this frame: board_stack_used() counts what stays painted. */
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (p = __stack_bottom; (uintptr_t)p < sp - 64u; p++) {
        *p = STACK_PAINT;
    }
    (void)run_main();
    for (;;) {
    }
}

uint32_t board_stack_used(void)
{
    const uint32_t *p = __stack_bottom;
    while (p < __stack_top && *p == STACK_PAINT) {
        p++;
    }
    return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)p);
}

uint32_t board_stack_size(void)
{
    return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)__stack_bottom);
}

void Default_Handler(void)
{
    for (;;) {
    }
}

typedef void (*vector_fn)(void);

/* 16 system exceptions, then the AN385's IRQs: UART0 RX 0, UART0 TX 1, ..., TIMER0 8. */
__attribute__((section(".vectors"), used)) static const vector_fn vectors[16 + 32] = {
    (vector_fn)(uintptr_t)__stack_top,
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    0, 0, 0, 0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMonitor */
    0,
    Default_Handler, /* PendSV */
    SysTick_Handler,
    Uart0Rx_Handler,
    Uart0Tx_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,
    Timer0_Handler, /* IRQ 8 */
    Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
};
