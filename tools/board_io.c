#define _POSIX_C_SOURCE 200809L
/* See board_io.h. */
#include "board_io.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the firmware's memory map, from its ELF symbols ---- */

uint32_t board_le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Reads the symbols of a 32-bit little-endian ELF; false when one is missing. */
bool read_board_map(const uint8_t *e, size_t n, board_map *m)
{
    static const char *names[] = {"__ram_start", "__data_start", "__bss_end", "__pool_start",
                                  "__pool_end",  "__stack_top",  "__image_start", "__image_end"};
    uint32_t *field[] = {&m->ram_start, &m->data_start, &m->bss_end, &m->pool_start,
                         &m->pool_end,  &m->stack_top,  &m->image_start, &m->image_end};
    int found = 0;
    if (n < 52 || memcmp(e, "\177ELF\1\1", 6) != 0) return false;
    uint32_t shoff = board_le32(e + 32), shentsize = le16(e + 46), shnum = le16(e + 48);
    if (shentsize < 40 || shoff > n || (uint64_t)shnum * shentsize > n - shoff) return false;
    for (uint32_t i = 0; i < shnum; i++) {
        const uint8_t *sh = e + shoff + (size_t)i * shentsize;
        if (board_le32(sh + 4) != 2) continue; /* SHT_SYMTAB */
        uint32_t off = board_le32(sh + 16), size = board_le32(sh + 20), link = board_le32(sh + 24);
        if (link >= shnum || off > n || size > n - off) return false;
        const uint8_t *str = e + shoff + (size_t)link * shentsize;
        uint32_t soff = board_le32(str + 16), ssize = board_le32(str + 20);
        if (soff > n || ssize > n - soff) return false;
        for (uint32_t k = 0; k + 16 <= size; k += 16) {
            uint32_t name = board_le32(e + off + k);
            if (name >= ssize) continue;
            const char *sym = (const char *)e + soff + name;
            for (int j = 0; j < 8; j++)
                if (strnlen(sym, ssize - name) < ssize - name && strcmp(sym, names[j]) == 0)
                    *field[j] = board_le32(e + off + k + 4), found |= 1 << j;
        }
    }
    return found == 0xff;
}

/* Runs argv with output to a pipe, killed at the deadline, and hands each
 * line of its output to on_line as it comes; returns the exit status (-1:
 * killed, -2: it could not start). */
int run_lines(char *const argv[], long timeout_s, void (*on_line)(void *ctx, char *line), void *ctx)
{
    enum { MAX_LINE = 1 << 20 }; /* a longer line is handed on in pieces */
    int fd[2];
    char *buf = malloc(MAX_LINE + 1);
    if (!buf || pipe(fd)) return free(buf), -2;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]), free(buf);
        return -2;
    }
    if (pid == 0) {
        dup2(fd[1], 1), dup2(fd[1], 2);
        close(fd[0]), close(fd[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "poet-emulate: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool killed = false;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left_ms = timeout_s * 1000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left_ms <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        if (poll(&p, 1, (int)(left_ms < 1000 ? left_ms : 1000)) <= 0) continue;
        ssize_t r = read(fd[0], buf + n, MAX_LINE - n);
        if (r <= 0) break;
        n += (size_t)r;
        size_t start = 0;
        for (size_t k = n - (size_t)r; k < n; k++)
            if (buf[k] == '\n') buf[k] = 0, on_line(ctx, buf + start), start = k + 1;
        if (start == 0 && n == MAX_LINE) buf[n] = 0, on_line(ctx, buf), start = n;
        memmove(buf, buf + start, n - start);
        n -= start;
    }
    if (n) buf[n] = 0, on_line(ctx, buf);
    close(fd[0]);
    free(buf);
    int st = 0;
    waitpid(pid, &st, 0);
    return killed ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
