/* Which parameter tensors train: the --train specs (docs/partial.md). */
#include "poet/graph.h"
#include "../ops/ops.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/file.h"

enum { FREEZE_ALL = POET_ATTR_FREEZE_WEIGHTS | POET_ATTR_FREEZE_BIAS, SPEC_FLAGS = FREEZE_ALL | POET_ATTR_BN_EVAL };

static const char FROZEN_BN[] = "+frozen-bn", MASKS[] = "+masks";

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

static bool parse_ratio(const char *spec, double *ratio);

/* The last word of line [line, *end), cut off with the space before it. */
static char *last_word(char *line, char **end)
{
    char *word = *end;
    while (word > line && !isspace((unsigned char)word[-1])) word--;
    *end = word;
    while (*end > line && isspace((unsigned char)(*end)[-1])) *--*end = 0;
    return word;
}

/* One line of a mask file: "NODE CHOICE [ratio:R]", the name being all but
 * the last words. */
static poet_status mask_line(const poet_graph *g, char *line, const char *path, int at, int *freeze, double *ratio,
                             bool *named, poet_err *err)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *end = line + strlen(line);
    while (end > line && isspace((unsigned char)end[-1])) *--end = 0;
    while (isspace((unsigned char)*line)) line++;
    if (!*line) return POET_OK;
    char *word = last_word(line, &end);
    double r = 0;
    bool has_ratio = strncmp(word, "ratio:", 6) == 0;
    if (has_ratio && !parse_ratio(word, &r))
        return poet_fail(err, POET_ERR_INVALID, "%s line %d: the ratio must be a number in (0, 1], got '%s'", path, at,
                         word);
    if (has_ratio) word = last_word(line, &end);
    int f = freeze_of(word);
    if (word == line || f < 0)
        return poet_fail(err, POET_ERR_INVALID, "%s line %d: expected 'NODE all|weights|bias|none [ratio:R]', got '%s'",
                         path, at, line);
    char *name_end = word;
    while (name_end > line && isspace((unsigned char)name_end[-1])) name_end--;
    *name_end = 0;
    int v = node_named(g, line);
    if (v < 0) return poet_fail(err, POET_ERR_INVALID, "%s line %d: no node '%s' with parameters", path, at, line);
    if (named[v]) return poet_fail(err, POET_ERR_INVALID, "%s line %d: node '%s' is named twice", path, at, line);
    named[v] = true;
    freeze[v] = f;
    ratio[v] = r;
    return POET_OK;
}

static poet_status read_mask(const poet_graph *g, const char *path, int *freeze, double *ratio, poet_err *err)
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
        st = mask_line(g, line, path, at, freeze, ratio, named, err);
        line = next;
    }
    free(text);
    free(named);
    return st;
}

/* "ratio:R", 0 < R <= 1: the share of a trained layer's input channels
 * that train. */
static bool parse_ratio(const char *spec, double *ratio)
{
    char *end = NULL;
    if (strncmp(spec, "ratio:", 6) != 0 || !spec[6] || isspace((unsigned char)spec[6])) return false;
    *ratio = strtod(spec + 6, &end);
    return !*end && *ratio > 0 && *ratio <= 1;
}

/* The freeze flags of each forward node under spec, and the share of its
 * input channels that train (0: all). */
static poet_status parse_spec(const poet_graph *g, const char *spec, int *freeze, double *ratio, poet_err *err)
{
    int layers = 0, last = 0;
    for (int v = 0; v < g->n_forward; v++) layers += g->nodes[v].params > 0, freeze[v] = 0, ratio[v] = 0;
    if (strcmp(spec, "all") == 0) return POET_OK;
    if (strncmp(spec, "ratio:", 6) == 0) {
        if (!parse_ratio(spec, &ratio[0]))
            return poet_fail(err, POET_ERR_INVALID, "--train %s: the ratio must be a number in (0, 1]", spec);
        for (int v = 1; v < g->n_forward; v++) ratio[v] = ratio[0];
        return POET_OK;
    }
    if (strcmp(spec, "biases") == 0) {
        for (int v = 0; v < g->n_forward; v++) freeze[v] = POET_ATTR_FREEZE_WEIGHTS;
        return POET_OK;
    }
    if (strncmp(spec, "mask:", 5) == 0) {
        if (!spec[5]) return poet_fail(err, POET_ERR_INVALID, "--train mask: needs a file, as mask:FILE");
        return read_mask(g, spec + 5, freeze, ratio, err);
    }
    char *end = NULL;
    long n = 0;
    if (strncmp(spec, "last:", 5) == 0 && isdigit((unsigned char)spec[5]) &&
        (errno = 0, n = strtol(spec + 5, &end, 10), !*end) && n >= 1) {
        if (errno || n > layers) /* the count as written, not as an int would wrap it */
            return poet_fail(err, POET_ERR_INVALID, "--train %s: the model has %d layers with parameters", spec, layers);
        last = (int)n;
        for (int v = g->n_forward - 1; v >= 0; v--)
            if (g->nodes[v].params) freeze[v] = last-- > 0 ? 0 : FREEZE_ALL;
        return POET_OK;
    }
    return poet_fail(err, POET_ERR_INVALID,
                     "--train: expected all, biases, last:N (N >= 1), ratio:R (0 < R <= 1) or mask:FILE, each "
                     "optionally followed by +frozen-bn, +masks and +ratio:R, got '%s'", spec);
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

/* The spec without its suffixes "+frozen-bn", "+masks" and "+ratio:R" (in
 * any order); *ratio_word points at the last's "ratio:R", or is NULL. */
static char *base_of(const char *spec, bool *frozen_bn, bool *masks, const char **ratio_word)
{
    char *base = malloc(strlen(spec) + 1);
    *frozen_bn = *masks = false;
    *ratio_word = NULL;
    if (!base) return NULL;
    strcpy(base, spec);
    for (bool more = true; more;) {
        bool f = cut_suffix(base, FROZEN_BN), r = cut_suffix(base, MASKS);
        char *plus = strrchr(base, '+');
        bool q = !*ratio_word && plus && strncmp(plus + 1, "ratio:", 6) == 0;
        if (q) *plus = 0, *ratio_word = plus + 1;
        *frozen_bn |= f, *masks |= r, more = f || r || q;
    }
    return base;
}

/* ---- relu masks, max-pool indices and channel selects ---- */

static bool is_aux(poet_op op)
{
    return op == POET_OP_RELU_MASK || op == POET_OP_POOL_INDEX || op == POET_OP_CHANNEL_SELECT;
}

static bool same_node(const poet_node *a, const poet_node *b)
{
    return a->bytes == b->bytes && a->flops == b->flops && a->params == b->params && a->buffers == b->buffers;
}

/* A convolution or linear layer: weights that read input channels. */
static bool is_layer(poet_op op) { return op == POET_OP_CONV2D || op == POET_OP_LINEAR; }

/* The axis a conv's or linear layer's weights see as input channels. */
static int channel_axis(const poet_graph *g, const poet_node *n)
{
    return n->op == POET_OP_CONV2D ? 1 : g->nodes[n->inputs[0]].shape.ndim - 1;
}

/* After relu v its mask; after max pool v its indices (which read the
 * pool's input and the pool, with its window); after conv or linear v the
 * `keep` input channels its weight gradient reads, their list from *listed
 * on in the image's channel lists. */
static void add_aux(poet_graph *h, const poet_node *n, int v, const int *ins, int keep, int *listed)
{
    char name[POET_NAME_BYTES];
    const char *what = n->op == POET_OP_RELU ? "mask" : n->op == POET_OP_MAXPOOL2D ? "index" : "select";
    snprintf(name, sizeof name, "%.*s.%s", POET_NAME_BYTES - 8, n->name, what);
    poet_attrs a = n->attrs;
    a.flags &= ~POET_ATTR_COMPACT_READ;
    int reads[2] = {ins[0], v}; /* the pool's input, and the pool */
    if (n->op == POET_OP_RELU) {
        poet_graph_add(h, POET_OP_RELU_MASK, &v, 1, NULL, name);
    } else if (n->op == POET_OP_MAXPOOL2D) {
        poet_graph_add(h, POET_OP_POOL_INDEX, reads, 2, &a, name);
    } else {
        poet_attrs sel = {0};
        sel.features = keep, sel.axis = channel_axis(h, &h->nodes[v]), sel.start = *listed;
        *listed += keep;
        poet_graph_add(h, POET_OP_CHANNEL_SELECT, ins, 1, &sel, name);
    }
}

/* The forward pass again, without masks, indices and selects, then with
 * one after each node v with aux_after[v] != 0 (old indices; NULL: none,
 * and the layers keep attrs.end; a conv or linear layer: the channels
 * kept, its attrs.end): indices shift and inputs follow; the backward pass
 * is dropped. Every node is inferred again and
 * must come out as it was; g is unchanged on failure. */
static poet_status rebuild_forward(poet_graph *g, const int *aux_after, poet_err *err)
{
    int F = g->n_forward, *map = malloc((size_t)F * sizeof *map), listed = 0;
    poet_graph h;
    if (!map) return poet_fail(err, POET_ERR_NOMEM, "out of memory placing masks");
    poet_status st = poet_graph_init(&h, g->model, g->batch, err);
    for (int v = 0; v < F && !st; v++) {
        const poet_node *n = &g->nodes[v];
        map[v] = -1;
        if (is_aux(n->op)) continue; /* only backward nodes read one */
        int ins[POET_MAX_INPUTS];
        for (int j = 0; j < n->n_inputs; j++) ins[j] = map[n->inputs[j]];
        int aux = aux_after ? aux_after[v] : 0;
        poet_attrs a = n->attrs;
        a.flags = (a.flags & ~POET_ATTR_COMPACT_READ) | (aux ? POET_ATTR_COMPACT_READ : 0);
        if (aux_after && is_layer(n->op)) a.end = aux; /* its trained channels; stripped, it keeps what it wants */
        map[v] = poet_graph_add(&h, n->op, ins, n->n_inputs, &a, n->name);
        if (map[v] >= 0 && !same_node(&h.nodes[map[v]], n))
            st = poet_fail(err, POET_ERR_UNSUPPORTED, "+masks: node %s cannot be built again as it is", n->name);
        if (!st && aux) add_aux(&h, n, map[v], ins, aux, &listed);
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

static bool has_aux(const poet_graph *g)
{
    for (int v = 0; v < g->n_forward; v++)
        if (is_aux(g->nodes[v].op)) return true;
    return false;
}

/* Whether forward node v has a gradient node. */
static bool has_gradient(const poet_graph *g, int v)
{
    for (int b = g->n_forward; b < g->n_nodes; b++)
        if (g->nodes[b].op == POET_OP_GRAD && g->nodes[b].fwd == v) return true;
    return false;
}

/* The tensor a relu's or max pool's backward reads: the relu's output, the
 * pool's input. */
static int read_by_grad(const poet_graph *g, int v)
{
    return g->nodes[v].op == POET_OP_RELU ? v : g->nodes[v].op == POET_OP_MAXPOOL2D ? g->nodes[v].inputs[0] : -1;
}

/* Whether backward node b, reading tensor t, may read a mask or indices
 * instead, given the choices so far: t must then be read by nothing else. */
static bool reader_goes(const poet_graph *g, const bool *aux, const poet_node *b, int t)
{
    if (b->op != POET_OP_GRAD) return false;
    return aux[b->fwd] && read_by_grad(g, b->fwd) == t;
}

/* The relus and max pools whose backward can read a mask or indices so
 * that the tensor it read dies after the forward pass: the largest set in
 * which every backward reader of each such tensor is one of them. */
static int choose_aux(const poet_graph *g, bool *aux)
{
    int F = g->n_forward, count = 0;
    for (int v = 0; v < F; v++) aux[v] = read_by_grad(g, v) >= 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int b = F; b < g->n_nodes; b++) {
            const poet_node *n = &g->nodes[b];
            for (int j = 0; j < n->n_inputs; j++) {
                int t = n->inputs[j];
                if (t >= F || reader_goes(g, aux, n, t)) continue;
                for (int v = 0; v < F; v++) /* t stays: whoever read it to free it gains nothing */
                    if (aux[v] && read_by_grad(g, v) == t) aux[v] = false, changed = true;
            }
        }
    }
    for (int v = 0; v < F; v++) count += aux[v] = aux[v] && has_gradient(g, v); /* and a gradient that reads */
    return count;
}

/* The conv (not grouped) and linear layers that want to train on fewer
 * input channels (attrs.end, set by want_channels) and whose gradient reads
 * their input: aux[v] = that many. The others want all again. */
static int choose_selects(poet_graph *g, int *aux)
{
    int F = g->n_forward, count = 0;
    for (int v = 0; v < F; v++) {
        poet_node *n = &g->nodes[v];
        aux[v] = 0;
        if (!is_layer(n->op)) continue;
        if (n->attrs.end > 0 && has_gradient(g, v)) aux[v] = n->attrs.end, count++;
        else n->attrs.end = 0;
    }
    return count;
}

/* Each trained conv (not grouped) and linear layer wants ceil(ratio[v] x C)
 * of its C input channels (attrs.end; 0: all, so where that is C). */
static void want_channels(poet_graph *g, const double *ratio)
{
    for (int v = 0; v < g->n_forward; v++) {
        poet_node *n = &g->nodes[v];
        if (!is_layer(n->op)) continue;
        int64_t C = g->nodes[n->inputs[0]].shape.dim[channel_axis(g, n)];
        int64_t keep = (int64_t)ceil(ratio[v] * (double)C - 1e-9);
        bool grouped = n->op == POET_OP_CONV2D && n->attrs.groups > 1; /* a depthwise layer trains whole */
        bool some = !grouped && ratio[v] > 0 && !(n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS) && keep >= 1 && keep < C;
        n->attrs.end = some ? (int32_t)keep : 0;
    }
}

/* g's forward pass rebuilt with aux (see rebuild_forward), and its backward
 * pass derived again. */
static poet_status rebuild(poet_graph *g, const int *aux, poet_err *err)
{
    g->n_nodes = g->n_forward, g->loss = -1;
    poet_status st = rebuild_forward(g, aux, err);
    poet_err again = {0};
    poet_status st2 = poet_graph_autodiff(g, g->n_forward - 1, st ? &again : err);
    return st ? st : st2;
}

/* With the flags and the wanted channels applied: the backward pass, with
 * channel selects where a layer trains on fewer input channels, then relu
 * masks and max-pool indices where they free what their backward read
 * (masks). */
static poet_status derive(poet_graph *g, bool masks, poet_err *err)
{
    g->n_nodes = g->n_forward, g->loss = -1;
    poet_status st = has_aux(g) ? rebuild_forward(g, NULL, err) : POET_OK;
    if (!st) st = poet_graph_autodiff(g, g->n_forward - 1, err);
    int F = g->n_forward, *aux = malloc(2 * (size_t)F * sizeof *aux); /* the selects at most double F */
    bool *chosen = malloc(2 * (size_t)F * sizeof *chosen);
    if (!st && (!aux || !chosen)) st = poet_fail(err, POET_ERR_NOMEM, "out of memory placing masks");
    if (!st && choose_selects(g, aux) > 0) st = rebuild(g, aux, err);
    if (!st && masks) {
        F = g->n_forward; /* the selects' layers keep theirs; relus and pools join them */
        int n = choose_aux(g, chosen);
        for (int v = 0; v < F; v++)
            aux[v] = chosen[v]                                                          ? 1
                     : v + 1 < F && g->nodes[v + 1].op == POET_OP_CHANNEL_SELECT ? g->nodes[v + 1].attrs.features
                                                                                 : 0;
        if (n > 0) st = rebuild(g, aux, err);
    }
    free(aux);
    free(chosen);
    return st;
}

/* The flags (was[v]) and the layers' wanted channels (was[F + v]) as they
 * were before a failed choice. */
static void restore(poet_graph *g, const int *was)
{
    apply(g, was);
    for (int v = 0; v < g->n_forward; v++)
        if (is_layer(g->nodes[v].op)) g->nodes[v].attrs.end = was[g->n_forward + v];
}

poet_status poet_graph_set_trainable(poet_graph *g, const char *spec, poet_err *err)
{
    if (g->loss < 0) return poet_fail(err, POET_ERR_INVALID, "graph '%s' has no backward pass to choose for", g->model);
    bool frozen_bn = false, masks = false;
    spec = spec ? spec : "all";
    const char *ratio_word;
    char *base = base_of(spec, &frozen_bn, &masks, &ratio_word);
    int F = g->n_forward, *freeze = malloc((size_t)F * sizeof *freeze), *was = malloc(2 * (size_t)F * sizeof *was);
    double *ratio = malloc((size_t)F * sizeof *ratio), suffix = 0;
    poet_status st = freeze && was && ratio && base ? parse_spec(g, base, freeze, ratio, err)
                                                    : poet_fail(err, POET_ERR_NOMEM, "out of memory choosing what trains");
    if (!st && ratio_word && strncmp(base, "ratio:", 6) == 0)
        st = poet_fail(err, POET_ERR_INVALID, "--train %s: a ratio twice", spec);
    if (!st && ratio_word && !parse_ratio(ratio_word, &suffix))
        st = poet_fail(err, POET_ERR_INVALID, "--train %s: the ratio must be a number in (0, 1]", spec);
    uint64_t trains = 0;
    for (int v = 0; !st && v < F; v++) {
        const poet_node *n = &g->nodes[v];
        poet_attrs chosen = n->attrs;
        chosen.flags = (chosen.flags & ~SPEC_FLAGS) | freeze[v];
        chosen.end = 0;
        trains += poet_param_trained(n->op, &chosen, n->params);
        was[v] = n->attrs.flags & SPEC_FLAGS, was[F + v] = n->attrs.end;
        if (frozen_bn && n->op == POET_OP_BATCHNORM2D) freeze[v] |= POET_ATTR_BN_EVAL;
        if (ratio[v] == 0) ratio[v] = suffix; /* +ratio:R: where the base chose none */
    }
    if (!st && !trains) st = poet_fail(err, POET_ERR_INVALID, "--train %s: no parameter of '%s' would train", spec, g->model);
    if (!st) {
        apply(g, freeze);
        want_channels(g, ratio);
        if ((st = derive(g, masks, err))) { /* out of memory, or a graph not built by poet_graph_add */
            if (g->n_forward == F) restore(g, was);
            poet_err ignored = {0};
            if (g->loss < 0) derive(g, false, &ignored);
        }
    }
    free(freeze);
    free(was);
    free(ratio);
    free(base);
    return st;
}
