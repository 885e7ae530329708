/* Which parameter tensors train: the --train specs (docs/partial.md). */
#include "ops.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "poet/file.h"

enum { FREEZE_ALL = POET_ATTR_FREEZE_WEIGHTS | POET_ATTR_FREEZE_BIAS, SPEC_FLAGS = FREEZE_ALL | POET_ATTR_BN_EVAL };

static const char FROZEN_BN[] = "+frozen-bn";

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
                     "+frozen-bn, got '%s'", spec);
}

static void apply(poet_graph *g, const int *flags)
{
    for (int v = 0; v < g->n_forward; v++) g->nodes[v].attrs.flags = (g->nodes[v].attrs.flags & ~SPEC_FLAGS) | flags[v];
}

/* The spec without its "+frozen-bn", and whether it had one. */
static char *base_of(const char *spec, bool *frozen_bn)
{
    size_t n = strlen(spec), k = sizeof FROZEN_BN - 1;
    *frozen_bn = n >= k && strcmp(spec + n - k, FROZEN_BN) == 0;
    char *base = malloc(n + 1);
    if (base) memcpy(base, spec, n + 1), base[*frozen_bn ? n - k : n] = 0;
    return base;
}

poet_status poet_graph_set_trainable(poet_graph *g, const char *spec, poet_err *err)
{
    if (g->loss < 0) return poet_fail(err, POET_ERR_INVALID, "graph '%s' has no backward pass to choose for", g->model);
    bool frozen_bn = false;
    spec = spec ? spec : "all";
    char *base = base_of(spec, &frozen_bn);
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
        g->n_nodes = F, g->loss = -1;
        if ((st = poet_graph_autodiff(g, F - 1, err))) { /* only out of memory; the old pass comes back */
            apply(g, was);
            g->n_nodes = F, g->loss = -1;
            poet_err ignored = {0};
            poet_graph_autodiff(g, F - 1, &ignored);
        }
    }
    free(freeze);
    free(was);
    free(base);
    return st;
}
