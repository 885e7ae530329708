/* The string.h of a freestanding build check (tests/CMakeLists.txt): the
 * few functions the device library calls, which every C toolchain for a
 * board provides (the compiler itself emits calls to them). Anything else
 * a device source asks of the host's C library fails that build. */
#ifndef POET_FREESTANDING_STRING_H
#define POET_FREESTANDING_STRING_H

#include <stddef.h>

void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
int strcmp(const char *a, const char *b);
size_t strlen(const char *s);

#endif
