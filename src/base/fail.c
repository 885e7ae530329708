/* poet_fail for builds without stdio (a device): a formatter for the
 * conversions poet's core uses (%s %c %d %i %u %x, with l, ll or z, and %%),
 * truncating at the message's size. The host links src/host/fail_stdio.c instead. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"

typedef struct out {
    char *p;
    size_t n, cap;
} out;

/* A message is one line, and names from files reach terminals: control
 * characters become '?'. */
static void put(out *o, char c)
{
    if (o->n + 1 < o->cap) o->p[o->n++] = (unsigned char)c < 0x20 || c == 0x7f ? '?' : c;
}

static void put_uint(out *o, unsigned long long v, unsigned base, bool negative)
{
    char digits[24];
    int k = 0;
    do {
        digits[k++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (negative) put(o, '-');
    while (k) put(o, digits[--k]);
}

static void format(out *o, const char *fmt, va_list ap)
{
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            put(o, *fmt);
            continue;
        }
        int longs = 0;
        bool size = false;
        for (fmt++; *fmt == 'l' || *fmt == 'z'; fmt++) *fmt == 'z' ? (void)(size = true) : (void)longs++;
        unsigned long long u;
        long long s;
        switch (*fmt) {
        case 's':
            for (const char *str = va_arg(ap, const char *); str && *str; str++) put(o, *str);
            break;
        case 'c': put(o, (char)va_arg(ap, int)); break;
        case 'd':
        case 'i':
            s = size ? (long long)va_arg(ap, ptrdiff_t) : longs == 2 ? va_arg(ap, long long)
                      : longs == 1 ? va_arg(ap, long) : va_arg(ap, int);
            put_uint(o, s < 0 ? 0ull - (unsigned long long)s : (unsigned long long)s, 10, s < 0);
            break;
        case 'u':
        case 'x':
            u = size ? va_arg(ap, size_t) : longs == 2 ? va_arg(ap, unsigned long long)
                : longs == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
            put_uint(o, u, *fmt == 'x' ? 16 : 10, false);
            break;
        case '%': put(o, '%'); break;
        default: return; /* a conversion the core does not use */
        }
    }
}

poet_status poet_fail(poet_err *err, poet_status status, const char *fmt, ...)
{
    if (!err) return status;
    out o = {err->msg, 0, sizeof err->msg};
    va_list ap;
    va_start(ap, fmt);
    format(&o, fmt, ap);
    va_end(ap);
    err->msg[o.n] = 0;
    err->status = status;
    return status;
}
