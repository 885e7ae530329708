/* Which parameter tensors train: the --train specs (docs/partial.md). */
#include "ops.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/file.h"

enum { FREEZE_ALL = POET_ATTR_FREEZE_WEIGHTS | POET_ATTR_FREEZE_BIAS, SPEC_FLAGS = FREEZE_ALL | POET_ATTR_BN_EVAL };

static const char FROZEN_BN[] = "+frozen-bn", RELU_MASKS[] = "+relu-masks";

/* "all", "weights", "bias" or "none": the flags that freeze the rest. */
static int freeze_of(const char *word)
{
    if (strcmp(word, "all") == 0) return 0;
    if (strcmp(word, "weights") == 0) return POET_ATTR_FREEZE_BIAS;
    if (strcmp(word, "bias") == 0) return POET_ATTR_FREEZE_WEIGHTS;
    if (strcmp(word, "none") == 0) return FREEZE_ALL;
    return -1;
}

static int node_named(const poet_graph *g, const char *name)
{
    for (int v = 0; v < g->n_forward; v++)
        if (g->nodes[v].params && strcmp(g->nodes[v].name, name) == 0) return v;
    return -1;
}

/* One line of a mask file: "NODE CHOICE", the name being all but the last word. */
static poet_status mask_line(const poet_graph *g, char *line, const char *path, int at, int *freeze, bool *named,
                             poet_err *err)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *end = line + strlen(line);
    while (end > line && isspace((unsigned char)end[-1])) *--end = 0;
    while (isspace((unsigned char)*line)) line++;
    if (!*line) return POET_OK;
    char *word = end;
    while (word > line && !isspace((unsigned char)word[-1])) word--;
    int f = freeze_of(word);
    if (word == line || f < 0)
        return poet_fail(err, POET_ERR_INVALID, "%s line %d: expected 'NODE all|weights|bias|none', got '%s'", path, at,
                         line);
    char *name_end = word;
    while (name_end > line && isspace((unsigned char)name_end[-1])) name_end--;
    *name_end = 0;
    int v = node_named(g, line);
    if (v < 0) return poet_fail(err, POET_ERR_INVALID, "%s line %d: no node '%s' with parameters", path, at, line);
    if (named[v]) return poet_fail(err, POET_ERR_INVALID, "%s line %d: node '%s' is named twice", path, at, line);
    named[v] = true;
    freeze[v] = f;
    return POET_OK;
}

static poet_status read_mask(const poet_graph *g, const char *path, int *freeze, poet_err *err)
{
    char *text = NULL;
    size_t len = 0;
    bool *named = calloc((size_t)g->n_forward, sizeof *named);
    poet_status st = named ? poet_read_file(path, &text, &len, err)
                           : poet_fail(err, POET_ERR_NOMEM, "out of memory reading %s", path);
    for (int v = 0; v < g->n_forward; v++) freeze[v] = FREEZE_ALL;
    if (!st && memchr(text, 0, len)) st = poet_fail(err, POET_ERR_INVALID, "%s: not a text file", path);
    char *line = text;
    for (int at = 1; !st && line && *line; at++) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        st = mask_line(g, line, path, at, freeze, named, err);
        line = next;
    }
    free(text);
    free(named);
    return st;
}

/* The freeze flags of each forward node under spec. */
static poet_status parse_spec(const poet_graph *g, const char *spec, int *freeze, poet_err *err)
{
    int layers = 0, last = 0;
    for (int v = 0; v < g->n_forward; v++) layers += g->nodes[v].params > 0, freeze[v] = 0;
    if (strcmp(spec, "all") == 0) return POET_OK;
    if (strcmp(spec, "biases") == 0) {
        for (int v = 0; v < g->n_forward; v++) freeze[v] = POET_ATTR_FREEZE_WEIGHTS;
        return POET_OK;
    }
    if (strncmp(spec, "mask:", 5) == 0) {
        if (!spec[5]) return poet_fail(err, POET_ERR_INVALID, "--train mask: needs a file, as mask:FILE");
        return read_mask(g, spec + 5, freeze, err);
    }
    char *end = NULL;
    if (strncmp(spec, "last:", 5) == 0 && (last = (int)strtol(spec + 5, &end, 10), end != spec + 5 && !*end) &&
        last >= 1 && spec[5] != '-' && spec[5] != '+') {
        if (last > layers)
            return poet_fail(err, POET_ERR_INVALID, "--train %s: the model has %d layers with parameters", spec, layers);
        for (int v = g->n_forward - 1; v >= 0; v--)
            if (g->nodes[v].params) freeze[v] = last-- > 0 ? 0 : FREEZE_ALL;
        return POET_OK;
    }
    return poet_fail(err, POET_ERR_INVALID,
                     "--train: expected all, biases, last:N (N >= 1) or mask:FILE, each optionally followed by "
                     "+frozen-bn and +relu-masks, got '%s'", spec);
}

static void apply(poet_graph *g, const int *flags)
{
    for (int v = 0; v < g->n_forward; v++) g->nodes[v].attrs.flags = (g->nodes[v].attrs.flags & ~SPEC_FLAGS) | flags[v];
}

/* Whether spec ends with suffix; if so it is cut off. */
static bool cut_suffix(char *spec, const char *suffix)
{
    size_t n = strlen(spec), k = strlen(suffix);
    if (n < k || strcmp(spec + n - k, suffix) != 0) return false;
    spec[n - k] = 0;
    return true;
}

/* The spec without its "+frozen-bn" and "+relu-masks" (in either order). */
static char *base_of(const char *spec, bool *frozen_bn, bool *relu_masks)
{
    char *base = malloc(strlen(spec) + 1);
    *frozen_bn = *relu_masks = false;
    if (!base) return NULL;
    strcpy(base, spec);
    for (bool more = true; more;) {
        bool f = cut_suffix(base, FROZEN_BN), r = cut_suffix(base, RELU_MASKS);
        *frozen_bn |= f, *relu_masks |= r, more = f || r;
    }
    return base;
}

/* ---- relu masks ---- */

static bool same_node(const poet_node *a, const poet_node *b)
{
    return a->bytes == b->bytes && a->flops == b->flops && a->params == b->params && a->buffers == b->buffers;
}

/* The forward pass again, without relu masks, then with one after each
 * relu that mask_after[] names (old indices, or NULL): indices shift and
 * inputs follow; the backward pass is dropped. Every node is inferred
 * again and must come out as it was; g is unchanged on failure. */
static poet_status rebuild_forward(poet_graph *g, const bool *mask_after, poet_err *err)
{
    int F = g->n_forward, *map = malloc((size_t)F * sizeof *map);
    poet_graph h;
    if (!map) return poet_fail(err, POET_ERR_NOMEM, "out of memory placing relu masks");
    poet_status st = poet_graph_init(&h, g->model, g->batch, err);
    for (int v = 0; v < F && !st; v++) {
        const poet_node *n = &g->nodes[v];
        map[v] = -1;
        if (n->op == POET_OP_RELU_MASK) continue; /* only relu backward reads one */
        int ins[POET_MAX_INPUTS];
        for (int j = 0; j < n->n_inputs; j++) ins[j] = map[n->inputs[j]];
        poet_attrs a = n->attrs;
        a.flags = (a.flags & ~POET_ATTR_RELU_MASKED) | (mask_after && mask_after[v] ? POET_ATTR_RELU_MASKED : 0);
        map[v] = poet_graph_add(&h, n->op, ins, n->n_inputs, &a, n->name);
        if (map[v] >= 0 && !same_node(&h.nodes[map[v]], n))
            st = poet_fail(err, POET_ERR_UNSUPPORTED, "+relu-masks: node %s cannot be built again as it is", n->name);
        char name[POET_NAME_BYTES];
        snprintf(name, sizeof name, "%.*s.mask", POET_NAME_BYTES - 6, n->name);
        if (!st && mask_after && mask_after[v]) poet_graph_add(&h, POET_OP_RELU_MASK, &map[v], 1, NULL, name);
        if (!st && h.err.status) st = poet_fail(err, h.err.status, "%s", h.err.msg);
    }
    free(map);
    if (st) {
        poet_graph_free(&h);
        return st;
    }
    free(g->nodes);
    g->nodes = h.nodes, g->cap = h.cap, g->n_nodes = h.n_nodes, g->n_forward = h.n_forward, g->loss = -1;
    return POET_OK;
}

static bool has_masks(const poet_graph *g)
{
    for (int v = 0; v < g->n_forward; v++)
        if (g->nodes[v].op == POET_OP_RELU_MASK) return true;
    return false;
}

/* The relus whose output the backward pass reads only for their own
 * gradient: a mask of 1 bit an element serves it instead. */
static int maskable_relus(const poet_graph *g, bool *mask_after)
{
    int F = g->n_forward, count = 0;
    bool *elsewhere = calloc((size_t)F, sizeof *elsewhere);
    if (!elsewhere) return -1;
    for (int v = 0; v < F; v++) mask_after[v] = false;
    for (int b = F; b < g->n_nodes; b++) {
        const poet_node *n = &g->nodes[b];
        for (int j = 0; j < n->n_inputs; j++) {
            int i = n->inputs[j];
            if (i >= F || g->nodes[i].op != POET_OP_RELU) continue;
            if (n->op == POET_OP_GRAD && n->fwd == i) mask_after[i] = true;
            else elsewhere[i] = true;
        }
    }
    for (int v = 0; v < F; v++) count += mask_after[v] = mask_after[v] && !elsewhere[v];
    free(elsewhere);
    return count;
}

/* With the flags applied: the backward pass, with relu masks where they
 * are smaller (relu_masks) and none otherwise. */
static poet_status derive(poet_graph *g, bool relu_masks, poet_err *err)
{
    g->n_nodes = g->n_forward, g->loss = -1;
    poet_status st = has_masks(g) ? rebuild_forward(g, NULL, err) : POET_OK;
    if (!st) st = poet_graph_autodiff(g, g->n_forward - 1, err);
    if (st || !relu_masks) return st;
    bool *mask_after = malloc((size_t)g->n_forward * sizeof *mask_after);
    int n = mask_after ? maskable_relus(g, mask_after) : -1;
    if (n < 0) st = poet_fail(err, POET_ERR_NOMEM, "out of memory placing relu masks");
    if (n > 0) {
        g->n_nodes = g->n_forward, g->loss = -1;
        st = rebuild_forward(g, mask_after, err);
        poet_err again = {0};
        poet_status st2 = poet_graph_autodiff(g, g->n_forward - 1, st ? &again : err);
        if (!st) st = st2;
    }
    free(mask_after);
    return st;
}

poet_status poet_graph_set_trainable(poet_graph *g, const char *spec, poet_err *err)
{
    if (g->loss < 0) return poet_fail(err, POET_ERR_INVALID, "graph '%s' has no backward pass to choose for", g->model);
    bool frozen_bn = false, relu_masks = false;
    spec = spec ? spec : "all";
    char *base = base_of(spec, &frozen_bn, &relu_masks);
    int F = g->n_forward, *freeze = malloc((size_t)F * sizeof *freeze), *was = malloc((size_t)F * sizeof *was);
    poet_status st = freeze && was && base ? parse_spec(g, base, freeze, err)
                                           : poet_fail(err, POET_ERR_NOMEM, "out of memory choosing what trains");
    uint64_t trains = 0;
    for (int v = 0; !st && v < F; v++) {
        const poet_node *n = &g->nodes[v];
        poet_attrs chosen = n->attrs;
        chosen.flags = (chosen.flags & ~SPEC_FLAGS) | freeze[v];
        trains += poet_param_trained(n->op, &chosen, n->params);
        was[v] = n->attrs.flags & SPEC_FLAGS;
        if (frozen_bn && n->op == POET_OP_BATCHNORM2D) freeze[v] |= POET_ATTR_BN_EVAL;
    }
    if (!st && !trains) st = poet_fail(err, POET_ERR_INVALID, "--train %s: no parameter of '%s' would train", spec, g->model);
    if (!st) {
        apply(g, freeze);
        if ((st = derive(g, relu_masks, err))) { /* out of memory, or a graph not built by poet_graph_add */
            if (g->n_forward == F) apply(g, was);
            poet_err ignored = {0};
            if (g->loss < 0) derive(g, false, &ignored);
        }
    }
    free(freeze);
    free(was);
    free(base);
    return st;
}
