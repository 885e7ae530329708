/* What main needs from the board: a cycle counter and the stack's
 * high-water mark. */
#ifndef POET_FIRMWARE_BOARD_H
#define POET_FIRMWARE_BOARD_H

#include <stdint.h>

uint64_t board_ticks(void);             /* SysTick cycles since start */
uint32_t board_stack_peak_bytes(void);  /* deepest stack use so far */
uint32_t board_stack_bytes(void);       /* the stack reserved */

#endif
