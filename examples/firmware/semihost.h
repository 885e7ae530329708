/* Arm semihosting: the debugger (here QEMU) lends the program the host's
 * console, files, command line and exit status. On a real board without a
 * debugger attached these calls halt the core: replace them there with
 * the board's UART and SD card driver (docs/device.md). */
#ifndef POET_FIRMWARE_SEMIHOST_H
#define POET_FIRMWARE_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

enum { SH_READ_BINARY = 1, SH_RW_BINARY = 3, SH_WRITE_BINARY = 5, SH_UPDATE_BINARY = 7 }; /* "rb", "r+b", "wb", "w+b" */

void sh_puts(const char *s);
int sh_open(const char *path, int mode);          /* a handle, or -1 */
int sh_close(int handle);
int sh_write(int handle, const void *src, size_t bytes); /* 0 when all were written */
int sh_read(int handle, void *dst, size_t bytes);        /* 0 when all were read */
int sh_seek(int handle, uint32_t offset);                /* 0 on success */
int sh_cmdline(char *buf, size_t bytes);                 /* 0 on success */
_Noreturn void sh_exit(int code);

#endif
