/* Start-up for a Cortex-M4F: the vector table, the FPU switched on before
 * any float instruction, .data copied, .bss zeroed, the stack painted (to
 * measure its high-water mark), SysTick as a 64-bit cycle counter. */
#include <stdint.h>

#include "board.h"
#include "semihost.h"

extern uint32_t __data_start[], __data_end[], __data_load[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[], __stack_limit[];

int main(void);

#define REG(addr) (*(volatile uint32_t *)(addr))
#define CPACR 0xE000ED88u
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#define SCB_ICSR 0xE000ED04u
#define ICSR_PENDSTSET (1u << 26)
#define STACK_PAINT 0x57ACC0DEu
#define SYSTICK_RELOAD 0xFFFFFFu

static volatile uint32_t systick_wraps;

/* Runs before the FPU is on: no float code here, so it is kept apart. */
__attribute__((noreturn, used)) void reset_handler(void)
{
    REG(CPACR) |= 0xFu << 20; /* CP10 and CP11: full access */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *s = __data_load, *d = __data_start; d < __data_end;) *d++ = *s++;
    for (uint32_t *d = __bss_start; d < __bss_end;) *d++ = 0;
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (uint32_t *p = __stack_limit; p < sp - 16; p++) *p = STACK_PAINT;
    REG(SYST_RVR) = SYSTICK_RELOAD;
    REG(SYST_CVR) = 0;
    REG(SYST_CSR) = 7; /* processor clock, interrupt on wrap, enabled */
    sh_exit(main());
}

uint64_t board_ticks(void)
{
    uint32_t w, v, pending;
    do {
        w = systick_wraps;
        v = REG(SYST_CVR);
        pending = REG(SCB_ICSR) & ICSR_PENDSTSET;
    } while (w != systick_wraps);
    /* a wrap whose interrupt has not run yet: the counter has reloaded (it
     * counts down from SYSTICK_RELOAD) and the wraps have not, which read
     * as a clock gone back one period (a 1000-switch timing of the device
     * test came out negative, on a loaded machine) */
    if (pending && v > SYSTICK_RELOAD / 2) w++;
    return (uint64_t)w * (SYSTICK_RELOAD + 1) + (SYSTICK_RELOAD - v);
}

uint32_t board_stack_peak_bytes(void)
{
    const uint32_t *p = __stack_limit;
    while (p < __stack_top && *p == STACK_PAINT) p++;
    return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)p);
}

uint32_t board_stack_bytes(void) { return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)__stack_limit); }

static void systick_handler(void) { systick_wraps++; }

static void fault_handler(void)
{
    sh_puts("poet-firmware: hard fault\n");
    sh_exit(3);
}

typedef void (*vector)(void);
__attribute__((section(".vectors"), used)) static const vector vectors[16] = {
    (vector)(uintptr_t)__stack_top, reset_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    fault_handler, 0, 0, 0, 0, fault_handler, fault_handler, 0, fault_handler, systick_handler};
