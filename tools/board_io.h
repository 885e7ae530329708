/* poet emulate's two dealings with the outside: the firmware's memory map,
 * read from its ELF symbols, and QEMU's output, read line by line as it
 * runs. */
#ifndef POET_TOOLS_BOARD_IO_H
#define POET_TOOLS_BOARD_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct board_map {
    uint32_t ram_start, data_start, bss_end, pool_start, pool_end, stack_top, image_start, image_end;
} board_map;

/* The little-endian word at p (the board's byte order). */
uint32_t board_le32(const uint8_t *p);

/* The symbols of a 32-bit little-endian ELF; false when one is missing. */
bool read_board_map(const uint8_t *elf, size_t n, board_map *m);

/* Runs argv with output to a pipe, killed at the deadline, and hands each
 * line of its output to on_line as it comes; returns the exit status (-1:
 * killed, -2: it could not start). */
int run_lines(char *const argv[], long timeout_s, void (*on_line)(void *ctx, char *line), void *ctx);

#endif
