/* poet_fail for the host: vsnprintf. A device links src/core/fail.c. */
#include "poet/status.h"

#include <stdarg.h>
#include <stdio.h>

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
