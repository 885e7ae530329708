/* Semihosting calls (see semihost.h): BKPT 0xAB with the operation in r0
 * and a pointer to its arguments in r1. */
#include "semihost.h"

static int call(uint32_t op, const void *args)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = args;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return (int)r0;
}

static size_t length(const char *s)
{
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

void sh_puts(const char *s) { call(0x04, s); }

int sh_open(const char *path, int mode)
{
    uint32_t a[3] = {(uint32_t)path, (uint32_t)mode, (uint32_t)length(path)};
    return call(0x01, a);
}

int sh_close(int handle)
{
    uint32_t a[1] = {(uint32_t)handle};
    return call(0x02, a);
}

int sh_write(int handle, const void *src, size_t bytes)
{
    uint32_t a[3] = {(uint32_t)handle, (uint32_t)src, (uint32_t)bytes};
    return call(0x05, a);
}

int sh_read(int handle, void *dst, size_t bytes)
{
    uint32_t a[3] = {(uint32_t)handle, (uint32_t)dst, (uint32_t)bytes};
    return call(0x06, a);
}

int sh_seek(int handle, uint32_t offset)
{
    uint32_t a[2] = {(uint32_t)handle, offset};
    return call(0x0A, a);
}

int sh_cmdline(char *buf, size_t bytes)
{
    uint32_t a[2] = {(uint32_t)buf, (uint32_t)bytes};
    return call(0x15, a);
}

_Noreturn void sh_exit(int code)
{
    uint32_t a[2] = {0x20026u, (uint32_t)code}; /* ADP_Stopped_ApplicationExit, with a status */
    call(0x20, a);
    for (;;) {
    }
}
