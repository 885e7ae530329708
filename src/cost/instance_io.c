/* Graph files: POET's reference instances (read) and poet's own format
 * (read and write, exact round trip). docs/formats.md describes both. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "../host/fileio.h"
#include "../host/json.h"
#include "profile_json.h"
#include "instance_json.h"
#include "poet/cost.h"

static const double BIG = 1e300;

static poet_status alloc_instance(poet_instance *inst, int T, int n_edges, poet_err *err)
{
    if (T < 1 || T > POET_MAX_NODES)
        return poet_fail(err, POET_ERR_LIMIT, "graph has %d nodes; poet accepts 1 to %d", T, POET_MAX_NODES);
    if (n_edges > POET_MAX_EDGES)
        return poet_fail(err, POET_ERR_LIMIT, "graph has %d edges; poet accepts at most %d", n_edges, POET_MAX_EDGES);
    inst->nodes = calloc((size_t)T, sizeof *inst->nodes);
    inst->edges = calloc((size_t)(n_edges ? n_edges : 1), sizeof *inst->edges);
    if (!inst->nodes || !inst->edges) return poet_fail(err, POET_ERR_NOMEM, "out of memory reading a graph");
    inst->T = T;
    inst->n_edges = n_edges;
    return POET_OK;
}

static poet_status read_edges(const cJSON *edges, poet_instance *inst, const char *what, poet_err *err)
{
    int e = 0;
    for (const cJSON *it = edges->child; it; it = it->next, e++) {
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(it->child) ||
            !cJSON_IsNumber(it->child->next))
            return poet_fail(err, POET_ERR_INVALID, "%s: edge %d must be a pair of node indices [u, v]", what, e);
        double u = it->child->valuedouble, v = it->child->next->valuedouble;
        if (!(u >= 0 && u < inst->T && v >= 0 && v < inst->T) || u != (int)u || v != (int)v)
            return poet_fail(err, POET_ERR_INVALID, "%s: edge %d [%g, %g] refers to a node outside 0..%d", what, e, u,
                             v, inst->T - 1);
        inst->edges[e] = (poet_edge){(int)u, (int)v};
    }
    return POET_OK;
}

static poet_status array_field(const cJSON *doc, const char *key, const char *what, const cJSON **out, poet_err *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!cJSON_IsArray(a)) return poet_fail(err, POET_ERR_INVALID, "%s: field '%s' must be an array", what, key);
    *out = a;
    return POET_OK;
}

/* ---- POET's reference format (tests/data/reference/README.md) ---- */

static poet_status read_reference_node(const cJSON *o, int i, const poet_profile *d, poet_cnode *c, poet_err *err)
{
    char what[64];
    snprintf(what, sizeof what, "node %d", i);
    if (!cJSON_IsObject(o)) return poet_fail(err, POET_ERR_INVALID, "%s: expected an object", what);
    int64_t index, bytes;
    poet_status st = json_integer(o, "index", 0, POET_MAX_NODES, true, 0, &index, what, err);
    if (!st && index != i) st = poet_fail(err, POET_ERR_INVALID, "%s: has index %lld", what, (long long)index);
    if (!st) st = json_string(o, "name", true, NULL, c->name, sizeof c->name, what, err);
    if (!st) st = json_string(o, "type", false, "", c->op, sizeof c->op, what, err);
    if (!st) st = json_bool(o, "is_backward", true, false, &c->is_backward, what, err);
    if (!st) st = json_integer(o, "ram_bytes", 0, (int64_t)POET_MAX_TENSOR_BYTES, true, 0, &bytes, what, err);
    if (!st) st = json_number(o, "cpu_cost_ms", 0, BIG, true, 0, &c->time_s, what, err); /* seconds, see README */
    if (!st) st = json_number(o, "compute_joules", 0, BIG, true, 0, &c->compute_j, what, err);
    if (!st) st = json_number(o, "pagein_joules", 0, BIG, true, 0, &c->pagein_j, what, err);
    if (!st) st = json_number(o, "pageout_joules", 0, BIG, true, 0, &c->pageout_j, what, err);
    if (!st) st = json_number(o, "flop", 0, BIG, false, 0, &c->flops, what, err);
    if (st) return st;
    c->bytes = (uint64_t)bytes;
    c->pagein_s = poet_cost_pagein_s(d, c->bytes);
    c->pageout_s = poet_cost_pageout_s(d, c->bytes);
    return POET_OK;
}

static poet_status parse_reference(const cJSON *doc, poet_instance *inst, poet_err *err)
{
    const char *what = "POET reference instance";
    char platform[POET_NAME_BYTES];
    int64_t T, batch, num_edges;
    const cJSON *nodes = NULL, *edges = NULL;
    poet_status st = json_string(doc, "model", true, NULL, inst->model, sizeof inst->model, what, err);
    if (!st) st = json_string(doc, "platform", true, NULL, platform, sizeof platform, what, err);
    if (!st) st = json_integer(doc, "T", 1, POET_MAX_NODES, true, 0, &T, what, err);
    if (!st) st = json_integer(doc, "batch_size", 1, 1 << 30, false, 1, &batch, what, err);
    if (!st) st = json_number(doc, "parameter_bytes", 0, BIG, false, 0, &inst->parameter_bytes, what, err);
    if (!st) st = array_field(doc, "nodes", what, &nodes, err);
    if (!st) st = array_field(doc, "edges", what, &edges, err);
    if (!st) st = json_integer(doc, "num_edges", 0, POET_MAX_EDGES, false, cJSON_GetArraySize(edges), &num_edges,
                               what, err);
    if (st) return st;
    if (cJSON_GetArraySize(nodes) != T)
        return poet_fail(err, POET_ERR_INVALID, "%s: T is %lld but there are %d nodes", what, (long long)T,
                         cJSON_GetArraySize(nodes));
    if (cJSON_GetArraySize(edges) != num_edges)
        return poet_fail(err, POET_ERR_INVALID, "%s: num_edges is %lld but there are %d edges", what,
                         (long long)num_edges, cJSON_GetArraySize(edges));
    inst->batch = (int)batch;
    if ((st = profile_from_poet_chipset(cJSON_GetObjectItemCaseSensitive(doc, "chipset"), platform, &inst->device,
                                       err)))
        return st;
    if ((st = alloc_instance(inst, (int)T, cJSON_GetArraySize(edges), err))) return st;
    int i = 0;
    for (const cJSON *it = nodes->child; it && !st; it = it->next, i++)
        st = read_reference_node(it, i, &inst->device, &inst->nodes[i], err);
    return st ? st : read_edges(edges, inst, what, err);
}

/* ---- poet's own format ---- */

static const char *const NODE_KEYS[] = {"name", "op", "backward", "bytes", "flops", "time_s", "compute_j",
                                        "pagein_j", "pageout_j", "pagein_s", "pageout_s", NULL};

static poet_status read_own_node(const cJSON *o, int i, poet_cnode *c, poet_err *err)
{
    char what[64];
    snprintf(what, sizeof what, "node %d", i);
    if (!cJSON_IsObject(o)) return poet_fail(err, POET_ERR_INVALID, "%s: expected an object", what);
    int64_t bytes;
    poet_status st = json_only_keys(o, NODE_KEYS, what, err);
    if (!st) st = json_string(o, "name", true, NULL, c->name, sizeof c->name, what, err);
    if (!st) st = json_string(o, "op", true, NULL, c->op, sizeof c->op, what, err);
    if (!st) st = json_bool(o, "backward", true, false, &c->is_backward, what, err);
    if (!st) st = json_integer(o, "bytes", 0, (int64_t)POET_MAX_TENSOR_BYTES, true, 0, &bytes, what, err);
    if (!st) st = json_number(o, "flops", 0, BIG, true, 0, &c->flops, what, err);
    if (!st) st = json_number(o, "time_s", 0, BIG, true, 0, &c->time_s, what, err);
    if (!st) st = json_number(o, "compute_j", 0, BIG, true, 0, &c->compute_j, what, err);
    if (!st) st = json_number(o, "pagein_j", 0, BIG, true, 0, &c->pagein_j, what, err);
    if (!st) st = json_number(o, "pageout_j", 0, BIG, true, 0, &c->pageout_j, what, err);
    if (!st) st = json_number(o, "pagein_s", 0, BIG, true, 0, &c->pagein_s, what, err);
    if (!st) st = json_number(o, "pageout_s", 0, BIG, true, 0, &c->pageout_s, what, err);
    c->bytes = (uint64_t)(st ? 0 : bytes);
    return st;
}

static poet_status parse_own(const cJSON *doc, poet_instance *inst, poet_err *err)
{
    static const char *const keys[] = {"format", "version", "model", "batch", "parameter_bytes", "gradient_bytes",
                                       "buffer_bytes", "runnable", "device", "nodes", "edges", NULL};
    const char *what = "poet graph";
    int64_t version, batch;
    const cJSON *nodes = NULL, *edges = NULL;
    poet_status st = json_only_keys(doc, keys, what, err);
    if (!st && !(st = json_integer(doc, "version", 0, 1000000, true, 0, &version, what, err)) && version != 1)
        st = poet_fail(err, POET_ERR_UNSUPPORTED, "%s: version %lld is not supported (this poet reads 1)", what,
                       (long long)version);
    if (!st) st = json_string(doc, "model", true, NULL, inst->model, sizeof inst->model, what, err);
    if (!st) st = json_integer(doc, "batch", 1, 1 << 30, true, 1, &batch, what, err);
    if (!st) st = json_number(doc, "parameter_bytes", 0, BIG, true, 0, &inst->parameter_bytes, what, err);
    if (!st) st = json_number(doc, "gradient_bytes", 0, BIG, true, 0, &inst->gradient_bytes, what, err);
    if (!st) st = json_number(doc, "buffer_bytes", 0, BIG, false, NAN, &inst->buffer_bytes, what, err);
    if (!st) st = json_bool(doc, "runnable", false, false, &inst->runnable, what, err);
    if (!st)
        st = profile_from_cjson(cJSON_GetObjectItemCaseSensitive(doc, "device"), &inst->device, "poet graph device",
                               err);
    if (!st) st = array_field(doc, "nodes", what, &nodes, err);
    if (!st) st = array_field(doc, "edges", what, &edges, err);
    if (st) return st;
    inst->batch = (int)batch;
    if ((st = alloc_instance(inst, cJSON_GetArraySize(nodes), cJSON_GetArraySize(edges), err))) return st;
    int i = 0;
    for (const cJSON *it = nodes->child; it && !st; it = it->next, i++) st = read_own_node(it, i, &inst->nodes[i], err);
    return st ? st : read_edges(edges, inst, what, err);
}

poet_status instance_from_cjson(const cJSON *doc, poet_instance *out, poet_err *err)
{
    if (!cJSON_IsObject(doc)) return poet_fail(err, POET_ERR_INVALID, "graph: expected a JSON object");
    poet_instance inst;
    memset(&inst, 0, sizeof inst);
    poet_status st;
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(doc, "format");
    if (format)
        st = cJSON_IsString(format) && strcmp(format->valuestring, "poet-graph") == 0
                 ? parse_own(doc, &inst, err)
                 : poet_fail(err, POET_ERR_INVALID, "graph file: format must be \"poet-graph\"");
    else if (cJSON_GetObjectItemCaseSensitive(doc, "chipset"))
        st = parse_reference(doc, &inst, err);
    else
        st = poet_fail(err, POET_ERR_INVALID,
                       "graph file: neither a poet graph (\"format\": \"poet-graph\") nor a POET reference instance");
    /* files from before frozen parameters: everything trains */
    if (!st && !(inst.buffer_bytes >= 0)) inst.buffer_bytes = inst.parameter_bytes - inst.gradient_bytes;
    if (!st) st = poet_instance_validate(&inst, err);
    if (st) {
        poet_instance_free(&inst);
        return st;
    }
    *out = inst;
    return POET_OK;
}

poet_status poet_instance_parse_json(const char *text, size_t len, poet_instance *out, poet_err *err)
{
    cJSON *doc = NULL;
    poet_status st = json_parse(text, len, "graph file", &doc, err);
    if (st) return st;
    st = instance_from_cjson(doc, out, err);
    cJSON_Delete(doc);
    return st;
}

static poet_status parse_instance(void *out, const char *text, size_t len, poet_err *err)
{
    return poet_instance_parse_json(text, len, out, err);
}

poet_status poet_instance_read_file(const char *path, poet_instance *out, poet_err *err)
{
    return host_read_parsed(path, parse_instance, out, err);
}

static cJSON *node_to_cjson(const poet_cnode *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = cJSON_AddStringToObject(o, "name", c->name) && cJSON_AddStringToObject(o, "op", c->op) &&
              cJSON_AddBoolToObject(o, "backward", c->is_backward) &&
              json_add_exact(o, "bytes", (double)c->bytes) && json_add_exact(o, "flops", c->flops) &&
              json_add_exact(o, "time_s", c->time_s) &&
              json_add_exact(o, "compute_j", c->compute_j) &&
              json_add_exact(o, "pagein_j", c->pagein_j) &&
              json_add_exact(o, "pageout_j", c->pageout_j) &&
              json_add_exact(o, "pagein_s", c->pagein_s) &&
              json_add_exact(o, "pageout_s", c->pageout_s);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add_nodes_edges(cJSON *doc, const poet_instance *inst)
{
    cJSON *nodes = cJSON_AddArrayToObject(doc, "nodes");
    cJSON *edges = nodes ? cJSON_AddArrayToObject(doc, "edges") : NULL;
    if (!edges) return false;
    for (int i = 0; i < inst->T; i++) {
        cJSON *n = node_to_cjson(&inst->nodes[i]);
        if (!n || !cJSON_AddItemToArray(nodes, n)) return cJSON_Delete(n), false;
    }
    for (int e = 0; e < inst->n_edges; e++) {
        int pair[2] = {inst->edges[e].src, inst->edges[e].dst};
        cJSON *p = cJSON_CreateIntArray(pair, 2);
        if (!p || !cJSON_AddItemToArray(edges, p)) return cJSON_Delete(p), false;
    }
    return true;
}

cJSON *instance_to_cjson(const poet_instance *inst)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *dev = profile_to_cjson(&inst->device);
    bool ok = doc && dev && cJSON_AddStringToObject(doc, "format", "poet-graph") &&
              json_add_exact(doc, "version", 1) && cJSON_AddStringToObject(doc, "model", inst->model) &&
              json_add_exact(doc, "batch", inst->batch) &&
              json_add_exact(doc, "parameter_bytes", inst->parameter_bytes) &&
              json_add_exact(doc, "gradient_bytes", inst->gradient_bytes) &&
              json_add_exact(doc, "buffer_bytes", inst->buffer_bytes) &&
              cJSON_AddBoolToObject(doc, "runnable", inst->runnable) && cJSON_AddItemToObject(doc, "device", dev);
    if (!ok) cJSON_Delete(dev);
    if (!ok || !add_nodes_edges(doc, inst)) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

char *poet_instance_to_json(const poet_instance *inst)
{
    cJSON *doc = instance_to_cjson(inst);
    char *text = doc ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    return text;
}

poet_status poet_instance_write_file(const poet_instance *inst, const char *path, poet_err *err)
{
    char *text = poet_instance_to_json(inst);
    if (!text) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path);
    poet_status st = poet_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

/* A growing string for the DOT writer. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int need = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (need < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)need < b->cap) {
            b->n += (size_t)need;
            return;
        }
        size_t cap = (b->cap ? 2 * b->cap : 4096) + (size_t)need;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* DOT strings: names from files may hold quotes or backslashes. */
static void dot_safe(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in && n + 1 < cap; in++) out[n++] = (*in == '"' || *in == '\\' || (unsigned char)*in < 32) ? '_' : *in;
    out[n] = '\0';
}

poet_status poet_instance_write_dot(const poet_instance *inst, const char *path, poet_err *err)
{
    sbuf b = {0};
    char name[POET_NAME_BYTES], op[24];
    dot_safe(inst->model, name, sizeof name);
    sb_printf(&b, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n",
              name);
    for (int i = 0; i < inst->T; i++) {
        const poet_cnode *c = &inst->nodes[i];
        dot_safe(c->name, name, sizeof name);
        dot_safe(c->op, op, sizeof op);
        sb_printf(&b, "  n%d [label=\"%d %s\\n%s\\n%llu B\", fillcolor=\"%s\"];\n", i, i, name, op,
                  (unsigned long long)c->bytes, c->is_backward ? "#f6c59b" : "#a9c8ec");
    }
    for (int e = 0; e < inst->n_edges; e++) sb_printf(&b, "  n%d -> n%d;\n", inst->edges[e].src, inst->edges[e].dst);
    sb_printf(&b, "}\n");
    poet_status st = b.oom ? poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path)
                           : poet_write_file_atomic(path, b.p, b.n, err);
    free(b.p);
    return st;
}
