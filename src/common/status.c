#include "poet/status.h"

#include <stdarg.h>
#include <stdio.h>

const char *poet_status_str(poet_status s)
{
    switch (s) {
    case POET_OK: return "ok";
    case POET_ERR_NOMEM: return "out of memory";
    case POET_ERR_INVALID: return "invalid value";
    case POET_ERR_PARSE: return "malformed input";
    case POET_ERR_IO: return "input/output error";
    case POET_ERR_LIMIT: return "limit exceeded";
    case POET_ERR_NOT_FOUND: return "not found";
    case POET_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}

poet_status poet_fail(poet_err *err, poet_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}
