/* Internal: work run in a child process, so that a library that ends its
 * process where it should fail (COIN-OR on a failed allocation, or on an
 * internal assertion) loses that work only, and so that work that does not
 * stop at its own limit can be stopped. Knows nothing of what the work is. */
#ifndef POET_SRC_HOST_APART_H
#define POET_SRC_HOST_APART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct apart_job {
    /* In the child: the work. Its answer goes to fd answer (the parent
     * reads it to its end), its log lines to fd log (-1 where nobody reads
     * them); true when the answer was written whole. */
    bool (*work)(void *ctx, int answer, int log);
    void *ctx;
    /* In the parent: each line of the log as it comes; NULL: no log. */
    void (*on_line)(void *line_ctx, const char *line);
    void *line_ctx;
    double deadline; /* host_now_s() past which the child is killed and its work lost */
} apart_job;

typedef enum apart_outcome {
    APART_DONE,    /* the answer is in */
    APART_LOST,    /* the child died, failed, or ran past the deadline */
    APART_NO_CHILD /* no child could be started: the caller may do the work itself */
} apart_outcome;

/* Runs job->work in a child process; on APART_DONE, *answer (malloc'd, the
 * caller frees it) holds the *len bytes it wrote. */
apart_outcome apart_run(const apart_job *job, uint8_t **answer, size_t *len);

/* Writes n bytes to fd whole (the child's answer); false on an error. */
bool apart_write(int fd, const void *buf, size_t n);

#endif
