#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What cJSON would make of text, bounded before it allocates: the values
 * (at most one more than the commas and opening brackets outside strings),
 * and no NUL inside a string, which a C string would cut short. */
static poet_status prescan(const char *text, size_t len, const char *what, poet_err *err)
{
    uint64_t values = 1;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '"') in_string = false;
            else if (c == '\\' && i + 1 < len) {
                if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0)
                    return poet_fail(err, POET_ERR_PARSE, "%s: a string holds a NUL character (\\u0000) at byte %zu",
                                     what, i);
                i++;
            }
        } else {
            in_string = c == '"';
            values += c == ',' || c == '[' || c == '{';
        }
    }
    if (values > JSON_MAX_VALUES)
        return poet_fail(err, POET_ERR_LIMIT, "%s: more than %d values; poet reads at most that many", what,
                         JSON_MAX_VALUES);
    return POET_OK;
}

poet_status json_parse(const char *text, size_t len, const char *what, cJSON **out, poet_err *err)
{
    poet_status st = prescan(text, len, what, err);
    if (st) return st;
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!doc) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        return poet_fail(err, POET_ERR_PARSE, "%s: invalid JSON near byte %zu", what, at);
    }
    size_t used = end && end >= text ? (size_t)(end - text) : len;
    while (used < len && (text[used] == ' ' || text[used] == '\n' || text[used] == '\r' || text[used] == '\t' ||
                          text[used] == '\0'))
        used++;
    if (used < len) {
        cJSON_Delete(doc);
        return poet_fail(err, POET_ERR_PARSE, "%s: invalid JSON: unexpected data after the document at byte %zu", what,
                         used);
    }
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return poet_fail(err, POET_ERR_PARSE, "%s: expected a JSON object at the top level", what);
    }
    *out = doc;
    return POET_OK;
}

poet_status json_only_keys(const cJSON *obj, const char *const *keys, const char *what, poet_err *err)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++) known = it->string && strcmp(it->string, *k) == 0;
        if (!known) return poet_fail(err, POET_ERR_INVALID, "%s: unknown field '%s'", what, it->string ? it->string : "");
    }
    return POET_OK;
}

static const cJSON *field(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

poet_status json_number(const cJSON *obj, const char *key, double lo, double hi, bool required, double dflt,
                        double *out, const char *what, poet_err *err)
{
    const cJSON *v = field(obj, key);
    if (!v) {
        if (required) return poet_fail(err, POET_ERR_INVALID, "%s: missing field '%s'", what, key);
        *out = dflt;
        return POET_OK;
    }
    if (!cJSON_IsNumber(v)) return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' must be a number", what, key);
    double x = v->valuedouble;
    if (!isfinite(x) || x < lo || x > hi)
        return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' = %g is outside [%g, %g]", what, key, x, lo, hi);
    *out = x;
    return POET_OK;
}

poet_status json_integer(const cJSON *obj, const char *key, int64_t lo, int64_t hi, bool required, int64_t dflt,
                         int64_t *out, const char *what, poet_err *err)
{
    double x = 0;
    poet_status st = json_number(obj, key, (double)lo, (double)hi, required, (double)dflt, &x, what, err);
    if (st) return st;
    if (x != floor(x) || fabs(x) > 9007199254740992.0)
        return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' must be a whole number", what, key);
    *out = (int64_t)x;
    return POET_OK;
}

poet_status json_string(const cJSON *obj, const char *key, bool required, const char *dflt, char *out, size_t cap,
                        const char *what, poet_err *err)
{
    const cJSON *v = field(obj, key);
    if (!v) {
        if (required) return poet_fail(err, POET_ERR_INVALID, "%s: missing field '%s'", what, key);
        snprintf(out, cap, "%s", dflt ? dflt : "");
        return POET_OK;
    }
    if (!cJSON_IsString(v)) return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' must be a string", what, key);
    size_t n = strlen(v->valuestring);
    if (n >= cap)
        return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' is longer than %zu bytes", what, key, cap - 1);
    for (size_t i = 0; i < n; i++) /* names reach terminals: no escape sequences */
        if ((unsigned char)v->valuestring[i] < 0x20 || v->valuestring[i] == 0x7f)
            return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' holds a control character", what, key);
    memcpy(out, v->valuestring, n + 1);
    return POET_OK;
}

poet_status json_bool(const cJSON *obj, const char *key, bool required, bool dflt, bool *out, const char *what,
                      poet_err *err)
{
    const cJSON *v = field(obj, key);
    if (!v) {
        if (required) return poet_fail(err, POET_ERR_INVALID, "%s: missing field '%s'", what, key);
        *out = dflt;
        return POET_OK;
    }
    if (!cJSON_IsBool(v)) return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return POET_OK;
}

cJSON *json_add_exact(cJSON *obj, const char *key, double x)
{
    char buf[40];
    if (!isfinite(x)) return NULL; /* JSON has no NaN or infinity */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
    return cJSON_AddRawToObject(obj, key, buf);
}
