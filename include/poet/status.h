/* poet: status codes and error messages shared by every module. */
#ifndef POET_STATUS_H
#define POET_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* 0 is success; every error is negative. An infeasible budget is an outcome,
 * never a status: planners report it in their result, not here. */
typedef enum poet_status {
    POET_OK = 0,
    POET_ERR_NOMEM = -1,       /* an allocation failed */
    POET_ERR_INVALID = -2,     /* an argument or a value in a file is invalid */
    POET_ERR_PARSE = -3,       /* a file is not well-formed */
    POET_ERR_IO = -4,          /* reading or writing a file failed */
    POET_ERR_LIMIT = -5,       /* a stated limit of poet is exceeded */
    POET_ERR_NOT_FOUND = -6,   /* an unknown model, device, planner or op */
    POET_ERR_UNSUPPORTED = -7  /* valid, but not something poet can do */
} poet_status;

/* A message for one call: what went wrong, in one line, naming the problem. */
#define POET_ERR_MSG_BYTES 256
typedef struct poet_err {
    poet_status status;
    char msg[POET_ERR_MSG_BYTES];
} poet_err;

const char *poet_status_str(poet_status s);

/* Records status and a printf-style message in err (err may be NULL) and
 * returns status, so that callers can write `return poet_fail(err, ...)`. */
poet_status poet_fail(poet_err *err, poet_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
