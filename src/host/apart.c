/* See apart.h: fork, a pipe for the answer and one for the log, poll with
 * the deadline, kill and reap. */
#define _POSIX_C_SOURCE 200809L
#include "apart.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

bool apart_write(int fd, const void *buf, size_t n)
{
    for (const char *p = buf; n > 0;) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

/* The log's reading end, and the part of a line read so far. */
typedef struct log_reader {
    int fd; /* -1 once closed */
    const apart_job *job;
    size_t len;
    char line[512];
} log_reader;

/* Reads what the log has and passes it on line by line; closes it at its end. */
static void log_read(log_reader *g)
{
    ssize_t k = read(g->fd, g->line + g->len, sizeof g->line - 1 - g->len);
    if (k < 0 && errno == EINTR) return;
    if (k <= 0) {
        close(g->fd), g->fd = -1;
        return;
    }
    g->len += (size_t)k;
    char *nl;
    while ((nl = memchr(g->line, '\n', g->len))) {
        *nl = 0;
        g->job->on_line(g->job->line_ctx, g->line);
        g->len -= (size_t)(nl + 1 - g->line);
        memmove(g->line, nl + 1, g->len);
    }
    if (g->len == sizeof g->line - 1) g->len = 0; /* a line too long to be one the caller looks for */
}

/* The answer, read to its end unless the deadline passes first, and the
 * log meanwhile. */
static bool read_answer(int fd, log_reader *g, double deadline, uint8_t **answer, size_t *len)
{
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (bool more = buf != NULL; more;) {
        double left = deadline - host_now_s();
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = g->fd, .events = POLLIN}};
        int ready = left > 0 ? poll(pfd, g->fd >= 0 ? 2 : 1, (int)ceil(left * 1000)) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break;
        if (g->fd >= 0 && pfd[1].revents) log_read(g);
        if (!pfd[0].revents) continue;
        if (n == cap) {
            uint8_t *q = realloc(buf, 2 * cap);
            if (!q) break;
            buf = q, cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) break;
        if (k == 0) {
            *answer = buf, *len = n;
            return true;
        }
        n += (size_t)k;
    }
    free(buf);
    return false;
}

apart_outcome apart_run(const apart_job *job, uint8_t **answer, size_t *len)
{
    int fd[2], lg[2] = {-1, -1};
    *answer = NULL, *len = 0;
    fflush(stdout), fflush(stderr); /* nothing pending for the child to write twice */
    if (pipe(fd) != 0) return APART_NO_CHILD;
    if (job->on_line && pipe(lg) != 0) {
        close(fd[0]), close(fd[1]);
        return APART_NO_CHILD;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        if (lg[0] >= 0) close(lg[0]);
        _exit(job->work(job->ctx, fd[1], lg[1]) ? 0 : 1);
    }
    close(fd[1]);
    if (lg[1] >= 0) close(lg[1]);
    log_reader g = {.fd = lg[0], .job = job};
    apart_outcome out = APART_NO_CHILD;
    if (pid > 0) {
        bool ok = read_answer(fd[0], &g, job->deadline, answer, len);
        if (!ok) kill(pid, SIGKILL); /* past the deadline, or dead already */
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        out = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? APART_DONE : APART_LOST;
        if (out != APART_DONE) free(*answer), *answer = NULL, *len = 0;
    }
    close(fd[0]);
    if (g.fd >= 0) close(g.fd);
    return out;
}
