/* A minimal test harness: CHECK records failures and keeps going; the
 * program ends with one "N passed, N failed" line and a matching status. */
#ifndef POET_TESTS_CHECK_H
#define POET_TESTS_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            check_passed++;                                                         \
        } else {                                                                    \
            check_failed++;                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                              \
    do {                                                                  \
        if (cond) {                                                       \
            check_passed++;                                               \
        } else {                                                          \
            check_failed++;                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static int check_report(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
