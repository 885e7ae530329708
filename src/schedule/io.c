/* Schedule files: JSON for people and tools, a compact binary form for
 * devices. Both hold the same sparse view: recomputations (the computation
 * of node t in stage t is implied), page-ins, page-outs, and retention
 * intervals (node i in RAM at the start of stages first..last). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../host/json.h"
#include "../cost/instance_json.h"
#include "internal.h"

/* ---- sparse view ---- */

typedef struct pair {
    int t, i;
} pair;

typedef struct hold {
    int i, first, last;
} hold;

typedef struct sparse {
    int n[3]; /* recompute, page-in, page-out */
    pair *ev[3];
    int n_holds;
    hold *holds;
} sparse;

static const int EVENT_MATRIX[3] = {POET_R, POET_MIN, POET_MOUT};
static const char *const EVENT_KEY[3] = {"recompute", "page_in", "page_out"};

static void sparse_free(sparse *sp)
{
    for (int e = 0; e < 3; e++) free(sp->ev[e]);
    free(sp->holds);
    memset(sp, 0, sizeof *sp);
}

static bool is_event(const poet_schedule *s, int e, int t, int i)
{
    return poet_sched_get(s, EVENT_MATRIX[e], t, i) && !(e == 0 && i == t);
}

static poet_status to_sparse(const poet_schedule *s, sparse *sp, poet_err *err)
{
    memset(sp, 0, sizeof *sp);
    for (int pass = 0; pass < 2; pass++) {
        for (int e = 0; e < 3; e++) {
            int n = 0;
            for (int t = 0; t < s->T; t++)
                for (int i = 0; i <= t; i++)
                    if (is_event(s, e, t, i)) {
                        if (pass) sp->ev[e][n] = (pair){t, i};
                        n++;
                    }
            if (!pass && !(sp->ev[e] = malloc((size_t)(n + 1) * sizeof(pair)))) goto oom;
            sp->n[e] = n;
        }
        int h = 0;
        for (int i = 0; i < s->T; i++)
            for (int t = i + 1; t < s->T; t++) {
                if (!poet_sched_get(s, POET_SRAM, t, i)) continue;
                int first = t;
                while (t + 1 < s->T && poet_sched_get(s, POET_SRAM, t + 1, i)) t++;
                if (pass) sp->holds[h] = (hold){i, first, t};
                h++;
            }
        if (!pass && !(sp->holds = malloc((size_t)(h + 1) * sizeof(hold)))) goto oom;
        sp->n_holds = h;
    }
    return POET_OK;
oom:
    sparse_free(sp);
    return poet_fail(err, POET_ERR_NOMEM, "out of memory writing a schedule");
}

/* Applies one sparse entry to s after range checks. */
static poet_status apply_event(poet_schedule *s, int e, long long t, long long i, poet_err *err)
{
    if (t < 0 || t >= s->T || i < 0 || i > t || (e == 0 && i == t))
        return poet_fail(err, POET_ERR_INVALID, "schedule: %s entry [%lld, %lld] is out of range", EVENT_KEY[e], t, i);
    poet_sched_set(s, EVENT_MATRIX[e], (int)t, (int)i, true);
    return POET_OK;
}

/* Holds of one tensor must not overlap: so the stages set, whatever the
 * number of holds, are at most T x T, and a file of many holds costs no
 * more to read than its matrix. */
static poet_status apply_hold(poet_schedule *s, long long i, long long first, long long last, poet_err *err)
{
    if (i < 0 || first <= i || last < first || last >= s->T)
        return poet_fail(err, POET_ERR_INVALID, "schedule: hold [%lld, %lld, %lld] is out of range", i, first, last);
    for (long long t = first; t <= last; t++) {
        if (poet_sched_get(s, POET_SRAM, (int)t, (int)i))
            return poet_fail(err, POET_ERR_INVALID, "schedule: hold [%lld, %lld, %lld] overlaps another hold of "
                                                    "node %lld", i, first, last, i);
        poet_sched_set(s, POET_SRAM, (int)t, (int)i, true);
    }
    return POET_OK;
}

static void set_diagonal(poet_schedule *s)
{
    for (int t = 0; t < s->T; t++) poet_sched_set(s, POET_R, t, t, true);
}

/* ---- JSON ---- */

/* Entries of event list `which` (0-2), or the holds (3), as JSON arrays. */
static cJSON *int_tuples(const sparse *sp, int which, int n, int width)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; a && k < n; k++) {
        int v[3];
        if (which < 3)
            v[0] = sp->ev[which][k].t, v[1] = sp->ev[which][k].i;
        else
            v[0] = sp->holds[k].i, v[1] = sp->holds[k].first, v[2] = sp->holds[k].last;
        cJSON *x = cJSON_CreateIntArray(v, width);
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static bool add_item(cJSON *doc, const char *key, cJSON *item)
{
    if (item && cJSON_AddItemToObject(doc, key, item)) return true;
    cJSON_Delete(item);
    return false;
}

char *poet_schedule_to_json(const poet_schedule *s, const poet_instance *graph)
{
    sparse sp;
    if (to_sparse(s, &sp, NULL)) return NULL;
    cJSON *doc = cJSON_CreateObject();
    bool ok = doc && cJSON_AddStringToObject(doc, "format", "poet-schedule") && json_add_exact(doc, "version", 1) &&
              cJSON_AddStringToObject(doc, "planner", s->planner) && json_add_exact(doc, "T", s->T) &&
              json_add_exact(doc, "budget_bytes", (double)s->budget_bytes) &&
              json_add_exact(doc, "runtime_factor", s->runtime_factor) &&
              (!s->runtime_counts_paging || cJSON_AddBoolToObject(doc, "runtime_counts_paging", true)) &&
              json_add_exact(doc, "graph_hash", s->graph_hash);
    for (int e = 0; ok && e < 3; e++) ok = add_item(doc, EVENT_KEY[e], int_tuples(&sp, e, sp.n[e], 2));
    ok = ok && add_item(doc, "hold", int_tuples(&sp, 3, sp.n_holds, 3));
    if (ok && graph) ok = add_item(doc, "graph", instance_to_cjson(graph));
    char *text = ok ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    sparse_free(&sp);
    return text;
}

static poet_status read_int_tuple(const cJSON *x, int n, long long *out, const char *key, poet_err *err)
{
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != n)
        return poet_fail(err, POET_ERR_INVALID, "schedule: each %s entry must be an array of %d integers", key, n);
    int k = 0;
    for (const cJSON *it = x->child; it; it = it->next, k++) {
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || v != (double)(long long)v || v < -1e9 || v > 1e9)
            return poet_fail(err, POET_ERR_INVALID, "schedule: %s entries must hold integers", key);
        out[k] = (long long)v;
    }
    return POET_OK;
}

static poet_status read_lists(const cJSON *doc, poet_schedule *s, poet_err *err)
{
    poet_status st = POET_OK;
    for (int e = 0; e < 4 && !st; e++) {
        const char *key = e < 3 ? EVENT_KEY[e] : "hold";
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, key);
        if (!cJSON_IsArray(a)) return poet_fail(err, POET_ERR_INVALID, "schedule: field '%s' must be an array", key);
        for (const cJSON *x = a->child; x && !st; x = x->next) {
            long long v[3];
            if (!(st = read_int_tuple(x, e < 3 ? 2 : 3, v, key, err)))
                st = e < 3 ? apply_event(s, e, v[0], v[1], err) : apply_hold(s, v[0], v[1], v[2], err);
        }
    }
    return st;
}

poet_status poet_schedule_parse_json(const char *text, size_t len, poet_schedule *s, poet_instance *graph,
                                     poet_err *err)
{
    static const char *const keys[] = {"format", "version", "planner", "T", "budget_bytes", "runtime_factor",
                                       "runtime_counts_paging", "graph_hash", "recompute", "page_in", "page_out",
                                       "hold", "graph", NULL};
    const char *what = "schedule";
    cJSON *doc = NULL;
    poet_status st = json_parse(text, len, what, &doc, err);
    if (st) return st;
    char format[32] = "", planner[32] = "";
    int64_t version = 0, T = 0, hash = 0;
    double budget = 0, factor = 1;
    bool counts_paging = false;
    if (!(st = json_only_keys(doc, keys, what, err)) &&
        !(st = json_string(doc, "format", true, NULL, format, sizeof format, what, err)) &&
        strcmp(format, "poet-schedule") != 0)
        st = poet_fail(err, POET_ERR_INVALID, "schedule: format must be \"poet-schedule\", got \"%s\"", format);
    if (!st && !(st = json_integer(doc, "version", 0, 1000000, true, 0, &version, what, err)) && version != 1)
        st = poet_fail(err, POET_ERR_UNSUPPORTED, "schedule: version %lld is not supported (this poet reads 1)",
                       (long long)version);
    if (!st) st = json_string(doc, "planner", false, "", planner, sizeof planner, what, err);
    if (!st) st = json_integer(doc, "T", 1, POET_MAX_PLAN_NODES, true, 0, &T, what, err);
    if (!st) st = json_number(doc, "budget_bytes", 0, (double)POET_MAX_BUDGET_BYTES, true, 0, &budget, what, err);
    if (!st) st = json_number(doc, "runtime_factor", 1, 1e6, true, 1, &factor, what, err);
    if (!st) st = json_bool(doc, "runtime_counts_paging", false, false, &counts_paging, what, err);
    if (!st) st = json_integer(doc, "graph_hash", 0, UINT32_MAX, false, 0, &hash, what, err);
    if (!st && !(st = poet_schedule_init(s, (int)T, err))) {
        snprintf(s->planner, sizeof s->planner, "%s", planner);
        s->budget_bytes = (uint64_t)budget;
        s->runtime_factor = factor;
        s->runtime_counts_paging = counts_paging;
        s->graph_hash = (uint32_t)hash;
        set_diagonal(s);
        if ((st = read_lists(doc, s, err))) poet_schedule_free(s);
    }
    if (!st && graph) {
        memset(graph, 0, sizeof *graph);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(doc, "graph");
        if (g && (st = instance_from_cjson(g, graph, err))) poet_schedule_free(s);
    }
    cJSON_Delete(doc);
    return st;
}

/* ---- binary ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put_byte(wbuf *w, uint8_t b)
{
    if (w->oom) return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        uint8_t *q = realloc(w->p, cap);
        if (!q) {
            w->oom = true;
            return;
        }
        w->p = q;
        w->cap = cap;
    }
    w->p[w->n++] = b;
}

static void put_varint(wbuf *w, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(w, (uint8_t)v);
}

static void put_le(wbuf *w, uint64_t v, int bytes)
{
    for (int k = 0; k < bytes; k++) put_byte(w, (uint8_t)(v >> (8 * k)));
}

enum { SCHEDULE_COUNTS_PAGING = 1 }; /* format 2's flags: the runtime budget counted transfers */

poet_status poet_schedule_encode(const poet_schedule *s, uint8_t **data, size_t *len, poet_err *err)
{
    sparse sp;
    poet_status st = to_sparse(s, &sp, err);
    if (st) return st;
    wbuf w = {0};
    put_le(&w, POET_SCHEDULE_BINARY_VERSION, 4);
    put_varint(&w, (uint64_t)s->T);
    put_varint(&w, s->budget_bytes);
    uint64_t bits;
    memcpy(&bits, &s->runtime_factor, sizeof bits);
    put_le(&w, bits, 8);
    put_le(&w, s->graph_hash, 4);
    put_varint(&w, s->runtime_counts_paging ? SCHEDULE_COUNTS_PAGING : 0); /* format 2's flags */
    size_t name_len = 0;
    while (name_len < sizeof s->planner - 1 && s->planner[name_len]) name_len++;
    put_varint(&w, name_len);
    for (size_t k = 0; k < name_len; k++) put_byte(&w, (uint8_t)s->planner[k]);
    for (int e = 0; e < 3; e++) {
        put_varint(&w, (uint64_t)sp.n[e]);
        int prev = 0;
        for (int k = 0; k < sp.n[e]; k++) { /* stage delta, then distance back from the stage */
            put_varint(&w, (uint64_t)(sp.ev[e][k].t - prev));
            put_varint(&w, (uint64_t)(sp.ev[e][k].t - sp.ev[e][k].i));
            prev = sp.ev[e][k].t;
        }
    }
    put_varint(&w, (uint64_t)sp.n_holds);
    int prev = 0;
    for (int k = 0; k < sp.n_holds; k++) {
        const hold *h = &sp.holds[k];
        put_varint(&w, (uint64_t)(h->i - prev));
        put_varint(&w, (uint64_t)(h->first - h->i - 1));
        put_varint(&w, (uint64_t)(h->last - h->first));
        prev = h->i;
    }
    sparse_free(&sp);
    if (!w.oom) put_le(&w, crc32(0L, w.p, (uInt)w.n), 4);
    if (w.oom) {
        free(w.p);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory encoding a schedule");
    }
    *data = w.p;
    *len = w.n;
    return POET_OK;
}

typedef struct rbuf {
    const uint8_t *p;
    size_t n, pos;
    bool bad;
} rbuf;

static uint64_t get_le(rbuf *r, int bytes)
{
    uint64_t v = 0;
    if (r->pos + (size_t)bytes > r->n) {
        r->bad = true;
        return 0;
    }
    for (int k = 0; k < bytes; k++) v |= (uint64_t)r->p[r->pos++] << (8 * k);
    return v;
}

/* A varint no larger than limit; anything else marks the buffer bad. */
static uint64_t get_varint(rbuf *r, uint64_t limit)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->pos >= r->n) break;
        uint8_t b = r->p[r->pos++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (v > limit) break;
            return v;
        }
    }
    r->bad = true;
    return 0;
}

/* A count of entries of at least `bytes` bytes each: no more than the
 * bytes left can hold, checked before the loop it bounds. */
static uint64_t get_count(rbuf *r, uint64_t limit, size_t bytes)
{
    uint64_t n = get_varint(r, limit);
    if (n > (r->n - r->pos) / bytes) r->bad = true;
    return r->bad ? 0 : n;
}

static poet_status decode_body(rbuf *r, poet_schedule *s, poet_err *err)
{
    const uint64_t T = (uint64_t)s->T;
    poet_status st = POET_OK;
    for (int e = 0; e < 3 && !st && !r->bad; e++) {
        uint64_t n = get_count(r, T * T, 2), t = 0;
        for (uint64_t k = 0; k < n && !st && !r->bad; k++) {
            t += get_varint(r, T);
            uint64_t back = get_varint(r, T);
            if (!r->bad) st = apply_event(s, e, (long long)t, (long long)t - (long long)back, err);
        }
    }
    uint64_t n = get_count(r, T * T, 3), i = 0;
    for (uint64_t k = 0; k < n && !st && !r->bad; k++) {
        i += get_varint(r, T);
        uint64_t first = i + 1 + get_varint(r, T), last = first + get_varint(r, T);
        if (!r->bad) st = apply_hold(s, (long long)i, (long long)first, (long long)last, err);
    }
    return st;
}

poet_status poet_schedule_decode(const uint8_t *data, size_t len, poet_schedule *s, poet_err *err)
{
    if (len < 8) return poet_fail(err, POET_ERR_PARSE, "schedule binary: %zu bytes is too short", len);
    uint32_t version = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    if ((version >> 16) != (POET_SCHEDULE_BINARY_VERSION >> 16))
        return poet_fail(err, POET_ERR_PARSE, "schedule binary: not a poet schedule (version word %08x)", version);
    if ((version & 0xffff) < 1 || version > POET_SCHEDULE_BINARY_VERSION)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "schedule binary: format %u is not supported (this poet reads 1 to %u)",
                         version & 0xffff, POET_SCHEDULE_BINARY_VERSION & 0xffff);
    uint32_t want = (uint32_t)data[len - 4] | (uint32_t)data[len - 3] << 8 | (uint32_t)data[len - 2] << 16 |
                    (uint32_t)data[len - 1] << 24;
    if (crc32(0L, data, (uInt)(len - 4)) != want)
        return poet_fail(err, POET_ERR_PARSE, "schedule binary: checksum mismatch (truncated or corrupted)");
    rbuf r = {data, len - 4, 4, false};
    uint64_t T = get_varint(&r, POET_MAX_PLAN_NODES), budget = get_varint(&r, POET_MAX_BUDGET_BYTES);
    uint64_t bits = get_le(&r, 8);
    uint32_t hash = (uint32_t)get_le(&r, 4);
    uint64_t flags = (version & 0xffff) >= 2 ? get_varint(&r, SCHEDULE_COUNTS_PAGING) : 0;
    uint64_t name_len = get_varint(&r, 31);
    double factor;
    memcpy(&factor, &bits, sizeof factor);
    bool printable = !r.bad && r.pos + name_len <= r.n;
    for (uint64_t k = 0; printable && k < name_len; k++) printable = data[r.pos + k] >= 0x20 && data[r.pos + k] != 0x7f;
    if (r.bad || T < 1 || !(factor >= 1 && factor <= 1e6) || !printable)
        return poet_fail(err, POET_ERR_PARSE, "schedule binary: malformed header");
    poet_status st = poet_schedule_init(s, (int)T, err);
    if (st) return st;
    memcpy(s->planner, data + r.pos, name_len);
    r.pos += name_len;
    s->budget_bytes = budget;
    s->runtime_factor = factor;
    s->runtime_counts_paging = flags & SCHEDULE_COUNTS_PAGING;
    s->graph_hash = hash;
    set_diagonal(s);
    st = decode_body(&r, s, err);
    if (!st && (r.bad || r.pos != r.n))
        st = poet_fail(err, POET_ERR_PARSE, "schedule binary: malformed body at byte %zu", r.pos);
    if (st) poet_schedule_free(s);
    return st;
}
