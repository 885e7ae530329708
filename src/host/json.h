/* Internal: strict field access on cJSON objects, with one-line errors. */
#ifndef POET_SRC_HOST_JSON_H
#define POET_SRC_HOST_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "poet/status.h"

enum { JSON_MAX_VALUES = 1 << 23 }; /* numbers, strings, arrays and objects in one document */

/* Parses text; a malformed document is an error naming `what`. Refused
 * before any parsing: more than JSON_MAX_VALUES values, or a NUL in a
 * string. */
poet_status json_parse(const char *text, size_t len, const char *what, cJSON **out, poet_err *err);
/* Fails on any key of obj not in the NULL-terminated list. */
poet_status json_only_keys(const cJSON *obj, const char *const *keys, const char *what, poet_err *err);
/* A finite number in [lo, hi]; when absent, *out = dflt unless required. */
poet_status json_number(const cJSON *obj, const char *key, double lo, double hi, bool required, double dflt,
                        double *out, const char *what, poet_err *err);
/* A whole number in [lo, hi] that a double represents exactly. */
poet_status json_integer(const cJSON *obj, const char *key, int64_t lo, int64_t hi, bool required, int64_t dflt,
                         int64_t *out, const char *what, poet_err *err);
/* A string of fewer than cap bytes without control characters; copied
 * into out. */
poet_status json_string(const cJSON *obj, const char *key, bool required, const char *dflt, char *out, size_t cap,
                        const char *what, poet_err *err);
poet_status json_bool(const cJSON *obj, const char *key, bool required, bool dflt, bool *out, const char *what,
                      poet_err *err);



/* Adds a number printed with the fewest digits that read back to exactly
 * the same double (cJSON's own printing rounds within an epsilon). */
cJSON *json_add_exact(cJSON *obj, const char *key, double x);
#endif
