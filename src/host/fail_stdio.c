/* poet_fail for the host: vsnprintf. A device links src/base/fail.c. */
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
        /* a message is one line, and names from files reach terminals: no escape sequences */
        for (char *c = err->msg; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        err->status = status;
    }
    return status;
}
